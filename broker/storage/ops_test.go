package storage

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRollBySizeAndTime(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 1000
	cfg.SegmentMs = 60_000
	l := openTestLog(t, OS, t.TempDir(), cfg, true)
	defer l.Close()
	appendN(t, l, 30, 3, 0)
	assert.GreaterOrEqual(t, l.NumSegments(), 3)
	for _, s := range l.segments[:len(l.segments)-1] {
		assert.LessOrEqual(t, s.size, cfg.SegmentBytes)
	}
	bases := l.SegmentBaseOffsets()
	for i := 1; i < len(bases); i++ {
		assert.Equal(t, l.segments[i-1].nextOffset, bases[i], "segments are contiguous")
	}
	_, err := os.Stat(offsetFileName(l.Dir(), bases[1], snapshotSuffix))
	assert.NoError(t, err, "producer snapshot at every roll")

	cfg.SegmentBytes = 1 << 30
	require.NoError(t, l.SetConfig(cfg))
	n := l.NumSegments()
	_, err = l.AppendAsLeader(BuildBatch([]Record{{TimestampMs: 10_000, Value: []byte("a")}}, BatchOptions{}), 0, 10_000)
	require.NoError(t, err)
	_, err = l.AppendAsLeader(BuildBatch([]Record{{TimestampMs: 30_000, Value: []byte("b")}}, BatchOptions{}), 0, 30_000)
	require.NoError(t, err)
	assert.Equal(t, n, l.NumSegments(), "within segment.ms of the first batch")
	_, err = l.AppendAsLeader(BuildBatch([]Record{{TimestampMs: 200_000, Value: []byte("c")}}, BatchOptions{}), 0, 200_000)
	require.NoError(t, err)
	assert.Equal(t, n+1, l.NumSegments(), "segment.ms passed")
}

func TestRecordTooLarge(t *testing.T) {
	cfg := testConfig()
	cfg.MaxMessageBytes = 200
	l := openTestLog(t, OS, t.TempDir(), cfg, true)
	defer l.Close()
	_, err := l.AppendAsLeader(BuildBatch([]Record{{Value: make([]byte, 300)}}, BatchOptions{}), 0, 1)
	assert.ErrorIs(t, err, ErrRecordTooLarge)
	assert.Equal(t, int64(0), l.LogEndOffset())
}

func TestRetentionBySizeTimeAndLogStart(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 800
	l := openTestLog(t, OS, t.TempDir(), cfg, true)
	defer l.Close()
	appendN(t, l, 40, 2, 0) // timestamps 1000..1039+
	l.UpdateHighWatermark(l.LogEndOffset())
	segs := l.NumSegments()
	require.Greater(t, segs, 4)

	n, err := l.DeleteOldSegments(2000)
	require.NoError(t, err)
	assert.Equal(t, 0, n, "7 days of retention keeps everything")

	cfg.RetentionBytes = 2000
	require.NoError(t, l.SetConfig(cfg))
	n, err = l.DeleteOldSegments(2000)
	require.NoError(t, err)
	assert.Positive(t, n)
	assert.Less(t, l.Size()-l.segments[0].size, int64(2000), "Kafka keeps the oldest segment that brings the size under retention.bytes")
	assert.Equal(t, l.SegmentBaseOffsets()[0], l.LogStartOffset())
	_, err = l.Read(0, 100, 1000, true)
	assert.ErrorIs(t, err, ErrOffsetOutOfRange)

	start := l.LogStartOffset()
	require.NoError(t, l.IncrementLogStartOffset(start+3))
	assert.Equal(t, start+3, l.LogStartOffset())
	assert.Error(t, l.IncrementLogStartOffset(l.LogEndOffset()+1), "not past the high watermark")

	cfg.RetentionBytes = -1
	cfg.RetentionMs = 500
	require.NoError(t, l.SetConfig(cfg))
	leo := l.LogEndOffset()
	n, err = l.DeleteOldSegments(1_000_000)
	require.NoError(t, err)
	assert.Positive(t, n)
	assert.Equal(t, 1, l.NumSegments(), "everything expired: a fresh active segment")
	assert.Equal(t, leo, l.LogStartOffset())
	assert.Equal(t, leo, l.LogEndOffset())
	info, err := l.AppendAsLeader(BuildBatch(records(1, "after", 5), BatchOptions{}), 0, 1)
	require.NoError(t, err)
	assert.Equal(t, leo, info.FirstOffset)
}

func TestTruncateToAndEpochs(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 700
	dir := t.TempDir()
	l := openTestLog(t, OS, dir, cfg, true)
	appendN(t, l, 10, 2, 1) // 0..19 epoch 1
	require.NoError(t, l.AssignEpochStartOffset(3, 20))
	appendN(t, l, 10, 2, 3) // 20..39 epoch 3
	l.UpdateHighWatermark(35)

	e, off := l.EndOffsetForEpoch(1)
	assert.Equal(t, int32(1), e)
	assert.Equal(t, int64(20), off)
	e, off = l.EndOffsetForEpoch(2)
	assert.Equal(t, int32(1), e)
	assert.Equal(t, int64(20), off)
	e, off = l.EndOffsetForEpoch(3)
	assert.Equal(t, int32(3), e)
	assert.Equal(t, int64(40), off)
	e, off = l.EndOffsetForEpoch(4)
	assert.Equal(t, int32(-1), e)
	assert.Equal(t, int64(-1), off)
	e, off = l.EndOffsetForEpoch(0)
	assert.Equal(t, int32(0), e)
	assert.Equal(t, int64(0), off)

	require.NoError(t, l.TruncateTo(25))
	assert.Equal(t, int64(24), l.LogEndOffset(), "the batch holding 25 goes entirely (batches are 2 records)")
	assert.Equal(t, int64(24), l.HighWatermark())
	require.NoError(t, l.TruncateTo(17))
	assert.Equal(t, int64(16), l.LogEndOffset())
	assert.Equal(t, []EpochEntry{{Epoch: 1, StartOffset: 0}}, l.EpochEntries())
	info, err := l.AppendAsLeader(BuildBatch(records(2, "again", 1), BatchOptions{}), 4, 1)
	require.NoError(t, err)
	assert.Equal(t, int64(16), info.FirstOffset)
	b, err := l.Read(16, 1000, 100, true)
	require.NoError(t, err)
	recs, err := DecodeRecords(b)
	require.NoError(t, err)
	assert.Equal(t, "again-0", string(recs[0].Value))
	require.NoError(t, l.Close())

	// The truncated state is what a clean reload sees.
	l2 := openTestLog(t, OS, dir, cfg, false)
	defer l2.Close()
	assert.Equal(t, int64(18), l2.LogEndOffset())
	assert.Equal(t, []EpochEntry{{Epoch: 1, StartOffset: 0}, {Epoch: 4, StartOffset: 16}}, l2.EpochEntries())

	require.NoError(t, l2.TruncateFullyAndStartAt(100))
	assert.Equal(t, int64(100), l2.LogStartOffset())
	assert.Equal(t, int64(100), l2.LogEndOffset())
	assert.Empty(t, l2.EpochEntries())
	assert.Equal(t, 1, l2.NumSegments())
	require.NoError(t, l2.AppendAsFollower(BuildBatch(records(3, "f", 1), BatchOptions{BaseOffset: 100, PartitionLeaderEpoch: 7})))
	assert.Equal(t, int64(103), l2.LogEndOffset())
	assert.Equal(t, []EpochEntry{{Epoch: 7, StartOffset: 100}}, l2.EpochEntries())
	err = l2.AppendAsFollower(BuildBatch(records(1, "g", 1), BatchOptions{BaseOffset: 101}))
	assert.ErrorIs(t, err, ErrNonMonotonicOffset)
}

func TestFetchOffsetByTimestamp(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 600
	l := openTestLog(t, OS, t.TempDir(), cfg, true)
	defer l.Close()
	for i := 0; i < 30; i++ {
		recs := []Record{{TimestampMs: int64(i * 100), Value: []byte("a")}, {TimestampMs: int64(i*100 + 50), Value: []byte("b")}}
		_, err := l.AppendAsLeader(BuildBatch(recs, BatchOptions{}), 2, 1)
		require.NoError(t, err)
	}
	for ts, want := range map[int64]int64{0: 0, 1: 1, 50: 1, 51: 2, 1234: 25, 2950: 59} {
		off, gotTs, ep, ok, err := l.FetchOffsetByTimestamp(ts)
		require.NoError(t, err)
		require.True(t, ok, "ts %d", ts)
		assert.Equal(t, want, off, "ts %d", ts)
		assert.GreaterOrEqual(t, gotTs, ts)
		assert.Equal(t, int32(2), ep)
	}
	_, _, _, ok, err := l.FetchOffsetByTimestamp(3000)
	require.NoError(t, err)
	assert.False(t, ok)
}

func TestLogAppendTimeAndFlushMessages(t *testing.T) {
	cfg := testConfig()
	cfg.MessageTimestampType = TimestampLogAppendTime
	cfg.FlushIntervalMessages = 1
	dir := t.TempDir()
	l := openTestLog(t, OS, dir, cfg, true)
	defer l.Close()
	info, err := l.AppendAsLeader(BuildBatch(records(2, "x", 5), BatchOptions{}), 0, 777)
	require.NoError(t, err)
	assert.Equal(t, int64(777), info.LogAppendTime)
	assert.Equal(t, int64(2), l.RecoveryPoint(), "flush.messages=1 flushes every append")
	b, err := l.Read(0, 1000, 10, true)
	require.NoError(t, err)
	recs, err := DecodeRecords(b)
	require.NoError(t, err)
	for _, r := range recs {
		assert.Equal(t, int64(777), r.TimestampMs)
	}
	_, err = os.Stat(filepath.Join(dir, LeaderEpochCheckpointFile))
	assert.NoError(t, err)
}

func TestLoadWipesLogBelowCheckpointedLogStart(t *testing.T) {
	dir := t.TempDir()
	l := openTestLog(t, OS, dir, testConfig(), true)
	appendN(t, l, 5, 2, 0)
	require.NoError(t, l.Close())
	l2, _, err := openLog(OS, dir, testTP, testConfig(), loadParams{cleanShutdown: true, recoveryPoint: -1, logStartOffset: 50, highWatermark: 10})
	require.NoError(t, err)
	defer l2.Close()
	assert.Equal(t, int64(50), l2.LogStartOffset())
	assert.Equal(t, int64(50), l2.LogEndOffset())
	assert.Equal(t, int64(50), l2.HighWatermark())
	assert.Equal(t, []int64{50}, l2.SegmentBaseOffsets())
}

func TestCompactPolicyKeepsEverything(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 600
	cfg.RetentionMs = 1
	cfg.RetentionBytes = 1
	cfg.CleanupPolicy = CleanupCompact
	l := openTestLog(t, OS, t.TempDir(), cfg, true)
	defer l.Close()
	appendN(t, l, 20, 2, 0)
	n, err := l.DeleteOldSegments(1 << 40)
	require.NoError(t, err)
	assert.Equal(t, 0, n)
	assert.Equal(t, int64(0), l.LogStartOffset())
	cfg.CleanupPolicy = CleanupCompactDelete
	require.NoError(t, l.SetConfig(cfg))
	n, err = l.DeleteOldSegments(1 << 40)
	require.NoError(t, err)
	assert.Positive(t, n)
	cfg.CleanupPolicy = "bogus"
	assert.ErrorContains(t, l.SetConfig(cfg), "cleanup.policy")
}

func TestFollowerAppendSpanningSegments(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 500
	l := openTestLog(t, OS, t.TempDir(), cfg, true)
	defer l.Close()
	var data []byte
	next := int64(0)
	for i := 0; i < 20; i++ {
		b := BuildBatch(records(2, fmt.Sprint(i), 1), BatchOptions{BaseOffset: next, PartitionLeaderEpoch: 1})
		data = append(data, b...)
		next += 2
	}
	require.NoError(t, l.AppendAsFollower(data))
	assert.Equal(t, int64(40), l.LogEndOffset())
	assert.Greater(t, l.NumSegments(), 3)
	for _, s := range l.segments {
		assert.LessOrEqual(t, s.size, cfg.SegmentBytes)
	}
	got, err := l.Read(0, 1<<20, 40, true)
	require.NoError(t, err)
	assert.Equal(t, data[:len(got)], got)
}

func TestFailedMultiSegmentAppendLeavesNoTrace(t *testing.T) {
	efs := NewErrorFS(OS)
	cfg := testConfig()
	cfg.SegmentBytes = 500
	l := openTestLog(t, efs, t.TempDir(), cfg, true)
	defer l.Close()
	appendN(t, l, 2, 2, 1)
	var data []byte
	next := int64(4)
	for i := 0; i < 10; i++ {
		data = append(data, BuildBatch(records(2, fmt.Sprint(i), 1), BatchOptions{BaseOffset: next, PartitionLeaderEpoch: 1})...)
		next += 2
	}
	efs.Inject(Rule{Op: OpWrite, Path: logSuffix, Skip: 1, Count: 1, Err: syscall.ENOSPC})
	require.Error(t, l.AppendAsFollower(data))
	assert.Equal(t, int64(4), l.LogEndOffset(), "the part written before the failure is taken back")
	require.NoError(t, l.AppendAsFollower(data))
	assert.Equal(t, int64(24), l.LogEndOffset())

	efs.Inject(Rule{Op: OpWrite, Path: logSuffix, Count: 1})
	require.ErrorIs(t, l.AppendAsFollower(BuildBatch(records(2, "after", 1), BatchOptions{BaseOffset: 24, PartitionLeaderEpoch: 1})), ErrLogDirOffline)
	assert.Equal(t, int64(24), l.LogEndOffset(), "an I/O error leaves the log end where it was")
}

func TestUnreadableEpochCheckpointIsRebuilt(t *testing.T) {
	dir := t.TempDir()
	l := openTestLog(t, OS, dir, testConfig(), true)
	appendN(t, l, 3, 2, 2)
	appendN(t, l, 3, 2, 5)
	want := l.EpochEntries()
	require.NoError(t, l.closeForShutdown())
	require.NoError(t, os.WriteFile(filepath.Join(dir, LeaderEpochCheckpointFile), []byte("0\n7\ngarbage"), 0o644))
	l2 := openTestLog(t, OS, dir, testConfig(), true)
	defer l2.Close()
	assert.Equal(t, []EpochEntry{{Epoch: 2, StartOffset: 0}, {Epoch: 5, StartOffset: 6}}, want)
	assert.Equal(t, want, l2.EpochEntries())
	data, err := os.ReadFile(filepath.Join(dir, LeaderEpochCheckpointFile))
	require.NoError(t, err)
	assert.Equal(t, "0\n2\n2 0\n5 6\n", string(data))
}

// A broker that led an epoch without appending anything (epoch 3 starts at
// the log end) and then follows a leader that never had that epoch is told
// to truncate to its own log end: the empty epoch must go, or its next
// fetch names epoch 3 again and is sent back to the same place forever.
func TestTruncateToLogEndDropsEmptyEpoch(t *testing.T) {
	dir := t.TempDir()
	l := openTestLog(t, OS, dir, testConfig(), true)
	appendN(t, l, 5, 2, 1) // 0..9 epoch 1
	require.NoError(t, l.AssignEpochStartOffset(3, 10))
	require.Equal(t, []EpochEntry{{Epoch: 1, StartOffset: 0}, {Epoch: 3, StartOffset: 10}}, l.EpochEntries())

	require.NoError(t, l.TruncateTo(10))
	assert.Equal(t, int64(10), l.LogEndOffset(), "nothing to cut from the log")
	assert.Equal(t, []EpochEntry{{Epoch: 1, StartOffset: 0}}, l.EpochEntries())
	latest, ok := l.LatestEpoch()
	require.True(t, ok)
	assert.Equal(t, int32(1), latest)

	// Past the log end too: the epochs that start at the log end go.
	require.NoError(t, l.AssignEpochStartOffset(4, 10))
	require.NoError(t, l.TruncateTo(12))
	assert.Equal(t, int64(10), l.LogEndOffset())
	assert.Equal(t, []EpochEntry{{Epoch: 1, StartOffset: 0}}, l.EpochEntries())
	require.NoError(t, l.Close())

	// The trimmed cache is what a reload sees.
	l = openTestLog(t, OS, dir, testConfig(), true)
	defer l.Close()
	assert.Equal(t, []EpochEntry{{Epoch: 1, StartOffset: 0}}, l.EpochEntries())
}

// TestFollowerAppendValidatesEveryBatch: a follower appends nothing of a
// fetch whose batches fail validation (CRC, sizes, magic, offsets that do
// not continue the log), so a corrupt batch from a leader or the network
// never becomes good data in its log.
func TestFollowerAppendValidatesEveryBatch(t *testing.T) {
	good := func(base int64) []byte {
		return BuildBatch(records(2, "g", 1), BatchOptions{BaseOffset: base, PartitionLeaderEpoch: 1})
	}
	cases := []struct {
		name string
		data func() []byte
		want error
	}{
		{"bit flip in a record", func() []byte { b := good(4); b[len(b)-3] ^= 0x10; return b }, ErrCorruptBatch},
		{"bit flip in the second batch", func() []byte {
			b := good(6)
			b[BatchHeaderSize+1] ^= 0x01
			return append(good(4), b...)
		}, ErrCorruptBatch},
		{"length shorter than a header", func() []byte { b := good(4); binary.BigEndian.PutUint32(b[8:], 10); return b }, ErrCorruptBatch},
		{"only a torn batch", func() []byte { return good(4)[:30] }, ErrIncompleteBatch},
		{"magic 1", func() []byte { b := good(4); b[16] = 1; return b }, ErrUnsupportedMagic},
		{"offsets below the log end", func() []byte { return good(2) }, ErrNonMonotonicOffset},
		{"offsets going back", func() []byte { return append(good(6), good(4)...) }, ErrNonMonotonicOffset},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l := openTestLog(t, OS, t.TempDir(), testConfig(), true)
			defer l.Close()
			appendN(t, l, 2, 2, 1)
			err := l.AppendAsFollower(c.data())
			require.ErrorIs(t, err, c.want)
			assert.Equal(t, int64(4), l.LogEndOffset(), "nothing appended")
		})
	}
}
