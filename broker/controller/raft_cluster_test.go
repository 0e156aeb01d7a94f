package controller

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/faultline/faultline/broker/lifecycle"
	"github.com/faultline/faultline/broker/metadata"
	"github.com/faultline/faultline/broker/quorum"
	"github.com/faultline/faultline/broker/quorum/raftq"
)

// raftController is one controller node of a Raft quorum in process: the
// quorum, the controller, its expiry loop and its controller listener.
type raftController struct {
	q         *raftq.Quorum
	c         *Controller
	addr      string
	stopKafka func()
	cancel    context.CancelFunc
	done      chan struct{}
	mu        sync.Mutex
	records   []metadata.Record
}

func (rc *raftController) count(match func(metadata.Record) bool) int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	n := 0
	for _, r := range rc.records {
		if match(r) {
			n++
		}
	}
	return n
}

func (rc *raftController) kill() {
	rc.stopKafka()
	rc.cancel()
	<-rc.done
	rc.c.Close()
	_ = rc.q.Close()
}

func startRaftController(t *testing.T, id int32, voters map[int32]string, network *raftq.MemNetwork) *raftController {
	t.Helper()
	q, err := raftq.Open(raftq.Config{
		NodeID: id, Voters: voters, DataDir: t.TempDir(), ClusterID: "cluster", Transport: network.Transport(id),
		Logger: slog.New(slog.DiscardHandler), TickInterval: 10 * time.Millisecond, ElectionTicks: 10, HeartbeatTicks: 1,
	})
	require.NoError(t, err)
	rc := &raftController{q: q, done: make(chan struct{})}
	_, err = q.Subscribe(func(b quorum.Batch) error {
		rc.mu.Lock()
		defer rc.mu.Unlock()
		rc.records = append(rc.records, b.Records...)
		return nil
	})
	require.NoError(t, err)
	rc.c, err = New(Config{NodeID: id, ClusterID: "cluster", Defaults: Defaults{NumPartitions: 3, ReplicationFactor: 3},
		Rand: rand.New(rand.NewPCG(uint64(id), 3)), Cluster: true}, q)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	rc.cancel = cancel
	go func() {
		defer close(rc.done)
		_ = rc.c.RunExpiry(ctx, testHeartbeat, testSession)
	}()
	rc.addr, rc.stopKafka = startKafka(t, dispatch(rc.c, nil))
	t.Cleanup(func() {
		select {
		case <-rc.done:
		default:
			rc.kill()
		}
	})
	return rc
}

// TestRaftControllerFailover runs three controllers on the Raft quorum and
// three brokers: the active controller dies, another voter wins the
// election, commits its NoOp, renews the sessions, and the brokers, which
// find it by trying the voters in turn, are not fenced; admin requests
// reach the new active controller through a lifecycle.Forwarder; a broker that dies
// afterwards is fenced by the new controller.
func TestRaftControllerFailover(t *testing.T) {
	network := raftq.NewMemNetwork()
	ids := []int32{1, 2, 3}
	raftVoters := map[int32]string{1: "127.0.0.1:1", 2: "127.0.0.1:1", 3: "127.0.0.1:1"}
	ctrls := map[int32]*raftController{}
	for _, id := range ids {
		ctrls[id] = startRaftController(t, id, raftVoters, network)
	}
	t.Cleanup(network.Wait)
	kafkaVoters := map[int32]string{}
	for id, rc := range ctrls {
		kafkaVoters[id] = rc.addr
	}
	var ctrlsMu sync.Mutex // the brokers' offset func reads ctrls
	live := func() []*raftController {
		ctrlsMu.Lock()
		defer ctrlsMu.Unlock()
		var out []*raftController
		for _, id := range ids {
			if rc := ctrls[id]; rc != nil {
				out = append(out, rc)
			}
		}
		return out
	}
	active := func() *raftController {
		for _, rc := range live() {
			if rc.c.Active() {
				return rc
			}
		}
		return nil
	}
	// Brokers read their metadata offset from a live controller's image,
	// standing in for their own observer fetch of the metadata log.
	offset := func() int64 {
		best := int64(-1)
		for _, rc := range live() {
			best = max(best, rc.c.Image().Offset)
		}
		return best
	}
	brokers := map[int32]*lifecycle.Manager{}
	for _, id := range []int32{11, 12, 13} {
		lc, err := lifecycle.New(lifecycle.Config{
			BrokerID: id, ClusterID: "cluster", IncarnationID: metadata.Uuid{byte(id)}, PreviousBrokerEpoch: -1,
			Listeners:         []metadata.Endpoint{{Name: "PLAINTEXT", Host: "localhost", Port: uint16(9000 + id)}},
			HeartbeatInterval: testHeartbeat, MetadataOffset: offset, Transport: kgoTransport(t, kafkaVoters, nil),
		})
		require.NoError(t, err)
		t.Cleanup(lc.Close)
		lc.SetReadyToUnfence()
		lc.Start()
		brokers[id] = lc
	}
	for _, lc := range brokers {
		waitState(t, lc, lifecycle.StateRunning)
	}
	first := active()
	require.NotNil(t, first)

	fwd := &lifecycle.Forwarder{Transport: kgoTransport(t, kafkaVoters, nil)}
	cr := fwd.CreateTopics(context.Background(), createReq(topic("orders", 3, 3)))
	require.Zero(t, cr.Topics[0].ErrorCode, kerr.ErrorForCode(cr.Topics[0].ErrorCode))

	// The active controller dies.
	var firstID int32
	for id, rc := range ctrls {
		if rc == first {
			firstID = id
		}
	}
	ctrlsMu.Lock()
	delete(ctrls, firstID)
	ctrlsMu.Unlock()
	first.kill()
	var next *raftController
	require.Eventually(t, func() bool { next = active(); return next != nil }, testWait, 5*time.Millisecond, "a new active controller")
	assert.GreaterOrEqual(t, next.count(isNoOp), 1, "the new controller committed a NoOp")
	fenced := func(id int32) int {
		return next.count(func(r metadata.Record) bool {
			f, ok := r.(*metadata.FenceBrokerRecord)
			return ok && f.ID == id
		})
	}
	assert.Never(t, func() bool { return fenced(11)+fenced(12)+fenced(13) > 0 }, 2*testSession, testHeartbeat,
		"brokers that keep heartbeating are not fenced across the failover")
	for id, lc := range brokers {
		assert.Equal(t, lifecycle.StateRunning, lc.State(), "broker %d", id)
		assert.True(t, next.c.Image().Live(id), "broker %d", id)
	}

	cr = fwd.CreateTopics(context.Background(), createReq(topic("events", 1, 3)))
	require.Zero(t, cr.Topics[0].ErrorCode, kerr.ErrorForCode(cr.Topics[0].ErrorCode))
	assert.True(t, slices.Equal([]string{"events", "orders"}, next.c.Image().TopicNames()))

	// A broker dies after the failover: fenced once, after its session.
	brokers[13].Close()
	require.Eventually(t, func() bool { return fenced(13) == 1 }, testWait, 5*time.Millisecond)
	for _, p := range next.c.Image().Topic("orders").Partitions {
		assert.NotEqual(t, int32(13), p.Leader)
		assert.NotContains(t, p.ISR, int32(13))
	}
}
