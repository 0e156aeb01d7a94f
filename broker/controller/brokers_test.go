package controller

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/faultline/faultline/broker/lifecycle"
	"github.com/faultline/faultline/broker/metadata"
)

const (
	testHeartbeat = 20 * time.Millisecond
	testSession   = 400 * time.Millisecond
	testWait      = 10 * time.Second
)

// TestBrokerLifecycleCluster runs three brokers against an active
// controller over TCP: registration, unfencing, seed 003's single broker
// failure (the session expires, one FenceBroker record, its partitions
// re-elected from the ISR with bumped leader epochs), and a controlled
// shutdown that moves leadership away before the broker is let go.
func TestBrokerLifecycleCluster(t *testing.T) {
	log := newSharedLog(t, 1)
	c := newClusterController(t, 1, log.view(1), nil)
	runExpiry(t, c, testHeartbeat, testSession)
	addr := serveKafka(t, dispatch(c, nil))
	pub := feed(t, log.local)
	ctx := context.Background()

	brokers := map[int32]*lifecycle.Manager{}
	for id := int32(1); id <= 3; id++ {
		lc := newLifecycle(t, id, 1, kgoTransport(t, map[int32]string{1: addr}, nil), pub)
		assert.Equal(t, lifecycle.StateStarting, lc.State())
		lc.Start()
		brokers[id] = lc
	}
	for id, lc := range brokers {
		waitState(t, lc, lifecycle.StateRecovery)
		assert.True(t, c.Image().Brokers[id].Fenced, "broker %d stays fenced until it is ready", id)
		assert.Equal(t, c.Image().Brokers[id].Epoch, lc.BrokerEpoch())
		lc.SetReadyToUnfence()
	}
	for id, lc := range brokers {
		waitState(t, lc, lifecycle.StateRunning)
		assert.True(t, c.Image().Live(id), "broker %d", id)
		assert.False(t, lc.Fenced())
	}

	require.Zero(t, c.CreateTopics(ctx, createReq(topic("orders", 3, 3))).Topics[0].ErrorCode)

	// A leader's ISR change through ActiveController, as its ISR loop
	// sends it (kgo negotiates v3: ISR members with broker epochs).
	im := c.Image()
	p1 := im.Topic("orders").Partitions[1]
	dropped := p1.Replicas[slices.IndexFunc(p1.Replicas, func(r int32) bool { return r != p1.Leader })]
	shrunk := slices.DeleteFunc(slices.Clone(p1.ISR), func(r int32) bool { return r == dropped })
	ap := kmsg.NewPtrAlterPartitionRequest()
	ap.BrokerID, ap.BrokerEpoch = p1.Leader, im.Brokers[p1.Leader].Epoch
	rp := kmsg.NewAlterPartitionRequestTopicPartition()
	rp.Partition, rp.LeaderEpoch, rp.PartitionEpoch, rp.NewISR = 1, p1.LeaderEpoch, p1.PartitionEpoch, shrunk
	for _, r := range shrunk {
		rp.NewEpochISR = append(rp.NewEpochISR, kmsg.AlterPartitionRequestTopicPartitionNewEpochISR{BrokerID: r, BrokerEpoch: im.Brokers[r].Epoch})
	}
	ap.Topics = []kmsg.AlterPartitionRequestTopic{{Topic: "orders", TopicID: im.Topic("orders").ID, Partitions: []kmsg.AlterPartitionRequestTopicPartition{rp}}}
	actx, acancel := context.WithTimeout(ctx, testWait)
	defer acancel()
	raw, err := lifecycle.ActiveController{Transport: kgoTransport(t, map[int32]string{1: addr}, nil)}.Request(actx, ap)
	require.NoError(t, err)
	ar := raw.(*kmsg.AlterPartitionResponse)
	require.Zero(t, ar.ErrorCode)
	require.Zero(t, ar.Topics[0].Partitions[0].ErrorCode, kerr.ErrorForCode(ar.Topics[0].Partitions[0].ErrorCode))
	assert.Equal(t, shrunk, ar.Topics[0].Partitions[0].ISR)
	assert.Equal(t, shrunk, c.Image().Topic("orders").Partitions[1].ISR)
	assert.Len(t, shrunk, 2)

	before := c.Image().Topic("orders").Partitions
	victim := before[0].Leader
	require.NotEqual(t, metadata.NoLeader, victim)

	// Single broker failure: the victim stops heartbeating.
	brokers[victim].Close()
	stopped := time.Now()
	require.Eventually(t, func() bool { return c.Image().Brokers[victim].Fenced }, testWait, 5*time.Millisecond)
	fencedAfter := time.Since(stopped)
	t.Logf("broker %d fenced %v after it stopped heartbeating (session %v, heartbeat %v)", victim, fencedAfter, testSession, testHeartbeat)
	assert.GreaterOrEqual(t, fencedAfter, testSession-2*testHeartbeat, "fenced only after the session timeout")
	assert.Never(t, func() bool { return fenceRecords(log, victim) != 1 }, 10*testHeartbeat, testHeartbeat, "exactly one FenceBroker record")
	after := c.Image().Topic("orders").Partitions
	for i, p := range before {
		q := after[i]
		assert.NotContains(t, q.ISR, victim, "partition %d: the fenced broker leaves the ISR", i)
		if p.Leader != victim {
			assert.Equal(t, p.Leader, q.Leader, "partition %d keeps its leader", i)
			assert.Equal(t, p.LeaderEpoch, q.LeaderEpoch, "partition %d keeps its leader epoch", i)
			continue
		}
		assert.NotEqual(t, victim, q.Leader, "partition %d", i)
		assert.Contains(t, p.ISR, q.Leader, "partition %d: the new leader comes from the ISR", i)
		assert.Equal(t, p.LeaderEpoch+1, q.LeaderEpoch, "partition %d: leader epoch bumped", i)
	}
	for id, lc := range brokers {
		if id != victim {
			assert.True(t, c.Image().Live(id), "broker %d keeps its session", id)
			assert.Equal(t, lifecycle.StateRunning, lc.State())
		}
	}

	// Controlled shutdown of a surviving leader.
	var leaving, staying int32
	for id := range brokers {
		if id == victim {
			continue
		}
		if leaderCount(c.Image(), id) > 0 && leaving == 0 {
			leaving = id
		} else {
			staying = id
		}
	}
	require.NotZero(t, leaving)
	beforeShutdown := c.Image().Topic("orders").Partitions
	sctx, cancel := context.WithTimeout(ctx, testWait)
	defer cancel()
	require.NoError(t, brokers[leaving].ControlledShutdown(sctx))
	im = c.Image()
	assert.Zero(t, leaderCount(im, leaving), "leadership moved away before the broker was told to shut down")
	assert.True(t, im.Brokers[leaving].InControlledShutdown)
	for i, p := range im.Topic("orders").Partitions {
		if slices.Contains(beforeShutdown[i].ISR, staying) {
			assert.Equal(t, staying, p.Leader, "partition %d: led by the last live ISR member", i)
		} else {
			assert.Equal(t, metadata.NoLeader, p.Leader, "partition %d: no live ISR member, no unclean election", i)
		}
	}
	assert.Equal(t, lifecycle.StateShuttingDown, brokers[leaving].State())
	// It sends nothing more, so its session expires and it is fenced once.
	require.Eventually(t, func() bool { return fenceRecords(log, leaving) == 1 }, testWait, 5*time.Millisecond)
	assert.True(t, c.Image().Live(staying))

	// The victim comes back as a new incarnation and is unfenced.
	back := newLifecycle(t, victim, 2, kgoTransport(t, map[int32]string{1: addr}, nil), pub)
	back.Start()
	back.SetReadyToUnfence()
	waitState(t, back, lifecycle.StateRunning)
	assert.Equal(t, metadata.Uuid{byte(victim), 2}, c.Image().Brokers[victim].IncarnationID)
	assert.True(t, c.Image().Live(victim))
}

// faultyTransport injects faults in front of another transport.
type faultyTransport struct {
	next  lifecycle.ControllerTransport
	fault func(req kmsg.Request) (kmsg.Response, error) // nil result: pass on
	mu    sync.Mutex
	keys  []int16 // keys passed on
}

func (f *faultyTransport) Send(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	if resp, err := f.fault(req); resp != nil || err != nil {
		return resp, err
	}
	f.mu.Lock()
	f.keys = append(f.keys, req.Key())
	f.mu.Unlock()
	return f.next.Send(ctx, req)
}

func (f *faultyTransport) count(key int16) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, k := range f.keys {
		if k == key {
			n++
		}
	}
	return n
}

// TestBrokerLifecycleFaults: NOT_CONTROLLER and network errors are retried,
// STALE_BROKER_EPOCH leads to a new registration, and a second incarnation
// is refused as a duplicate until the first one's session expires.
func TestBrokerLifecycleFaults(t *testing.T) {
	log := newSharedLog(t, 1)
	c := newClusterController(t, 1, log.view(1), nil)
	runExpiry(t, c, testHeartbeat, testSession)
	pub := feed(t, log.local)

	var notController, netErrors, stale atomic.Int32
	notController.Store(3)
	netErrors.Store(3)
	tr := &faultyTransport{next: directTransport{c}, fault: func(req kmsg.Request) (kmsg.Response, error) {
		switch {
		case notController.Add(-1) >= 0:
			resp := req.ResponseKind()
			switch r := resp.(type) {
			case *kmsg.BrokerRegistrationResponse:
				r.ErrorCode = kerr.NotController.Code
			case *kmsg.BrokerHeartbeatResponse:
				r.ErrorCode = kerr.NotController.Code
			}
			return resp, nil
		case netErrors.Add(-1) >= 0:
			return nil, errors.New("connection reset")
		case req.Key() == 63 && stale.Add(-1) >= 0:
			r := req.ResponseKind().(*kmsg.BrokerHeartbeatResponse)
			r.ErrorCode, r.IsFenced = kerr.StaleBrokerEpoch.Code, true
			return r, nil
		}
		return nil, nil
	}}
	lc := newLifecycle(t, 1, 1, tr, pub)
	lc.SetReadyToUnfence()
	lc.Start()
	waitState(t, lc, lifecycle.StateRunning)
	assert.Equal(t, 1, tr.count(62), "one registration after the faults")
	epoch := lc.BrokerEpoch()

	changed := lc.Changed()
	stale.Store(1)
	require.Eventually(t, func() bool { return tr.count(62) == 2 }, testWait, time.Millisecond, "registers again after STALE_BROKER_EPOCH")
	<-changed
	// The first change may be the moment the stale epoch is dropped (-1
	// until the registration is answered): wait for the registration.
	require.Eventually(t, func() bool { return lc.BrokerEpoch() >= 0 }, testWait, time.Millisecond, "registered again")
	assert.Equal(t, epoch, lc.BrokerEpoch(), "the same incarnation keeps its epoch")
	assert.Equal(t, lifecycle.StateRunning, lc.State())

	// A second incarnation while the first heartbeats: refused.
	second := newLifecycle(t, 1, 2, directTransport{c}, pub)
	second.SetReadyToUnfence()
	second.Start()
	assert.Never(t, func() bool { return second.BrokerEpoch() >= 0 }, testSession/2, testHeartbeat, "DUPLICATE_BROKER_REGISTRATION while alive")
	lc.Close()
	waitState(t, second, lifecycle.StateRunning)
	assert.Greater(t, second.BrokerEpoch(), epoch)
	assert.Equal(t, metadata.Uuid{1, 2}, c.Image().Brokers[1].IncarnationID)
}

// TestControllerFailoverFencesNobody: a newly active controller renews
// every broker's session, so brokers that keep heartbeating are not
// fenced, while one that died during the failover is, after the session
// timeout.
func TestControllerFailoverFencesNobody(t *testing.T) {
	log := newSharedLog(t, 1)
	c1 := newClusterController(t, 1, log.view(1), nil)
	c2 := newClusterController(t, 2, log.view(2), nil)
	runExpiry(t, c1, testHeartbeat, testSession)
	runExpiry(t, c2, testHeartbeat, testSession)
	addr1 := serveKafka(t, dispatch(c1, nil))
	addr2 := serveKafka(t, dispatch(c2, nil))
	voters := map[int32]string{1: addr1, 2: addr2}
	pub := feed(t, log.local)

	brokers := map[int32]*lifecycle.Manager{}
	for id := int32(1); id <= 3; id++ {
		lc := newLifecycle(t, id, 1, kgoTransport(t, voters, log.currentLeader), pub)
		lc.SetReadyToUnfence()
		lc.Start()
		brokers[id] = lc
	}
	for _, lc := range brokers {
		waitState(t, lc, lifecycle.StateRunning)
	}
	noops := log.count(isNoOp)
	brokers[3].Close()
	log.setLeader(2, 2)
	require.Eventually(t, c2.Active, testWait, time.Millisecond)
	assert.Equal(t, noops+1, log.count(isNoOp))
	require.Eventually(t, func() bool { return c2.Image().Brokers[3].Fenced }, testWait, 5*time.Millisecond, "the dead broker is fenced by the new controller")
	assert.Equal(t, 1, fenceRecords(log, 3))
	for id := int32(1); id <= 2; id++ {
		assert.Zero(t, fenceRecords(log, id), "broker %d kept heartbeating through the failover", id)
		assert.Equal(t, lifecycle.StateRunning, brokers[id].State())
	}
	assert.False(t, c1.Active())
}
