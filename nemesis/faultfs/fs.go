package faultfs

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// Options tune a mount. The zero value is the default.
type Options struct {
	// StageDir holds files and directories that were unlinked or replaced
	// while a durable name still refers to them, so that a power loss can
	// bring them back. It must be on the backing dir's filesystem and is
	// emptied at Mount and removed at Unmount. Default: a hidden sibling of
	// the backing dir, ".<base>.faultfs".
	StageDir string
	// Debug logs every FUSE request (go-fuse's debug output).
	Debug bool
}

// FS is a mounted fault filesystem.
type FS struct {
	backing, mountpoint, stage string
	dev                        uint64
	debug                      bool

	// ctl serializes Mount, PowerLoss and Unmount.
	ctl     sync.Mutex
	session *session

	// mu guards the model and the faults.
	mu     sync.Mutex
	model  *Model
	faults Faults
	now    func() time.Time
}

// session is one FUSE mount of the FS. A power loss ends it (every
// operation on it fails with EIO from then on, so no process that still
// holds a file of it sees anything again) and starts a new one.
type session struct {
	fs     *FS
	server *fuse.Server
	off    atomic.Bool
	// ops is held shared by every operation in progress, so that a power
	// loss waits for them before it rolls the backing dir back.
	ops sync.RWMutex
	// stopping is closed when the power loss begins: an operation still
	// waiting out an injected delay gives up then, as the power cut would
	// have stopped it.
	stopping chan struct{}
}

func (s *session) enter() bool {
	s.ops.RLock()
	if s.off.Load() {
		s.ops.RUnlock()
		return false
	}
	return true
}

func (s *session) leave() { s.ops.RUnlock() }

// Mount mounts the fault filesystem at mountpoint over backingDir. It needs
// root (or CAP_SYS_ADMIN) and /dev/fuse, and no fusermount binary. Every
// file and directory in backingDir at the time is durable.
func Mount(backingDir, mountpoint string, opts Options) (*FS, error) {
	backing, err := filepath.Abs(backingDir)
	if err != nil {
		return nil, fmt.Errorf("faultfs: backing dir %s: %w", backingDir, err)
	}
	mnt, err := filepath.Abs(mountpoint)
	if err != nil {
		return nil, fmt.Errorf("faultfs: mountpoint %s: %w", mountpoint, err)
	}
	if inside(mnt, backing) || inside(backing, mnt) {
		return nil, fmt.Errorf("faultfs: mountpoint %s and backing dir %s must not contain each other (the mount would serve itself)", mnt, backing)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(backing, &st); err != nil || st.Mode&syscall.S_IFMT != syscall.S_IFDIR {
		return nil, fmt.Errorf("faultfs: backing dir %s must be an existing directory", backing)
	}
	stage := opts.StageDir
	if stage == "" {
		stage = filepath.Join(filepath.Dir(backing), "."+filepath.Base(backing)+".faultfs")
	}
	if err := os.RemoveAll(stage); err != nil {
		return nil, fmt.Errorf("faultfs: empty stage dir: %w", err)
	}
	if err := os.MkdirAll(stage, 0o700); err != nil {
		return nil, fmt.Errorf("faultfs: stage dir: %w", err)
	}
	var sst syscall.Stat_t
	if err := syscall.Stat(stage, &sst); err != nil || sst.Dev != st.Dev {
		return nil, fmt.Errorf("faultfs: stage dir %s must be on the filesystem of %s (set Options.StageDir)", stage, backing)
	}
	f := &FS{
		backing: backing, mountpoint: mnt, stage: stage, dev: uint64(st.Dev), debug: opts.Debug,
		model: NewModel(Ino(st.Ino)), now: time.Now,
	}
	f.ctl.Lock()
	defer f.ctl.Unlock()
	if err := f.mount(); err != nil {
		os.RemoveAll(stage)
		return nil, err
	}
	return f, nil
}

// inside reports whether path is dir or below it.
func inside(path, dir string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}

func (f *FS) mount() error {
	s := &session{fs: f, stopping: make(chan struct{})}
	root := &fs.LoopbackRoot{Path: f.backing, Dev: f.dev}
	root.NewNode = func(r *fs.LoopbackRoot, _ *fs.Inode, _ string, st *syscall.Stat_t) fs.InodeEmbedder {
		return &node{LoopbackNode: fs.LoopbackNode{RootData: r}, s: s, ino: Ino(st.Ino)}
	}
	rootNode := &node{LoopbackNode: fs.LoopbackNode{RootData: root}, s: s, ino: f.model.root}
	root.RootNode = rootNode
	server, err := fs.Mount(f.mountpoint, rootNode, &fs.Options{MountOptions: fuse.MountOptions{
		DirectMountStrict: true,
		AllowOther:        true,
		FsName:            f.backing,
		Name:              "faultfs",
		Debug:             f.debug,
	}})
	if err != nil {
		return fmt.Errorf("faultfs: mount %s (needs root or CAP_SYS_ADMIN, and /dev/fuse): %w", f.mountpoint, err)
	}
	s.server = server
	f.session = s
	return nil
}

// Mountpoint is where the filesystem is mounted.
func (f *FS) Mountpoint() string { return f.mountpoint }

// Unmount ends the mount and empties the stage area: the backing dir keeps
// the latest state, which is the disk's from then on. Files still open on
// the mount fail with EIO.
func (f *FS) Unmount() error {
	f.ctl.Lock()
	defer f.ctl.Unlock()
	if f.session == nil {
		return nil
	}
	err := f.detach()
	if rerr := os.RemoveAll(f.stage); err == nil && rerr != nil {
		err = fmt.Errorf("faultfs: remove stage dir: %w", rerr)
	}
	return err
}

// detach switches the current session off, waits for its operations and
// unmounts it, lazily when a process still holds a file of it.
func (f *FS) detach() error {
	s := f.session
	f.session = nil
	s.off.Store(true)
	close(s.stopping)
	s.ops.Lock()
	s.ops.Unlock()
	if err := s.server.Unmount(); err != nil {
		if lerr := syscall.Unmount(f.mountpoint, syscall.MNT_DETACH); lerr != nil {
			return fmt.Errorf("faultfs: unmount %s: %v; lazy unmount: %w", f.mountpoint, err, lerr)
		}
	}
	return nil
}

// PowerLoss is a power cut of the disk: the mount goes away (operations in
// progress finish first, open files fail with EIO from then on), the
// backing dir is rolled back to what the disk has made durable plus what
// spec lets persist, and the filesystem is mounted again on it. Kill the
// processes using the mount first, as the power cut would.
func (f *FS) PowerLoss(spec PowerSpec) error {
	f.ctl.Lock()
	defer f.ctl.Unlock()
	if f.session == nil {
		return errors.New("faultfs: power loss: not mounted")
	}
	if err := f.detach(); err != nil {
		return err
	}
	f.mu.Lock()
	plan := f.model.PowerLoss(spec)
	err := f.apply(plan)
	f.mu.Unlock()
	if err != nil {
		return fmt.Errorf("faultfs: power loss: %w", err)
	}
	return f.mount()
}

// apply carries out a power loss plan on the backing dir.
func (f *FS) apply(plan []Action) error {
	for _, a := range plan {
		from, to := f.path(a.From), f.path(a.To)
		var err error
		switch a.Kind {
		case Move:
			err = os.Rename(from, to)
		case HardLink:
			err = os.Link(from, to)
		case Remove:
			err = os.Remove(from)
		case RemoveAll:
			err = os.RemoveAll(from)
		case WriteAt:
			err = writeAt(from, a.Off, a.Data)
		case TruncateTo:
			err = os.Truncate(from, a.Size)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", a, err)
		}
	}
	return nil
}

func writeAt(name string, off int64, data []byte) error {
	w, err := os.OpenFile(name, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	if _, err := w.WriteAt(data, off); err != nil {
		w.Close()
		return err
	}
	return w.Close()
}

func (f *FS) path(l Loc) string {
	if l.Stage != 0 {
		return filepath.Join(f.stagePath(l.Stage), l.Rel)
	}
	return filepath.Join(f.backing, l.Rel)
}

func (f *FS) stagePath(ino Ino) string {
	return filepath.Join(f.stage, strconv.FormatUint(uint64(ino), 10))
}

// decide applies the faults to one operation of session s: it waits out
// the delay and returns the errno to fail with (0: go ahead). A delay cut
// short, by the caller's interruption (the kernel interrupts the request
// of a process that is killed) or by a power loss, returns EINTR: the
// operation did not happen.
func (f *FS) decide(ctx context.Context, s *session, op Ops, rel string, grow int64) syscall.Errno {
	f.mu.Lock()
	d := f.faults.Decide(f.now(), op, rel, grow)
	f.mu.Unlock()
	if d.Delay > 0 {
		t := time.NewTimer(d.Delay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return syscall.EINTR
		case <-s.stopping:
			return syscall.EINTR
		}
	}
	return d.Errno
}

// collectLocked removes from the stage area what no durable name refers
// to any more. FS.mu is held.
func (f *FS) collectLocked() {
	for _, ino := range f.model.TakeGarbage() {
		os.RemoveAll(f.stagePath(ino))
	}
}

// InjectEIO starts failing operations with EIO.
func (f *FS) InjectEIO(e EIOFault) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.faults.AddEIO(e, f.now())
}

// InjectNoSpace starts refusing writes past a quota with ENOSPC.
func (f *FS) InjectNoSpace(n NoSpaceFault) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.faults.SetNoSpace(n)
}

// InjectLatency starts delaying operations.
func (f *FS) InjectLatency(s SlowFault) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.faults.AddSlow(s, f.now())
}

// Heal ends every EIO, ENOSPC and latency fault. The durability model goes
// on: a later power loss still drops what no fsync made durable.
func (f *FS) Heal() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.faults.Heal()
}

// Status lists the faults in force and what a power loss would drop.
func (f *FS) Status() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	files, unsynced := f.model.Unsynced()
	return fmt.Sprintf("%s\nunsynced: %d bytes written to %d files", f.faults.String(f.now()), unsynced, files)
}

// Apply carries out a command and says what it did.
func (f *FS) Apply(c Command) (string, error) {
	switch c.Verb {
	case "power":
		if err := f.PowerLoss(c.Power); err != nil {
			return "", err
		}
		return "power lost: " + c.String(), nil
	case "eio":
		f.InjectEIO(c.EIO)
	case "enospc":
		f.InjectNoSpace(c.NoSpace)
	case "slow":
		f.InjectLatency(c.Slow)
	case "heal":
		f.Heal()
		return "healed", nil
	case "status":
		return f.Status(), nil
	default:
		return "", fmt.Errorf("faultfs: unknown command %q", c.Verb)
	}
	return "started: " + c.String(), nil
}

// Exec parses and applies one command line.
func (f *FS) Exec(line string) (string, error) {
	c, err := ParseCommand(line)
	if err != nil {
		return "", err
	}
	return f.Apply(c)
}
