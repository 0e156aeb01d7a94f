package storage

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func idemBatch(pid int64, epoch int16, seq int32, n int) []byte {
	return BuildBatch(records(n, "p", 100), BatchOptions{Producer: &BatchProducer{ID: pid, Epoch: epoch, BaseSequence: seq}})
}

func TestIdempotentProducerSequenceChecks(t *testing.T) {
	l := openTestLog(t, OS, t.TempDir(), testConfig(), true)
	defer l.Close()
	app := func(pid int64, epoch int16, seq int32, n int) (AppendInfo, error) {
		return l.AppendAsLeader(idemBatch(pid, epoch, seq, n), 0, 1)
	}
	info, err := app(9, 0, 5, 2) // unknown producer: any sequence
	require.NoError(t, err)
	assert.Equal(t, int64(0), info.FirstOffset)
	for i := 0; i < 6; i++ {
		_, err := app(9, 0, int32(7+2*i), 2)
		require.NoError(t, err)
	}
	leo := l.LogEndOffset()
	assert.Equal(t, int64(14), leo)

	dup, err := app(9, 0, 15, 2) // the 5th most recent batch (offsets 10-11)
	require.NoError(t, err)
	assert.True(t, dup.Duplicate)
	assert.Equal(t, int64(10), dup.FirstOffset)
	assert.Equal(t, int64(11), dup.LastOffset)
	assert.Equal(t, leo, l.LogEndOffset(), "a duplicate appends nothing")

	_, err = app(9, 0, 7, 2) // fell out of the 5 remembered batches
	assert.ErrorIs(t, err, ErrOutOfOrderSequence)
	_, err = app(9, 0, 20, 1) // gap: expected 19
	assert.ErrorIs(t, err, ErrOutOfOrderSequence)
	_, err = app(9, 0, 19, 3) // partially overlapping is not a duplicate
	require.NoError(t, err)

	_, err = app(9, 1, 3, 1) // new epoch must start at 0
	assert.ErrorIs(t, err, ErrOutOfOrderSequence)
	_, err = app(9, 1, 0, 1)
	require.NoError(t, err)
	_, err = app(9, 0, 22, 1) // fenced epoch
	assert.ErrorIs(t, err, ErrInvalidProducerEpoch)

	_, err = l.AppendAsLeader(BuildBatch(records(1, "x", 1), BatchOptions{Producer: &BatchProducer{ID: 4, Epoch: 0, BaseSequence: -1}}), 0, 1)
	assert.ErrorIs(t, err, ErrInvalidRecord)
}

func TestIdempotentSequenceWrapsAtMaxInt32(t *testing.T) {
	l := openTestLog(t, OS, t.TempDir(), testConfig(), true)
	defer l.Close()
	_, err := l.AppendAsLeader(idemBatch(1, 0, 2147483646, 2), 0, 1)
	require.NoError(t, err)
	_, err = l.AppendAsLeader(idemBatch(1, 0, 0, 1), 0, 1)
	assert.NoError(t, err)
}

func TestProducerStateSurvivesRestart(t *testing.T) {
	for _, clean := range []bool{true, false} {
		name := "unclean"
		if clean {
			name = "clean"
		}
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			m := newTestManager(t, OS, []string{dir}, nil)
			_, err := m.Load()
			require.NoError(t, err)
			l, err := m.GetOrCreateLog(testTP, testConfig())
			require.NoError(t, err)
			for i := 0; i < 4; i++ {
				_, err := l.AppendAsLeader(idemBatch(3, 2, int32(i*2), 2), 0, 1)
				require.NoError(t, err)
				_, err = l.AppendAsLeader(BuildBatch(records(1, "plain", 1), BatchOptions{}), 0, 1)
				require.NoError(t, err)
			}
			if clean {
				require.NoError(t, m.Shutdown(1))
			} else {
				require.NoError(t, l.Close())
			}
			m2 := newTestManager(t, OS, []string{dir}, nil)
			_, err = m2.Load()
			require.NoError(t, err)
			l2, ok := m2.GetLog(testTP)
			require.True(t, ok)
			dup, err := l2.AppendAsLeader(idemBatch(3, 2, 6, 2), 0, 1)
			require.NoError(t, err)
			assert.True(t, dup.Duplicate)
			assert.Equal(t, int64(9), dup.FirstOffset)
			_, err = l2.AppendAsLeader(idemBatch(3, 2, 9, 1), 0, 1)
			assert.ErrorIs(t, err, ErrOutOfOrderSequence)
			_, err = l2.AppendAsLeader(idemBatch(3, 1, 8, 1), 0, 1)
			assert.ErrorIs(t, err, ErrInvalidProducerEpoch)
			info, err := l2.AppendAsLeader(idemBatch(3, 2, 8, 1), 0, 1)
			require.NoError(t, err)
			assert.Equal(t, int64(12), info.FirstOffset)
			require.NoError(t, m2.Shutdown(2))
		})
	}
}

func TestProducerSnapshotFormat(t *testing.T) {
	ps := newProducerState()
	ps.replay(BatchHeader{BaseOffset: 100, LastOffsetDelta: 2, ProducerID: 77, ProducerEpoch: 3, BaseSequence: 10, MaxTimestamp: 555})
	ps.replay(BatchHeader{BaseOffset: 0, LastOffsetDelta: 0, ProducerID: 5, ProducerEpoch: 0, BaseSequence: 0, MaxTimestamp: 1})
	b := encodeProducerSnapshot(ps)
	require.Len(t, b, snapshotHeaderSize+2*snapshotEntrySize)
	got, err := decodeProducerSnapshot(b)
	require.NoError(t, err)
	e := got.producers[77]
	require.NotNil(t, e)
	assert.Equal(t, int16(3), e.epoch)
	assert.Equal(t, []batchMeta{{firstSeq: 10, lastSeq: 12, firstOffset: 100, lastOffset: 102, timestamp: 555}}, e.batches)
	assert.Equal(t, int64(-1), e.currentTxnFirstOffset)
	b[len(b)-1] ^= 1
	_, err = decodeProducerSnapshot(b)
	assert.ErrorIs(t, err, ErrCorruptCheckpoint)
}

func TestCorruptProducerSnapshotFallsBackToReplay(t *testing.T) {
	dir := t.TempDir()
	m := newTestManager(t, OS, []string{dir}, nil)
	_, err := m.Load()
	require.NoError(t, err)
	l, err := m.GetOrCreateLog(testTP, testConfig())
	require.NoError(t, err)
	_, err = l.AppendAsLeader(idemBatch(8, 0, 0, 3), 0, 1)
	require.NoError(t, err)
	require.NoError(t, m.Shutdown(1))
	snap := offsetFileName(filepath.Join(dir, testTP.DirName()), 3, snapshotSuffix)
	require.NoError(t, writeFileAtomic(OS, snap, []byte("garbage")))
	m2 := newTestManager(t, OS, []string{dir}, nil)
	_, err = m2.Load()
	require.NoError(t, err)
	l2, _ := m2.GetLog(testTP)
	dup, err := l2.AppendAsLeader(idemBatch(8, 0, 0, 3), 0, 1)
	require.NoError(t, err)
	assert.True(t, dup.Duplicate, "state rebuilt from the log")
	require.NoError(t, m2.Shutdown(2))
}

func TestExpiredProducerIsUnknownAgain(t *testing.T) {
	l := openTestLog(t, OS, t.TempDir(), testConfig(), true)
	defer l.Close()
	_, err := l.AppendAsLeader(idemBatch(5, 0, 0, 1), 0, 1) // timestamp 100
	require.NoError(t, err)
	_, err = l.AppendAsLeader(idemBatch(5, 0, 9, 1), 0, 1)
	require.ErrorIs(t, err, ErrOutOfOrderSequence)
	assert.Equal(t, 0, l.ExpireProducers(150, 100))
	assert.Equal(t, 1, l.ExpireProducers(200, 100))
	_, err = l.AppendAsLeader(idemBatch(5, 0, 9, 1), 0, 1)
	assert.NoError(t, err)
}

// TestSnapshotAtRollInsideAnAppendHoldsItsEarlierBatches appends, in one
// call, batches of producers A and B that fill a segment and a batch of A
// that rolls a new one. The producer snapshot written at that roll must
// describe the log below it, the same append's first two batches included:
// recovery after a crash starts from it and replays only what follows.
func TestSnapshotAtRollInsideAnAppendHoldsItsEarlierBatches(t *testing.T) {
	const pidA, pidB, epochB = 1, 2, 2
	batches := [][]byte{idemBatch(pidA, 0, 0, 1), idemBatch(pidB, epochB, 0, 1), idemBatch(pidA, 0, 1, 1)}
	cfg := testConfig()
	cfg.SegmentBytes = int64(len(batches[0]) + len(batches[1]))
	appends := map[string]func(l *Log) error{
		"leader": func(l *Log) error {
			_, err := l.AppendAsLeader(concat(batches), 0, 1)
			return err
		},
		"follower": func(l *Log) error {
			stamped := make([][]byte, len(batches))
			for i, b := range batches {
				stamped[i] = append([]byte(nil), b...)
				setBaseOffset(stamped[i], int64(i))
			}
			return l.AppendAsFollower(concat(stamped))
		},
	}
	for name, appendAll := range appends {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			_, l := managedLog(t, dir, cfg)
			require.NoError(t, appendAll(l))
			require.Equal(t, []int64{0, 2}, l.SegmentBaseOffsets(), "the append rolled before its last batch")
			require.NoError(t, l.Close()) // a crash: no snapshot at the log end
			require.FileExists(t, offsetFileName(filepath.Join(dir, testTP.DirName()), 2, snapshotSuffix))

			_, l2 := reopenUnclean(t, OS, dir)
			dupB, err := l2.AppendAsLeader(idemBatch(pidB, epochB, 0, 1), 0, 1)
			require.NoError(t, err)
			assert.True(t, dupB.Duplicate, "B's retried batch is a duplicate")
			assert.Equal(t, int64(1), dupB.FirstOffset)
			dupA, err := l2.AppendAsLeader(idemBatch(pidA, 0, 0, 1), 0, 1)
			require.NoError(t, err)
			assert.True(t, dupA.Duplicate, "A's retried first batch is a duplicate")
			assert.Equal(t, int64(0), dupA.FirstOffset)
			_, err = l2.AppendAsLeader(idemBatch(pidB, epochB-1, 1, 1), 0, 1)
			assert.ErrorIs(t, err, ErrInvalidProducerEpoch, "B's older epoch is fenced")
			assert.Equal(t, int64(3), l2.LogEndOffset(), "nothing was appended twice")
		})
	}
}
