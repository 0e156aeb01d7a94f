package storage

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"syscall"
)

// Op names an FS or File operation for fault injection.
type Op int

const (
	OpAny Op = iota
	OpOpen
	OpRead
	OpWrite
	OpSync
	OpTruncate
	OpRemove
	OpRename
	OpMkdir
	OpReadDir
	OpStat
	OpSyncDir
)

func (o Op) String() string {
	names := [...]string{"any", "open", "read", "write", "sync", "truncate", "remove", "rename", "mkdir", "readdir", "stat", "syncdir"}
	if int(o) < len(names) {
		return names[o]
	}
	return fmt.Sprintf("op(%d)", int(o))
}

// FaultMode is how a matching operation misbehaves.
type FaultMode int

const (
	// FaultError fails the operation with the rule's error, doing nothing.
	FaultError FaultMode = iota
	// FaultShortWrite writes the first KeepBytes bytes and then fails with
	// the rule's error (a write cut short by EIO or ENOSPC).
	FaultShortWrite
	// FaultTornWrite writes the first KeepBytes bytes and reports full
	// success: what a crash leaves when only part of a write reached the
	// disk.
	FaultTornWrite
)

// Rule selects operations to fault, in the spirit of pebble's errorfs.
type Rule struct {
	Op   Op     // OpAny matches every operation
	Path string // substring of the path; "" matches every path
	// Skip lets the first Skip matching operations through.
	Skip int
	// Count is how many operations to fault after Skip; 0 means all.
	Count int
	Mode  FaultMode
	// Err is the injected error (default EIO).
	Err error
	// KeepBytes is how much of a write reaches the file in the short and
	// torn modes.
	KeepBytes int
}

type activeRule struct {
	Rule
	seen, hits int
}

// ErrorFS wraps an FS and injects faults into the operations that match its
// rules. It is safe for concurrent use.
type ErrorFS struct {
	base  FS
	mu    sync.Mutex
	rules []*activeRule
}

// NewErrorFS wraps base.
func NewErrorFS(base FS) *ErrorFS { return &ErrorFS{base: base} }

// Inject adds a rule and returns a function that removes it.
func (e *ErrorFS) Inject(r Rule) (remove func()) {
	if r.Err == nil {
		r.Err = syscall.EIO
	}
	ar := &activeRule{Rule: r}
	e.mu.Lock()
	e.rules = append(e.rules, ar)
	e.mu.Unlock()
	return func() {
		e.mu.Lock()
		defer e.mu.Unlock()
		for i, x := range e.rules {
			if x == ar {
				e.rules = append(e.rules[:i], e.rules[i+1:]...)
				return
			}
		}
	}
}

// Clear removes every rule.
func (e *ErrorFS) Clear() {
	e.mu.Lock()
	e.rules = nil
	e.mu.Unlock()
}

// Hits is how many operations the rules have faulted so far.
func (e *ErrorFS) Hits() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for _, r := range e.rules {
		n += r.hits
	}
	return n
}

// match returns the rule that faults this operation, if any.
func (e *ErrorFS) match(op Op, path string) *Rule {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, r := range e.rules {
		if (r.Op != OpAny && r.Op != op) || (r.Path != "" && !strings.Contains(path, r.Path)) {
			continue
		}
		r.seen++
		if r.seen <= r.Skip || (r.Count > 0 && r.hits >= r.Count) {
			continue
		}
		r.hits++
		rule := r.Rule
		return &rule
	}
	return nil
}

func (e *ErrorFS) fail(op Op, path string) error {
	if r := e.match(op, path); r != nil {
		return &os.PathError{Op: op.String(), Path: path, Err: r.Err}
	}
	return nil
}

func (e *ErrorFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	if err := e.fail(OpOpen, name); err != nil {
		return nil, err
	}
	f, err := e.base.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &errorFile{File: f, fs: e, path: name}, nil
}

func (e *ErrorFS) Remove(name string) error {
	if err := e.fail(OpRemove, name); err != nil {
		return err
	}
	return e.base.Remove(name)
}

func (e *ErrorFS) RemoveAll(path string) error {
	if err := e.fail(OpRemove, path); err != nil {
		return err
	}
	return e.base.RemoveAll(path)
}

func (e *ErrorFS) Rename(oldpath, newpath string) error {
	if err := e.fail(OpRename, newpath); err != nil {
		return err
	}
	return e.base.Rename(oldpath, newpath)
}

func (e *ErrorFS) MkdirAll(path string, perm os.FileMode) error {
	if err := e.fail(OpMkdir, path); err != nil {
		return err
	}
	return e.base.MkdirAll(path, perm)
}

func (e *ErrorFS) ReadDir(name string) ([]os.DirEntry, error) {
	if err := e.fail(OpReadDir, name); err != nil {
		return nil, err
	}
	return e.base.ReadDir(name)
}

func (e *ErrorFS) Stat(name string) (os.FileInfo, error) {
	if err := e.fail(OpStat, name); err != nil {
		return nil, err
	}
	return e.base.Stat(name)
}

func (e *ErrorFS) SyncDir(dir string) error {
	if err := e.fail(OpSyncDir, dir); err != nil {
		return err
	}
	return e.base.SyncDir(dir)
}

type errorFile struct {
	File
	fs   *ErrorFS
	path string
}

func (f *errorFile) Read(p []byte) (int, error) {
	if err := f.fs.fail(OpRead, f.path); err != nil {
		return 0, err
	}
	return f.File.Read(p)
}

func (f *errorFile) ReadAt(p []byte, off int64) (int, error) {
	if err := f.fs.fail(OpRead, f.path); err != nil {
		return 0, err
	}
	return f.File.ReadAt(p, off)
}

func (f *errorFile) Write(p []byte) (int, error) {
	r := f.fs.match(OpWrite, f.path)
	if r == nil {
		return f.File.Write(p)
	}
	perr := &os.PathError{Op: "write", Path: f.path, Err: r.Err}
	if r.Mode == FaultError {
		return 0, perr
	}
	keep := min(max(r.KeepBytes, 0), len(p))
	n, err := f.File.Write(p[:keep])
	if err != nil {
		return n, err
	}
	if r.Mode == FaultTornWrite {
		// Advance the file offset as if everything was written, so that
		// later writes land where the writer expects them.
		if _, err := f.File.Seek(int64(len(p)-keep), 1); err != nil {
			return n, err
		}
		return len(p), nil
	}
	return n, perr
}

func (f *errorFile) Sync() error {
	if err := f.fs.fail(OpSync, f.path); err != nil {
		return err
	}
	return f.File.Sync()
}

func (f *errorFile) Truncate(size int64) error {
	if err := f.fs.fail(OpTruncate, f.path); err != nil {
		return err
	}
	return f.File.Truncate(size)
}
