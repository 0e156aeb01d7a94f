package replica

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/faultline/faultline/broker/controller"
	"github.com/faultline/faultline/broker/metadata"
	"github.com/faultline/faultline/broker/quorum"
	"github.com/faultline/faultline/broker/quorum/quorumtest"
	"github.com/faultline/faultline/broker/storage"
)

// broker is a single node wired the way the node package wires it.
type broker struct {
	lm    *storage.LogManager
	q     *quorumtest.Local
	pub   *metadata.Publisher
	m     *Manager
	c     *controller.Controller
	reg   *prometheus.Registry
	epoch int64
}

func settingsFromConfigs(overrides map[string]string) (Settings, error) {
	s := Settings{Log: storage.DefaultLogConfig(), MinInsyncReplicas: 1}
	if v, ok := overrides["min.insync.replicas"]; ok {
		n, err := strconv.Atoi(v)
		if err != nil {
			return s, fmt.Errorf("min.insync.replicas %q: %w", v, err)
		}
		s.MinInsyncReplicas = n
	}
	if v, ok := overrides["segment.index.bytes"]; ok {
		// Unchecked here, as a broker meets a config an older controller
		// accepted: the log may refuse it.
		n, err := strconv.Atoi(v)
		if err != nil {
			return s, fmt.Errorf("segment.index.bytes %q: %w", v, err)
		}
		s.Log.SegmentIndexBytes = int32(n)
	}
	return s, nil
}

func startBroker(t testing.TB, dir string, incarnation byte) *broker {
	t.Helper()
	ctx := context.Background()
	lm, err := storage.NewLogManager(storage.OS, []string{dir}, storage.ManagerOptions{})
	require.NoError(t, err)
	_, err = lm.Load()
	require.NoError(t, err)
	q, err := quorumtest.OpenLocal(quorumtest.LocalConfig{NodeID: 1, Logs: lm})
	require.NoError(t, err)
	pub := metadata.NewPublisher(metadata.NewImage("cluster"))
	reg := prometheus.NewRegistry()
	m, err := New(Config{NodeID: 1, Logs: lm, TopicSettings: settingsFromConfigs, Registerer: reg})
	require.NoError(t, err)
	pub.Subscribe(m.ApplyImage)
	_, err = quorum.FeedPublisher(q, pub)
	require.NoError(t, err)
	c, err := controller.New(controller.Config{NodeID: 1, ClusterID: "cluster",
		Defaults: controller.Defaults{NumPartitions: 1, ReplicationFactor: 1}, Rand: rand.New(rand.NewPCG(3, 4))}, q)
	require.NoError(t, err)
	epoch, err := c.RegisterBroker(ctx, controller.BrokerRegistration{BrokerID: 1, IncarnationID: metadata.Uuid{incarnation},
		Endpoints: []metadata.Endpoint{{Name: "PLAINTEXT", Host: "localhost", Port: 9092}}})
	require.NoError(t, err)
	reply, err := c.Heartbeat(ctx, controller.Heartbeat{BrokerID: 1, BrokerEpoch: epoch, MetadataOffset: pub.Image().Offset})
	require.NoError(t, err)
	require.False(t, reply.IsFenced, "broker 1 unfenced by its first heartbeat")
	return &broker{lm: lm, q: q, pub: pub, m: m, c: c, reg: reg, epoch: epoch}
}

func (b *broker) stop(t testing.TB) {
	t.Helper()
	b.c.Close()
	require.NoError(t, b.q.Close())
	require.NoError(t, b.lm.Shutdown(b.epoch))
}

func (b *broker) createTopic(t testing.TB, name string, partitions int32, configs map[string]string) {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, partitions, 1
	for k, v := range configs {
		rt.Configs = append(rt.Configs, kmsg.CreateTopicsRequestTopicConfig{Name: k, Value: &v})
	}
	req.Topics = append(req.Topics, rt)
	resp := b.c.CreateTopics(context.Background(), req)
	require.Equal(t, int16(0), resp.Topics[0].ErrorCode, "%v", resp.Topics[0].ErrorMessage)
}

func values(vs ...string) []storage.Record {
	var out []storage.Record
	for _, v := range vs {
		out = append(out, storage.Record{TimestampMs: 1000, Value: []byte(v)})
	}
	return out
}

func batch(vs ...string) []byte { return storage.BuildBatch(values(vs...), storage.BatchOptions{}) }

func idempotent(pid int64, seq int32, vs ...string) []byte {
	return storage.BuildBatch(values(vs...), storage.BatchOptions{Producer: &storage.BatchProducer{ID: pid, Epoch: 0, BaseSequence: seq}})
}

func consumer(offset int64) FetchPartition {
	return FetchPartition{ReplicaID: -1, ReplicaEpoch: -1, CurrentLeaderEpoch: -1, FetchOffset: offset, LastFetchedEpoch: -1, LogStartOffset: -1, MaxBytes: 1 << 20}
}

// readValues decodes fetched batches into offset -> value.
func readValues(t testing.TB, data []byte) map[int64]string {
	t.Helper()
	out := map[int64]string{}
	require.NoError(t, storage.ForEachBatch(data, func(_ storage.BatchHeader, b []byte) error {
		recs, err := storage.DecodeRecords(b)
		for _, r := range recs {
			out[r.Offset] = string(r.Value)
		}
		return err
	}))
	return out
}

func TestManagerProduceFetchRestart(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	b := startBroker(t, dir, 1)
	b.createTopic(t, "orders", 2, nil)
	assert.Equal(t, OnlineReplica, b.m.State("orders", 0))
	assert.Equal(t, OnlineReplica, b.m.State("orders", 1))
	assert.Equal(t, 2.0, gauge(t, b.reg, "kafka_server_replica_manager_leader_count"))
	assert.Equal(t, 0.0, gauge(t, b.reg, "kafka_server_replica_manager_under_replicated_partitions"))
	leaderEpoch := b.pub.Image().Partition("orders", 0).LeaderEpoch

	changed := b.m.Changed()
	res := b.m.Produce(ctx, "orders", 0, batch("a", "b", "c"), -1)
	require.Equal(t, int16(0), res.ErrorCode, res.ErrorMessage)
	assert.Equal(t, int64(0), res.BaseOffset)
	assert.Equal(t, int64(0), res.LogStartOffset)
	select {
	case <-changed:
	default:
		t.Fatal("Changed not closed by an append")
	}
	res = b.m.Produce(ctx, "orders", 0, batch("d"), 1)
	require.Equal(t, int16(0), res.ErrorCode)
	assert.Equal(t, int64(3), res.BaseOffset)
	res = b.m.Produce(ctx, "orders", 0, batch("e"), 0)
	require.Equal(t, int16(0), res.ErrorCode)

	// Idempotent producer: a retry returns the original offset, a gap fails.
	res = b.m.Produce(ctx, "orders", 0, idempotent(7, 0, "p0", "p1"), -1)
	require.Equal(t, int16(0), res.ErrorCode)
	assert.Equal(t, int64(5), res.BaseOffset)
	res = b.m.Produce(ctx, "orders", 0, idempotent(7, 0, "p0", "p1"), -1)
	require.Equal(t, int16(0), res.ErrorCode)
	assert.Equal(t, int64(5), res.BaseOffset, "duplicate gets the original offset")
	res = b.m.Produce(ctx, "orders", 0, idempotent(7, 5, "gap"), -1)
	assert.Equal(t, kerr.OutOfOrderSequenceNumber.Code, res.ErrorCode)
	corrupt := batch("crc")
	corrupt[len(corrupt)-1] ^= 0xff
	res = b.m.Produce(ctx, "orders", 0, corrupt, 1)
	assert.Equal(t, kerr.CorruptMessage.Code, res.ErrorCode)
	assert.Equal(t, kerr.UnknownTopicOrPartition.Code, b.m.Produce(ctx, "nope", 0, batch("x"), 1).ErrorCode)

	f := b.m.Fetch(ctx, "orders", 0, consumer(0))
	require.Equal(t, int16(0), f.ErrorCode)
	assert.Equal(t, int64(7), f.HighWatermark)
	assert.Equal(t, map[int64]string{0: "a", 1: "b", 2: "c", 3: "d", 4: "e", 5: "p0", 6: "p1"}, readValues(t, f.Records))

	stale := consumer(0)
	stale.CurrentLeaderEpoch = leaderEpoch - 1
	if leaderEpoch > 0 {
		assert.Equal(t, kerr.FencedLeaderEpoch.Code, b.m.Fetch(ctx, "orders", 0, stale).ErrorCode)
	}
	future := consumer(0)
	future.CurrentLeaderEpoch = leaderEpoch + 1
	assert.Equal(t, kerr.UnknownLeaderEpoch.Code, b.m.Fetch(ctx, "orders", 0, future).ErrorCode)
	assert.Equal(t, kerr.OffsetOutOfRange.Code, b.m.Fetch(ctx, "orders", 0, consumer(100)).ErrorCode)
	assert.Empty(t, b.m.Fetch(ctx, "orders", 0, consumer(7)).Records, "reading at the high watermark returns nothing")

	off, _, ep, code := b.m.ListOffset(ctx, "orders", 0, -1, -2, 0)
	assert.Equal(t, []any{int64(0), leaderEpoch, int16(0)}, []any{off, ep, code})
	off, _, ep, code = b.m.ListOffset(ctx, "orders", 0, -1, -1, 0)
	assert.Equal(t, []any{int64(7), leaderEpoch, int16(0)}, []any{off, ep, code})
	off, ts, _, code := b.m.ListOffset(ctx, "orders", 0, -1, 1000, 0)
	assert.Equal(t, []any{int64(0), int64(1000), int16(0)}, []any{off, ts, code})
	off, _, _, code = b.m.ListOffset(ctx, "orders", 0, -1, 5000, 0)
	assert.Equal(t, []any{int64(-1), int16(0)}, []any{off, code}, "no record that late")
	off, _, _, code = b.m.ListOffset(ctx, "orders", 0, -1, -3, 0)
	assert.Equal(t, []any{int64(0), int16(0)}, []any{off, code}, "every record has timestamp 1000: the first")

	ep, end, code := b.m.OffsetForLeaderEpoch(ctx, "orders", 0, -1, leaderEpoch)
	assert.Equal(t, []any{leaderEpoch, int64(7), int16(0)}, []any{ep, end, code})

	// Internal writer on the other partition.
	last, err := b.m.AppendInternal(ctx, "orders", 1, values("k1", "k2"))
	require.NoError(t, err)
	assert.Equal(t, int64(1), last)
	var read []string
	require.NoError(t, b.m.ReadCommitted("orders", 1, 1, func(off int64, r storage.Record) error {
		read = append(read, fmt.Sprintf("%d=%s", off, r.Value))
		return nil
	}))
	assert.Equal(t, []string{"1=k2"}, read)
	_, err = b.m.AppendInternal(ctx, "nope", 0, values("x"))
	assert.ErrorIs(t, err, kerr.UnknownTopicOrPartition)

	b.stop(t)

	// Restart: the topic, the data and the producer state survive; the
	// partition is led again at a newer epoch.
	b = startBroker(t, dir, 2)
	defer b.stop(t)
	assert.Equal(t, OnlineReplica, b.m.State("orders", 0))
	newEpoch := b.pub.Image().Partition("orders", 0).LeaderEpoch
	assert.Greater(t, newEpoch, leaderEpoch)
	f = b.m.Fetch(ctx, "orders", 0, consumer(0))
	require.Equal(t, int16(0), f.ErrorCode)
	assert.Equal(t, int64(7), f.HighWatermark)
	assert.Len(t, readValues(t, f.Records), 7)
	res = b.m.Produce(ctx, "orders", 0, idempotent(7, 0, "p0", "p1"), -1)
	assert.Equal(t, int64(5), res.BaseOffset, "duplicate detected after a restart")
	res = b.m.Produce(ctx, "orders", 0, batch("after"), -1)
	assert.Equal(t, int64(7), res.BaseOffset)

	// A follower whose last epoch is the old one and that fetches past that
	// epoch's end is told where it diverged.
	div := consumer(9)
	div.ReplicaID = 1
	div.LastFetchedEpoch = newEpoch - 1
	f = b.m.Fetch(ctx, "orders", 0, div)
	require.Equal(t, int16(0), f.ErrorCode)
	require.NotNil(t, f.DivergingEpoch)
	assert.Equal(t, DivergingEpoch{Epoch: leaderEpoch, EndOffset: 7}, *f.DivergingEpoch)
	assert.Empty(t, f.Records)
	ok := consumer(7)
	ok.ReplicaID = 1
	ok.LastFetchedEpoch = newEpoch
	f = b.m.Fetch(ctx, "orders", 0, ok)
	assert.Nil(t, f.DivergingEpoch)
	assert.Equal(t, map[int64]string{7: "after"}, readValues(t, f.Records))

	// Deleting the topic deletes the logs.
	del := kmsg.NewPtrDeleteTopicsRequest()
	del.TopicNames = []string{"orders"}
	require.Equal(t, int16(0), b.c.DeleteTopics(ctx, del).Topics[0].ErrorCode)
	assert.Equal(t, NonExistentReplica, b.m.State("orders", 0))
	_, exists := b.lm.GetLog(storage.TopicPartition{Topic: "orders", Partition: 0})
	assert.False(t, exists)
	assert.Equal(t, kerr.UnknownTopicOrPartition.Code, b.m.Produce(ctx, "orders", 0, batch("x"), 1).ErrorCode)
}

// counter reads one counter of a registry.
func counter(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}

// gauge reads one gauge of a registry.
func gauge(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() == name {
			require.Len(t, mf.GetMetric(), 1)
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}

func TestManagerNotEnoughReplicas(t *testing.T) {
	ctx := context.Background()
	b := startBroker(t, t.TempDir(), 1)
	defer b.stop(t)
	b.createTopic(t, "strict", 1, map[string]string{"min.insync.replicas": "2"})
	res := b.m.Produce(ctx, "strict", 0, batch("x"), -1)
	assert.Equal(t, kerr.NotEnoughReplicas.Code, res.ErrorCode)
	assert.NotEmpty(t, res.ErrorMessage)
	assert.Equal(t, int64(0), b.m.HighWatermark("strict", 0))
	f := b.m.Fetch(ctx, "strict", 0, consumer(0))
	assert.Empty(t, f.Records, "nothing was written")
	res = b.m.Produce(ctx, "strict", 0, batch("x"), 1)
	assert.Equal(t, int16(0), res.ErrorCode, "acks=1 does not need the ISR")
}

// leadRF2 registers a second broker, which never fetches, and has b lead
// topic rf2 of partitions partitions, each replicated to both; it returns
// the second broker's epoch.
func leadRF2(t *testing.T, b *broker, partitions int32) int64 {
	t.Helper()
	ctx := context.Background()
	epoch2, err := b.c.RegisterBroker(ctx, controller.BrokerRegistration{BrokerID: 2, IncarnationID: metadata.Uuid{9}})
	require.NoError(t, err)
	_, err = b.c.Heartbeat(ctx, controller.Heartbeat{BrokerID: 2, BrokerEpoch: epoch2, MetadataOffset: b.pub.Image().Offset})
	require.NoError(t, err)
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "rf2", -1, -1
	for p := range partitions {
		rt.ReplicaAssignment = append(rt.ReplicaAssignment, kmsg.CreateTopicsRequestTopicReplicaAssignment{Partition: p, Replicas: []int32{1, 2}})
	}
	req.Topics = append(req.Topics, rt)
	require.Equal(t, int16(0), b.c.CreateTopics(ctx, req).Topics[0].ErrorCode)
	for p := range partitions {
		require.Equal(t, OnlineReplica, b.m.State("rf2", p))
	}
	return epoch2
}

// TestManagerFollowerAdvancesHW exercises the multi-replica path of the
// leader with a second, simulated broker that fetches as a follower.
func TestManagerFollowerAdvancesHW(t *testing.T) {
	ctx := context.Background()
	b := startBroker(t, t.TempDir(), 1)
	defer b.stop(t)
	epoch2 := leadRF2(t, b, 1)

	// Nobody fetches: acks=all times out, the record stays invisible.
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	res := b.m.Produce(short, "rf2", 0, batch("a"), -1)
	cancel()
	assert.Equal(t, kerr.RequestTimedOut.Code, res.ErrorCode)
	assert.Empty(t, b.m.Fetch(ctx, "rf2", 0, consumer(0)).Records)
	// WaitBound bounds the wait as a deadline would, armed only here,
	// where the append has to wait.
	start := time.Now()
	res = b.m.Produce(WaitBound(ctx, 20*time.Millisecond), "rf2", 0, batch("bounded"), -1)
	assert.Equal(t, kerr.RequestTimedOut.Code, res.ErrorCode)
	assert.Less(t, time.Since(start), 10*time.Second, "the bound ends the wait")

	// A produce waits; the follower's fetch at the end moves the HW.
	done := make(chan ProduceResult)
	go func() { done <- b.m.Produce(ctx, "rf2", 0, batch("b"), -1) }()
	follower := consumer(0)
	follower.ReplicaID = 2
	require.Eventually(t, func() bool {
		f := b.m.Fetch(ctx, "rf2", 0, follower)
		if f.ErrorCode != 0 {
			return false
		}
		follower.FetchOffset += int64(len(readValues(t, f.Records)))
		return follower.FetchOffset >= 3 && b.m.HighWatermark("rf2", 0) == 3
	}, 5*time.Second, time.Millisecond)
	select {
	case r := <-done:
		assert.Equal(t, int16(0), r.ErrorCode)
		assert.Equal(t, int64(2), r.BaseOffset)
	case <-time.After(5 * time.Second):
		t.Fatal("acks=all produce not released by the follower's fetch")
	}
	assert.Len(t, readValues(t, b.m.Fetch(ctx, "rf2", 0, consumer(0)).Records), 3)

	// The follower is caught up: no ISR change. Once the leader is ahead
	// and the follower silent for longer than replica.lag.time.max.ms, the
	// leader proposes to drop it.
	assert.Empty(t, b.m.ISRChanges(time.Now().UnixMilli()))
	require.Equal(t, int16(0), b.m.Produce(ctx, "rf2", 0, batch("late"), 1).ErrorCode)
	changes := b.m.ISRChanges(time.Now().Add(31 * time.Second).UnixMilli())
	require.Len(t, changes, 1)
	assert.Equal(t, []int32{1}, changes[0].NewISR)
	assert.Equal(t, b.pub.Image().Topic("rf2").ID, changes[0].TopicID)

	// Fencing the follower shrinks the ISR to the leader, which releases
	// the next write at once.
	_, err := b.c.Heartbeat(ctx, controller.Heartbeat{BrokerID: 2, BrokerEpoch: epoch2, MetadataOffset: b.pub.Image().Offset, WantFence: true})
	require.NoError(t, err)
	assert.Equal(t, []int32{1}, b.pub.Image().Partition("rf2", 0).ISR)
	res = b.m.Produce(ctx, "rf2", 0, batch("c"), -1)
	assert.Equal(t, int16(0), res.ErrorCode)
	assert.Equal(t, 1.0, gauge(t, b.reg, "kafka_server_replica_manager_under_replicated_partitions"))
	assert.Equal(t, 1.0, counter(t, b.reg, "kafka_server_replica_manager_isr_shrinks_total"))
}

// TestWaitBoundIsOneBoundForTheCall: the markers of one WriteTxnMarkers
// call share the WaitBound of its context: with no follower fetching,
// three markers time out together at the bound, not one after another.
func TestWaitBoundIsOneBoundForTheCall(t *testing.T) {
	ctx := context.Background()
	b := startBroker(t, t.TempDir(), 1)
	defer b.stop(t)
	leadRF2(t, b, 3)
	var markers []TxnMarker
	for p := range int32(3) {
		markers = append(markers, TxnMarker{Topic: "rf2", Partition: p, ProducerID: 9, Commit: true})
	}
	const bound = 300 * time.Millisecond
	start := time.Now()
	codes := b.m.WriteTxnMarkers(WaitBound(ctx, bound), markers)
	took := time.Since(start)
	for _, code := range codes {
		assert.Equal(t, kerr.RequestTimedOut.Code, code)
	}
	assert.GreaterOrEqual(t, took, bound)
	assert.Less(t, took, 2*bound, "one bound for the call's waits, not one per marker")
}

func TestManagerDeleteStrayLogs(t *testing.T) {
	b := startBroker(t, t.TempDir(), 1)
	defer b.stop(t)
	b.createTopic(t, "kept", 1, nil)
	ghost := storage.TopicPartition{Topic: "ghost", Partition: 0}
	_, err := b.lm.GetOrCreateLog(ghost, storage.DefaultLogConfig())
	require.NoError(t, err)
	assert.Equal(t, []storage.TopicPartition{ghost}, b.m.DeleteStrayLogs(b.pub.Image()))
	logs := b.lm.Logs()
	assert.NotContains(t, logs, ghost)
	assert.Contains(t, logs, storage.TopicPartition{Topic: "kept", Partition: 0})
	assert.Contains(t, logs, quorum.MetadataPartition)
	assert.Equal(t, OnlineReplica, b.m.State("kept", 0))
}

func TestManagerTooLarge(t *testing.T) {
	ctx := context.Background()
	b := startBroker(t, t.TempDir(), 1)
	defer b.stop(t)
	b.createTopic(t, "small", 1, nil)
	l, ok := b.lm.GetLog(storage.TopicPartition{Topic: "small", Partition: 0})
	require.True(t, ok)
	cfg := l.Config()
	cfg.MaxMessageBytes = 200
	cfg.SegmentBytes = 1000
	require.NoError(t, l.SetConfig(cfg))
	big := strings.Repeat("x", 300)
	assert.Equal(t, kerr.MessageTooLarge.Code, b.m.Produce(ctx, "small", 0, batch(big), 1).ErrorCode)
	two := append(batch("a", strings.Repeat("y", 100)), batch(strings.Repeat("z", 100))...)
	assert.Equal(t, int16(0), b.m.Produce(ctx, "small", 0, two, 1).ErrorCode)
	many := bytes.Repeat(batch(strings.Repeat("w", 100)), 8)
	assert.Equal(t, kerr.RecordListTooLarge.Code, b.m.Produce(ctx, "small", 0, many, 1).ErrorCode)
}

func TestManagerBadTopicConfigLeavesPartitionOut(t *testing.T) {
	ctx := context.Background()
	b := startBroker(t, t.TempDir(), 1)
	defer b.stop(t)
	b.createTopic(t, "bad", 1, map[string]string{"min.insync.replicas": "many"})
	assert.Equal(t, NonExistentReplica, b.m.State("bad", 0))
	assert.Equal(t, kerr.NotLeaderForPartition.Code, b.m.Produce(ctx, "bad", 0, batch("x"), 1).ErrorCode)
	// Other topics are unaffected, and the bad one is retried with every
	// image (and fails again).
	b.createTopic(t, "good", 1, nil)
	assert.Equal(t, OnlineReplica, b.m.State("good", 0))
	assert.Equal(t, NonExistentReplica, b.m.State("bad", 0))
}

// TestManagerConfigTheLogRefuses: a topic config the partition's log
// refuses leaves the log's settings as they were, logged, and the
// partition serving; a later config it accepts applies.
func TestManagerConfigTheLogRefuses(t *testing.T) {
	ctx := context.Background()
	b := startBroker(t, t.TempDir(), 1)
	defer b.stop(t)
	b.createTopic(t, "t", 1, nil)
	l, ok := b.lm.GetLog(storage.TopicPartition{Topic: "t", Partition: 0})
	require.True(t, ok)
	before := l.Config()
	alter := func(name, value string) {
		req := kmsg.NewPtrIncrementalAlterConfigsRequest()
		res := kmsg.NewIncrementalAlterConfigsRequestResource()
		res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeTopic, "t"
		res.Configs = []kmsg.IncrementalAlterConfigsRequestResourceConfig{{Name: name, Op: kmsg.IncrementalAlterConfigOpSet, Value: &value}}
		req.Resources = append(req.Resources, res)
		resp := b.c.IncrementalAlterConfigs(ctx, req)
		require.Zero(t, resp.Resources[0].ErrorCode, "%v", resp.Resources[0].ErrorMessage)
	}
	alter("segment.index.bytes", "8")
	require.Eventually(t, func() bool { return b.pub.Image().Topic("t").Configs["segment.index.bytes"] == "8" }, 10*time.Second, time.Millisecond)
	assert.Equal(t, before, l.Config(), "the log keeps its settings")
	assert.Equal(t, OnlineReplica, b.m.State("t", 0))
	assert.Zero(t, b.m.Produce(ctx, "t", 0, batch("x"), -1).ErrorCode, "the partition still serves")

	// Role changes still apply to the topic: fenced, its partition goes
	// offline; unfenced, it leads again.
	heartbeat := func(fence bool) {
		_, err := b.c.Heartbeat(ctx, controller.Heartbeat{BrokerID: 1, BrokerEpoch: b.epoch, MetadataOffset: b.pub.Image().Offset, WantFence: fence})
		require.NoError(t, err)
	}
	heartbeat(true)
	require.Eventually(t, func() bool { return b.m.State("t", 0) == OfflineReplica }, 10*time.Second, time.Millisecond,
		"a refused config must not freeze the partition's role")
	heartbeat(false)
	require.Eventually(t, func() bool { return b.m.State("t", 0) == OnlineReplica }, 10*time.Second, time.Millisecond)
	alter("segment.index.bytes", "4096")
	require.Eventually(t, func() bool { return l.Config().SegmentIndexBytes == 4096 }, 10*time.Second, time.Millisecond)
	assert.Equal(t, OnlineReplica, b.m.State("t", 0))

	// A topic born with such a config still gets its replica, on the
	// default log settings, and serves.
	b.createTopic(t, "born", 1, map[string]string{"segment.index.bytes": "8", "min.insync.replicas": "1"})
	require.Eventually(t, func() bool { return b.m.State("born", 0) == OnlineReplica }, 10*time.Second, time.Millisecond)
	assert.Zero(t, b.m.Produce(ctx, "born", 0, batch("y"), -1).ErrorCode)
	born, ok := b.lm.GetLog(storage.TopicPartition{Topic: "born", Partition: 0})
	require.True(t, ok)
	assert.Equal(t, storage.DefaultLogConfig().SegmentIndexBytes, born.Config().SegmentIndexBytes)
}

func TestManagerFollowerThenLeader(t *testing.T) {
	ctx := context.Background()
	b := startBroker(t, t.TempDir(), 1)
	defer b.stop(t)
	epoch2, err := b.c.RegisterBroker(ctx, controller.BrokerRegistration{BrokerID: 2, IncarnationID: metadata.Uuid{9}})
	require.NoError(t, err)
	_, err = b.c.Heartbeat(ctx, controller.Heartbeat{BrokerID: 2, BrokerEpoch: epoch2, MetadataOffset: b.pub.Image().Offset})
	require.NoError(t, err)
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "led-elsewhere", -1, -1
	rt.ReplicaAssignment = []kmsg.CreateTopicsRequestTopicReplicaAssignment{{Partition: 0, Replicas: []int32{2, 1}}}
	req.Topics = append(req.Topics, rt)
	require.Equal(t, int16(0), b.c.CreateTopics(ctx, req).Topics[0].ErrorCode)

	assert.Equal(t, OnlineFetchingReplica, b.m.State("led-elsewhere", 0))
	assert.Equal(t, kerr.NotLeaderForPartition.Code, b.m.Produce(ctx, "led-elsewhere", 0, batch("x"), 1).ErrorCode)
	assert.Equal(t, kerr.NotLeaderForPartition.Code, b.m.Fetch(ctx, "led-elsewhere", 0, consumer(0)).ErrorCode)
	_, _, _, code := b.m.ListOffset(ctx, "led-elsewhere", 0, -1, -1, 0)
	assert.Equal(t, kerr.NotLeaderForPartition.Code, code)

	// Broker 2's session ends: this broker, in the ISR, takes over with a
	// new leader epoch that starts at its log end.
	_, err = b.c.Heartbeat(ctx, controller.Heartbeat{BrokerID: 2, BrokerEpoch: epoch2, MetadataOffset: b.pub.Image().Offset, WantFence: true})
	require.NoError(t, err)
	p := b.pub.Image().Partition("led-elsewhere", 0)
	require.Equal(t, int32(1), p.Leader)
	assert.Equal(t, OnlineReplica, b.m.State("led-elsewhere", 0))
	res := b.m.Produce(ctx, "led-elsewhere", 0, batch("x"), -1)
	require.Equal(t, int16(0), res.ErrorCode)
	l, ok := b.lm.GetLog(storage.TopicPartition{Topic: "led-elsewhere", Partition: 0})
	require.True(t, ok)
	assert.Equal(t, []storage.EpochEntry{{Epoch: p.LeaderEpoch, StartOffset: 0}}, l.EpochEntries())
}
