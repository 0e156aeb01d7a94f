package faultfs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// node is the FUSE adapter of one backing inode: go-fuse's loopback does
// the I/O, and each change is checked against the faults before and
// reported to the model after (both under FS.mu).
type node struct {
	fs.LoopbackNode
	s   *session
	ino Ino
	// data serializes this file's writes, truncations and fsyncs, so that
	// the bytes saved for the model are the ones a write replaces.
	data sync.Mutex
}

var (
	_ fs.NodeLookuper       = (*node)(nil)
	_ fs.NodeCreater        = (*node)(nil)
	_ fs.NodeOpener         = (*node)(nil)
	_ fs.NodeMkdirer        = (*node)(nil)
	_ fs.NodeMknoder        = (*node)(nil)
	_ fs.NodeSymlinker      = (*node)(nil)
	_ fs.NodeLinker         = (*node)(nil)
	_ fs.NodeUnlinker       = (*node)(nil)
	_ fs.NodeRmdirer        = (*node)(nil)
	_ fs.NodeRenamer        = (*node)(nil)
	_ fs.NodeSetattrer      = (*node)(nil)
	_ fs.NodeGetattrer      = (*node)(nil)
	_ fs.NodeOpendirHandler = (*node)(nil)
	_ fs.FileWriter         = (*file)(nil)
	_ fs.FileFsyncer        = (*file)(nil)
	_ fs.FileReader         = (*file)(nil)
	_ fs.FileAllocater      = (*file)(nil)
	_ fs.FileFsyncdirer     = (*dirHandle)(nil)
	_ fs.FileReaddirenter   = (*dirHandle)(nil)
	_ fs.FileReleasedirer   = (*dirHandle)(nil)
	_ fs.FileSeekdirer      = (*dirHandle)(nil)
)

func (n *node) fsys() *FS { return n.s.fs }

// rel is the node's path relative to the root; empty for an unlinked file.
func (n *node) rel() string { return n.Path(nil) }

func (n *node) abs() string { return filepath.Join(n.fsys().backing, n.rel()) }

func (n *node) childAbs(name string) string { return filepath.Join(n.abs(), name) }

func childNode(ch *fs.Inode) *node { return ch.Operations().(*node) }

// learnLocked tells the model about name in n if it exists in the backing
// dir and the model has not seen it. FS.mu is held.
func (n *node) learnLocked(name string) {
	m := n.fsys().model
	if _, ok := m.Entry(n.ino, name); ok {
		return
	}
	var st syscall.Stat_t
	if syscall.Lstat(n.childAbs(name), &st) != nil {
		return
	}
	m.Learn(n.ino, name, Ino(st.Ino), st.Mode&syscall.S_IFMT == syscall.S_IFDIR, st.Size)
}

func (n *node) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if !n.s.enter() {
		return nil, syscall.EIO
	}
	defer n.s.leave()
	ch, errno := n.LoopbackNode.Lookup(ctx, name, out)
	if errno != 0 {
		return nil, errno
	}
	f := n.fsys()
	f.mu.Lock()
	f.model.Learn(n.ino, name, childNode(ch).ino, out.Attr.Mode&syscall.S_IFMT == syscall.S_IFDIR, int64(out.Attr.Size))
	f.mu.Unlock()
	return ch, 0
}

func (n *node) Getattr(ctx context.Context, fh fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	if !n.s.enter() {
		return syscall.EIO
	}
	defer n.s.leave()
	if f, ok := fh.(*file); ok {
		fh = f.LoopbackFile
	}
	return n.LoopbackNode.Getattr(ctx, fh, out)
}

func (n *node) Create(ctx context.Context, name string, flags, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	if !n.s.enter() {
		return nil, nil, 0, syscall.EIO
	}
	defer n.s.leave()
	f := n.fsys()
	f.mu.Lock()
	n.learnLocked(name)
	_, existed := f.model.Entry(n.ino, name)
	ch, fh, fuseFlags, errno := n.LoopbackNode.Create(ctx, name, flags&^syscall.O_TRUNC, mode, out)
	if errno != 0 {
		f.mu.Unlock()
		return nil, nil, 0, errno
	}
	c := childNode(ch)
	if !existed {
		f.model.Create(n.ino, name, c.ino, false)
	}
	f.mu.Unlock()
	h := &file{LoopbackFile: fh.(*fs.LoopbackFile), n: c}
	if existed && flags&syscall.O_TRUNC != 0 {
		if errno := c.truncate(ctx, h, 0); errno != 0 {
			return nil, nil, 0, errno
		}
		out.Attr.Size = 0
	}
	return ch, h, fuseFlags, 0
}

func (n *node) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	if !n.s.enter() {
		return nil, 0, syscall.EIO
	}
	defer n.s.leave()
	fh, fuseFlags, errno := n.LoopbackNode.Open(ctx, flags&^syscall.O_TRUNC)
	if errno != 0 {
		return nil, 0, errno
	}
	h := &file{LoopbackFile: fh.(*fs.LoopbackFile), n: n}
	if flags&syscall.O_TRUNC != 0 {
		if errno := n.truncate(ctx, h, 0); errno != 0 {
			h.Release(ctx)
			return nil, 0, errno
		}
	}
	return h, fuseFlags, 0
}

// created reports a new entry made by the loopback to the model.
func (n *node) created(name string, ch *fs.Inode, dir bool, errno syscall.Errno) (*fs.Inode, syscall.Errno) {
	if errno != 0 {
		return nil, errno
	}
	f := n.fsys()
	f.mu.Lock()
	f.model.Create(n.ino, name, childNode(ch).ino, dir)
	f.mu.Unlock()
	return ch, 0
}

func (n *node) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if !n.s.enter() {
		return nil, syscall.EIO
	}
	defer n.s.leave()
	ch, errno := n.LoopbackNode.Mkdir(ctx, name, mode, out)
	return n.created(name, ch, true, errno)
}

func (n *node) Mknod(ctx context.Context, name string, mode, rdev uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if !n.s.enter() {
		return nil, syscall.EIO
	}
	defer n.s.leave()
	ch, errno := n.LoopbackNode.Mknod(ctx, name, mode, rdev, out)
	return n.created(name, ch, false, errno)
}

func (n *node) Symlink(ctx context.Context, target, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if !n.s.enter() {
		return nil, syscall.EIO
	}
	defer n.s.leave()
	ch, errno := n.LoopbackNode.Symlink(ctx, target, name, out)
	return n.created(name, ch, false, errno)
}

func (n *node) Link(ctx context.Context, target fs.InodeEmbedder, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if !n.s.enter() {
		return nil, syscall.EIO
	}
	defer n.s.leave()
	t, ok := target.(*node)
	if !ok {
		return nil, syscall.EXDEV
	}
	f := n.fsys()
	f.mu.Lock()
	defer f.mu.Unlock()
	ch, errno := n.LoopbackNode.Link(ctx, &t.LoopbackNode, name, out)
	if errno != 0 {
		return nil, errno
	}
	f.model.Link(n.ino, name, t.ino)
	return ch, 0
}

// stageLocked keeps the entry name of n in the stage area when a durable
// name still refers to it, before the entry is removed or replaced. A
// file is hard-linked there; a directory (which is empty) is moved there,
// which removes its entry. It reports whether the entry is gone.
func (n *node) stageLocked(name string) (removed bool, errno syscall.Errno) {
	f := n.fsys()
	ino, need := f.model.NeedStage(n.ino, name)
	if !need {
		return false, 0
	}
	src, dst := n.childAbs(name), f.stagePath(ino)
	var st syscall.Stat_t
	if err := syscall.Lstat(src, &st); err != nil {
		return false, fs.ToErrno(err)
	}
	if st.Mode&syscall.S_IFMT == syscall.S_IFDIR {
		if empty, err := dirEmpty(src); err != nil || !empty {
			return false, syscall.ENOTEMPTY
		}
		if err := os.Rename(src, dst); err != nil {
			return false, fs.ToErrno(err)
		}
		f.model.Staged(ino)
		return true, 0
	}
	if err := os.Link(src, dst); err != nil && !errors.Is(err, os.ErrExist) {
		return false, fs.ToErrno(err)
	}
	f.model.Staged(ino)
	return false, 0
}

func dirEmpty(dir string) (bool, error) {
	d, err := os.Open(dir)
	if err != nil {
		return false, err
	}
	defer d.Close()
	_, err = d.Readdirnames(1)
	if errors.Is(err, io.EOF) {
		return true, nil
	}
	return false, err
}

func (n *node) remove(ctx context.Context, name string, rm func() syscall.Errno) syscall.Errno {
	if !n.s.enter() {
		return syscall.EIO
	}
	defer n.s.leave()
	f := n.fsys()
	f.mu.Lock()
	defer f.mu.Unlock()
	n.learnLocked(name)
	removed, errno := n.stageLocked(name)
	if errno != 0 {
		return errno
	}
	if !removed {
		if errno := rm(); errno != 0 {
			return errno
		}
	}
	f.model.Unlink(n.ino, name)
	f.collectLocked()
	return 0
}

func (n *node) Unlink(ctx context.Context, name string) syscall.Errno {
	return n.remove(ctx, name, func() syscall.Errno { return n.LoopbackNode.Unlink(ctx, name) })
}

func (n *node) Rmdir(ctx context.Context, name string) syscall.Errno {
	return n.remove(ctx, name, func() syscall.Errno { return n.LoopbackNode.Rmdir(ctx, name) })
}

// Rename replaces newName atomically, as the backing dir does; a replaced
// entry that a durable name refers to is staged first. RENAME_EXCHANGE is
// not supported.
func (n *node) Rename(ctx context.Context, name string, newParent fs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	if !n.s.enter() {
		return syscall.EIO
	}
	defer n.s.leave()
	np, ok := newParent.(*node)
	if !ok {
		return syscall.EXDEV
	}
	if flags&unixRenameExchange != 0 {
		return syscall.EINVAL
	}
	f := n.fsys()
	f.mu.Lock()
	defer f.mu.Unlock()
	n.learnLocked(name)
	np.learnLocked(newName)
	if _, errno := np.stageLocked(newName); errno != 0 {
		return errno
	}
	if errno := n.LoopbackNode.Rename(ctx, name, &np.LoopbackNode, newName, flags); errno != 0 {
		return errno
	}
	f.model.Rename(n.ino, name, np.ino, newName)
	f.collectLocked()
	return 0
}

// unixRenameExchange is RENAME_EXCHANGE of renameat2(2).
const unixRenameExchange = 1 << 1

func (n *node) Setattr(ctx context.Context, fh fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	if !n.s.enter() {
		return syscall.EIO
	}
	defer n.s.leave()
	h, _ := fh.(*file)
	size, resize := in.GetSize()
	if !resize {
		return n.LoopbackNode.Setattr(ctx, unwrap(h), in, out)
	}
	n.data.Lock()
	defer n.data.Unlock()
	f := n.fsys()
	f.mu.Lock()
	saved, errno := n.readSaved(h, f.model.ToSaveTruncate(n.ino, int64(size)))
	f.mu.Unlock()
	if errno != 0 {
		return errno
	}
	if errno := n.LoopbackNode.Setattr(ctx, unwrap(h), in, out); errno != 0 {
		return errno
	}
	f.mu.Lock()
	f.model.Truncate(n.ino, int64(size), saved)
	f.mu.Unlock()
	return 0
}

// truncate is ftruncate(fd, size) through the model.
func (n *node) truncate(ctx context.Context, h *file, size int64) syscall.Errno {
	in := &fuse.SetAttrIn{}
	in.Valid = fuse.FATTR_SIZE
	in.Size = uint64(size)
	return n.Setattr(ctx, h, in, &fuse.AttrOut{})
}

func unwrap(h *file) fs.FileHandle {
	if h == nil {
		return nil
	}
	return h.LoopbackFile
}

// readSaved reads the durable bytes of ranges from the backing file:
// through h's descriptor when there is one (reopened for reading when h is
// write-only), else by path.
func (n *node) readSaved(h *file, ranges []Range) ([]Span, syscall.Errno) {
	if len(ranges) == 0 {
		return nil, 0
	}
	name := n.abs()
	if h != nil {
		fd, _ := h.LoopbackFile.PassthroughFd()
		spans, err := readSpans(fd, ranges)
		if !errors.Is(err, syscall.EBADF) {
			return spans, fs.ToErrno(err)
		}
		name = fmt.Sprintf("/proc/self/fd/%d", fd)
	}
	r, err := os.Open(name)
	if err != nil {
		return nil, fs.ToErrno(err)
	}
	defer r.Close()
	spans, err := readSpans(int(r.Fd()), ranges)
	return spans, fs.ToErrno(err)
}

func readSpans(fd int, ranges []Range) ([]Span, error) {
	spans := make([]Span, 0, len(ranges))
	for _, r := range ranges {
		buf := make([]byte, r.End-r.Off)
		k, err := syscall.Pread(fd, buf, r.Off)
		if err != nil {
			return nil, err
		}
		spans = append(spans, Span{Off: r.Off, Data: buf[:k]})
	}
	return spans, nil
}

func (n *node) OpendirHandle(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	if !n.s.enter() {
		return nil, 0, syscall.EIO
	}
	defer n.s.leave()
	ds, errno := fs.NewLoopbackDirStream(n.abs())
	if errno != 0 {
		return nil, 0, errno
	}
	return &dirHandle{ds: ds, n: n}, 0, 0
}

// file is an open file: writes and fsyncs go through the faults and the
// model; everything else is the loopback's.
type file struct {
	*fs.LoopbackFile
	n *node
}

// PassthroughFd keeps the kernel's FUSE passthrough off: every read and
// write must come to the adapter, or the model and the faults would miss
// them.
func (h *file) PassthroughFd() (int, bool) { return -1, false }

func (h *file) Read(ctx context.Context, buf []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	if !h.n.s.enter() {
		return nil, syscall.EIO
	}
	defer h.n.s.leave()
	return h.LoopbackFile.Read(ctx, buf, off)
}

func (h *file) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	n := h.n
	if !n.s.enter() {
		return 0, syscall.EIO
	}
	defer n.s.leave()
	n.data.Lock()
	defer n.data.Unlock()
	f := n.fsys()
	end := off + int64(len(data))
	f.mu.Lock()
	size, _ := f.model.Size(n.ino)
	toSave := f.model.ToSave(n.ino, off, end)
	f.mu.Unlock()
	if errno := f.decide(ctx, n.s, OpWrite, n.rel(), max(0, end-size)); errno != 0 {
		return 0, errno
	}
	saved, errno := n.readSaved(h, toSave)
	if errno != 0 {
		return 0, errno
	}
	written, errno := h.LoopbackFile.Write(ctx, data, off)
	if written > 0 {
		f.mu.Lock()
		f.model.Write(n.ino, off, data[:written], saved)
		f.mu.Unlock()
	}
	return written, errno
}

func (h *file) Fsync(ctx context.Context, flags uint32) syscall.Errno {
	n := h.n
	if !n.s.enter() {
		return syscall.EIO
	}
	defer n.s.leave()
	n.data.Lock()
	defer n.data.Unlock()
	f := n.fsys()
	errno := f.decide(ctx, n.s, OpFsync, n.rel(), 0)
	if errno == syscall.EINTR { // cut short: the fsync did not happen
		return errno
	}
	if errno != 0 {
		f.mu.Lock()
		f.model.FsyncFailed(n.ino)
		f.mu.Unlock()
		return errno
	}
	if errno := h.LoopbackFile.Fsync(ctx, flags); errno != 0 {
		return errno
	}
	f.mu.Lock()
	f.model.Fsync(n.ino)
	f.collectLocked()
	f.mu.Unlock()
	return 0
}

// Allocate is refused: the model does not track preallocated space.
func (h *file) Allocate(ctx context.Context, off, size uint64, mode uint32) syscall.Errno {
	return syscall.EOPNOTSUPP
}

// dirHandle is an open directory; its fsync makes its entries durable.
type dirHandle struct {
	ds fs.DirStream
	n  *node
}

func (d *dirHandle) Readdirent(ctx context.Context) (*fuse.DirEntry, syscall.Errno) {
	if !d.n.s.enter() {
		return nil, syscall.EIO
	}
	defer d.n.s.leave()
	return d.ds.(fs.FileReaddirenter).Readdirent(ctx)
}

func (d *dirHandle) Seekdir(ctx context.Context, off uint64) syscall.Errno {
	return d.ds.(fs.FileSeekdirer).Seekdir(ctx, off)
}

func (d *dirHandle) Releasedir(ctx context.Context, flags uint32) {
	d.ds.(fs.FileReleasedirer).Releasedir(ctx, flags)
}

func (d *dirHandle) Fsyncdir(ctx context.Context, flags uint32) syscall.Errno {
	n := d.n
	if !n.s.enter() {
		return syscall.EIO
	}
	defer n.s.leave()
	f := n.fsys()
	if errno := f.decide(ctx, n.s, OpFsync, n.rel(), 0); errno != 0 {
		return errno
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if errno := d.ds.(fs.FileFsyncdirer).Fsyncdir(ctx, flags); errno != 0 {
		return errno
	}
	f.model.Fsync(n.ino)
	f.collectLocked()
	return 0
}
