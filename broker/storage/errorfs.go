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
	// synced is, per file opened through this FS, its size at the last
	// fsync (or when first opened): what survives Crash.
	synced map[string]int64
}

// NewErrorFS wraps base.
func NewErrorFS(base FS) *ErrorFS { return &ErrorFS{base: base, synced: map[string]int64{}} }

// Crash simulates a power loss for the files opened through this FS: each
// is cut back to its size at its last fsync, so writes that were never
// fsynced vanish. Close the files (a Log's Close) before calling it. It
// models lost appends, not reordered or partially persisted pages.
func (e *ErrorFS) Crash() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	for path, size := range e.synced {
		fi, err := e.base.Stat(path)
		if err != nil {
			continue
		}
		if fi.Size() > size {
			f, err := e.base.OpenFile(path, os.O_WRONLY, 0)
			if err != nil {
				return fmt.Errorf("crash %s: %w", path, err)
			}
			terr := f.Truncate(size)
			cerr := f.Close()
			if terr != nil {
				return fmt.Errorf("crash %s: %w", path, terr)
			}
			if cerr != nil {
				return fmt.Errorf("crash %s: %w", path, cerr)
			}
		}
	}
	return nil
}

func (e *ErrorFS) noteSynced(path string, f File) {
	fi, err := f.Stat()
	if err != nil {
		return
	}
	e.mu.Lock()
	e.synced[path] = fi.Size()
	e.mu.Unlock()
}

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
	e.mu.Lock()
	_, known := e.synced[name]
	e.mu.Unlock()
	if !known || flag&os.O_TRUNC != 0 {
		e.noteSynced(name, f)
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
	if err := e.base.Rename(oldpath, newpath); err != nil {
		return err
	}
	e.mu.Lock()
	if size, ok := e.synced[oldpath]; ok {
		e.synced[newpath] = size
		delete(e.synced, oldpath)
	}
	e.mu.Unlock()
	return nil
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
	if err := f.File.Sync(); err != nil {
		return err
	}
	f.fs.noteSynced(f.path, f.File)
	return nil
}

func (f *errorFile) Truncate(size int64) error {
	if err := f.fs.fail(OpTruncate, f.path); err != nil {
		return err
	}
	if err := f.File.Truncate(size); err != nil {
		return err
	}
	f.fs.mu.Lock()
	if s, ok := f.fs.synced[f.path]; ok && size < s {
		f.fs.synced[f.path] = size
	}
	f.fs.mu.Unlock()
	return nil
}
