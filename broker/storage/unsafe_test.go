package storage

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// openUnsafeLog opens testTP's log in dir with planted bugs u, as after a
// clean or an unclean shutdown (recovery point 0).
func openUnsafeLog(t *testing.T, fs FS, dir string, cfg LogConfig, clean bool, u Unsafe) *Log {
	t.Helper()
	l, _, err := openLog(fs, filepath.Join(dir, testTP.DirName()), testTP, cfg, loadParams{
		cleanShutdown: clean, recoveryPoint: -1, logStartOffset: -1, highWatermark: -1, unsafe: u,
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// TestUnsafeRecoverySkipCRC: a bit flip in a batch after the recovery point
// cuts the log there on recovery; with unsafe.recovery.skip.crc the corrupt
// batch survives recovery and is served.
func TestUnsafeRecoverySkipCRC(t *testing.T) {
	for _, skip := range []bool{false, true} {
		dir := t.TempDir()
		batches := writtenLog(t, OS, dir, testConfig(), 20)
		flipByte(t, activeLogPath(t, dir), batchStart(batches, 12)+BatchHeaderSize+2)
		corrupt, err := ParseBatchHeader(batches[12])
		require.NoError(t, err)
		last, err := ParseBatchHeader(batches[19])
		require.NoError(t, err)

		l := openUnsafeLog(t, OS, dir, testConfig(), false, Unsafe{RecoverySkipCRC: skip})
		if !skip {
			assert.Equal(t, corrupt.BaseOffset, l.LogEndOffset(), "recovery cuts the log at the corrupt batch")
			continue
		}
		assert.Equal(t, last.NextOffset(), l.LogEndOffset(), "unsafe: the corrupt batch and all after it survive recovery")
		b, err := l.Read(corrupt.BaseOffset, 1<<20, l.LogEndOffset(), true)
		require.NoError(t, err)
		_, err = ValidateBatch(b[:len(batches[12])])
		assert.ErrorIs(t, err, ErrCorruptBatch, "unsafe: the log serves the corrupt batch")
	}
}

// TestUnsafeIdempotenceOff: a retry of an idempotent batch is answered with
// the original offsets; with unsafe.idempotence.off it is appended again.
func TestUnsafeIdempotenceOff(t *testing.T) {
	for _, off := range []bool{false, true} {
		l := openUnsafeLog(t, OS, t.TempDir(), testConfig(), true, Unsafe{IdempotenceOff: off})
		first, err := l.AppendAsLeader(idemBatch(9, 0, 0, 2), 0, 1)
		require.NoError(t, err)
		retry, err := l.AppendAsLeader(idemBatch(9, 0, 0, 2), 0, 1)
		require.NoError(t, err)
		if !off {
			assert.True(t, retry.Duplicate)
			assert.Equal(t, first.FirstOffset, retry.FirstOffset)
			assert.Equal(t, int64(2), l.LogEndOffset(), "the retry is not appended")
			continue
		}
		assert.False(t, retry.Duplicate)
		assert.Equal(t, int64(2), retry.FirstOffset, "unsafe: the retry gets new offsets")
		assert.Equal(t, int64(4), l.LogEndOffset(), "unsafe: the batch is in the log twice")
	}
}

// TestUnsafeAckBeforeFsync: under flush.messages=1 an append returns only
// after its fsync, so a failing fsync fails the append and nothing that a
// power loss drops is acknowledged; with unsafe.ack.before.fsync the append
// is acknowledged before the fsync, and the power loss drops it.
func TestUnsafeAckBeforeFsync(t *testing.T) {
	for _, early := range []bool{false, true} {
		efs := NewErrorFS(OS)
		cfg := testConfig()
		cfg.FlushIntervalMessages = 1
		dir := t.TempDir()
		l := openUnsafeLog(t, efs, dir, cfg, true, Unsafe{AckBeforeFsync: early})
		_, err := l.AppendAsLeader(BuildBatch(records(1, "durable", 1), BatchOptions{}), 0, 1)
		require.NoError(t, err)
		require.NoError(t, l.Flush())
		efs.Inject(Rule{Op: OpSync, Path: logSuffix})
		_, err = l.AppendAsLeader(BuildBatch(records(1, "acked", 1), BatchOptions{}), 0, 1)
		if !early {
			assert.ErrorIs(t, err, ErrLogDirOffline, "the append waits for its fsync, which failed")
			continue
		}
		assert.NoError(t, err, "unsafe: acknowledged before the fsync")
		_ = l.Close()
		efs.Clear()
		require.NoError(t, efs.Crash())
		l2 := openUnsafeLog(t, efs, dir, cfg, false, Unsafe{})
		assert.Equal(t, int64(1), l2.LogEndOffset(), "unsafe: the power loss dropped an acknowledged record")
	}
}

// TestUnsafeIgnoreFsyncError: a failed fsync takes the log offline and
// fails the append; with unsafe.ignore.fsync.error the append is
// acknowledged, the recovery point passes it, and a power loss drops it.
func TestUnsafeIgnoreFsyncError(t *testing.T) {
	for _, ignore := range []bool{false, true} {
		efs := NewErrorFS(OS)
		cfg := testConfig()
		cfg.FlushIntervalMessages = 1
		dir := t.TempDir()
		l := openUnsafeLog(t, efs, dir, cfg, true, Unsafe{IgnoreFsyncError: ignore})
		efs.Inject(Rule{Op: OpSync, Path: logSuffix})
		_, err := l.AppendAsLeader(BuildBatch(records(1, "acked", 1), BatchOptions{}), 0, 1)
		if !ignore {
			assert.ErrorIs(t, err, ErrLogDirOffline)
			assert.Equal(t, int64(0), l.RecoveryPoint())
			continue
		}
		require.NoError(t, err, "unsafe: the failed fsync is ignored")
		assert.Equal(t, int64(1), l.RecoveryPoint(), "unsafe: the record counts as durable")
		_ = l.Close()
		efs.Clear()
		require.NoError(t, efs.Crash())
		l2 := openUnsafeLog(t, efs, dir, cfg, false, Unsafe{})
		assert.Equal(t, int64(0), l2.LogEndOffset(), "unsafe: the power loss dropped an acknowledged record")
	}
}

// TestUnsafeFollowerSkipValidation: a follower refuses a batch whose CRC
// does not match; with unsafe.follower.skip.validation it appends it.
func TestUnsafeFollowerSkipValidation(t *testing.T) {
	for _, skip := range []bool{false, true} {
		l := openUnsafeLog(t, OS, t.TempDir(), testConfig(), true, Unsafe{FollowerSkipValidation: skip})
		b := BuildBatch(records(3, "leader", 1), BatchOptions{})
		b[len(b)-1] ^= 0x10
		err := l.AppendAsFollower(b)
		if !skip {
			assert.ErrorIs(t, err, ErrCorruptBatch)
			assert.Equal(t, int64(0), l.LogEndOffset())
			continue
		}
		require.NoError(t, err, "unsafe: the corrupt batch is appended")
		assert.Equal(t, int64(3), l.LogEndOffset())
	}
}

// TestUnsafeCleanerDropsLatest: key a is written twice and b once, then
// the segment rolls; after an unclean shutdown the cleaner keeps the
// latest value of each (a=2, b=1); with unsafe.cleaner.drops.latest it
// drops them as well, and a log loaded after a clean shutdown keeps them
// either way.
func TestUnsafeCleanerDropsLatest(t *testing.T) {
	for _, tc := range []struct {
		planted, unclean bool
		want             map[string]string
	}{
		{false, true, map[string]string{"a": "2", "b": "1"}},
		{true, false, map[string]string{"a": "2", "b": "1"}},
		{true, true, map[string]string{}},
	} {
		dir := t.TempDir()
		cfg := compactConfig()
		first := openUnsafeLog(t, OS, dir, cfg, true, Unsafe{})
		_, err := first.AppendAsLeader(BuildBatch([]Record{{Key: []byte("a"), Value: []byte("1")}}, BatchOptions{}), 0, 1)
		require.NoError(t, err)
		require.NoError(t, first.Close())

		l := openUnsafeLog(t, OS, dir, cfg, !tc.unclean, Unsafe{CleanerDropsLatest: tc.planted})
		_, err = l.AppendAsLeader(BuildBatch([]Record{{Key: []byte("b"), Value: []byte("1")}, {Key: []byte("a"), Value: []byte("2")}}, BatchOptions{}), 0, 1)
		require.NoError(t, err)
		require.NoError(t, l.Roll())
		l.UpdateHighWatermark(l.LogEndOffset())
		_, cleaned, err := l.clean(context.Background(), newOffsetMap(1<<20), -1, 1, nil)
		require.NoError(t, err)
		require.True(t, cleaned)

		got := map[string]string{}
		for _, r := range readAll(t, l) {
			got[string(r.Key)] = string(r.Value)
		}
		assert.Equal(t, tc.want, got, "planted %v, unclean %v", tc.planted, tc.unclean)
	}
}

// TestUnsafeCleanerPastLSO: key a has a committed value, then a record in
// a transaction still open, then b, and the segment rolls. The cleaner's
// range ends at the last stable offset (the open transaction's first
// offset, 1); with unsafe.cleaner.past.lso it runs to the high watermark,
// through the undecided transaction, and its checkpoint passes records
// whose fate it cannot know yet (the suite's compact-txn-kill pair shows
// what follows: aborted values read, committed ones lost).
func TestUnsafeCleanerPastLSO(t *testing.T) {
	for _, planted := range []bool{false, true} {
		l := openUnsafeLog(t, OS, t.TempDir(), compactConfig(), true, Unsafe{CleanerPastLSO: planted})
		_, err := l.AppendAsLeader(BuildBatch([]Record{{Key: []byte("a"), Value: []byte("1")}}, BatchOptions{}), 0, 1)
		require.NoError(t, err)
		_, err = l.AppendAsLeader(BuildBatch([]Record{{Key: []byte("a"), Value: []byte("open")}},
			BatchOptions{Transactional: true, Producer: &BatchProducer{ID: 7, Epoch: 0, BaseSequence: 0}}), 0, 1)
		require.NoError(t, err)
		_, err = l.AppendAsLeader(BuildBatch([]Record{{Key: []byte("b"), Value: []byte("1")}}, BatchOptions{}), 0, 1)
		require.NoError(t, err)
		require.NoError(t, l.Roll())
		l.UpdateHighWatermark(l.LogEndOffset())
		require.Equal(t, int64(1), l.LastStableOffset(), "the open transaction holds the LSO")
		stats, cleaned, err := l.clean(context.Background(), newOffsetMap(1<<20), -1, 1, nil)
		require.NoError(t, err)
		require.True(t, cleaned)
		if planted {
			assert.Equal(t, int64(3), stats.endOffset, "cleaned to the high watermark, through the open transaction")
		} else {
			assert.Equal(t, int64(1), stats.endOffset, "cleaned up to the last stable offset, no further")
		}
	}
}

// TestUnsafeProduceNoEpochFence: a transactional batch from an epoch older
// than the partition has seen (a zombie's, after its successor's epoch
// ended its transaction with a marker) is refused; with the switch it is
// appended, and opens a transaction the older epoch holds the LSO at.
func TestUnsafeProduceNoEpochFence(t *testing.T) {
	for _, planted := range []bool{false, true} {
		l := openUnsafeLog(t, OS, t.TempDir(), DefaultLogConfig(), true, Unsafe{ProduceNoEpochFence: planted})
		txnBatch := func(epoch int16, seq int32) []byte {
			return BuildBatch([]Record{{Value: []byte("v")}}, BatchOptions{Producer: &BatchProducer{ID: 7, Epoch: epoch, BaseSequence: seq}, Transactional: true})
		}
		_, err := l.AppendAsLeader(txnBatch(3, 0), 0, 1)
		require.NoError(t, err)
		// The successor's InitProducerId aborts the transaction at epoch 4.
		_, err = l.AppendMarker(7, 4, false, 0, 0, 1)
		require.NoError(t, err)
		end := l.LogEndOffset()
		l.UpdateHighWatermark(end)
		_, err = l.AppendAsLeader(txnBatch(3, 1), 0, 1) // the zombie's late send
		if !planted {
			assert.ErrorIs(t, err, ErrInvalidProducerEpoch)
			assert.Equal(t, end, l.LogEndOffset(), "nothing appended")
			continue
		}
		require.NoError(t, err)
		l.UpdateHighWatermark(l.LogEndOffset())
		assert.Equal(t, end, l.LastStableOffset(), "the fenced epoch's batch opens a transaction nobody ends")
		// Nothing else: the successor's sequence goes on, its retry is
		// still a duplicate.
		first, err := l.AppendAsLeader(txnBatch(4, 0), 0, 1)
		require.NoError(t, err)
		_, err = l.AppendAsLeader(txnBatch(4, 1), 0, 1)
		require.NoError(t, err, "the successor's next sequence")
		dup, err := l.AppendAsLeader(txnBatch(4, 0), 0, 1)
		require.NoError(t, err)
		assert.True(t, dup.Duplicate, "the successor's retry is still recognised")
		assert.Equal(t, first.FirstOffset, dup.FirstOffset)
	}
}
