// Package faultfs is the fault filesystem a node's agent mounts over the
// broker's data dir (in the spirit of LazyFS): a FUSE filesystem (go-fuse
// v2) that passes every operation through to a backing dir and keeps a
// model of what the disk has made durable, so that a power loss drops
// exactly what no fsync made durable, and that can tear or reorder the
// unsynced writes, fail writes and fsyncs with EIO, run out of space
// (ENOSPC) and slow writes and fsyncs down.
//
// # Use
//
//	f, err := faultfs.Mount("/backing", "/data", faultfs.Options{})
//	out, err := f.Exec("eio fsync path=*.log for=10s") // or f.InjectEIO(...)
//	err = f.PowerLoss(faultfs.PowerSpec{Torn: true, Seed: 7})
//	err = f.Unmount()
//
// Mount needs root (or CAP_SYS_ADMIN) and /dev/fuse; it mounts with
// go-fuse's DirectMountStrict, so no fusermount binary is needed (a
// scratch image works). The process that called Mount serves the mount:
// an agent keeps running while the mount is in use and takes commands
// (Exec) from `docker exec` lines.
//
// # The model
//
// Writes go to the backing dir at once (write-through), so reads through
// the mount see the latest writes, as from a page cache, and the backing
// dir always holds the latest state: the filesystem's own state is never
// on the data path, and after Heal or Unmount it holds nothing the broker
// needs. What the model keeps is how to undo: the durable bytes each
// unsynced write or truncation replaced (read from the backing file just
// before the change), each file's durable size, its unsynced changes in
// order, and for every directory the durable entry of each name seen.
// Model is a pure data structure (no FUSE, no I/O): the adapter reports
// changes to it, and PowerLoss returns a plan of backing-dir operations.
//
//   - A file's data and size are durable after an fsync (or fdatasync) of
//     the file; truncation is a change like a write.
//   - A name (create, mkdir, rename, link, unlink, rmdir) is durable after
//     an fsync of the directory that holds it; a rename touches two
//     directories, each durable on its own. A new file whose data was
//     fsynced but whose directory was not is lost at a power loss.
//   - A file or directory unlinked or replaced while a durable name still
//     refers to it is kept in a stage dir outside the backing dir (a
//     hidden sibling by default), and removed from there once no durable
//     name refers to it, or at Unmount.
//   - Files and directories present at Mount are durable.
//   - fsyncgate: after an fsync fails with EIO the file's dirty data is
//     dropped, as Linux does: reads still return it until the power loss,
//     but it never becomes durable (a later successful fsync does not save
//     it) and never persists at a power loss. Data written after the
//     failure is dirty again, and a later successful fsync makes it
//     durable. A failed directory fsync leaves the entries as they were.
//
// A power loss ends the mount (operations in progress finish first, but
// not an injected delay, which is cut short; files
// still open on it fail with EIO), rolls the backing dir back to its
// durable state and mounts again. Kill the processes using the mount first,
// as the power cut would. Beyond dropping every unsynced change:
//
//   - torn: each file's last unsynced write persists up to a block
//     boundary inside it (4 KiB, or block=BYTES), the writes before it in
//     full; a write inside one block does not persist;
//   - reorder: an arbitrary subset of each file's unsynced changes
//     persists, in their order, not only a prefix (with torn, the last
//     of the subset is torn).
//
// The choices are drawn from the seed, over the files in path order, so
// the same seed and the same operations give the same bytes.
//
// Faults stay in force across a power loss, until heal.
//
// # Costs and limits
//
// The model holds the bytes of every unsynced write (and the durable bytes
// an overwrite or shrinking truncation replaced) until the file's fsync or
// a power loss, so a file that is written and never fsynced costs its
// written bytes in memory; appends cost no read. One file's writes,
// truncations and fsyncs run one at a time (as the model needs the bytes a
// write replaces); changes of names and directory fsyncs take one lock for
// the whole filesystem. The mount is served by the process that called
// Mount: a process must not exit holding a file open on a mount it serves
// itself (the kernel would wait on it forever), so close files before
// Unmount.
//
// # Commands
//
// One command per line, words separated by spaces:
//
//	power [torn] [reorder] [block=BYTES] [seed=N]
//	eio [write|fsync|all] [path=GLOB] [for=DURATION]
//	enospc [bytes=N]
//	slow [write|fsync|all] DELAY [jitter=DURATION] [seed=N] [path=GLOB] [for=DURATION]
//	heal
//	status
//
// eio fails the chosen operations (all by default) with EIO, on files
// whose path relative to the root matches GLOB (path.Match; a glob without
// a slash matches the base name at any depth; no glob: every file), for
// DURATION or until heal. enospc lets writes grow the files by N more bytes
// (default 0: full now); a write that would pass the quota fails with
// ENOSPC and writes nothing, overwrites inside a file still succeed, and
// truncation does not count (sparse). slow delays the chosen operations by
// DELAY plus a jitter drawn uniformly in [0, jitter) from the seed; an
// operation still waiting out its delay when its caller is killed (the
// kernel interrupts the request) or the power is cut fails with EINTR and
// has no effect, so an fsync in progress at a power loss makes nothing
// durable. heal
// ends every eio, enospc and slow fault; the durability model goes on.
// status lists the faults in force and the unsynced bytes a power loss
// would drop.
// Faults add up: two eio commands fail the union of what each names.
//
// # Never
//
// The filesystem must never hold data the backing dir does not have
// (write-through), never let a process see the volatile state after a
// power loss (the old mount is dead, the new one shows the durable state),
// never touch anything outside the backing and stage dirs, never mount
// where the mount would contain its backing dir or lie inside it (Mount
// refuses: the mount would serve itself), and never leave
// a mount behind: Unmount always unmounts, lazily when a file is still
// open. fallocate is refused (EOPNOTSUPP): the model does not track
// preallocated space. RENAME_EXCHANGE is refused (EINVAL). The kernel's
// FUSE passthrough is kept off, so that every read and write reaches the
// model. A directory renamed with both parents fsynced has two durable
// names; a power loss brings it back under one.
package faultfs
