package storage

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func txnBatch(pid int64, epoch int16, seq int32, n int) []byte {
	return BuildBatch(records(n, "t", 100), BatchOptions{Producer: &BatchProducer{ID: pid, Epoch: epoch, BaseSequence: seq}, Transactional: true})
}

// txnScenario writes, on a fresh log: pid 1 opens a transaction at 0 (2
// records), plain data at 2, pid 2 opens one at 3, pid 1 aborts (marker at
// 4), pid 2 writes at 5, pid 2 commits (marker at 6), pid 3 opens one at 7
// and leaves it open.
func txnScenario(t *testing.T, l *Log) {
	t.Helper()
	app := func(b []byte) {
		_, err := l.AppendAsLeader(b, 0, 1)
		require.NoError(t, err)
	}
	marker := func(pid int64, commit bool) {
		_, err := l.AppendMarker(pid, 0, commit, 5, 0, 1)
		require.NoError(t, err)
	}
	app(txnBatch(1, 0, 0, 2))
	app(BuildBatch(records(1, "plain", 1), BatchOptions{}))
	app(txnBatch(2, 0, 0, 1))
	marker(1, false)
	app(txnBatch(2, 0, 1, 1))
	marker(2, true)
	app(txnBatch(3, 0, 0, 1))
	require.Equal(t, int64(8), l.LogEndOffset())
}

func checkTxnScenario(t *testing.T, l *Log) {
	t.Helper()
	assert.Equal(t, int64(7), l.FirstUnstableOffset(), "pid 3's transaction is still open")
	l.UpdateHighWatermark(5)
	assert.Equal(t, int64(5), l.LastStableOffset(), "the LSO never passes the high watermark")
	l.UpdateHighWatermark(8)
	assert.Equal(t, int64(7), l.LastStableOffset())
	assert.Equal(t, []AbortedTxn{{ProducerID: 1, FirstOffset: 0, LastOffset: 4, LastStableOffset: 3}}, l.AbortedTxns(0, 8))
	assert.Empty(t, l.AbortedTxns(5, 8), "the abort ended before offset 5")
	assert.Len(t, l.AbortedTxns(4, 5), 1)
}

func TestTransactionsLSOAndAbortedIndex(t *testing.T) {
	l := openTestLog(t, OS, t.TempDir(), testConfig(), true)
	defer l.Close()
	assert.Equal(t, int64(0), l.LastStableOffset())
	txnScenario(t, l)
	checkTxnScenario(t, l)
	data, err := os.ReadFile(offsetFileName(l.Dir(), 0, txnIndexSuffix))
	require.NoError(t, err)
	assert.Len(t, data, txnIndexEntrySize, "one abort, one 34-byte entry in Kafka's format")
	// Committing pid 3 stabilises everything.
	_, err = l.AppendMarker(3, 0, true, 5, 0, 1)
	require.NoError(t, err)
	l.UpdateHighWatermark(9)
	assert.Equal(t, int64(9), l.LastStableOffset())
	assert.Equal(t, int64(-1), l.FirstUnstableOffset())
}

func TestMarkersFenceZombiesAndOldCoordinators(t *testing.T) {
	l := openTestLog(t, OS, t.TempDir(), testConfig(), true)
	defer l.Close()
	_, err := l.AppendAsLeader(txnBatch(1, 0, 0, 1), 0, 1)
	require.NoError(t, err)
	// A coordinator that fenced the producer aborts with epoch 1.
	_, err = l.AppendMarker(1, 1, false, 3, 0, 1)
	require.NoError(t, err)
	_, err = l.AppendAsLeader(txnBatch(1, 0, 1, 1), 0, 1)
	assert.ErrorIs(t, err, ErrInvalidProducerEpoch, "the zombie's batch is refused")
	_, err = l.AppendMarker(1, 1, true, 2, 0, 1)
	assert.ErrorIs(t, err, ErrTransactionCoordinatorFenced)
	_, err = l.AppendMarker(1, 0, true, 3, 0, 1)
	assert.ErrorIs(t, err, ErrInvalidProducerEpoch)
	_, err = l.AppendAsLeader(txnBatch(1, 1, 0, 1), 0, 1)
	assert.NoError(t, err, "the new epoch starts at sequence 0")
}

// Seed 002: after a clean shutdown the producer snapshot brings back the
// open transactions; after an unclean one (no snapshot) they are rebuilt
// from the log, and so is the aborted index.
func TestTransactionStateSurvivesRestart(t *testing.T) {
	for _, mode := range []string{"clean", "unclean", "unclean-lost-index"} {
		t.Run(mode, func(t *testing.T) {
			dir := t.TempDir()
			m := newTestManager(t, OS, []string{dir}, nil)
			_, err := m.Load()
			require.NoError(t, err)
			l, err := m.GetOrCreateLog(testTP, testConfig())
			require.NoError(t, err)
			txnScenario(t, l)
			pdir := l.Dir()
			if mode == "clean" {
				require.NoError(t, m.Shutdown(1))
			} else {
				require.NoError(t, l.Close())
				snaps, err := filepath.Glob(filepath.Join(pdir, "*"+snapshotSuffix))
				require.NoError(t, err)
				for _, s := range snaps {
					require.NoError(t, os.Remove(s))
				}
				if mode == "unclean-lost-index" {
					require.NoError(t, os.Remove(offsetFileName(pdir, 0, txnIndexSuffix)))
				}
			}
			m2 := newTestManager(t, OS, []string{dir}, nil)
			_, err = m2.Load()
			require.NoError(t, err)
			l2, ok := m2.GetLog(testTP)
			require.True(t, ok)
			checkTxnScenario(t, l2)
			require.NoError(t, m2.Shutdown(2))
		})
	}
}

func TestTruncationDropsAbortsAndReopensTransactions(t *testing.T) {
	l := openTestLog(t, OS, t.TempDir(), testConfig(), true)
	defer l.Close()
	txnScenario(t, l)
	require.NoError(t, l.TruncateTo(4))
	assert.Empty(t, l.AbortedTxns(0, 10), "the abort marker at 4 is gone")
	assert.Equal(t, int64(0), l.FirstUnstableOffset(), "pid 1's transaction is open again")
	_, err := os.Stat(offsetFileName(l.Dir(), 0, txnIndexSuffix))
	assert.True(t, os.IsNotExist(err), "the index file follows the truncation")
}

func TestFollowerAppendTracksTransactions(t *testing.T) {
	leader := openTestLog(t, OS, t.TempDir(), testConfig(), true)
	defer leader.Close()
	txnScenario(t, leader)
	data, err := leader.Read(0, 1<<20, 8, true)
	require.NoError(t, err)
	follower := openTestLog(t, OS, t.TempDir(), testConfig(), true)
	defer follower.Close()
	require.NoError(t, follower.AppendAsFollower(data))
	checkTxnScenario(t, follower)
}

func TestTxnIndexFormat(t *testing.T) {
	in := []AbortedTxn{{1, 2, 3, 4}, {5, 6, 7, 8}}
	b := encodeTxnIndex(in)
	require.Len(t, b, 68)
	out, err := decodeTxnIndex(append(b, 0, 0, 1))
	require.NoError(t, err)
	assert.Equal(t, in, out, "a torn tail is ignored")
	b[0] = 1
	_, err = decodeTxnIndex(b)
	assert.ErrorIs(t, err, ErrCorruptCheckpoint)
}

func FuzzDecodeTxnIndex(f *testing.F) {
	f.Add(encodeTxnIndex([]AbortedTxn{{1, 2, 3, 4}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		entries, err := decodeTxnIndex(b)
		if err == nil {
			assert.Equal(t, entries, must(decodeTxnIndex(encodeTxnIndex(entries))))
		}
	})
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func FuzzParseMarker(f *testing.F) {
	f.Add(BuildMarker(1, 2, true, 3, 4))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _, _ = parseMarker(b)
	})
}

// A transactional batch that repeats the producer id, epoch and sequences
// of a batch whose transaction has already ended (here aborted) is no
// retry of it: the broker must refuse it, not answer the old offsets and
// write nothing (the lost-write of the txn suite under kill:leaders, where
// a client reused a sequence after aborting a transaction whose produce
// had timed out). Within an open transaction a retry is still a duplicate.
func TestTxnDuplicateNeverCrossesATransactionEnd(t *testing.T) {
	l := openTestLog(t, OS, t.TempDir(), testConfig(), true)
	defer l.Close()
	first, err := l.AppendAsLeader(txnBatch(7, 0, 0, 2), 0, 1)
	require.NoError(t, err)
	retry, err := l.AppendAsLeader(txnBatch(7, 0, 0, 2), 0, 1)
	require.NoError(t, err)
	assert.True(t, retry.Duplicate, "a retry inside the open transaction is a duplicate")
	assert.Equal(t, first.FirstOffset, retry.FirstOffset)

	_, err = l.AppendMarker(7, 0, false, 0, 0, 1)
	require.NoError(t, err)
	leo := l.LogEndOffset()
	_, err = l.AppendAsLeader(txnBatch(7, 0, 0, 2), 0, 1)
	assert.ErrorIs(t, err, ErrOutOfOrderSequence, "a new transaction's batch is never a duplicate of an aborted one")
	assert.Equal(t, leo, l.LogEndOffset())

	next, err := l.AppendAsLeader(txnBatch(7, 0, 2, 1), 0, 1)
	require.NoError(t, err, "the next sequence opens the next transaction")
	assert.False(t, next.Duplicate)
	assert.Equal(t, leo, next.FirstOffset)
}
