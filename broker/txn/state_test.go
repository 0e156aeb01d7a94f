package txn

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
)

func ids(start int64) func() (int64, error) {
	next := start
	return func() (int64, error) {
		next++
		return next - 1, nil
	}
}

var tpA, tpB = TopicPartition{"a", 0}, TopicPartition{"b", 1}

func newTxn(t *testing.T) Metadata {
	t.Helper()
	d := InitProducerID(nil, "t", InitRequest{TimeoutMs: 1000, ProducerID: -1, ProducerEpoch: -1}, ids(7), 10)
	require.Zero(t, d.Code)
	require.True(t, d.Write)
	assert.Equal(t, int64(7), d.Next.ProducerID)
	assert.Equal(t, int16(0), d.Next.ProducerEpoch)
	assert.Equal(t, Empty, d.Next.State)
	return d.Next
}

func TestInitBumpsEpochAndFencesTheOldProducer(t *testing.T) {
	m := newTxn(t)
	d := InitProducerID(&m, "t", InitRequest{TimeoutMs: 1000, ProducerID: -1, ProducerEpoch: -1}, ids(100), 20)
	require.Zero(t, d.Code)
	assert.Equal(t, int16(1), d.Next.ProducerEpoch)
	assert.Equal(t, int64(7), d.Next.ProducerID)
	// The old incarnation (epoch 0) is fenced everywhere.
	assert.Equal(t, kerr.ProducerFenced.Code, AddPartitions(&d.Next, 7, 0, []TopicPartition{tpA}, 30).Code)
	assert.Equal(t, kerr.ProducerFenced.Code, EndTxn(&d.Next, EndRequest{ProducerID: 7, Epoch: 0, Commit: true}, ids(100), 30).Code)
}

func TestInitAbortsAnOpenTransactionFirst(t *testing.T) {
	m := newTxn(t)
	d := AddPartitions(&m, 7, 0, []TopicPartition{tpA}, 20)
	require.Zero(t, d.Code)
	d = InitProducerID(&d.Next, "t", InitRequest{TimeoutMs: 1000, ProducerID: -1, ProducerEpoch: -1}, ids(100), 30)
	assert.Equal(t, kerr.ConcurrentTransactions.Code, d.Code)
	assert.True(t, d.Write && d.Markers && d.Retry)
	assert.Equal(t, PrepareAbort, d.Next.State)
	assert.Equal(t, int16(1), d.Next.ProducerEpoch, "the abort's markers carry the bumped epoch")
	done, ok := Complete(d.Next, 40)
	require.True(t, ok)
	assert.Equal(t, CompleteAbort, done.State)
	d = InitProducerID(&done, "t", InitRequest{TimeoutMs: 1000, ProducerID: -1, ProducerEpoch: -1}, ids(100), 50)
	require.Zero(t, d.Code)
	assert.Equal(t, int16(2), d.Next.ProducerEpoch)
}

// TestUnsafeInitKeepsOpen: the planted bug hands a second producer the
// open transaction's id and epoch, so the first one's commit is still
// accepted (fenced-commit in the harness).
func TestUnsafeInitKeepsOpen(t *testing.T) {
	m := newTxn(t)
	d := AddPartitions(&m, 7, 0, []TopicPartition{tpA}, 20)
	require.Zero(t, d.Code)
	open := d.Next
	d = InitProducerID(&open, "t", InitRequest{TimeoutMs: 1000, ProducerID: -1, ProducerEpoch: -1, UnsafeKeepOpen: true}, ids(100), 30)
	require.Zero(t, d.Code)
	assert.False(t, d.Write || d.Markers)
	assert.Equal(t, Ongoing, d.Next.State)
	assert.Equal(t, int16(0), d.Next.ProducerEpoch, "no bump: the open transaction's producer is not fenced")
	assert.Zero(t, EndTxn(&d.Next, EndRequest{ProducerID: 7, Epoch: 0, Commit: true}, ids(100), 40).Code, "the zombie commits")
}

func TestInitWhilePreparedIsRetried(t *testing.T) {
	m := newTxn(t)
	m.State = PrepareCommit
	d := InitProducerID(&m, "t", InitRequest{ProducerID: -1, ProducerEpoch: -1}, ids(1), 1)
	assert.Equal(t, kerr.ConcurrentTransactions.Code, d.Code)
	assert.False(t, d.Write)
}

func TestEpochExhaustionRollsTheProducerID(t *testing.T) {
	m := newTxn(t)
	m.ProducerEpoch = maxEpoch
	d := InitProducerID(&m, "t", InitRequest{ProducerID: -1, ProducerEpoch: -1}, ids(500), 1)
	require.Zero(t, d.Code)
	assert.Equal(t, int64(500), d.Next.ProducerID)
	assert.Equal(t, int16(0), d.Next.ProducerEpoch)
	assert.Equal(t, int64(7), d.Next.PrevProducerID)
}

func TestInitWithAnUnknownIDIsRefused(t *testing.T) {
	assert.Equal(t, kerr.InvalidProducerIDMapping.Code, InitProducerID(nil, "t", InitRequest{ProducerID: 3, ProducerEpoch: 0}, ids(1), 1).Code)
	m := newTxn(t)
	assert.Equal(t, kerr.ProducerFenced.Code, InitProducerID(&m, "t", InitRequest{ProducerID: 7, ProducerEpoch: 5}, ids(1), 1).Code)
	d := InitProducerID(&m, "t", InitRequest{ProducerID: 7, ProducerEpoch: 0}, ids(1), 1)
	require.Zero(t, d.Code)
	assert.Equal(t, int16(1), d.Next.ProducerEpoch)
}

func TestIDAllocationFailure(t *testing.T) {
	bad := func() (int64, error) { return 0, errors.New("no controller") }
	assert.Equal(t, kerr.CoordinatorNotAvailable.Code, InitProducerID(nil, "t", InitRequest{ProducerID: -1, ProducerEpoch: -1}, bad, 1).Code)
}

func TestCommitPath(t *testing.T) {
	m := newTxn(t)
	d := AddPartitions(&m, 7, 0, []TopicPartition{tpB, tpA}, 20)
	require.Zero(t, d.Code)
	assert.Equal(t, Ongoing, d.Next.State)
	assert.Equal(t, []TopicPartition{tpA, tpB}, d.Next.Partitions)
	assert.Equal(t, int64(20), d.Next.StartMs)
	again := AddPartitions(&d.Next, 7, 0, []TopicPartition{tpA}, 25)
	assert.False(t, again.Write, "nothing new to persist")
	end := EndTxn(&d.Next, EndRequest{ProducerID: 7, Epoch: 0, Commit: true}, ids(1), 30)
	require.Zero(t, end.Code)
	assert.True(t, end.Write && end.Markers)
	assert.Equal(t, PrepareCommit, end.Next.State)
	assert.Equal(t, int16(0), end.Next.ProducerEpoch)
	// While markers are in flight the client must wait.
	assert.Equal(t, kerr.ConcurrentTransactions.Code, AddPartitions(&end.Next, 7, 0, []TopicPartition{tpA}, 31).Code)
	assert.Equal(t, kerr.ConcurrentTransactions.Code, EndTxn(&end.Next, EndRequest{ProducerID: 7, Epoch: 0, Commit: true}, ids(1), 31).Code)
	assert.Equal(t, kerr.InvalidTxnState.Code, EndTxn(&end.Next, EndRequest{ProducerID: 7, Epoch: 0, Commit: false}, ids(1), 31).Code)
	done, ok := Complete(end.Next, 40)
	require.True(t, ok)
	assert.Equal(t, CompleteCommit, done.State)
	assert.Empty(t, done.Partitions)
	// A retried commit succeeds and changes nothing; an abort is refused.
	retry := EndTxn(&done, EndRequest{ProducerID: 7, Epoch: 0, Commit: true}, ids(1), 41)
	assert.Zero(t, retry.Code)
	assert.False(t, retry.Write)
	assert.Equal(t, kerr.InvalidTxnState.Code, EndTxn(&done, EndRequest{ProducerID: 7, Epoch: 0, Commit: false}, ids(1), 41).Code)
	_, ok = Complete(done, 50)
	assert.False(t, ok)
}

func TestEndWithoutTransactionIsInvalid(t *testing.T) {
	m := newTxn(t)
	assert.Equal(t, kerr.InvalidTxnState.Code, EndTxn(&m, EndRequest{ProducerID: 7, Epoch: 0, Commit: true}, ids(1), 1).Code)
	assert.Equal(t, kerr.InvalidProducerIDMapping.Code, EndTxn(&m, EndRequest{ProducerID: 8, Epoch: 0, Commit: true}, ids(1), 1).Code)
	assert.Equal(t, kerr.InvalidProducerIDMapping.Code, EndTxn(nil, EndRequest{ProducerID: 8, Epoch: 0, Commit: true}, ids(1), 1).Code)
	assert.Equal(t, kerr.InvalidProducerIDMapping.Code, AddPartitions(nil, 8, 0, []TopicPartition{tpA}, 1).Code)
}

// KAFKA-17754: the EndTxn(commit) of transaction 1 is delayed and arrives
// while transaction 2 of the same producer is open. Under TV2 every end
// bumps the epoch, so the delayed request carries an older epoch and
// cannot commit transaction 2.
func TestDelayedEndTxnCannotDecideALaterTransaction(t *testing.T) {
	m := newTxn(t)
	d := AddPartitions(&m, 7, 0, []TopicPartition{tpA}, 20)
	end := EndTxn(&d.Next, EndRequest{ProducerID: 7, Epoch: 0, Commit: false, TV2: true}, ids(1), 30)
	require.Zero(t, end.Code)
	assert.Equal(t, int16(1), end.Next.ProducerEpoch, "the end bumps the epoch")
	done, _ := Complete(end.Next, 31)
	// A retry of the same EndTxn (old epoch, same outcome) is answered as done.
	retry := EndTxn(&done, EndRequest{ProducerID: 7, Epoch: 0, Commit: false, TV2: true}, ids(1), 32)
	assert.Zero(t, retry.Code)
	assert.False(t, retry.Write)
	// Transaction 2 under the new epoch.
	d = AddPartitions(&done, 7, 1, []TopicPartition{tpB}, 40)
	require.Zero(t, d.Code)
	// The delayed EndTxn of transaction 1 (epoch 0) must not end it.
	late := EndTxn(&d.Next, EndRequest{ProducerID: 7, Epoch: 0, Commit: true, TV2: true}, ids(1), 50)
	assert.Equal(t, kerr.ProducerFenced.Code, late.Code)
	assert.False(t, late.Write)
	assert.Equal(t, Ongoing, d.Next.State)
	// Without TV2 the same request under the same epoch would commit it:
	// the hole KIP-890 closes.
	tv1 := d.Next
	tv1.TV2 = false
	assert.Zero(t, EndTxn(&tv1, EndRequest{ProducerID: 7, Epoch: 1, Commit: true}, ids(1), 50).Code)
}

func TestEmptyAbortUnderTV2BumpsTheEpoch(t *testing.T) {
	m := newTxn(t)
	d := EndTxn(&m, EndRequest{ProducerID: 7, Epoch: 0, Commit: false, TV2: true}, ids(1), 5)
	require.Zero(t, d.Code)
	assert.Equal(t, CompleteAbort, d.Next.State)
	assert.Equal(t, int16(1), d.Next.ProducerEpoch)
	assert.False(t, d.Markers)

	// After a committed (or aborted) transaction too: under TV2 the
	// client cannot know whether any leader added a partition to the one
	// it aborts.
	for _, commit := range []bool{true, false} {
		m := newTxn(t)
		d := AddPartitions(&m, 7, 0, []TopicPartition{tpA}, 10)
		require.Zero(t, d.Code)
		d = EndTxn(&d.Next, EndRequest{ProducerID: 7, Epoch: 0, Commit: commit, TV2: true}, ids(1), 11)
		require.Zero(t, d.Code)
		done, _ := Complete(d.Next, 12)
		require.Equal(t, int16(1), done.ProducerEpoch)
		ab := EndTxn(&done, EndRequest{ProducerID: 7, Epoch: 1, Commit: false, TV2: true}, ids(1), 13)
		require.Zero(t, ab.Code, "an abort of a transaction nobody opened")
		assert.Equal(t, CompleteAbort, ab.Next.State)
		assert.Equal(t, int16(2), ab.Next.ProducerEpoch)
		assert.False(t, ab.Markers, "nothing to mark")
		assert.Equal(t, kerr.InvalidTxnState.Code, EndTxn(&done, EndRequest{ProducerID: 7, Epoch: 1, Commit: true, TV2: true}, ids(1), 13).Code,
			"a commit of a transaction nobody opened is refused")
	}
}

// A producer told of its commit at once (EndTxn answers when the decision
// is durable) may end its next transaction while the markers of the last
// are still being written: under TV2 its request carries the bumped epoch
// and is answered CONCURRENT_TRANSACTIONS, to retry, not INVALID_TXN_STATE
// (franz-go's own TestTxnEtl met that under load).
func TestEndOfTheNextTransactionWhileMarkersAreWrittenIsRetried(t *testing.T) {
	for _, first := range []bool{true, false} {
		m := newTxn(t)
		d := AddPartitions(&m, 7, 0, []TopicPartition{tpA}, 10)
		prep := EndTxn(&d.Next, EndRequest{ProducerID: 7, Epoch: 0, Commit: first, TV2: true}, ids(1), 11)
		require.Zero(t, prep.Code)
		require.True(t, prep.Next.State.prepared())
		for _, commit := range []bool{true, false} {
			next := EndTxn(&prep.Next, EndRequest{ProducerID: 7, Epoch: 1, Commit: commit, TV2: true}, ids(1), 12)
			assert.Equal(t, kerr.ConcurrentTransactions.Code, next.Code)
			assert.True(t, next.Retry)
			assert.False(t, next.Write)
		}
		done, _ := Complete(prep.Next, 13)
		ab := EndTxn(&done, EndRequest{ProducerID: 7, Epoch: 1, Commit: false, TV2: true}, ids(1), 14)
		assert.Zero(t, ab.Code, "retried once complete, the abort of the empty next transaction goes through")
	}
	// Without TV2 the epoch is the one of the transaction being
	// finished: the opposite outcome is refused.
	m := newTxn(t)
	d := AddPartitions(&m, 7, 0, []TopicPartition{tpA}, 10)
	prep := EndTxn(&d.Next, EndRequest{ProducerID: 7, Epoch: 0, Commit: true}, ids(1), 11)
	assert.Equal(t, kerr.InvalidTxnState.Code, EndTxn(&prep.Next, EndRequest{ProducerID: 7, Epoch: 0, Commit: false}, ids(1), 12).Code)
}

// A client that never heard its EndTxn's answer re-initialises at the
// epoch it holds (KIP-360; franz-go does after a transport error): under
// TV2 that epoch is the one the EndTxn replaced, and the answer is the
// current epoch, with no bump and nothing aborted, as Kafka does.
func TestInitAfterAnUnheardTV2EndTxn(t *testing.T) {
	m := newTxn(t)
	d := AddPartitions(&m, 7, 0, []TopicPartition{tpA}, 10)
	prep := EndTxn(&d.Next, EndRequest{ProducerID: 7, Epoch: 0, Commit: true, TV2: true}, ids(1), 11)
	require.Zero(t, prep.Code)
	assert.Equal(t, int16(0), prep.Next.LastProducerEpoch)
	done, _ := Complete(prep.Next, 12)
	init := InitProducerID(&done, "t", InitRequest{TimeoutMs: 1000, ProducerID: 7, ProducerEpoch: 0}, ids(1), 13)
	require.Zero(t, init.Code)
	assert.False(t, init.Write)
	assert.Equal(t, int16(1), init.Next.ProducerEpoch)
	assert.Equal(t, CompleteCommit, init.Next.State)
	// After the next transaction's end, epoch 0 is older still: a zombie's.
	d = AddPartitions(&done, 7, 1, []TopicPartition{tpB}, 20)
	prep = EndTxn(&d.Next, EndRequest{ProducerID: 7, Epoch: 1, Commit: false, TV2: true}, ids(1), 21)
	require.Zero(t, prep.Code)
	done, _ = Complete(prep.Next, 22)
	assert.Equal(t, kerr.ProducerFenced.Code, InitProducerID(&done, "t", InitRequest{TimeoutMs: 1000, ProducerID: 7, ProducerEpoch: 0}, ids(1), 23).Code)
}

func TestTimeoutAbortFencesTheProducer(t *testing.T) {
	m := newTxn(t)
	d := AddPartitions(&m, 7, 0, []TopicPartition{tpA}, 100)
	assert.False(t, TimedOut(d.Next, 1100))
	require.True(t, TimedOut(d.Next, 1101))
	ab := Abort(d.Next, ids(1), 1101)
	require.Zero(t, ab.Code)
	assert.Equal(t, PrepareAbort, ab.Next.State)
	assert.Equal(t, int16(1), ab.Next.ProducerEpoch)
	assert.Equal(t, int16(0), ab.Next.LastProducerEpoch)
	done, _ := Complete(ab.Next, 1102)
	// The abandoned producer's commit is fenced; its abort is the one done.
	assert.Equal(t, kerr.ProducerFenced.Code, EndTxn(&done, EndRequest{ProducerID: 7, Epoch: 0, Commit: true}, ids(1), 1103).Code)
	assert.Zero(t, EndTxn(&done, EndRequest{ProducerID: 7, Epoch: 0, Commit: false}, ids(1), 1103).Code)
	// It can recover with KIP-360 InitProducerId under its old epoch.
	re := InitProducerID(&done, "t", InitRequest{ProducerID: 7, ProducerEpoch: 0}, ids(1), 1104)
	require.Zero(t, re.Code)
	assert.Equal(t, int16(1), re.Next.ProducerEpoch)
	assert.Equal(t, kerr.InvalidTxnState.Code, Abort(done, ids(1), 1).Code)
}

func TestRecordRoundTrip(t *testing.T) {
	m := Metadata{TransactionalID: "tx-1", ProducerID: 42, PrevProducerID: 41, ProducerEpoch: 3, LastProducerEpoch: -1,
		TimeoutMs: 60000, State: Ongoing, Partitions: []TopicPartition{tpA, tpB, {"b", 4}}, StartMs: 5, UpdateMs: 6, TV2: true}
	got, tomb, err := DecodeRecord(EncodeKey(m.TransactionalID), EncodeValue(m))
	require.NoError(t, err)
	assert.False(t, tomb)
	assert.Equal(t, m, got)
	_, tomb, err = DecodeRecord(EncodeKey("x"), nil)
	require.NoError(t, err)
	assert.True(t, tomb)
	_, _, err = DecodeRecord([]byte{0}, nil)
	assert.Error(t, err)
	_, _, err = DecodeRecord(EncodeKey("x"), []byte{0, 9, 1})
	assert.Error(t, err)
}

func FuzzDecodeRecord(f *testing.F) {
	m := Metadata{TransactionalID: "t", ProducerID: 1, PrevProducerID: -1, LastProducerEpoch: -1, State: Ongoing, Partitions: []TopicPartition{tpA}}
	f.Add(EncodeKey("t"), EncodeValue(m))
	f.Add([]byte{0, 0}, []byte{0, 1})
	f.Fuzz(func(t *testing.T, key, value []byte) {
		got, tomb, err := DecodeRecord(key, value)
		if err != nil || tomb {
			return
		}
		again, _, err := DecodeRecord(EncodeKey(got.TransactionalID), EncodeValue(got))
		require.NoError(t, err)
		assert.Equal(t, got.State, again.State)
		assert.Equal(t, got.Partitions, again.Partitions)
	})
}

// TestVerifyPartitions (KIP-890 part 1): a partition is verified only in
// the producer's open transaction at its current epoch; nothing changes.
func TestVerifyPartitions(t *testing.T) {
	m := newTxn(t)
	assert.Equal(t, kerr.InvalidTxnState.Code, VerifyPartitions(&m, 7, 0, []TopicPartition{tpA}), "no transaction open")
	d := AddPartitions(&m, 7, 0, []TopicPartition{tpA}, 10)
	require.Zero(t, d.Code)
	open := d.Next
	assert.Zero(t, VerifyPartitions(&open, 7, 0, []TopicPartition{tpA}))
	assert.Equal(t, kerr.InvalidTxnState.Code, VerifyPartitions(&open, 7, 0, []TopicPartition{tpA, {Topic: "other", Partition: 9}}), "a partition the client never added")
	assert.Equal(t, kerr.ProducerFenced.Code, VerifyPartitions(&open, 7, 1, []TopicPartition{tpA}))
	assert.Equal(t, kerr.InvalidProducerIDMapping.Code, VerifyPartitions(&open, 8, 0, []TopicPartition{tpA}))
	end := EndTxn(&open, EndRequest{ProducerID: 7, Epoch: 0, Commit: true}, ids(1), 11)
	require.Zero(t, end.Code)
	assert.Equal(t, kerr.ConcurrentTransactions.Code, VerifyPartitions(&end.Next, 7, 0, []TopicPartition{tpA}), "its end is being written")
	done, _ := Complete(end.Next, 12)
	assert.Equal(t, kerr.InvalidTxnState.Code, VerifyPartitions(&done, 7, 0, []TopicPartition{tpA}),
		"a produce delayed past its transaction's end would open a transaction nobody ends")
	assert.Equal(t, open.Partitions, []TopicPartition{tpA}, "nothing changed")
}

// A transaction's partitions stay sorted and each is listed once, however
// a request mixes new partitions, ones already added and repeats.
func TestMetadataAddKeepsPartitionsSortedAndUnique(t *testing.T) {
	var m Metadata
	assert.True(t, m.add([]TopicPartition{{"t", 5}}))
	assert.True(t, m.add([]TopicPartition{{"a", 0}, {"t", 5}, {"a", 0}, {"t", 1}}))
	assert.Equal(t, []TopicPartition{{"a", 0}, {"t", 1}, {"t", 5}}, m.Partitions)
	assert.False(t, m.add([]TopicPartition{{"t", 1}, {"a", 0}}), "nothing new")
	assert.True(t, m.add([]TopicPartition{{"t", 0}, {"t", 1}, {"b", 2}}))
	assert.Equal(t, []TopicPartition{{"a", 0}, {"b", 2}, {"t", 0}, {"t", 1}, {"t", 5}}, m.Partitions)
}
