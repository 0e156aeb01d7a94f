package faultfs

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// mounted mounts a fault filesystem over a fresh backing dir for one test
// and unmounts it when the test ends. It skips where FUSE cannot mount.
func mounted(t testing.TB) (f *FS, mnt, backing string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("faultfs: needs root and /dev/fuse to mount (run the tests as root, e.g. in CI)")
	}
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Skip("faultfs: needs root and /dev/fuse to mount; /dev/fuse is missing")
	}
	dir := t.TempDir()
	backing, mnt = filepath.Join(dir, "backing"), filepath.Join(dir, "mnt")
	require.NoError(t, os.Mkdir(backing, 0o755))
	require.NoError(t, os.Mkdir(mnt, 0o755))
	f, err := Mount(backing, mnt, Options{})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, f.Unmount()) })
	return f, mnt, backing
}

func writeFile(t testing.TB, name string, data []byte, sync bool) {
	t.Helper()
	w, err := os.OpenFile(name, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	require.NoError(t, err)
	defer w.Close()
	_, err = w.Write(data)
	require.NoError(t, err)
	if sync {
		require.NoError(t, w.Sync())
	}
	require.NoError(t, w.Close())
}

func syncDir(t testing.TB, dir string) {
	t.Helper()
	d, err := os.Open(dir)
	require.NoError(t, err)
	defer d.Close()
	require.NoError(t, d.Sync())
	require.NoError(t, d.Close())
}

// openFile opens name on the mount and closes it before the mount goes.
func openFile(t testing.TB, name string, flag int) *os.File {
	t.Helper()
	w, err := os.OpenFile(name, flag, 0)
	require.NoError(t, err)
	t.Cleanup(func() { w.Close() })
	return w
}

func exec(t testing.TB, f *FS, line string) {
	t.Helper()
	_, err := f.Exec(line)
	require.NoError(t, err)
}

func assertGone(t testing.TB, name string, msgAndArgs ...any) {
	t.Helper()
	_, err := os.Stat(name)
	assert.ErrorIs(t, err, os.ErrNotExist, msgAndArgs...)
}

func readFile(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(name)
	require.NoError(t, err)
	return b
}

func power(t testing.TB, f *FS, spec PowerSpec) {
	t.Helper()
	require.NoError(t, f.PowerLoss(spec))
}

func TestMountUnsyncedDataIsLostAndSyncedDataKept(t *testing.T) {
	f, mnt, backing := mounted(t)
	a := filepath.Join(mnt, "a")
	writeFile(t, a, []byte("durable "), true)
	syncDir(t, mnt)
	writeFile(t, a, []byte("volatile"), false)
	assert.Equal(t, "durable volatile", string(readFile(t, a)), "reads see the latest writes")
	assert.Equal(t, "durable volatile", string(readFile(t, filepath.Join(backing, "a"))), "writes go through to the backing dir")

	power(t, f, PowerSpec{})

	assert.Equal(t, "durable ", string(readFile(t, a)))
	assert.Equal(t, "durable ", string(readFile(t, filepath.Join(backing, "a"))))
}

func TestMountOverwriteOfSyncedBytesIsUndone(t *testing.T) {
	f, mnt, _ := mounted(t)
	a := filepath.Join(mnt, "a")
	writeFile(t, a, []byte("0123456789"), true)
	syncDir(t, mnt)
	w := openFile(t, a, os.O_WRONLY)
	_, err := w.WriteAt([]byte("xyz"), 4)
	require.NoError(t, err)
	require.NoError(t, w.Close())
	assert.Equal(t, "0123xyz789", string(readFile(t, a)))

	power(t, f, PowerSpec{})

	assert.Equal(t, "0123456789", string(readFile(t, a)))
}

func TestMountCreateWithoutDirectoryFsyncIsLost(t *testing.T) {
	f, mnt, backing := mounted(t)
	writeFile(t, filepath.Join(mnt, "synced-file-only"), []byte("data"), true)
	writeFile(t, filepath.Join(mnt, "named"), []byte("data"), true)
	syncDir(t, mnt)
	require.NoError(t, os.Mkdir(filepath.Join(mnt, "dir"), 0o755))
	writeFile(t, filepath.Join(mnt, "dir", "inner"), []byte("x"), true)
	syncDir(t, filepath.Join(mnt, "dir"))

	power(t, f, PowerSpec{})

	assert.Equal(t, "data", string(readFile(t, filepath.Join(mnt, "named"))))
	entries, err := os.ReadDir(backing)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	assert.Equal(t, []string{"named", "synced-file-only"}, names,
		"a directory whose parent was never fsynced is lost with what it holds")
}

func TestMountCreateLostWhenOnlyTheFileIsSynced(t *testing.T) {
	f, mnt, _ := mounted(t)
	writeFile(t, filepath.Join(mnt, "new"), []byte("data"), true)

	power(t, f, PowerSpec{})

	assertGone(t, filepath.Join(mnt, "new"))
}

func TestMountRenameIsDurableOnlyAfterADirectoryFsync(t *testing.T) {
	for _, tc := range []struct {
		name     string
		syncDir  bool
		contents string
	}{
		{name: "without a directory fsync the replaced file comes back", contents: "old"},
		{name: "with a directory fsync the rename is kept", syncDir: true, contents: "new"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, mnt, _ := mounted(t)
			old, tmp := filepath.Join(mnt, "checkpoint"), filepath.Join(mnt, "checkpoint.tmp")
			writeFile(t, old, []byte("old"), true)
			syncDir(t, mnt)
			writeFile(t, tmp, []byte("new"), true)
			require.NoError(t, os.Rename(tmp, old))
			assert.Equal(t, "new", string(readFile(t, old)))
			if tc.syncDir {
				syncDir(t, mnt)
			}

			power(t, f, PowerSpec{})

			assert.Equal(t, tc.contents, string(readFile(t, old)))
			assertGone(t, tmp)
		})
	}
}

func TestMountDirectoryRenameWithoutFsyncIsUndone(t *testing.T) {
	f, mnt, _ := mounted(t)
	require.NoError(t, os.Mkdir(filepath.Join(mnt, "topic-0"), 0o755))
	writeFile(t, filepath.Join(mnt, "topic-0", "00.log"), []byte("log"), true)
	syncDir(t, filepath.Join(mnt, "topic-0"))
	syncDir(t, mnt)
	require.NoError(t, os.Rename(filepath.Join(mnt, "topic-0"), filepath.Join(mnt, "topic-0.delete")))

	power(t, f, PowerSpec{})

	assert.Equal(t, "log", string(readFile(t, filepath.Join(mnt, "topic-0", "00.log"))))
	assertGone(t, filepath.Join(mnt, "topic-0.delete"))
}

func TestMountUnlinkWithoutDirectoryFsyncIsUndone(t *testing.T) {
	f, mnt, _ := mounted(t)
	gone, kept := filepath.Join(mnt, "unlinked-synced"), filepath.Join(mnt, "unlinked-unsynced")
	writeFile(t, gone, []byte("a"), true)
	writeFile(t, kept, []byte("b"), true)
	syncDir(t, mnt)
	require.NoError(t, os.Remove(gone))
	syncDir(t, mnt)
	require.NoError(t, os.Remove(kept))
	assertGone(t, kept)

	power(t, f, PowerSpec{})

	assertGone(t, gone, "an unlink made durable stays")
	assert.Equal(t, "b", string(readFile(t, kept)), "an unlink without a directory fsync is undone")
}

func TestMountTruncateWithoutFsyncIsUndone(t *testing.T) {
	f, mnt, _ := mounted(t)
	shrunk, grown := filepath.Join(mnt, "shrunk"), filepath.Join(mnt, "grown")
	writeFile(t, shrunk, []byte("0123456789"), true)
	writeFile(t, grown, []byte("01"), true)
	syncDir(t, mnt)
	require.NoError(t, os.Truncate(shrunk, 3))
	require.NoError(t, os.Truncate(grown, 100))
	assert.Equal(t, "012", string(readFile(t, shrunk)))

	power(t, f, PowerSpec{})

	assert.Equal(t, "0123456789", string(readFile(t, shrunk)))
	assert.Equal(t, "01", string(readFile(t, grown)))
}

func TestMountTruncateWithFsyncIsKept(t *testing.T) {
	f, mnt, _ := mounted(t)
	a := filepath.Join(mnt, "a")
	writeFile(t, a, []byte("0123456789"), true)
	syncDir(t, mnt)
	w := openFile(t, a, os.O_WRONLY)
	require.NoError(t, w.Truncate(4))
	require.NoError(t, w.Sync())
	require.NoError(t, w.Close())

	power(t, f, PowerSpec{})

	assert.Equal(t, "0123", string(readFile(t, a)))
}

// unsyncedBlocks writes a synced file and then three unsynced 8 KiB writes
// of distinct bytes, and returns the file's path on the mount.
func unsyncedBlocks(t *testing.T, mnt string) string {
	a := filepath.Join(mnt, "segment.log")
	writeFile(t, a, bytes.Repeat([]byte{'s'}, 4096), true)
	syncDir(t, mnt)
	for _, c := range []byte{'a', 'b', 'c'} {
		writeFile(t, a, bytes.Repeat([]byte{c}, 8192), false)
	}
	return a
}

func TestMountTornWriteIsCutAtABlockBoundaryAndReplays(t *testing.T) {
	var results [][]byte
	for range 2 {
		f, mnt, _ := mounted(t)
		a := unsyncedBlocks(t, mnt)
		power(t, f, PowerSpec{Torn: true, BlockBytes: 512, Seed: 7})
		got := readFile(t, a)
		results = append(results, got)
		require.Greater(t, len(got), 4096+2*8192, "the writes before the last persist")
		require.Less(t, len(got), 4096+3*8192, "the last write persists only in part")
		assert.Zero(t, len(got)%512, "cut at a block boundary")
		assert.Equal(t, bytes.Repeat([]byte{'c'}, len(got)-4096-2*8192), got[4096+2*8192:])
	}
	assert.Equal(t, results[0], results[1], "the same seed tears the same way")
}

func TestMountReorderedPersistenceIsASeededSubset(t *testing.T) {
	var results [][]byte
	for range 2 {
		f, mnt, _ := mounted(t)
		a := filepath.Join(mnt, "a")
		writeFile(t, a, make([]byte, 8*1024), true)
		syncDir(t, mnt)
		w := openFile(t, a, os.O_WRONLY)
		for i := range 8 {
			_, err := w.WriteAt(bytes.Repeat([]byte{byte('A' + i)}, 1024), int64(i*1024))
			require.NoError(t, err)
		}
		require.NoError(t, w.Close())
		power(t, f, PowerSpec{Reorder: true, Seed: 3})
		results = append(results, readFile(t, a))
	}
	got := results[0]
	require.Len(t, got, 8*1024)
	var persisted []int
	for i := range 8 {
		block := got[i*1024 : (i+1)*1024]
		switch {
		case bytes.Equal(block, bytes.Repeat([]byte{byte('A' + i)}, 1024)):
			persisted = append(persisted, i)
		default:
			assert.Equal(t, make([]byte, 1024), block, "a block is either its write or the durable zeros")
		}
	}
	assert.NotEmpty(t, persisted, "seed 3 persists some writes")
	assert.Less(t, len(persisted), 8, "seed 3 drops some writes")
	assert.NotEqual(t, []int{0, 1, 2, 3, 4, 5, 6, 7}[:len(persisted)], persisted, "seed 3 persists a subset that is not a prefix")
	assert.Equal(t, results[0], results[1], "the same seed persists the same subset")
}

func TestMountEIOSurfacesAndAFailedFsyncNeverBecomesDurable(t *testing.T) {
	f, mnt, _ := mounted(t)
	a := filepath.Join(mnt, "a.log")
	other := filepath.Join(mnt, "other")
	writeFile(t, a, []byte("durable."), true)
	writeFile(t, other, []byte("x"), true)
	syncDir(t, mnt)
	exec(t, f, "eio fsync path=*.log")

	w := openFile(t, a, os.O_WRONLY|os.O_APPEND)
	_, err := w.Write([]byte("lost."))
	require.NoError(t, err, "writes still succeed under an fsync fault")
	assert.ErrorIs(t, w.Sync(), syscall.EIO)
	writeFile(t, other, []byte("y"), true)

	f.Heal()
	_, err = w.Write([]byte("later."))
	require.NoError(t, err)
	require.NoError(t, w.Sync(), "fsync succeeds after the heal")
	assert.Equal(t, "durable.lost.later.", string(readFile(t, a)), "reads still see the dropped data, as from the page cache")

	power(t, f, PowerSpec{})

	assert.Equal(t, "durable.\x00\x00\x00\x00\x00later.", string(readFile(t, a)),
		"the data of the failed fsync was dropped; the later fsync did not make it durable")
	assert.Equal(t, "xy", string(readFile(t, other)), "files outside the glob are unaffected")
}

func TestMountEIOOnWriteForADuration(t *testing.T) {
	f, mnt, _ := mounted(t)
	a := filepath.Join(mnt, "a")
	writeFile(t, a, nil, true)
	f.InjectEIO(EIOFault{Ops: OpWrite, For: 200 * time.Millisecond})
	w := openFile(t, a, os.O_WRONLY)
	_, err := w.Write([]byte("x"))
	assert.ErrorIs(t, err, syscall.EIO)
	require.Eventually(t, func() bool {
		_, err := w.Write([]byte("x"))
		return err == nil
	}, 5*time.Second, 20*time.Millisecond, "the fault ends after its duration")
}

func TestMountENOSPCPastTheQuotaWritesNothing(t *testing.T) {
	f, mnt, _ := mounted(t)
	a := filepath.Join(mnt, "a")
	writeFile(t, a, []byte("0123456789"), true)
	exec(t, f, "enospc bytes=6")
	w := openFile(t, a, os.O_WRONLY)
	_, err := w.WriteAt([]byte("abcd"), 10)
	require.NoError(t, err)
	_, err = w.WriteAt([]byte("efgh"), 14)
	assert.ErrorIs(t, err, syscall.ENOSPC)
	assert.Equal(t, "0123456789abcd", string(readFile(t, a)), "nothing of the refused write is visible")
	_, err = w.WriteAt([]byte("XY"), 0)
	assert.NoError(t, err, "overwrites need no new space")

	f.Heal()
	_, err = w.WriteAt([]byte("efgh"), 14)
	assert.NoError(t, err, "writes go on once space returns")
}

func TestMountLatencyDelaysFsync(t *testing.T) {
	f, mnt, _ := mounted(t)
	a := filepath.Join(mnt, "a")
	writeFile(t, a, []byte("x"), true)
	exec(t, f, "slow fsync 150ms jitter=10ms seed=1")
	w := openFile(t, a, os.O_WRONLY)
	start := time.Now()
	require.NoError(t, w.Sync())
	assert.GreaterOrEqual(t, time.Since(start), 150*time.Millisecond)
	start = time.Now()
	_, err := w.Write([]byte("y"))
	require.NoError(t, err)
	assert.Less(t, time.Since(start), 150*time.Millisecond, "writes are not slowed by an fsync fault")
}

// A power loss during a slow fsync's delay cuts it short: what it would
// have made durable is not (the kernel holds the file's lock through a
// FUSE fsync, so writes to it wait meanwhile; a killed caller interrupts
// the delay the same way).
func TestMountSlowFsyncIsCutShortByPowerLoss(t *testing.T) {
	f, mnt, _ := mounted(t)
	a := filepath.Join(mnt, "a")
	writeFile(t, a, []byte("durable"), true)
	syncDir(t, mnt)
	exec(t, f, "slow fsync 3s")
	w := openFile(t, a, os.O_WRONLY|os.O_APPEND)
	_, err := w.Write([]byte(" written"))
	require.NoError(t, err)
	synced := make(chan error, 1)
	go func() { synced <- w.Sync() }()
	time.Sleep(100 * time.Millisecond)

	power(t, f, PowerSpec{})
	assert.Error(t, <-synced, "the fsync in progress never completed")
	assert.Equal(t, "durable", string(readFile(t, a)))
}

func TestMountPowerLossCutsOffOpenFiles(t *testing.T) {
	f, mnt, _ := mounted(t)
	a := filepath.Join(mnt, "a")
	writeFile(t, a, []byte("durable"), true)
	syncDir(t, mnt)
	w := openFile(t, a, os.O_WRONLY|os.O_APPEND)
	_, err := w.Write([]byte(" volatile"))
	require.NoError(t, err)

	power(t, f, PowerSpec{})

	_, err = w.Write([]byte("more"))
	assert.Error(t, err, "a file opened before the power loss is dead")
	assert.Equal(t, "durable", string(readFile(t, a)), "the new mount shows the durable state only")
}

func TestMountCommandsThroughExec(t *testing.T) {
	f, _, _ := mounted(t)
	out, err := f.Exec("slow write 1ms for=1h")
	require.NoError(t, err)
	assert.Equal(t, "started: slow write 1ms for=1h0m0s", out)
	status, err := f.Exec("status")
	require.NoError(t, err)
	assert.Contains(t, status, "slow write 1ms")
	_, err = f.Exec("heal")
	require.NoError(t, err)
	assert.Equal(t, "no faults\nunsynced: 0 bytes written to 0 files", f.Status())
	writeFile(t, filepath.Join(f.Mountpoint(), "a"), []byte("xyz"), false)
	assert.Contains(t, f.Status(), "unsynced: 3 bytes written to 1 files")
	_, err = f.Exec("power torn seed=1")
	require.NoError(t, err)
	_, err = f.Exec("explode")
	assert.Error(t, err)
}

func TestMountLeavesNoStageBehind(t *testing.T) {
	f, mnt, backing := mounted(t)
	writeFile(t, filepath.Join(mnt, "a"), []byte("x"), true)
	syncDir(t, mnt)
	require.NoError(t, os.Remove(filepath.Join(mnt, "a")))
	stage := filepath.Join(filepath.Dir(backing), ".backing.faultfs")
	entries, err := os.ReadDir(stage)
	require.NoError(t, err)
	assert.Len(t, entries, 1, "the unlinked durable file waits in the stage area")
	require.NoError(t, f.Unmount())
	_, err = os.Stat(stage)
	assert.True(t, errors.Is(err, os.ErrNotExist))
}

// TestMountBrokerLikeDataDir runs the file operations a Kafka log dir sees
// (a partition dir, a segment appended and flushed, a preallocated index,
// checkpoints replaced by rename) and checks what survives a power loss.
func TestMountBrokerLikeDataDir(t *testing.T) {
	f, mnt, _ := mounted(t)
	part := filepath.Join(mnt, "topic-0")
	require.NoError(t, os.Mkdir(part, 0o755))
	syncDir(t, mnt)
	segment, index := filepath.Join(part, "00000000000000000000.log"), filepath.Join(part, "00000000000000000000.index")
	writeFile(t, segment, []byte("record-0;"), true)
	writeFile(t, index, nil, false)
	syncDir(t, part)
	writeFile(t, segment, []byte("record-1;"), true)
	writeFile(t, segment, []byte("record-2;"), false)
	idx := openFile(t, index, os.O_WRONLY)
	require.NoError(t, idx.Truncate(1024))
	_, err := idx.WriteAt([]byte("offset-1"), 0)
	require.NoError(t, err)
	checkpoint := filepath.Join(mnt, "recovery-point-offset-checkpoint")
	replace := func(contents string, durable bool) {
		writeFile(t, checkpoint+".tmp", []byte(contents), true)
		require.NoError(t, os.Rename(checkpoint+".tmp", checkpoint))
		if durable {
			syncDir(t, mnt)
		}
	}
	replace("topic 0 1", true)
	replace("topic 0 2", false)

	power(t, f, PowerSpec{})

	assert.Equal(t, "record-0;record-1;", string(readFile(t, segment)), "the flushed records survive, the unflushed one is lost")
	assert.Empty(t, readFile(t, index), "the index was never fsynced")
	assert.Equal(t, "topic 0 1", string(readFile(t, checkpoint)), "the checkpoint renamed without a directory fsync is undone")
	assertGone(t, checkpoint+".tmp")
}

// TestMountOnlyTheFilesOwnFsyncMakesItDurable: nothing but an fsync (or
// fdatasync) of the file itself makes its appended data durable. Not an
// fsync or fdatasync of another file in the same dir, a directory fsync,
// a checkpoint replaced by rename, chmod, utimes, a size-keeping truncate,
// syncfs, closing every descriptor (FUSE's flush and release, as a killed
// broker's files are closed), nor data written long before the power loss.
func TestMountOnlyTheFilesOwnFsyncMakesItDurable(t *testing.T) {
	f, mnt, _ := mounted(t)
	part := filepath.Join(mnt, "t0-0")
	require.NoError(t, os.Mkdir(part, 0o755))
	syncDir(t, mnt)
	segment := filepath.Join(part, "00000000000000000000.log")
	writeFile(t, segment, []byte("flushed;"), true)
	syncDir(t, part)

	seg := openFile(t, segment, os.O_WRONLY|os.O_APPEND)
	_, err := seg.Write([]byte("old-unflushed;"))
	require.NoError(t, err)
	time.Sleep(1100 * time.Millisecond) // older than any write-back delay of the model: it has none
	checkpoint := filepath.Join(mnt, "replication-offset-checkpoint")
	for i := range 3 {
		writeFile(t, checkpoint+".tmp", []byte(fmt.Sprint("t0 0 ", i)), true)
		require.NoError(t, os.Rename(checkpoint+".tmp", checkpoint))
		syncDir(t, mnt)
	}
	other := openFile(t, filepath.Join(part, "leader-epoch-checkpoint"), os.O_CREATE|os.O_WRONLY)
	_, err = other.Write([]byte("0 0"))
	require.NoError(t, err)
	require.NoError(t, syscall.Fdatasync(int(other.Fd())))
	require.NoError(t, other.Sync())
	syncDir(t, part)
	require.NoError(t, os.Chmod(segment, 0o600))
	now := time.Now()
	require.NoError(t, os.Chtimes(segment, now, now))
	_, err = seg.Write([]byte("new-unflushed;"))
	require.NoError(t, err)
	require.NoError(t, seg.Truncate(int64(len("flushed;old-unflushed;new-unflushed;"))))
	require.NoError(t, unix.Syncfs(int(other.Fd())))
	require.NoError(t, seg.Close())
	require.NoError(t, other.Close())
	assert.Equal(t, "flushed;old-unflushed;new-unflushed;", string(readFile(t, segment)))

	power(t, f, PowerSpec{})

	assert.Equal(t, "flushed;", string(readFile(t, segment)), "only the segment's own fsync made its data durable")
	assert.Equal(t, "0 0", string(readFile(t, filepath.Join(part, "leader-epoch-checkpoint"))))
	assert.Equal(t, "t0 0 2", string(readFile(t, checkpoint)))
}

// TestMountRandomOperationsAgainstAnOracle runs seeded random file
// operations in one directory through the mount and checks the state after
// a power loss against a plain oracle: a name is durable as of the last
// directory fsync, a file's bytes as of its last fsync.
func TestMountRandomOperationsAgainstAnOracle(t *testing.T) {
	for seed := range int64(6) {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			f, mnt, backing := mounted(t)
			rng := rand.New(rand.NewSource(seed))
			names := []string{"a", "b", "c", "d"}
			type inode struct{ cur, dur []byte }
			cur, dur := map[string]*inode{}, map[string]*inode{}
			for range 150 {
				name := names[rng.Intn(len(names))]
				p := filepath.Join(mnt, name)
				x := cur[name]
				switch op := rng.Intn(8); {
				case op == 0 && x == nil:
					writeFile(t, p, nil, false)
					cur[name] = &inode{}
				case op <= 2 && x != nil:
					off := rng.Intn(len(x.cur) + 10)
					data := bytes.Repeat([]byte{byte('a' + rng.Intn(26))}, 1+rng.Intn(5000))
					w := openFile(t, p, os.O_WRONLY)
					_, err := w.WriteAt(data, int64(off))
					require.NoError(t, err)
					require.NoError(t, w.Close())
					if need := off + len(data); need > len(x.cur) {
						x.cur = append(x.cur, make([]byte, need-len(x.cur))...)
					}
					copy(x.cur[off:], data)
				case op == 3 && x != nil:
					size := rng.Intn(len(x.cur) + 100)
					require.NoError(t, os.Truncate(p, int64(size)))
					x.cur = append(x.cur[:min(size, len(x.cur))], make([]byte, max(0, size-len(x.cur)))...)
				case op == 4 && x != nil:
					w := openFile(t, p, os.O_WRONLY)
					require.NoError(t, w.Sync())
					require.NoError(t, w.Close())
					x.dur = append([]byte{}, x.cur...)
				case op == 5 && x != nil:
					to := names[rng.Intn(len(names))]
					require.NoError(t, os.Rename(p, filepath.Join(mnt, to)))
					delete(cur, name)
					cur[to] = x
				case op == 6 && x != nil:
					require.NoError(t, os.Remove(p))
					delete(cur, name)
				case op == 7:
					syncDir(t, mnt)
					dur = map[string]*inode{}
					for n, y := range cur {
						dur[n] = y
					}
				}
			}
			want := map[string]string{}
			for n, y := range dur {
				want[n] = string(y.dur)
			}

			power(t, f, PowerSpec{})

			got := map[string]string{}
			entries, err := os.ReadDir(backing)
			require.NoError(t, err)
			for _, e := range entries {
				got[e.Name()] = string(readFile(t, filepath.Join(backing, e.Name())))
			}
			assert.Equal(t, want, got)
		})
	}
}

func TestMountConcurrentWritersKeepTheirSyncedPrefix(t *testing.T) {
	f, mnt, _ := mounted(t)
	const writers, records = 4, 50
	var wg sync.WaitGroup
	for i := range writers {
		name := filepath.Join(mnt, fmt.Sprintf("p%d.log", i))
		writeFile(t, name, nil, true)
		w := openFile(t, name, os.O_WRONLY|os.O_APPEND)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range records {
				if _, err := w.Write([]byte(fmt.Sprintf("%02d;", r))); err != nil {
					t.Error(err)
					return
				}
				if r < records-10 {
					if err := w.Sync(); err != nil {
						t.Error(err)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	syncDir(t, mnt)

	power(t, f, PowerSpec{})

	var want strings.Builder
	for r := range records - 10 {
		fmt.Fprintf(&want, "%02d;", r)
	}
	for i := range writers {
		assert.Equal(t, want.String(), string(readFile(t, filepath.Join(mnt, fmt.Sprintf("p%d.log", i)))))
	}
}

func TestMountRefusesAMountpointOverItsBackingDir(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct{ backing, mnt string }{
		{dir, dir},
		{dir, filepath.Join(dir, "mnt")},
		{filepath.Join(dir, "backing"), dir},
	} {
		_, err := Mount(tc.backing, tc.mnt, Options{})
		assert.ErrorContains(t, err, "must not contain each other")
	}
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Empty(t, entries, "nothing was created")
}
