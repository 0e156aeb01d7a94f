package node

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/faultline/faultline/broker/metadata"
)

// TestSeedNetworkPartitionControllerSideServes is seed 003's "Network
// Partition Scenario": the controllers and the partition leader on one
// side, the two followers cut off on the other. The controller side fences
// the followers and shrinks the ISR to the leader, which goes on taking
// acks=all writes (min.insync.replicas=1, as in the seed); the isolated
// followers never elect themselves and refuse writes with
// NOT_LEADER_OR_FOLLOWER. After the heal they are unfenced, catch up and
// rejoin the ISR, and every acknowledged record is on all three replicas.
func TestSeedNetworkPartitionControllerSideServes(t *testing.T) {
	s := startSeedCluster(t, nil)
	before := s.createTopic("split", nil)
	leader := before.Leader
	followers := without(before.Replicas, leader)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl := s.client(kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordRetries(1000))
	requireAcked(t, produceAll(ctx, cl, "split", valueRange("before", 0, 50)), "before the split")

	// The followers' side never sees itself lead, for the whole split.
	var selfElected atomic.Bool
	watchCtx, stopWatch := context.WithCancel(ctx)
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for watchCtx.Err() == nil {
			for _, f := range followers {
				if c := s.node(f); c.node != nil {
					if p, ok := partitionState(c, "split", 0); ok && p.Leader == f {
						selfElected.Store(true)
					}
				}
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()

	s.sw.Partition(append(slices.Clone(seedControllers), leader), followers)
	during := s.waitPartition("split", "ISR shrunk to the leader alone", func(p metadata.Partition) bool {
		return slices.Equal(p.ISR, []int32{leader})
	}, 15*time.Second)
	assert.Equal(t, leader, during.Leader, "the leader on the controller's side keeps leading")
	assert.Equal(t, before.LeaderEpoch, during.LeaderEpoch, "no election: the leader never changed")
	ac := s.activeController()
	require.NotNil(t, ac)
	im := ac.node.publisher.Image()
	for _, f := range followers {
		assert.False(t, im.Live(f), "the controller fenced isolated broker %d", f)
	}

	requireAcked(t, produceAll(ctx, cl, "split", valueRange("during", 0, 50)), "the controller's side keeps taking acks=all writes")
	for _, f := range followers {
		code, _, err := s.rawProduce(f, "split", -1, "to-isolated", time.Second)
		require.NoError(t, err)
		assert.Equal(t, kerr.NotLeaderForPartition.Code, code, "isolated follower %d refuses writes", f)
	}

	s.sw.Heal()
	s.waitPartition("split", "the followers back in the ISR", func(p metadata.Partition) bool {
		return len(p.ISR) == 3 && p.Leader == leader
	}, 30*time.Second)
	stopWatch()
	<-watched
	assert.False(t, selfElected.Load(), "an isolated follower never saw itself as leader")
	requireAcked(t, produceAll(ctx, cl, "split", valueRange("after", 0, 10)), "after the heal")
	want := slices.Concat(valueRange("before", 0, 50), valueRange("during", 0, 50), valueRange("after", 0, 10))
	for _, id := range before.Replicas {
		s.waitReplicaValues(id, "split", want, 10*time.Second)
	}
}
