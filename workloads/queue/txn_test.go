package queue

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/faultline/faultline/checker"
)

// TestFencedTransactionFails: a transaction whose producer a successor
// with the same transactional.id fenced before the commit fails, marked
// Fenced, and none of its sends is read; the successor takes over and
// commits the next one.
func TestFencedTransactionFails(t *testing.T) {
	cl, invoke, _ := txnTestClient(t, Options{TxnAbortOneIn: -1, TxnFenceOneIn: 1})
	send := func(v int64) checker.MicroOp { return checker.MicroOp{F: "send", Key: 0, Value: v} }
	require.Equal(t, checker.OK, invoke(checker.Op{F: "assign", Keys: []int{0}}).Type)

	fenced := invoke(checker.Op{F: "txn", Mops: []checker.MicroOp{send(1)}})
	assert.Equal(t, checker.Fail, fenced.Type, fenced.Error)
	assert.True(t, fenced.Fenced)
	assert.Contains(t, fenced.Error, "fenced by a new producer of its transactional.id")

	cl.opts.TxnFenceOneIn = -1
	next := invoke(checker.Op{F: "txn", Mops: []checker.MicroOp{send(2)}})
	require.Equal(t, checker.OK, next.Type, "the successor commits: %s", next.Error)
	assert.False(t, next.Fenced)
	var seen []int64
	require.Eventually(t, func() bool {
		poll := invoke(checker.Op{F: "poll", Mops: []checker.MicroOp{{F: "poll"}}})
		for _, p := range poll.Mops[0].Polls[0] {
			seen = append(seen, p.Value)
		}
		return len(seen) > 0
	}, 10*time.Second, 10*time.Millisecond)
	assert.Equal(t, []int64{2}, seen, "read_committed returns the successor's send, never the fenced one's")
}

// TestFailedAbortWithoutCommitFails: a transaction whose abort errs, no
// commit ever sent for it, is recorded fail (it can only be aborted) and
// its producer is replaced, so that nothing can commit it later.
func TestFailedAbortWithoutCommitFails(t *testing.T) {
	opts, topics, ctx, cluster := onKfakeCluster(t, Options{PartitionsPerTopic: 1, ReplicationFactor: 1, RequestTimeout: 2 * time.Second,
		Txn: true, TxnAbortOneIn: 1, TxnFenceOneIn: -1})
	cluster.ControlKey(int16(kmsg.EndTxn), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		cluster.KeepControl()
		req := kreq.(*kmsg.EndTxnRequest)
		if req.Commit {
			return nil, nil, false
		}
		resp := req.ResponseKind().(*kmsg.EndTxnResponse)
		resp.ErrorCode = kerr.InvalidTxnState.Code
		return resp, nil, true
	})
	cl, err := NewClient(opts, topics)
	require.NoError(t, err)
	defer cl.Close()
	old := cl.producer
	done := cl.Invoke(ctx, checker.Op{Type: checker.Invoke, F: "txn", Mops: []checker.MicroOp{{F: "send", Key: 0, Value: 1}}})
	assert.Equal(t, checker.Fail, done.Type, done.Error)
	assert.Contains(t, done.Error, "no commit was sent at its epoch and the producer was closed")
	assert.NotSame(t, old, cl.producer)
}

// TestOnlyAbortedNeedsAnotherEpoch: a transaction whose abort errs counts
// as aborted only when no commit the producer sent was at its epoch
// (below transaction.version 2 a delayed copy of one could still commit
// it) and the epochs are known.
func TestOnlyAbortedNeedsAnotherEpoch(t *testing.T) {
	c := &Client{txn: &txnState{committed: noEpoch}}
	assert.True(t, c.onlyAborted(producerEpoch{7, 0}), "nothing committed yet")
	c.txn.committed = producerEpoch{7, 0}
	assert.False(t, c.onlyAborted(producerEpoch{7, 0}), "a commit at the same epoch (transaction.version 0 or 1)")
	assert.True(t, c.onlyAborted(producerEpoch{7, 1}), "every EndTxn bumped the epoch (transaction.version 2)")
	assert.False(t, c.onlyAborted(unknownEpoch))
	c.txn.committed = unknownEpoch
	assert.False(t, c.onlyAborted(producerEpoch{7, 1}), "a commit at an epoch unknown")
}

// sendTxn is a txn operation of one send of v to key 0.
func sendTxn(v int64) checker.Op {
	return checker.Op{Type: checker.Invoke, F: "txn", Mops: []checker.MicroOp{{F: "send", Key: 0, Value: v}}}
}

// committedOnce is a transactional workload on kfake (one key, no
// transaction aborted or fenced on purpose) and a client of it that has
// committed one transaction, sending 1 to key 0.
func committedOnce(t *testing.T) (*workload, *Client, context.Context) {
	t.Helper()
	opts, topics, ctx := onKfake(t, Options{PartitionsPerTopic: 1, ReplicationFactor: 1, RequestTimeout: 3 * time.Second,
		Txn: true, TxnAbortOneIn: -1, TxnFenceOneIn: -1})
	cl, err := NewClient(opts, topics)
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	require.Equal(t, checker.OK, cl.Invoke(ctx, sendTxn(1)).Type)
	return &workload{opts: opts, topics: topics}, cl, ctx
}

// TestSuccessorTakesOverTheTransactionalID: a crashed client's successor
// (workloads.Restartable) runs under the crashed one's transactional.id,
// so its InitProducerId fences it: the successor commits, and the old
// client, were it still alive, no longer can.
func TestSuccessorTakesOverTheTransactionalID(t *testing.T) {
	w, old, ctx := committedOnce(t)

	id := w.Identity(old)
	require.NotEmpty(t, id)
	fresh, err := w.NewClient()
	require.NoError(t, err)
	defer fresh.Close()
	assert.NotEqual(t, id, w.Identity(fresh), "a fresh client has a transactional.id of its own")

	succ, err := w.NewClientAs(id)
	require.NoError(t, err)
	defer succ.Close()
	assert.Equal(t, id, w.Identity(succ))
	got := succ.Invoke(ctx, sendTxn(2))
	require.Equal(t, checker.OK, got.Type, got.Error)
	after := old.Invoke(ctx, sendTxn(3))
	assert.NotEqual(t, checker.OK, after.Type, "the successor's InitProducerId fenced the client it took over from")
}

// TestRestartAfterCommitTakesOver: with every commit followed by a restart,
// each transaction commits, the next runs on a new producer of the same
// transactional.id (its epoch bumped by the InitProducerId), and
// read_committed returns every committed send.
func TestRestartAfterCommitTakesOver(t *testing.T) {
	cl, invoke, ctx := txnTestClient(t, Options{TxnAbortOneIn: -1, TxnFenceOneIn: -1, TxnRestartOneIn: 1})
	require.Equal(t, checker.OK, invoke(checker.Op{F: "assign", Keys: []int{0}}).Type)
	w := &workload{opts: cl.opts, topics: cl.topics}
	id := w.Identity(cl)
	var producers []*kgo.Client
	var epochs []int16
	for v := int64(1); v <= 3; v++ {
		got := invoke(checker.Op{F: "txn", Mops: []checker.MicroOp{{F: "send", Key: 0, Value: v}}})
		require.Equal(t, checker.OK, got.Type, got.Error)
		producers = append(producers, cl.producer)
		_, e, err := cl.producer.ProducerID(ctx)
		require.NoError(t, err)
		epochs = append(epochs, e)
	}
	assert.Equal(t, id, w.Identity(cl), "the same transactional.id throughout")
	assert.NotSame(t, producers[0], producers[1], "a new producer after each commit")
	assert.NotSame(t, producers[1], producers[2])
	assert.Less(t, epochs[0], epochs[1], "each InitProducerId bumps the epoch")
	assert.Less(t, epochs[1], epochs[2])
	var seen []int64
	require.Eventually(t, func() bool {
		poll := invoke(checker.Op{F: "poll", Mops: []checker.MicroOp{{F: "poll"}}})
		for _, p := range poll.Mops[0].Polls[0] {
			seen = append(seen, p.Value)
		}
		return len(seen) >= 3
	}, 10*time.Second, 10*time.Millisecond)
	assert.Equal(t, []int64{1, 2, 3}, seen, "every commit stays committed")
}

// txnTestClient is a transactional client on kfake (one partition per
// topic, replication 1) with opts' odds, and invoke, which runs an op as
// invoked on it.
func txnTestClient(t *testing.T, opts Options) (*Client, func(checker.Op) checker.Op, context.Context) {
	t.Helper()
	opts.PartitionsPerTopic, opts.ReplicationFactor, opts.RequestTimeout, opts.Txn = 1, 1, 3*time.Second, true
	opts, topics, ctx := onKfake(t, opts)
	cl, err := NewClient(opts, topics)
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	return cl, func(op checker.Op) checker.Op {
		t.Helper()
		op.Type = checker.Invoke
		return cl.Invoke(ctx, op)
	}, ctx
}

// TestTxnTimeoutDefaultsToFourRequestTimeouts: the producers'
// transaction.timeout.ms is --txn-timeout when set, else four request
// timeouts.
func TestTxnTimeoutDefaultsToFourRequestTimeouts(t *testing.T) {
	assert.Equal(t, 20*time.Second, Options{}.withDefaults().TxnTimeout)
	assert.Equal(t, 8*time.Second, Options{RequestTimeout: 2 * time.Second}.withDefaults().TxnTimeout)
	assert.Equal(t, 3*time.Second, Options{TxnTimeout: 3 * time.Second}.withDefaults().TxnTimeout)
}

// TestPausedClientIsAZombieItsSuccessorFences: a client paused as its
// transaction's send leaves it (workloads.Pausable) holds that Produce;
// a successor under its transactional.id commits meanwhile; resumed, the
// zombie's send and commit reach the broker with the old epoch and are
// refused, so its transaction fails and read_committed returns only the
// successor's send.
func TestPausedClientIsAZombieItsSuccessorFences(t *testing.T) {
	w, zombie, ctx := committedOnce(t)

	zombie.Pause()
	held := make(chan checker.Op, 1)
	go func() { held <- zombie.Invoke(ctx, sendTxn(2)) }()
	select {
	case op := <-held:
		t.Fatalf("the paused client's transaction ended: %+v", op)
	case <-time.After(300 * time.Millisecond):
	}

	succ, err := w.NewClientAs(w.Identity(zombie))
	require.NoError(t, err)
	defer succ.Close()
	got := succ.Invoke(ctx, sendTxn(3))
	require.Equal(t, checker.OK, got.Type, got.Error)

	zombie.Resume()
	var op checker.Op
	select {
	case op = <-held:
	case <-time.After(30 * time.Second):
		t.Fatal("the zombie's transaction did not end once resumed")
	}
	assert.NotEqual(t, checker.OK, op.Type, "the zombie's late send and commit are fenced: %s", op.Error)

	require.Equal(t, checker.OK, succ.Invoke(ctx, checker.Op{Type: checker.Invoke, F: "assign", Keys: []int{0}}).Type)
	var seen []int64
	require.Eventually(t, func() bool {
		poll := succ.Invoke(ctx, checker.Op{Type: checker.Invoke, F: "poll", Mops: []checker.MicroOp{{F: "poll"}}})
		for _, p := range poll.Mops[0].Polls[0] {
			seen = append(seen, p.Value)
		}
		return len(seen) >= 2
	}, 10*time.Second, 10*time.Millisecond)
	assert.Equal(t, []int64{1, 3}, seen, "read_committed returns the committed sends, never the zombie's")
}
