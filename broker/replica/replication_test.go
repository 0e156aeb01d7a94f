package replica

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/faultline/faultline/broker/controller"
	"github.com/faultline/faultline/broker/metadata"
	"github.com/faultline/faultline/broker/storage"
)

// fetchOnce makes one follower fetch of topic-0 from the leader's manager,
// as issue 3's fetcher will over the network, and applies the answer.
func fetchOnce(t *testing.T, follower, leader *Manager, followerID int32, topic string) error {
	t.Helper()
	pos, ok := follower.FollowerPosition(topic, 0)
	require.True(t, ok, "broker %d does not follow %s-0", followerID, topic)
	res := leader.Fetch(context.Background(), topic, 0, FetchPartition{
		ReplicaID: followerID, ReplicaEpoch: -1, CurrentLeaderEpoch: pos.LeaderEpoch,
		FetchOffset: pos.FetchOffset, LastFetchedEpoch: pos.LastFetchedEpoch, LogStartOffset: pos.LogStartOffset, MaxBytes: 1 << 20,
	})
	return follower.ApplyFetchResponse(topic, 0, pos.LeaderEpoch, leaderData(res))
}

// leaderData is what a follower's Fetcher decodes from the wire when the
// leader answered res.
func leaderData(res FetchResult) LeaderData {
	return LeaderData{ErrorCode: res.ErrorCode, HighWatermark: res.HighWatermark, LogStartOffset: res.LogStartOffset,
		Records: res.Records, DivergingEpoch: res.DivergingEpoch}
}

// logValues reads a whole partition log, bypassing roles.
func logValues(t *testing.T, lm *storage.LogManager, topic string) map[int64]string {
	t.Helper()
	l, ok := lm.GetLog(storage.TopicPartition{Topic: topic, Partition: 0})
	require.True(t, ok)
	data, err := l.Read(l.LogStartOffset(), 1<<20, l.LogEndOffset(), true)
	require.NoError(t, err)
	return readValues(t, data)
}

// TestReplicationReintegration runs seed 003's failover and reintegration
// on two brokers in one process, with the test playing the fetcher:
// replication releases an acks=all write; the leader dies with a write only
// it has; the follower takes over with a new epoch; the old leader comes
// back, learns where its log diverged, truncates the uncommitted tail,
// catches up and is taken back into the ISR.
func TestReplicationReintegration(t *testing.T) {
	ctx := context.Background()
	b := startBroker(t, t.TempDir(), 1) // broker 1, also the controller
	defer b.stop(t)
	lm2, err := storage.NewLogManager(storage.OS, []string{t.TempDir()}, storage.ManagerOptions{})
	require.NoError(t, err)
	_, err = lm2.Load()
	require.NoError(t, err)
	defer func() { require.NoError(t, lm2.Shutdown(0)) }()
	m2, err := New(Config{NodeID: 2, Logs: lm2, TopicSettings: settingsFromConfigs})
	require.NoError(t, err)
	defer b.pub.Subscribe(m2.ApplyImage)()
	epoch2, err := b.c.RegisterBroker(ctx, controller.BrokerRegistration{BrokerID: 2, IncarnationID: metadata.Uuid{2}})
	require.NoError(t, err)
	_, err = b.c.Heartbeat(ctx, controller.Heartbeat{BrokerID: 2, BrokerEpoch: epoch2, MetadataOffset: b.pub.Image().Offset})
	require.NoError(t, err)

	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "orders", -1, -1
	rt.ReplicaAssignment = []kmsg.CreateTopicsRequestTopicReplicaAssignment{{Partition: 0, Replicas: []int32{1, 2}}}
	req.Topics = append(req.Topics, rt)
	require.Equal(t, int16(0), b.c.CreateTopics(ctx, req).Topics[0].ErrorCode)
	epoch0 := b.pub.Image().Partition("orders", 0).LeaderEpoch
	assert.Equal(t, OnlineReplica, b.m.State("orders", 0))
	assert.Equal(t, OnlineFetchingReplica, m2.State("orders", 0))

	// 1. acks=all waits for the follower.
	done := make(chan ProduceResult, 1)
	go func() { done <- b.m.Produce(ctx, "orders", 0, batch("a", "b", "c"), -1) }()
	require.Eventually(t, func() bool {
		require.NoError(t, fetchOnce(t, m2, b.m, 2, "orders"))
		return len(done) == 1
	}, 5*time.Second, time.Millisecond)
	assert.Equal(t, int16(0), (<-done).ErrorCode)
	require.NoError(t, fetchOnce(t, m2, b.m, 2, "orders"))
	assert.Equal(t, int64(3), m2.HighWatermark("orders", 0), "the follower learns the HW from the leader")

	// 2. The leader takes a write the follower never sees (acks=1).
	require.Equal(t, int16(0), b.m.Produce(ctx, "orders", 0, batch("lost1", "lost2"), 1).ErrorCode)
	readVals := func(read func(string, int32, int64, func(int64, storage.Record) error) error) []string {
		var out []string
		require.NoError(t, read("orders", 0, 1, func(_ int64, r storage.Record) error {
			out = append(out, string(r.Value))
			return nil
		}))
		return out
	}
	assert.Equal(t, []string{"b", "c"}, readVals(b.m.ReadCommitted), "ReadCommitted stops at the high watermark")
	assert.Equal(t, []string{"b", "c", "lost1", "lost2"}, readVals(b.m.ReadToEnd), "ReadToEnd reads to the log end")

	// 3. Broker 1 is fenced: broker 2 leads at a new epoch from its LEO 3.
	_, err = b.c.Heartbeat(ctx, controller.Heartbeat{BrokerID: 1, BrokerEpoch: b.epoch, MetadataOffset: b.pub.Image().Offset, WantFence: true})
	require.NoError(t, err)
	p := b.pub.Image().Partition("orders", 0)
	require.Equal(t, int32(2), p.Leader)
	assert.Equal(t, []int32{2}, p.ISR)
	assert.Equal(t, OnlineReplica, m2.State("orders", 0))
	assert.Equal(t, OnlineFetchingReplica, b.m.State("orders", 0))
	assert.Equal(t, kerr.NotLeaderForPartition.Code, b.m.Produce(ctx, "orders", 0, batch("stale"), 1).ErrorCode)
	res := m2.Produce(ctx, "orders", 0, batch("n1", "n2"), -1)
	require.Equal(t, int16(0), res.ErrorCode)
	assert.Equal(t, int64(3), res.BaseOffset, "the new epoch starts at the follower's LEO")

	// 4. Broker 1 comes back and fetches: its first fetch names its old
	// epoch, which ended at 3 on the new leader, so it truncates 3-4.
	_, err = b.c.Heartbeat(ctx, controller.Heartbeat{BrokerID: 1, BrokerEpoch: b.epoch, MetadataOffset: b.pub.Image().Offset})
	require.NoError(t, err)
	pos, ok := b.m.FollowerPosition("orders", 0)
	require.True(t, ok)
	assert.Equal(t, FetchPosition{Leader: 2, LeaderEpoch: p.LeaderEpoch, FetchOffset: 5, LastFetchedEpoch: epoch0, LogStartOffset: 0}, pos)
	require.NoError(t, fetchOnce(t, b.m, m2, 1, "orders"))
	assert.Equal(t, map[int64]string{0: "a", 1: "b", 2: "c"}, logValues(t, b.lm, "orders"), "the divergent tail is gone")
	require.NoError(t, fetchOnce(t, b.m, m2, 1, "orders"))
	require.NoError(t, fetchOnce(t, b.m, m2, 1, "orders"))
	assert.Equal(t, logValues(t, lm2, "orders"), logValues(t, b.lm, "orders"))
	assert.Equal(t, map[int64]string{0: "a", 1: "b", 2: "c", 3: "n1", 4: "n2"}, logValues(t, b.lm, "orders"))
	assert.Equal(t, int64(5), b.m.HighWatermark("orders", 0))

	// 5. Caught up: the leader proposes the ISR expansion, the controller
	// commits it, and acks=all needs broker 1 again.
	changes := m2.ISRChanges(time.Now().UnixMilli())
	require.Len(t, changes, 1)
	assert.Equal(t, []int32{2, 1}, changes[0].NewISR)
	code, np, err := b.c.AlterPartition(ctx, controller.AlterPartition{BrokerID: 2, BrokerEpoch: epoch2, TopicID: changes[0].TopicID,
		Partition: 0, LeaderEpoch: changes[0].LeaderEpoch, PartitionEpoch: changes[0].PartitionEpoch, NewISR: changes[0].NewISR})
	require.NoError(t, err)
	require.Equal(t, int16(0), code)
	assert.Equal(t, []int32{2, 1}, np.ISR)
	assert.Equal(t, []int32{2, 1}, b.pub.Image().Partition("orders", 0).ISR)
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	assert.Equal(t, kerr.RequestTimedOut.Code, m2.Produce(short, "orders", 0, batch("needs-1"), -1).ErrorCode)

	// A response for an epoch this broker no longer follows is dropped.
	err = b.m.ApplyFetchResponse("orders", 0, epoch0, LeaderData{HighWatermark: 99})
	assert.ErrorIs(t, err, ErrNotFollower)
}

// TestReplicationEmptyDisk: a follower whose log is empty while the
// leader's log starts later restarts its log at the leader's log start.
func TestReplicationEmptyDisk(t *testing.T) {
	ctx := context.Background()
	b := startBroker(t, t.TempDir(), 1)
	defer b.stop(t)
	lm2, err := storage.NewLogManager(storage.OS, []string{t.TempDir()}, storage.ManagerOptions{})
	require.NoError(t, err)
	_, err = lm2.Load()
	require.NoError(t, err)
	defer func() { require.NoError(t, lm2.Shutdown(0)) }()
	m2, err := New(Config{NodeID: 2, Logs: lm2})
	require.NoError(t, err)
	defer b.pub.Subscribe(m2.ApplyImage)()
	epoch2, err := b.c.RegisterBroker(ctx, controller.BrokerRegistration{BrokerID: 2, IncarnationID: metadata.Uuid{2}})
	require.NoError(t, err)
	_, err = b.c.Heartbeat(ctx, controller.Heartbeat{BrokerID: 2, BrokerEpoch: epoch2, MetadataOffset: b.pub.Image().Offset})
	require.NoError(t, err)
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "t", -1, -1
	rt.ReplicaAssignment = []kmsg.CreateTopicsRequestTopicReplicaAssignment{{Partition: 0, Replicas: []int32{1, 2}}}
	req.Topics = append(req.Topics, rt)
	require.Equal(t, int16(0), b.c.CreateTopics(ctx, req).Topics[0].ErrorCode)
	require.Equal(t, int16(0), b.m.Produce(ctx, "t", 0, batch("a", "b", "c", "d"), 1).ErrorCode)
	require.NoError(t, fetchOnce(t, m2, b.m, 2, "t"))
	require.NoError(t, fetchOnce(t, m2, b.m, 2, "t"))
	require.Equal(t, int64(4), b.m.HighWatermark("t", 0))
	l, ok := b.lm.GetLog(storage.TopicPartition{Topic: "t", Partition: 0})
	require.True(t, ok)
	require.NoError(t, l.IncrementLogStartOffset(2))
	// The follower's disk is replaced by an empty one.
	l2, ok := lm2.GetLog(storage.TopicPartition{Topic: "t", Partition: 0})
	require.True(t, ok)
	require.NoError(t, l2.TruncateFullyAndStartAt(0))

	err = fetchOnce(t, m2, b.m, 2, "t")
	require.NoError(t, err)
	pos, _ := m2.FollowerPosition("t", 0)
	assert.Equal(t, int64(2), pos.FetchOffset)
	require.NoError(t, fetchOnce(t, m2, b.m, 2, "t"))
	// The leader's first batch starts at 0, inside which its log start
	// lies: the follower's log holds the whole batch.
	assert.Equal(t, map[int64]string{0: "a", 1: "b", 2: "c", 3: "d"}, logValues(t, lm2, "t"))
	pos, _ = m2.FollowerPosition("t", 0)
	assert.Equal(t, int64(4), pos.FetchOffset)
}
