package txn

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/faultline/faultline/broker/metadata"
)

type fakeSource struct {
	im atomic.Pointer[metadata.Image]
}

func (s *fakeSource) Image() *metadata.Image { return s.im.Load() }

func testImage(leader, epoch int32) *metadata.Image {
	im := &metadata.Image{
		Brokers:    map[int32]metadata.Broker{1: {ID: 1, Host: "b1", Port: 9092}, 2: {ID: 2, Host: "b2", Port: 9093}},
		Topics:     map[string]*metadata.Topic{},
		TopicsByID: map[metadata.Uuid]*metadata.Topic{},
	}
	for i, name := range []string{StateTopic, "t"} {
		t := &metadata.Topic{Name: name, ID: metadata.Uuid{byte(i + 1)}}
		n := 50
		if name == "t" {
			n = 2
		}
		for p := range n {
			t.Partitions = append(t.Partitions, metadata.Partition{Partition: int32(p), Replicas: []int32{leader}, ISR: []int32{leader}, Leader: leader, LeaderEpoch: epoch})
		}
		im.Topics[name] = t
		im.TopicsByID[t.ID] = t
	}
	return im
}

// memStateLog is an in-memory __transaction_state.
type memStateLog struct {
	mu    sync.Mutex
	parts map[int32][][2][]byte
}

func (l *memStateLog) EnsureTopic(context.Context) error { return nil }

func (l *memStateLog) Append(_ context.Context, _ time.Duration, p int32, k, v []byte) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.parts == nil {
		l.parts = map[int32][][2][]byte{}
	}
	l.parts[p] = append(l.parts[p], [2][]byte{k, v})
	return nil
}

func (l *memStateLog) Replay(_ context.Context, p int32, fn func(k, v []byte) error) error {
	l.mu.Lock()
	recs := append([][2][]byte(nil), l.parts[p]...)
	l.mu.Unlock()
	for _, r := range recs {
		if err := fn(r[0], r[1]); err != nil {
			return err
		}
	}
	return nil
}

func (l *memStateLog) states(t *testing.T) []State {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []State
	for _, recs := range l.parts {
		for _, r := range recs {
			m, _, err := DecodeRecord(r[0], r[1])
			require.NoError(t, err)
			out = append(out, m.State)
		}
	}
	return out
}

type fakeMarkers struct {
	mu      sync.Mutex
	written []Marker
	block   atomic.Bool // while set, every partition stays pending
}

func (f *fakeMarkers) WriteMarkers(_ context.Context, _ time.Duration, m Marker) []TopicPartition {
	if f.block.Load() {
		return m.Partitions
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.written = append(f.written, m)
	return nil
}

func (f *fakeMarkers) all() []Marker {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Marker(nil), f.written...)
}

type harness struct {
	c       *Coordinator
	log     *memStateLog
	markers *fakeMarkers
	md      *fakeSource
	now     atomic.Int64
}

func newHarness(t *testing.T, log *memStateLog, epoch int32, unsafe ...Unsafe) *harness {
	t.Helper()
	h := &harness{log: log, markers: &fakeMarkers{}, md: &fakeSource{}}
	h.now.Store(1000)
	h.md.im.Store(testImage(1, epoch))
	var pid atomic.Int64
	pid.Store(100)
	cfg := Config{
		NodeID:         1,
		RetryBackoffMs: 1,
		MarkerWaitMs:   2000,
		NewProducerID:  func(context.Context) (int64, error) { return pid.Add(1), nil },
		GroupPartition: func(string) int32 { return 3 },
		Now:            func() time.Time { return time.UnixMilli(h.now.Load()) },
	}
	for _, u := range unsafe {
		cfg.Unsafe = u
	}
	c, err := New(cfg, log, h.markers, h.md)
	require.NoError(t, err)
	t.Cleanup(c.Close)
	h.c = c
	c.ApplyImage(nil, h.md.Image())
	require.Eventually(t, func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, st := range c.parts {
			if st.loading {
				return false
			}
		}
		return len(c.parts) == 50
	}, 5*time.Second, time.Millisecond)
	return h
}

func (h *harness) init(t *testing.T, id string) (int64, int16) {
	t.Helper()
	req := kmsg.NewPtrInitProducerIDRequest()
	req.TransactionalID = &id
	req.TransactionTimeoutMillis = 60000
	req.ProducerID, req.ProducerEpoch = -1, -1
	req.Version = 4
	for range 100 {
		resp := h.c.InitProducerID(context.Background(), req)
		if resp.ErrorCode == kerr.ConcurrentTransactions.Code {
			time.Sleep(time.Millisecond)
			continue
		}
		require.Zero(t, resp.ErrorCode, kerr.ErrorForCode(resp.ErrorCode))
		return resp.ProducerID, resp.ProducerEpoch
	}
	t.Fatal("InitProducerId kept answering CONCURRENT_TRANSACTIONS")
	return 0, 0
}

func (h *harness) add(id string, pid int64, epoch int16, topic string, parts ...int32) int16 {
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	req.Version = 3
	req.TransactionalID, req.ProducerID, req.ProducerEpoch = id, pid, epoch
	rt := kmsg.NewAddPartitionsToTxnRequestTopic()
	rt.Topic, rt.Partitions = topic, parts
	req.Topics = append(req.Topics, rt)
	return h.c.AddPartitionsToTxn(context.Background(), req).Topics[0].Partitions[0].ErrorCode
}

func (h *harness) end(id string, pid int64, epoch int16, commit bool) int16 {
	req := kmsg.NewPtrEndTxnRequest()
	req.Version = 4
	req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = id, pid, epoch, commit
	return h.c.EndTxn(context.Background(), req).ErrorCode
}

func TestCoordinatorCommitWritesMarkersAndCompletes(t *testing.T) {
	h := newHarness(t, &memStateLog{}, 7)
	pid, epoch := h.init(t, "tx")
	assert.Equal(t, int64(101), pid)
	require.Zero(t, h.add("tx", pid, epoch, "t", 0, 1))
	require.Zero(t, h.end("tx", pid, epoch, true))
	ms := h.markers.all()
	require.Len(t, ms, 1)
	assert.True(t, ms[0].Commit)
	assert.Equal(t, int32(7), ms[0].CoordinatorEpoch, "the coordinator epoch is the partition's leader epoch")
	assert.Equal(t, []TopicPartition{{"t", 0}, {"t", 1}}, ms[0].Partitions)
	require.Eventually(t, func() bool { return len(h.log.states(t)) == 4 }, 5*time.Second, time.Millisecond, "the Complete record follows the markers")
	assert.Equal(t, []State{Empty, Ongoing, PrepareCommit, CompleteCommit}, h.log.states(t))

	d := h.c.DescribeTransactions(context.Background(), &kmsg.DescribeTransactionsRequest{TransactionalIDs: []string{"tx", "other"}})
	assert.Equal(t, "CompleteCommit", d.TransactionStates[0].State)
	assert.Equal(t, kerr.TransactionalIDNotFound.Code, d.TransactionStates[1].ErrorCode)
	l := h.c.ListTransactions(context.Background(), &kmsg.ListTransactionsRequest{StateFilters: []string{"CompleteCommit", "Bogus"}})
	require.Len(t, l.TransactionStates, 1)
	assert.Equal(t, []string{"Bogus"}, l.UnknownStateFilters)
}

func TestCoordinatorRefusesUnknownPartitionsAndFencedProducers(t *testing.T) {
	h := newHarness(t, &memStateLog{}, 0)
	pid, epoch := h.init(t, "tx")
	assert.Equal(t, kerr.UnknownTopicOrPartition.Code, h.add("tx", pid, epoch, "nope", 0))
	pid2, epoch2 := h.init(t, "tx")
	assert.Equal(t, pid, pid2)
	assert.Equal(t, epoch+1, epoch2)
	assert.Equal(t, kerr.ProducerFenced.Code, h.add("tx", pid, epoch, "t", 0))
	assert.Equal(t, kerr.InvalidProducerIDMapping.Code, h.add("unknown", pid, epoch, "t", 0))
}

// With MarkerWaitMs 0 (the broker's default) EndTxn answers once the
// decision is durable; the producer's next request waits for the markers
// up to BusyWaitMs and is answered CONCURRENT_TRANSACTIONS past it. Once
// the markers are in, the next transaction's record is written, and the
// Complete record it made unnecessary is not.
func TestEndTxnAnswersOnceTheDecisionIsDurable(t *testing.T) {
	h := newHarness(t, &memStateLog{}, 1)
	h.c.cfg.MarkerWaitMs = 0
	h.c.cfg.CompleteDelayMs = 60000
	pid, epoch := h.init(t, "tx")
	require.Zero(t, h.add("tx", pid, epoch, "t", 0))
	h.markers.block.Store(true)
	require.Zero(t, h.end("tx", pid, epoch, true), "answered with the markers still pending")
	states := h.log.states(t)
	assert.Equal(t, PrepareCommit, states[len(states)-1])
	assert.Empty(t, h.markers.all())

	h.c.cfg.BusyWaitMs = 1
	assert.Equal(t, kerr.ConcurrentTransactions.Code, h.add("tx", pid, epoch, "t", 1), "markers still pending past the busy wait")

	h.c.cfg.BusyWaitMs = 10000
	go func() {
		time.Sleep(20 * time.Millisecond)
		h.markers.block.Store(false)
	}()
	require.Zero(t, h.add("tx", pid, epoch, "t", 1), "the next transaction waits for the markers of the last")
	require.Len(t, h.markers.all(), 1)
	assert.True(t, h.markers.all()[0].Commit)
	assert.Equal(t, []State{Empty, Ongoing, PrepareCommit, Ongoing}, h.log.states(t),
		"the next transaction follows the markers; no Complete record between")
}

// endedTxn is a coordinator whose EndTxn answers once the decision is
// durable (MarkerWaitMs 0) and whose Complete records wait
// completeDelayMs, with transactional id "tx" initialized, one partition
// added and the transaction ended (commit or abort).
func endedTxn(t *testing.T, completeDelayMs int64, commit bool) (*harness, int64, int16) {
	t.Helper()
	h := newHarness(t, &memStateLog{}, 1)
	h.c.cfg.MarkerWaitMs = 0
	h.c.cfg.CompleteDelayMs = completeDelayMs
	pid, epoch := h.init(t, "tx")
	require.Zero(t, h.add("tx", pid, epoch, "t", 0))
	require.Zero(t, h.end("tx", pid, epoch, commit))
	return h, pid, epoch
}

// TestCompleteFollowsTheMarkersWhenNothingElseComes: with no next request
// the Complete record is written CompleteDelayMs after the markers, and
// from the markers on the id already reads as complete.
func TestCompleteFollowsTheMarkersWhenNothingElseComes(t *testing.T) {
	h, _, _ := endedTxn(t, 200, false)
	describe := func() string {
		req := kmsg.NewPtrDescribeTransactionsRequest()
		req.TransactionalIDs = []string{"tx"}
		return h.c.DescribeTransactions(context.Background(), req).TransactionStates[0].State
	}
	require.Eventually(t, func() bool { return len(h.markers.all()) == 1 }, 5*time.Second, time.Millisecond)
	require.Eventually(t, func() bool { return describe() == "CompleteAbort" }, 5*time.Second, time.Millisecond,
		"complete once the markers are in")
	require.Eventually(t, func() bool {
		s := h.log.states(t)
		return s[len(s)-1] == CompleteAbort
	}, 5*time.Second, time.Millisecond, "the record follows")
	assert.Equal(t, []State{Empty, Ongoing, PrepareAbort, CompleteAbort}, h.log.states(t))
}

// TestPendingCompleteRecordIsDroppedNotWaitedFor: the Complete record
// waits on a timer, not a goroutine. The next transaction's first write
// stops it (no Complete record, nothing left running), and so does
// closing the coordinator: Close does not wait out the delay.
func TestPendingCompleteRecordIsDroppedNotWaitedFor(t *testing.T) {
	h, pid, epoch := endedTxn(t, 60000, true)
	pending := func() bool {
		h.c.mu.Lock()
		defer h.c.mu.Unlock()
		f := h.c.txns["tx"].finishing
		return f != nil && f.timer != nil
	}
	require.Eventually(t, pending, 5*time.Second, time.Millisecond, "markers written, Complete record waiting")
	require.Zero(t, h.add("tx", pid, epoch, "t", 1))
	assert.False(t, pending(), "the next transaction's record stopped it")

	require.Zero(t, h.end("tx", pid, epoch, false))
	require.Eventually(t, pending, 5*time.Second, time.Millisecond)
	closed := make(chan struct{})
	go func() { h.c.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Close waited for a pending Complete record")
	}
	assert.Equal(t, []State{Empty, Ongoing, PrepareCommit, Ongoing, PrepareAbort}, h.log.states(t))
}

// abortLeftPrepared aborts a transaction on a coordinator of epoch 1
// whose markers never land, and closes it: log holds a prepared abort.
func abortLeftPrepared(t *testing.T, log *memStateLog) {
	t.Helper()
	h := newHarness(t, log, 1)
	pid, epoch := h.init(t, "tx")
	require.Zero(t, h.add("tx", pid, epoch, "t", 0))
	h.markers.block.Store(true)
	h.c.cfg.MarkerWaitMs = 1
	require.Zero(t, h.end("tx", pid, epoch, false), "the decision is durable; markers go on in the background")
	// The coordinator's node loses the partition before the markers land.
	h.c.Close()
}

func TestCoordinatorFinishesPreparedTransactionsAfterFailover(t *testing.T) {
	log := &memStateLog{}
	abortLeftPrepared(t, log)

	h2 := newHarness(t, log, 2)
	require.Eventually(t, func() bool { return len(h2.markers.all()) == 1 }, 5*time.Second, time.Millisecond)
	m := h2.markers.all()[0]
	assert.False(t, m.Commit)
	assert.Equal(t, int32(2), m.CoordinatorEpoch)
	require.Eventually(t, func() bool {
		s := log.states(t)
		return s[len(s)-1] == CompleteAbort
	}, 5*time.Second, time.Millisecond)
}

// TestUnsafeTakeoverCommitsAborts: with the planted bug the coordinator
// that takes over writes commit markers for the prepared abort it loads.
func TestUnsafeTakeoverCommitsAborts(t *testing.T) {
	log := &memStateLog{}
	abortLeftPrepared(t, log)

	h2 := newHarness(t, log, 2, Unsafe{TakeoverCommitsAborts: true})
	require.Eventually(t, func() bool { return len(h2.markers.all()) == 1 }, 5*time.Second, time.Millisecond)
	assert.True(t, h2.markers.all()[0].Commit, "the aborted transaction is committed")
}

// TestUnsafeTakeoverLeavesPrepared: with the planted bug the coordinator
// that takes over writes nothing for the prepared abort it loads, and a
// new producer of its transactional id is refused for as long as it asks.
func TestUnsafeTakeoverLeavesPrepared(t *testing.T) {
	log := &memStateLog{}
	abortLeftPrepared(t, log)

	h2 := newHarness(t, log, 2, Unsafe{TakeoverLeavesPrepared: true})
	req := kmsg.NewPtrInitProducerIDRequest()
	id := "tx"
	req.TransactionalID, req.TransactionTimeoutMillis, req.Version = &id, 60000, 4
	req.ProducerID, req.ProducerEpoch = -1, -1
	for range 3 {
		assert.Equal(t, kerr.ConcurrentTransactions.Code, h2.c.InitProducerID(context.Background(), req).ErrorCode)
		time.Sleep(20 * time.Millisecond)
	}
	assert.Empty(t, h2.markers.all(), "no markers")
	assert.Equal(t, PrepareAbort, log.states(t)[len(log.states(t))-1], "no Complete record")
}

func TestCoordinatorAbortsTimedOutTransactions(t *testing.T) {
	h := newHarness(t, &memStateLog{}, 0)
	pid, epoch := h.init(t, "tx")
	require.Zero(t, h.add("tx", pid, epoch, "t", 1))
	assert.Zero(t, h.c.AbortTimedOut())
	h.now.Add(60001)
	assert.Equal(t, 1, h.c.AbortTimedOut())
	require.Eventually(t, func() bool { return len(h.markers.all()) == 1 }, 5*time.Second, time.Millisecond)
	m := h.markers.all()[0]
	assert.False(t, m.Commit)
	assert.Equal(t, epoch+1, m.ProducerEpoch, "the abort's markers fence the abandoned producer")
	assert.Equal(t, kerr.ProducerFenced.Code, h.end("tx", pid, epoch, true))
}

func TestCoordinatorNotCoordinatorElsewhere(t *testing.T) {
	h := newHarness(t, &memStateLog{}, 0)
	h.md.im.Store(testImage(2, 1))
	h.c.ApplyImage(nil, h.md.Image())
	assert.Equal(t, kerr.NotCoordinator.Code, h.end("tx", 1, 0, true))
	f := h.c.FindCoordinator(context.Background(), &kmsg.FindCoordinatorRequest{Version: 4, CoordinatorType: 1, CoordinatorKeys: []string{"tx"}})
	require.Len(t, f.Coordinators, 1)
	assert.Equal(t, int32(2), f.Coordinators[0].NodeID)
	assert.Equal(t, "b2", f.Coordinators[0].Host)
}

// TestCoordinatorExpiresIdleTransactionalIDs: an id with no transaction
// open and unused past transactional.id.expiration.ms is forgotten, with a
// tombstone a later load honours; an id with a transaction open is kept
// however old; a producer that comes back with an expired id starts over
// with a new producer id.
func TestCoordinatorExpiresIdleTransactionalIDs(t *testing.T) {
	log := &memStateLog{}
	h := newHarness(t, log, 0)
	h.c.cfg.ExpirationMs = 5000
	h.init(t, "idle")
	busy, busyEpoch := h.init(t, "busy")
	require.Zero(t, h.add("busy", busy, busyEpoch, "t", 1))
	assert.Zero(t, h.c.ExpireIDs(), "not yet")
	h.now.Add(5001)
	h.c.cfg.MaxTimeoutMs = 1 << 40 // the open transaction is not timed out here
	assert.Equal(t, 1, h.c.ExpireIDs(), "the idle id only: busy has a transaction open")
	assert.Zero(t, h.c.ExpireIDs(), "once")

	describe := func(h *harness, id string) kmsg.DescribeTransactionsResponseTransactionState {
		t.Helper()
		d := h.c.DescribeTransactions(context.Background(), &kmsg.DescribeTransactionsRequest{TransactionalIDs: []string{id}})
		require.Len(t, d.TransactionStates, 1)
		return d.TransactionStates[0]
	}
	h2 := newHarness(t, log, 1) // a later load of the same log
	assert.Equal(t, kerr.TransactionalIDNotFound.Code, describe(h2, "idle").ErrorCode, "the tombstone is loaded")
	assert.Equal(t, busy, describe(h2, "busy").ProducerID, "busy survives the load")
	h.c.Close()

	h2.init(t, "idle")
	assert.Zero(t, describe(h2, "idle").ErrorCode, "the id starts over")
}

// The leaders' add, in process (AddForLeader) and as AddPartitionsToTxn v4
// (addPartitionsBatched), answers per partition in the request's order: an
// unknown partition fails the add of all, a verification fails only the
// partition that is not in the transaction.
func TestAddForLeaderAnswersInRequestOrder(t *testing.T) {
	h := newHarness(t, &memStateLog{}, 0)
	pid, epoch := h.init(t, "tx")
	nope, notAttempted := kerr.UnknownTopicOrPartition.Code, kerr.OperationNotAttempted.Code
	assert.Equal(t, []int16{notAttempted, nope, notAttempted},
		h.c.AddForLeader("tx", pid, epoch, []TopicPartition{{"t", 1}, {"nope", 0}, {"t", 0}}, false))
	assert.Equal(t, []int16{0, 0, 0}, h.c.AddForLeader("tx", pid, epoch, []TopicPartition{{"t", 1}, {"t", 0}, {"t", 1}}, false))
	assert.Equal(t, []int16{kerr.InvalidTxnState.Code, 0},
		h.c.AddForLeader("tx", pid, epoch, []TopicPartition{{"t", 2}, {"t", 1}}, true), "verification changes nothing")
	assert.Equal(t, []int16{kerr.ProducerFenced.Code}, h.c.AddForLeader("tx", pid, epoch-1, []TopicPartition{{"t", 0}}, false))

	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	req.Version = 4
	for _, tx := range []struct {
		id     string
		verify bool
		parts  []int32
	}{{"tx", true, []int32{2, 0}}, {"tx", false, []int32{1}}, {"other", false, []int32{0}}} {
		rt := kmsg.NewAddPartitionsToTxnRequestTransaction()
		rt.TransactionalID, rt.ProducerID, rt.ProducerEpoch, rt.VerifyOnly = tx.id, pid, epoch, tx.verify
		tt := kmsg.NewAddPartitionsToTxnRequestTransactionTopic()
		tt.Topic, tt.Partitions = "t", tx.parts
		rt.Topics = append(rt.Topics, tt)
		req.Transactions = append(req.Transactions, rt)
	}
	var got [][]int16
	for _, r := range h.c.AddPartitionsToTxn(context.Background(), req).Transactions {
		var codes []int16
		for _, p := range r.Topics[0].Partitions {
			codes = append(codes, p.ErrorCode)
		}
		got = append(got, codes)
	}
	assert.Equal(t, [][]int16{{kerr.InvalidTxnState.Code, 0}, {0}, {kerr.InvalidProducerIDMapping.Code}}, got)
}
