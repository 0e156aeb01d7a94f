package replica_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/faultline/faultline/broker/metadata"
	"github.com/faultline/faultline/broker/replica"
	"github.com/faultline/faultline/broker/storage"
)

// TestClusterAcksAllWaitsForFollowers: an acks=all write is acknowledged
// only once every ISR member holds it and the high watermark passed it; a
// follower cut off holds the write back (no ISR shrink within the lag
// time), and once the link heals it catches up and the write commits.
func TestClusterAcksAllWaitsForFollowers(t *testing.T) {
	ctx := context.Background()
	c := threeNodes(t, 60000)
	c.createTopic("orders", []int32{1, 2, 3}, map[string]string{"min.insync.replicas": "2"})
	require.Eventually(t, func() bool { return len(c.node(2).fetcher.Sources()) == 1 && len(c.node(3).fetcher.Sources()) == 1 }, waitFor, tick)
	assert.Equal(t, []int32{1}, c.node(2).fetcher.Sources())

	res := c.produce(ctx, 1, "orders", -1, "a", "b")
	require.Equal(t, int16(0), res.ErrorCode)
	for _, id := range []int32{2, 3} {
		assert.Equal(t, map[int64]string{0: "a", 1: "b"}, c.contents(id, "orders"), "node %d holds an acknowledged acks=all write", id)
	}
	assert.Equal(t, int64(2), c.node(1).m.HighWatermark("orders", 0))
	require.Eventually(t, func() bool { return c.node(2).m.HighWatermark("orders", 0) == 2 }, waitFor, tick, "followers learn the HW")

	// Node 3 is cut off: the write reaches node 2 only and is not
	// acknowledged; the high watermark does not move.
	c.net.Cut(1, 3)
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	res = c.produce(short, 1, "orders", -1, "c")
	assert.Equal(t, kerr.RequestTimedOut.Code, res.ErrorCode)
	require.Eventually(t, func() bool { return c.leo(2, "orders") == 3 }, waitFor, tick)
	assert.Equal(t, int64(2), c.node(1).m.HighWatermark("orders", 0), "the HW waits for node 3")
	assert.Equal(t, int64(2), c.leo(3, "orders"))
	assert.Empty(t, c.proposals("orders"), "no shrink before replica.lag.time.max.ms")

	c.net.Heal(1, 3)
	require.Eventually(t, func() bool { return c.node(1).m.HighWatermark("orders", 0) == 3 }, waitFor, tick)
	assert.Equal(t, map[int64]string{0: "a", 1: "b", 2: "c"}, c.contents(3, "orders"))
	assert.Equal(t, int16(0), c.produce(ctx, 1, "orders", -1, "d").ErrorCode)
}

// TestClusterLaggingFollowerLeavesISR: a follower cut off stops advancing;
// after replica.lag.time.max.ms the leader proposes removing it, the
// pending acks=all write commits on the smaller ISR, and when the link
// heals the follower catches up and is proposed back.
func TestClusterLaggingFollowerLeavesISR(t *testing.T) {
	ctx := context.Background()
	c := threeNodes(t, 400)
	c.createTopic("orders", []int32{1, 2, 3}, map[string]string{"min.insync.replicas": "2"})
	require.Equal(t, int16(0), c.produce(ctx, 1, "orders", -1, "a").ErrorCode)

	c.net.Cut(1, 3)
	res := c.produce(ctx, 1, "orders", -1, "b", "c")
	require.Equal(t, int16(0), res.ErrorCode, "committed once node 3 left the ISR")
	assert.Equal(t, []int32{1, 2}, c.isr("orders"))
	assert.Contains(t, c.proposals("orders"), []int32{1, 2})
	assert.Equal(t, int64(1), c.leo(3, "orders"), "node 3 stopped advancing")
	assert.Equal(t, 0.0, replica.Gauge(t, c.node(3).reg, "kafka_server_replica_fetcher_manager_max_lag"), "no answer, no known lag")
	assert.Positive(t, replica.Counter(t, c.node(3).reg, "kafka_server_replica_fetcher_failed_requests_total"))
	assert.Equal(t, 1.0, replica.Counter(t, c.node(1).reg, "kafka_server_replica_manager_isr_shrinks_total"))
	assert.Equal(t, 1.0, replica.Gauge(t, c.node(1).reg, "kafka_server_replica_manager_under_replicated_partitions"))

	c.net.Heal(1, 3)
	require.Eventually(t, func() bool { return len(c.isr("orders")) == 3 }, waitFor, tick)
	assert.Equal(t, []int32{1, 2, 3}, c.isr("orders"))
	assert.Equal(t, c.contents(1, "orders"), c.contents(3, "orders"))
	assert.Equal(t, 1.0, replica.Counter(t, c.node(1).reg, "kafka_server_replica_manager_isr_expands_total"))
	assert.Equal(t, 0.0, replica.Gauge(t, c.node(1).reg, "kafka_server_replica_manager_under_replicated_partitions"))
}

// TestClusterNotEnoughReplicas: with min.insync.replicas=3 on three
// replicas, a write pending when the ISR shrinks gets
// NOT_ENOUGH_REPLICAS_AFTER_APPEND (it is in the leader's log), and the
// next one NOT_ENOUGH_REPLICAS (nothing written).
func TestClusterNotEnoughReplicas(t *testing.T) {
	ctx := context.Background()
	c := threeNodes(t, 400)
	c.createTopic("orders", []int32{1, 2, 3}, map[string]string{"min.insync.replicas": "3"})
	require.Equal(t, int16(0), c.produce(ctx, 1, "orders", -1, "a").ErrorCode)

	c.net.Cut(1, 3)
	res := c.produce(ctx, 1, "orders", -1, "b")
	assert.Equal(t, kerr.NotEnoughReplicasAfterAppend.Code, res.ErrorCode)
	assert.Equal(t, []int32{1, 2}, c.isr("orders"))
	assert.Equal(t, map[int64]string{0: "a", 1: "b"}, c.contents(1, "orders"), "the write is in the leader's log")
	assert.Equal(t, int64(1), c.node(1).m.HighWatermark("orders", 0), "but not committed")

	res = c.produce(ctx, 1, "orders", -1, "c")
	assert.Equal(t, kerr.NotEnoughReplicas.Code, res.ErrorCode)
	assert.Equal(t, int64(2), c.leo(1, "orders"), "nothing written")
	assert.Equal(t, int16(0), c.produce(ctx, 1, "orders", 1, "acks1").ErrorCode, "acks=1 still works")

	c.net.Heal(1, 3)
	require.Eventually(t, func() bool { return len(c.isr("orders")) == 3 }, waitFor, tick)
	assert.Equal(t, int16(0), c.produce(ctx, 1, "orders", -1, "d").ErrorCode)
	assert.Equal(t, int64(4), c.node(1).m.HighWatermark("orders", 0))
}

// TestClusterReintegration is seed 003's "Broker Reintegration After
// Failure" with the seed's numbers: broker 1 leads orders-0 at epoch 1 with
// offsets 0-1049, of which 0-1008 are committed (high watermark 1009); it
// fails; broker 2 leads epoch 2 from offset 1009 and writes up to 2000;
// broker 1 returns as a follower, learns that epoch 1 ended at 1009,
// truncates 1009-1049 (41 records), fetches 1009-2000 and is taken back
// into the ISR. Broker 1 either restarts on its data or stays up behind a
// network partition.
func TestClusterReintegration(t *testing.T) {
	for _, restart := range []bool{true, false} {
		name := map[bool]string{true: "restart", false: "partition"}[restart]
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			c := threeNodes(t, 1000)
			dir1 := c.node(1).dir
			c.createTopic("orders", []int32{1, 2, 3}, map[string]string{"min.insync.replicas": "2"})
			// Epoch 0: offsets 0-499; epoch 1 (broker 1 re-elected): 500-1008.
			require.Equal(t, int16(0), c.produce(ctx, 1, "orders", -1, seq("e0", 0, 500)...).ErrorCode)
			c.elect("orders", 1, []int32{1, 2, 3})
			res := c.produce(ctx, 1, "orders", -1, seq("e1", 500, 509)...)
			require.Equal(t, int16(0), res.ErrorCode)
			require.Equal(t, int64(500), res.BaseOffset)
			require.Eventually(t, func() bool { return c.leo(2, "orders") == 1009 && c.leo(3, "orders") == 1009 }, waitFor, tick)

			// Broker 1 loses its followers, takes 41 uncommitted acks=1
			// writes (1009-1049) and fails.
			c.net.Cut(1, 2)
			c.net.Cut(1, 3)
			res = c.produce(ctx, 1, "orders", 1, seq("lost", 1009, 41)...)
			require.Equal(t, int16(0), res.ErrorCode)
			assert.Equal(t, int64(1050), c.leo(1, "orders"))
			assert.Equal(t, int64(1009), c.node(1).m.HighWatermark("orders", 0), "1008 is the last committed offset")
			if restart {
				c.stop(1)
			}

			// Broker 2 leads epoch 2 with ISR [2, 3] from its LEO 1009.
			c.elect("orders", 2, []int32{2, 3})
			res = c.produce(ctx, 2, "orders", -1, seq("e2", 1009, 992)...)
			require.Equal(t, int16(0), res.ErrorCode)
			assert.Equal(t, int64(1009), res.BaseOffset, "epoch 2 starts at offset 1009")
			assert.Equal(t, int64(2001), c.node(2).m.HighWatermark("orders", 0))

			// Broker 1 comes back as a follower of broker 2.
			c.net.Heal(1, 2)
			c.net.Heal(1, 3)
			if restart {
				c.start(1, dir1)
			}
			n1 := c.node(1)
			require.Eventually(t, func() bool { return c.leo(1, "orders") == 2001 }, waitFor, tick, "%s", n1.logs)
			assert.Equal(t, replica.OnlineFetchingReplica, n1.m.State("orders", 0))
			assert.Contains(t, n1.logs.String(), "truncating from 1050 to 1009", "broker 1 cut its divergent tail at 1009")
			want := c.contents(2, "orders")
			assert.Equal(t, want, c.contents(1, "orders"))
			assert.Equal(t, "e1-1008", want[1008])
			assert.Equal(t, "e2-1009", want[1009])
			assert.Equal(t, "e2-2000", want[2000])
			require.Eventually(t, func() bool { return n1.m.HighWatermark("orders", 0) == 2001 }, waitFor, tick)

			require.Eventually(t, func() bool { return len(c.isr("orders")) == 3 }, waitFor, tick)
			assert.Equal(t, []int32{2, 3, 1}, c.isr("orders"), "ISR [2, 3] -> [1, 2, 3]")
			assert.Contains(t, c.proposals("orders"), []int32{2, 3, 1})
			assert.Equal(t, int16(0), c.produce(ctx, 2, "orders", -1, "after").ErrorCode)
			assert.Equal(t, kerr.NotLeaderForPartition.Code, c.produce(ctx, 1, "orders", -1, "stale").ErrorCode)
		})
	}
}

// TestClusterEmptyDiskReplacement: a follower whose disk was replaced by an
// empty one, while the leader's log no longer starts at 0, re-replicates
// everything the leader has from the leader's log start, and its own log
// start follows the leader's.
func TestClusterEmptyDiskReplacement(t *testing.T) {
	ctx := context.Background()
	c := threeNodes(t, 60000)
	c.createTopic("orders", []int32{1, 2, 3}, nil)
	for i := range 10 {
		require.Equal(t, int16(0), c.produce(ctx, 1, "orders", -1, seq("v", i*10, 10)...).ErrorCode)
	}
	require.NoError(t, c.partitionLog(1, "orders").IncrementLogStartOffset(45))
	c.stop(3)
	c.start(3, t.TempDir())

	require.Eventually(t, func() bool { return c.leo(3, "orders") == 100 }, waitFor, tick)
	l3 := c.partitionLog(3, "orders")
	// Restarted at the base of the leader's first batch (40), then the log
	// start follows the leader's, as Kafka's followers' does.
	require.Eventually(t, func() bool { return l3.LogStartOffset() == 45 }, waitFor, tick, "log start %d", l3.LogStartOffset())
	leader := c.contents(1, "orders")
	got := c.contents(3, "orders")
	for off := int64(45); off < 100; off++ {
		assert.Equal(t, leader[off], got[off], "offset %d", off)
	}
	assert.Contains(t, c.node(3).logs.String(), "restarting the log there")
	require.Equal(t, int16(0), c.produce(ctx, 1, "orders", -1, "after").ErrorCode)
	require.Eventually(t, func() bool { return c.node(3).m.HighWatermark("orders", 0) == 101 }, waitFor, tick)
}

// TestClusterFetcherFollowsImage: the fetcher set follows the image:
// a leader move starts a fetcher for the new leader and stops the old one,
// the old leader becomes a follower, and deleting the topic stops all.
func TestClusterFetcherFollowsImage(t *testing.T) {
	ctx := context.Background()
	c := threeNodes(t, 60000)
	c.createTopic("a", []int32{1, 2, 3}, nil)
	c.createTopic("b", []int32{2, 1}, nil)
	assert.Equal(t, []int32{2}, c.node(1).fetcher.Sources())
	assert.Equal(t, []int32{1}, c.node(2).fetcher.Sources())
	assert.Equal(t, []int32{1}, c.node(3).fetcher.Sources())
	require.Equal(t, int16(0), c.produce(ctx, 2, "b", -1, "x").ErrorCode)

	c.elect("a", 3, []int32{3, 1, 2})
	assert.Equal(t, []int32{2, 3}, c.node(1).fetcher.Sources())
	assert.Equal(t, []int32{3}, c.node(2).fetcher.Sources())
	assert.Empty(t, c.node(3).fetcher.Sources())
	require.Equal(t, int16(0), c.produce(ctx, 3, "a", -1, "y").ErrorCode)
	assert.Equal(t, map[int64]string{0: "y"}, c.contents(1, "a"))

	c.update(func(im *metadata.Image) {
		delete(im.TopicsByID, im.Topics["b"].ID)
		delete(im.Topics, "b")
	})
	assert.Equal(t, []int32{3}, c.node(1).fetcher.Sources())
	assert.Equal(t, []int32{3}, c.node(2).fetcher.Sources())
}

// TestClusterDelayedFollower: a slow link delays acks=all writes but loses
// nothing.
func TestClusterDelayedFollower(t *testing.T) {
	ctx := context.Background()
	c := threeNodes(t, 60000)
	c.createTopic("orders", []int32{1, 2, 3}, nil)
	c.net.Delay(3, 1, 30*time.Millisecond)
	for i := range 5 {
		require.Equal(t, int16(0), c.produce(ctx, 1, "orders", -1, seq("v", i, 1)...).ErrorCode)
	}
	assert.Equal(t, c.contents(1, "orders"), c.contents(3, "orders"))
	assert.Equal(t, []int32{1, 2, 3}, c.isr("orders"))
}

// TestFetcherStaleLeaderRefusal: a follower whose image is ahead of the
// leader's gets refusals and keeps retrying until the leader catches up.
func TestFetcherStaleLeaderRefusal(t *testing.T) {
	ctx := context.Background()
	c := threeNodes(t, 60000)
	c.createTopic("orders", []int32{1, 2}, nil)
	require.Equal(t, int16(0), c.produce(ctx, 1, "orders", -1, "a").ErrorCode)
	// Node 2 alone learns of a new epoch led by node 1: node 1 answers
	// UNKNOWN_LEADER_EPOCH until it learns it too.
	next := cloneImage(c.image())
	next.Partition("orders", 0).LeaderEpoch++
	c.node(2).pub.Publish(next)
	require.Eventually(t, func() bool { return strings.Contains(c.node(2).logs.String(), "refused") }, waitFor, tick)
	res := c.node(1).m.Produce(ctx, "orders", 0, replica.Batch("b"), 1)
	require.Equal(t, int16(0), res.ErrorCode)
	c.elect("orders", 1, []int32{1, 2})
	require.Eventually(t, func() bool { return c.leo(2, "orders") == 2 }, waitFor, tick)
}

// TestClusterISRChangeNeedsController: a shrink the controller cannot hear
// about does not happen (acks=all keeps waiting), is retried, and commits
// once the controller is reachable; a fenced broker that catches up is not
// taken back into the ISR until it is unfenced.
func TestClusterISRChangeNeedsController(t *testing.T) {
	ctx := context.Background()
	c := threeNodes(t, 400)
	c.createTopic("orders", []int32{1, 2, 3}, map[string]string{"min.insync.replicas": "2"})
	require.Equal(t, int16(0), c.produce(ctx, 1, "orders", -1, "a").ErrorCode)

	c.net.Cut(1, 0) // node 1 cannot reach the controller
	c.net.Cut(1, 3)
	short, cancel := context.WithTimeout(ctx, 600*time.Millisecond)
	defer cancel()
	assert.Equal(t, kerr.RequestTimedOut.Code, c.produce(short, 1, "orders", -1, "b").ErrorCode)
	require.Eventually(t, func() bool { return strings.Contains(c.node(1).logs.String(), "Failed to alter ISR to [1 2]") }, waitFor, tick)
	assert.Equal(t, []int32{1, 2, 3}, c.isr("orders"))

	c.net.Heal(1, 0)
	require.Eventually(t, func() bool { return len(c.isr("orders")) == 2 }, waitFor, tick)
	assert.Equal(t, []int32{1, 2}, c.isr("orders"))
	assert.Equal(t, int64(2), c.node(1).m.HighWatermark("orders", 0), "the pending write commits on the smaller ISR")

	c.update(func(im *metadata.Image) {
		b := im.Brokers[3]
		b.Fenced = true
		im.Brokers[3] = b
	})
	c.net.Heal(1, 3)
	require.Eventually(t, func() bool { return c.leo(3, "orders") == 2 }, waitFor, tick)
	c.node(1).isr.Check(ctx)
	assert.Equal(t, []int32{1, 2}, c.isr("orders"), "a fenced broker does not join the ISR")

	c.update(func(im *metadata.Image) {
		b := im.Brokers[3]
		b.Fenced = false
		im.Brokers[3] = b
	})
	c.node(1).isr.Check(ctx)
	assert.Equal(t, []int32{1, 2, 3}, c.isr("orders"))
}

// TestClusterLeaderOfEmptyEpochRejoins: node 2 is elected for epoch 1 and
// deposed before it appends anything, so its epoch cache ends with epoch 1
// starting at its log end, an epoch the next leader (node 3, epoch 2)
// never had. The divergence answer sends it to its own log end; it must
// drop the empty epoch there, fetch on, and rejoin the ISR.
func TestClusterLeaderOfEmptyEpochRejoins(t *testing.T) {
	ctx := context.Background()
	c := threeNodes(t, 60000)
	c.createTopic("orders", []int32{1, 2, 3}, nil)
	require.Equal(t, int16(0), c.produce(ctx, 1, "orders", -1, "a", "b").ErrorCode)

	c.elect("orders", 2, []int32{1, 2, 3})
	require.Eventually(t, func() bool { return c.node(2).m.State("orders", 0) == replica.OnlineReplica }, waitFor, tick)
	require.Equal(t, []storage.EpochEntry{{Epoch: 0, StartOffset: 0}, {Epoch: 1, StartOffset: 2}}, c.partitionLog(2, "orders").EpochEntries())

	c.elect("orders", 3, []int32{1, 3})
	require.Equal(t, int16(0), c.produce(ctx, 3, "orders", -1, "c").ErrorCode)
	require.Eventually(t, func() bool { return slices.Contains(c.isr("orders"), 2) }, waitFor, tick, "node 2 rejoins the ISR")
	assert.Equal(t, map[int64]string{0: "a", 1: "b", 2: "c"}, c.contents(2, "orders"))
	assert.Equal(t, []storage.EpochEntry{{Epoch: 0, StartOffset: 0}, {Epoch: 2, StartOffset: 2}}, c.partitionLog(2, "orders").EpochEntries())
}
