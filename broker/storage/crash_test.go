package storage

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var testTP = TopicPartition{Topic: "t", Partition: 0}

// writtenLog appends n batches of varying size to a fresh log in dir, closes
// it without a clean shutdown, and returns the stamped batches in order.
func writtenLog(t *testing.T, fs FS, dir string, cfg LogConfig, n int) [][]byte {
	t.Helper()
	l := openTestLog(t, fs, filepath.Join(dir, testTP.DirName()), cfg, true)
	var out [][]byte
	for i := 0; i < n; i++ {
		b := BuildBatch(records(1+i%4, fmt.Sprintf("batch%d", i), int64(5000+i*3)), BatchOptions{})
		_, err := l.AppendAsLeader(b, int32(1+i/10), 1)
		require.NoError(t, err)
		out = append(out, b)
	}
	require.NoError(t, l.Close())
	return out
}

// referenceLog builds, with follower appends, a log holding exactly batches
// and returns the bytes of every file of its partition dir except
// checkpoints and snapshots.
func referenceFiles(t *testing.T, cfg LogConfig, batches [][]byte) map[string][]byte {
	t.Helper()
	dir := filepath.Join(t.TempDir(), testTP.DirName())
	l := openTestLog(t, OS, dir, cfg, true)
	for _, b := range batches {
		require.NoError(t, l.AppendAsFollower(append([]byte(nil), b...)))
	}
	require.NoError(t, l.Close())
	return segmentFiles(t, dir)
}

func segmentFiles(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	out := map[string][]byte{}
	for _, e := range ents {
		switch filepath.Ext(e.Name()) {
		case logSuffix, indexSuffix, timeIndexSuffix:
			b, err := os.ReadFile(filepath.Join(dir, e.Name()))
			require.NoError(t, err)
			out[e.Name()] = b
		}
	}
	return out
}

// reopenUnclean loads dir with a LogManager as after a crash.
func reopenUnclean(t *testing.T, fs FS, dir string) (*LogManager, *Log) {
	t.Helper()
	m := newTestManager(t, fs, []string{dir}, nil)
	stats, err := m.Load()
	require.NoError(t, err)
	require.Equal(t, []string{dir}, stats.UncleanDirs)
	l, ok := m.GetLog(testTP)
	require.True(t, ok)
	return m, l
}

func activeLogPath(t *testing.T, dir string) string {
	t.Helper()
	matches, err := filepath.Glob(filepath.Join(dir, testTP.DirName(), "*"+logSuffix))
	require.NoError(t, err)
	require.NotEmpty(t, matches)
	return matches[len(matches)-1]
}

// batchStart is the byte position of batch k in a single-segment log.
func batchStart(batches [][]byte, k int) int64 {
	var p int64
	for _, b := range batches[:k] {
		p += int64(len(b))
	}
	return p
}

func TestCrashRecoveryKeepsExactlyTheValidPrefix(t *testing.T) {
	const n = 40
	cases := map[string]struct {
		damage func(t *testing.T, path string, batches [][]byte)
		keep   int // batches that must survive
	}{
		"torn tail mid-batch": {
			damage: func(t *testing.T, path string, batches [][]byte) {
				require.NoError(t, os.Truncate(path, batchStart(batches, 33)+20))
			},
			keep: 33,
		},
		"torn tail inside the header": {
			damage: func(t *testing.T, path string, batches [][]byte) {
				require.NoError(t, os.Truncate(path, batchStart(batches, 39)+9))
			},
			keep: 39,
		},
		"garbage appended": {
			damage: func(t *testing.T, path string, _ [][]byte) {
				f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
				require.NoError(t, err)
				_, err = f.Write([]byte("this is not a record batch, not at all"))
				require.NoError(t, err)
				require.NoError(t, f.Close())
			},
			keep: n,
		},
		"zeroed tail (lost pages)": {
			damage: func(t *testing.T, path string, batches [][]byte) {
				fi, err := os.Stat(path)
				require.NoError(t, err)
				require.NoError(t, os.Truncate(path, batchStart(batches, 30)))
				require.NoError(t, os.Truncate(path, fi.Size()))
			},
			keep: 30,
		},
		"bit flip in a record": {
			damage: func(t *testing.T, path string, batches [][]byte) {
				flipByte(t, path, batchStart(batches, 25)+BatchHeaderSize+3)
			},
			keep: 25,
		},
		"bit flip in the CRC": {
			damage: func(t *testing.T, path string, batches [][]byte) {
				flipByte(t, path, batchStart(batches, 12)+offCRC)
			},
			keep: 12,
		},
		"length past end of file": {
			damage: func(t *testing.T, path string, batches [][]byte) {
				f, err := os.OpenFile(path, os.O_WRONLY, 0)
				require.NoError(t, err)
				_, err = f.WriteAt([]byte{0x7f, 0, 0, 0}, batchStart(batches, 37)+offBatchLength)
				require.NoError(t, err)
				require.NoError(t, f.Close())
			},
			keep: 37,
		},
		"offsets going backwards": {
			damage: func(t *testing.T, path string, batches [][]byte) {
				f, err := os.OpenFile(path, os.O_WRONLY, 0)
				require.NoError(t, err)
				_, err = f.WriteAt(make([]byte, 8), batchStart(batches, 20)+offBaseOffset)
				require.NoError(t, err)
				require.NoError(t, f.Close())
			},
			keep: 20,
		},
		"indexes deleted": {
			damage: func(t *testing.T, path string, _ [][]byte) {
				require.NoError(t, os.Remove(path[:len(path)-len(logSuffix)]+indexSuffix))
				require.NoError(t, os.Remove(path[:len(path)-len(logSuffix)]+timeIndexSuffix))
			},
			keep: n,
		},
		"indexes garbled": {
			damage: func(t *testing.T, path string, _ [][]byte) {
				require.NoError(t, os.WriteFile(path[:len(path)-len(logSuffix)]+indexSuffix, []byte("garbage!!"), 0o644))
				require.NoError(t, os.WriteFile(path[:len(path)-len(logSuffix)]+timeIndexSuffix, make([]byte, 24), 0o644))
			},
			keep: n,
		},
	}
	cfg := testConfig()
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			batches := writtenLog(t, OS, dir, cfg, n)
			tc.damage(t, activeLogPath(t, dir), batches)
			m, l := reopenUnclean(t, OS, dir)
			want := batches[:tc.keep]
			leo := int64(0)
			for _, b := range want {
				h, err := ParseBatchHeader(b)
				require.NoError(t, err)
				leo = h.NextOffset()
			}
			assert.Equal(t, leo, l.LogEndOffset())
			got, err := l.Read(0, 1<<30, leo, true)
			require.NoError(t, err)
			assert.Equal(t, concat(want), got, "exactly the valid prefix survives")
			require.NoError(t, m.Shutdown(1))
			assert.Equal(t, referenceFiles(t, cfg, want), segmentFiles(t, filepath.Join(dir, testTP.DirName())),
				"log and rebuilt indexes equal a clean build of the prefix")
		})
	}
}

func concat(bs [][]byte) []byte {
	var out []byte
	for _, b := range bs {
		out = append(out, b...)
	}
	return out
}

func flipByte(t *testing.T, path string, pos int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	require.NoError(t, err)
	defer f.Close()
	var b [1]byte
	_, err = f.ReadAt(b[:], pos)
	require.NoError(t, err)
	b[0] ^= 0x10
	_, err = f.WriteAt(b[:], pos)
	require.NoError(t, err)
}

func TestCrashRecoveryDropsSegmentsAfterCorruption(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 1500
	dir := t.TempDir()
	batches := writtenLog(t, OS, dir, cfg, 60)
	pdir := filepath.Join(dir, testTP.DirName())
	logs, err := filepath.Glob(filepath.Join(pdir, "*"+logSuffix))
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(logs), 4, "several segments")
	// Corrupt the first batch of the second segment.
	flipByte(t, logs[1], BatchHeaderSize+2)
	base, ok := parseOffsetName(filepath.Base(logs[1]), logSuffix)
	require.True(t, ok)

	m, l := reopenUnclean(t, OS, dir)
	assert.Equal(t, base, l.LogEndOffset())
	assert.Equal(t, 2, l.NumSegments(), "later segments deleted, the damaged one kept empty")
	var keep [][]byte
	for _, b := range batches {
		if h, _ := ParseBatchHeader(b); h.BaseOffset < base {
			keep = append(keep, b)
		}
	}
	got, err := l.Read(0, 1<<30, base, true)
	require.NoError(t, err)
	var all []byte
	for off := int64(0); off < base; {
		b, err := l.Read(off, 1<<30, base, true)
		require.NoError(t, err)
		require.NotEmpty(t, b)
		require.NoError(t, ForEachBatch(b, func(h BatchHeader, _ []byte) error { off = h.NextOffset(); return nil }))
		all = append(all, b...)
	}
	assert.NotEmpty(t, got)
	assert.Equal(t, concat(keep), all)
	require.NoError(t, m.Shutdown(1))
	for _, p := range logs[2:] {
		_, err := os.Stat(p)
		assert.True(t, os.IsNotExist(err), p)
	}
}

// TestAppendWriteErrorsKeepTheLogWhole: a write refused for want of space
// (ENOSPC, whole or cut short) leaves nothing of the batch and the log
// serves again once there is space; an I/O error (EIO) takes the log
// offline: the log end stays where it was and every later read and write
// fails with ErrLogDirOffline, even once the disk answers again.
func TestAppendWriteErrorsKeepTheLogWhole(t *testing.T) {
	efs := NewErrorFS(OS)
	dir := t.TempDir()
	l := openTestLog(t, efs, filepath.Join(dir, testTP.DirName()), testConfig(), true)
	appendN(t, l, 5, 2, 0)

	remove := efs.Inject(Rule{Op: OpWrite, Path: logSuffix, Count: 1, Err: syscall.ENOSPC})
	_, err := l.AppendAsLeader(BuildBatch(records(2, "x", 1), BatchOptions{}), 0, 1)
	assert.True(t, errors.Is(err, syscall.ENOSPC), "ENOSPC surfaces: %v", err)
	assert.False(t, errors.Is(err, ErrLogDirOffline), "a full disk does not take the log offline")
	remove()
	assert.Equal(t, int64(10), l.LogEndOffset())

	remove = efs.Inject(Rule{Op: OpWrite, Path: logSuffix, Count: 1, Mode: FaultShortWrite, KeepBytes: 30, Err: syscall.ENOSPC})
	_, err = l.AppendAsLeader(BuildBatch(records(2, "y", 1), BatchOptions{}), 0, 1)
	assert.Error(t, err)
	remove()
	assert.Equal(t, int64(10), l.LogEndOffset(), "a short write is cut back")

	info, err := l.AppendAsLeader(BuildBatch(records(2, "z", 1), BatchOptions{}), 0, 1)
	require.NoError(t, err, "space is back: the log serves again")
	assert.Equal(t, int64(10), info.FirstOffset)
	b, err := l.Read(0, 1<<20, 100, true)
	require.NoError(t, err)
	n := 0
	require.NoError(t, ForEachBatch(b, func(h BatchHeader, batch []byte) error {
		_, err := ValidateBatch(batch)
		n++
		return err
	}))
	assert.Equal(t, 6, n)

	remove = efs.Inject(Rule{Op: OpWrite, Path: logSuffix, Count: 1, Mode: FaultShortWrite, KeepBytes: 30})
	_, err = l.AppendAsLeader(BuildBatch(records(2, "w", 1), BatchOptions{}), 0, 1)
	assert.True(t, errors.Is(err, syscall.EIO), "EIO surfaces: %v", err)
	assert.ErrorIs(t, err, ErrLogDirOffline)
	remove()
	assert.Equal(t, int64(12), l.LogEndOffset(), "the failed write is not in the log end")
	_, err = l.AppendAsLeader(BuildBatch(records(2, "v", 1), BatchOptions{}), 0, 1)
	assert.ErrorIs(t, err, ErrLogDirOffline, "the disk answers again, but the log stays offline")
	_, err = l.Read(0, 1<<20, 100, true)
	assert.ErrorIs(t, err, ErrLogDirOffline, "an offline log serves no reads")
	assert.True(t, l.Offline())
	require.NoError(t, l.Close())

	_, l2 := reopenUnclean(t, OS, dir)
	assert.Equal(t, int64(12), l2.LogEndOffset(), "recovery drops the part the failed write left")
}

func TestTornWriteThenCrash(t *testing.T) {
	efs := NewErrorFS(OS)
	dir := t.TempDir()
	l := openTestLog(t, efs, filepath.Join(dir, testTP.DirName()), testConfig(), true)
	appendN(t, l, 8, 3, 0)
	efs.Inject(Rule{Op: OpWrite, Path: logSuffix, Count: 1, Mode: FaultTornWrite, KeepBytes: 40})
	_, err := l.AppendAsLeader(BuildBatch(records(3, "torn", 1), BatchOptions{}), 0, 1)
	require.NoError(t, err, "a torn write looks successful")
	assert.Equal(t, int64(27), l.LogEndOffset())
	require.NoError(t, l.Close())

	_, l2 := reopenUnclean(t, OS, dir)
	assert.Equal(t, int64(24), l2.LogEndOffset())
}

func TestShutdownFsyncFailureWritesNoMarker(t *testing.T) {
	efs := NewErrorFS(OS)
	dir := t.TempDir()
	m := newTestManager(t, efs, []string{dir}, nil)
	_, err := m.Load()
	require.NoError(t, err)
	l, err := m.GetOrCreateLog(testTP, testConfig())
	require.NoError(t, err)
	appendN(t, l, 3, 3, 0)
	efs.Inject(Rule{Op: OpSync, Path: logSuffix})
	assert.Error(t, m.Shutdown(7))
	_, err = os.Stat(filepath.Join(dir, CleanShutdownFile))
	assert.True(t, os.IsNotExist(err), "no marker after a failed flush")
}

func TestPowerLossKeepsFlushedData(t *testing.T) {
	t.Run("flush.messages=1 keeps every acknowledged append", func(t *testing.T) {
		efs := NewErrorFS(OS)
		dir := t.TempDir()
		cfg := testConfig()
		cfg.FlushIntervalMessages = 1
		cfg.SegmentBytes = 2000
		l := openTestLog(t, efs, filepath.Join(dir, testTP.DirName()), cfg, true)
		appendN(t, l, 50, 2, 0)
		require.NoError(t, l.Close())
		require.NoError(t, efs.Crash())
		_, l2 := reopenUnclean(t, OS, dir)
		assert.Equal(t, int64(100), l2.LogEndOffset())
	})
	t.Run("default policy keeps the flushed prefix", func(t *testing.T) {
		efs := NewErrorFS(OS)
		dir := t.TempDir()
		l := openTestLog(t, efs, filepath.Join(dir, testTP.DirName()), testConfig(), true)
		appendN(t, l, 20, 2, 0)
		require.NoError(t, l.Flush())
		appendN(t, l, 20, 2, 0)
		require.NoError(t, l.Close())
		require.NoError(t, efs.Crash())
		_, l2 := reopenUnclean(t, OS, dir)
		assert.Equal(t, int64(40), l2.LogEndOffset(), "unflushed appends are lost, flushed ones kept")
	})
}

// TestFailedFsyncIsNeverRetried (fsyncgate): with flush.messages=1 an
// append whose fsync fails is an error and takes the log offline. A later
// fsync could succeed without the pages the kernel dropped, so none is
// tried: the producer's retry of the batch is refused with
// ErrLogDirOffline, before and after the disk answers again, and nothing
// is ever acknowledged as durable.
func TestFailedFsyncIsNeverRetried(t *testing.T) {
	efs := NewErrorFS(OS)
	cfg := testConfig()
	cfg.FlushIntervalMessages = 1
	l := openTestLog(t, efs, filepath.Join(t.TempDir(), testTP.DirName()), cfg, true)
	defer l.Close()
	batch := func() []byte {
		return BuildBatch(records(2, "p", 1), BatchOptions{Producer: &BatchProducer{ID: 9, Epoch: 0, BaseSequence: 0}})
	}

	removeFault := efs.Inject(Rule{Op: OpSync, Path: logSuffix})
	_, err := l.AppendAsLeader(batch(), 0, 1)
	require.ErrorIs(t, err, ErrLogDirOffline, "the fsync failed")
	require.Equal(t, int64(0), l.RecoveryPoint())
	info, err := l.AppendAsLeader(batch(), 0, 1)
	assert.ErrorIs(t, err, ErrLogDirOffline, "the retry is refused (got %+v)", info)

	removeFault()
	info, err = l.AppendAsLeader(batch(), 0, 1)
	assert.ErrorIs(t, err, ErrLogDirOffline, "the retry is refused once fsyncs work again (got %+v)", info)
	assert.ErrorIs(t, l.Flush(), ErrLogDirOffline, "no fsync is tried again")
	assert.Equal(t, int64(0), l.RecoveryPoint(), "nothing became durable")
}

// TestRecoveryCutsCorruptionBelowTheRecoveryPoint: a bit flip in a flushed
// segment, below the recovery point, is found by the recovery of an
// unclean start (Kafka trusts those segments): the log is cut at the
// corrupt batch and later segments are deleted, so the corrupt batch is
// never served and the replica fetches the rest again from its leader.
func TestRecoveryCutsCorruptionBelowTheRecoveryPoint(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 1500
	dir := t.TempDir()
	m, l := managedLog(t, dir, cfg)
	appendN(t, l, 60, 2, 1)
	leo := l.LogEndOffset()
	require.NoError(t, m.Shutdown(1))
	require.NoError(t, os.Remove(filepath.Join(dir, CleanShutdownFile)), "as after a crash, with every segment flushed")
	points, err := ReadOffsetCheckpoint(OS, filepath.Join(dir, RecoveryPointCheckpointFile))
	require.NoError(t, err)
	require.Equal(t, leo, points[testTP], "the recovery point is the log end")

	logs, err := filepath.Glob(filepath.Join(dir, testTP.DirName(), "*"+logSuffix))
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(logs), 4, "several segments")
	flipByte(t, logs[1], BatchHeaderSize+2)
	base, ok := parseOffsetName(filepath.Base(logs[1]), logSuffix)
	require.True(t, ok)

	m2, l2 := reopenUnclean(t, OS, dir)
	defer func() { _ = m2.Shutdown(2) }()
	assert.Equal(t, base, l2.LogEndOffset(), "cut at the corrupt batch")
	assert.Equal(t, base, l2.RecoveryPoint())
	for off := int64(0); off < l2.LogEndOffset(); {
		b, err := l2.Read(off, 1<<30, l2.LogEndOffset(), true)
		require.NoError(t, err)
		require.NotEmpty(t, b)
		require.NoError(t, ForEachBatch(b, func(h BatchHeader, batch []byte) error {
			_, err := ValidateBatch(batch)
			off = h.NextOffset()
			return err
		}), "every batch served is valid")
	}
}

// managedLog loads a LogManager over dir and creates testTP's log in it
// with cfg.
func managedLog(t *testing.T, dir string, cfg LogConfig) (*LogManager, *Log) {
	t.Helper()
	m := newTestManager(t, OS, []string{dir}, nil)
	_, err := m.Load()
	require.NoError(t, err)
	l, err := m.GetOrCreateLog(testTP, cfg)
	require.NoError(t, err)
	return m, l
}
