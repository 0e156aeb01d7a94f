package node

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/faultline/faultline/broker/storage"
	"github.com/faultline/faultline/internal/testutil"
)

// client returns a kgo client for n that is closed when the test ends.
func client(t *testing.T, n *Node, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(n.Addr().String())}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	return cl
}

func createTopic(t *testing.T, n *Node, topic string, partitions int32) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := kadm.NewClient(client(t, n)).CreateTopic(ctx, partitions, 1, nil, topic)
	require.NoError(t, err)
	require.NoError(t, resp.Err)
}

// produceSync produces values to topic (partition 0 unless the record says
// otherwise) and returns the records as acknowledged.
func produceSync(t *testing.T, cl *kgo.Client, topic string, values []string) []*kgo.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	recs := make([]*kgo.Record, len(values))
	for i, v := range values {
		recs[i] = &kgo.Record{Topic: topic, Value: []byte(v)}
	}
	require.NoError(t, cl.ProduceSync(ctx, recs...).FirstErr())
	return recs
}

// consumeN reads n records of topic from the start with a direct consumer.
func consumeN(t *testing.T, n *Node, topic string, count int) []*kgo.Record {
	t.Helper()
	cl := client(t, n, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out []*kgo.Record
	for len(out) < count {
		fs := cl.PollFetches(ctx)
		require.NoError(t, fs.Err0(), "after %d of %d records", len(out), count)
		out = append(out, fs.Records()...)
	}
	return out
}

func values(n int, prefix string) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = prefix + strconv.Itoa(i)
	}
	return out
}

func TestProduceConsume10000InOrder(t *testing.T) {
	n := startNode(t, nil)
	createTopic(t, n, "orders", 1)
	cl := client(t, n, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DefaultProduceTopic("orders"))
	want := values(10000, "v")
	acked := produceSync(t, cl, "orders", want)
	for i, r := range acked {
		require.Equal(t, int64(i), r.Offset, "record %d acked at offset %d", i, r.Offset)
	}
	got := consumeN(t, n, "orders", len(want))
	require.Len(t, got, len(want))
	for i, r := range got {
		assert.Equal(t, int64(i), r.Offset)
		assert.Equal(t, want[i], string(r.Value))
	}

	body := scrape(t, n)
	assert.Contains(t, body, "kafka_server_replica_manager_leader_count 1\n")
	assert.Contains(t, body, "kafka_server_replica_manager_partition_count 1\n")
	assert.Regexp(t, `kafka_network_requests_total\{api="Produce"\} [1-9]`, body)
	assert.Regexp(t, `kafka_network_request_latency_seconds_count\{api="Fetch"\} [1-9]`, body)
}

func TestAutoCreateTopicOnProduce(t *testing.T) {
	n := startNode(t, map[string]string{"num.partitions": "2"})
	cl := client(t, n, kgo.AllowAutoTopicCreation())
	produceSync(t, cl, "auto-created", values(10, "a"))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	topics, err := kadm.NewClient(cl).ListTopics(ctx, "auto-created")
	require.NoError(t, err)
	require.True(t, topics.Has("auto-created"))
	assert.Len(t, topics["auto-created"].Partitions, 2)
	assert.Len(t, consumeN(t, n, "auto-created", 10), 10)
}

func TestAutoCreateDisabled(t *testing.T) {
	n := startNode(t, map[string]string{"auto.create.topics.enable": "false"})
	cl := client(t, n, kgo.AllowAutoTopicCreation())
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	err := cl.ProduceSync(ctx, &kgo.Record{Topic: "nope", Value: []byte("x")}).FirstErr()
	require.Error(t, err)
	topics, err := kadm.NewClient(client(t, n)).ListTopics(context.Background())
	require.NoError(t, err)
	assert.False(t, topics.Has("nope"))
}

func TestGroupConsumerResumesAtCommittedOffset(t *testing.T) {
	n := startNode(t, nil)
	createTopic(t, n, "events", 3)
	produceSync(t, client(t, n, kgo.RecordPartitioner(kgo.RoundRobinPartitioner())), "events", values(300, "e"))

	consume := func(limit int) []*kgo.Record {
		cl, err := kgo.NewClient(
			kgo.SeedBrokers(n.Addr().String()),
			kgo.ConsumerGroup("g1"),
			kgo.ConsumeTopics("events"),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			kgo.DisableAutoCommit(),
		)
		require.NoError(t, err)
		defer cl.Close()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		var got []*kgo.Record
		for len(got) < limit {
			fs := cl.PollRecords(ctx, limit-len(got))
			require.NoError(t, fs.Err0())
			got = append(got, fs.Records()...)
		}
		require.NoError(t, cl.CommitRecords(ctx, got...))
		cl.LeaveGroup()
		return got
	}
	first := consume(120)
	second := consume(180)
	seen := map[string]int{}
	for _, r := range append(first, second...) {
		seen[string(r.Value)]++
	}
	assert.Len(t, seen, 300, "every record once across the two consumers")
	for v, c := range seen {
		assert.Equal(t, 1, c, "value %s consumed %d times", v, c)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	offsets, err := kadm.NewClient(client(t, n)).FetchOffsets(ctx, "g1")
	require.NoError(t, err)
	var total int64
	offsets.Each(func(o kadm.OffsetResponse) { total += o.At })
	assert.Equal(t, int64(300), total, "committed offsets sum to the records consumed")
}

func TestIdempotentRetriesDoNotDuplicate(t *testing.T) {
	n := startNode(t, nil)
	createTopic(t, n, "idem", 1)
	dropper := testutil.NewResponseDropper(0) // Produce
	cl := client(t, n,
		kgo.Dialer(dropper.DialContext),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.DefaultProduceTopic("idem"),
		kgo.RetryBackoffFn(func(int) time.Duration { return 10 * time.Millisecond }),
		kgo.MetadataMinAge(10*time.Millisecond),
	)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const total = 200
	var wg sync.WaitGroup
	errs := make(chan error, total)
	for i := range total {
		if i%20 == 10 {
			dropper.Arm(1)
		}
		wg.Add(1)
		cl.Produce(ctx, &kgo.Record{Value: fmt.Appendf(nil, "i%d", i)}, func(_ *kgo.Record, err error) {
			defer wg.Done()
			if err != nil {
				errs <- err
			}
		})
		if i%20 == 10 {
			require.NoError(t, cl.Flush(ctx))
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.Positive(t, dropper.Dropped(), "the test must lose produce responses to force retries")

	got := consumeN(t, n, "idem", total)
	seen := map[string]int64{}
	for i, r := range got {
		assert.Equal(t, int64(i), r.Offset, "offsets are consecutive")
		if prev, dup := seen[string(r.Value)]; dup {
			t.Errorf("value %s at offsets %d and %d", r.Value, prev, r.Offset)
		}
		seen[string(r.Value)] = r.Offset
	}
	assert.Len(t, seen, total)
	end := listEnd(t, n, "idem")
	assert.Equal(t, int64(total), end, "log end offset: no duplicate appended")
}

// listEnd returns the end offset of partition 0 of topic.
func listEnd(t *testing.T, n *Node, topic string) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ends, err := kadm.NewClient(client(t, n)).ListEndOffsets(ctx, topic)
	require.NoError(t, err)
	o, ok := ends.Lookup(topic, 0)
	require.True(t, ok)
	require.NoError(t, o.Err)
	return o.Offset
}

func TestRestartKeepsTopicsAndData(t *testing.T) {
	dir := t.TempDir()
	props := map[string]string{"log.dirs": filepath.Join(dir, "data")}
	n := startNode(t, props)
	createTopic(t, n, "durable", 2)
	produceSync(t, client(t, n, kgo.RecordPartitioner(kgo.RoundRobinPartitioner())), "durable", values(100, "d"))
	stopNode(t, n)

	n2, logs := startNodeLogs(t, props)
	assert.NotContains(t, logs.String(), "Found unclean shutdown file marker")
	got := consumeN(t, n2, "durable", 100)
	seen := map[string]bool{}
	for _, r := range got {
		seen[string(r.Value)] = true
	}
	assert.Len(t, seen, 100)
	produceSync(t, client(t, n2, kgo.RecordPartitioner(kgo.RoundRobinPartitioner())), "durable", values(10, "after"))
	assert.Len(t, consumeN(t, n2, "durable", 110), 110)
}

func TestAdminAPIs(t *testing.T) {
	n := startNode(t, nil)
	adm := kadm.NewClient(client(t, n))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	retention := "3600000"
	created, err := adm.CreateTopic(ctx, 2, 1, map[string]*string{"retention.ms": &retention}, "admin")
	require.NoError(t, err)
	require.NoError(t, created.Err)
	bad := "-7"
	_, err = adm.CreateTopic(ctx, 1, 1, map[string]*string{"segment.bytes": &bad}, "bad-config")
	assert.ErrorIs(t, err, kerr.InvalidConfig, "an invalid topic config is refused")

	topicCfgs, err := adm.DescribeTopicConfigs(ctx, "admin")
	require.NoError(t, err)
	rc, err := topicCfgs.On("admin", nil)
	require.NoError(t, err)
	values := map[string]string{}
	for _, c := range rc.Configs {
		values[c.Key] = c.MaybeValue()
	}
	assert.Equal(t, "3600000", values["retention.ms"])
	assert.Equal(t, "1073741824", values["segment.bytes"], "defaults come from the broker's log.segment.bytes")

	brokerCfgs, err := adm.DescribeBrokerConfigs(ctx, 1)
	require.NoError(t, err)
	require.Len(t, brokerCfgs, 1)
	found := false
	for _, c := range brokerCfgs[0].Configs {
		if c.Key == "node.id" {
			found = true
			assert.Equal(t, "1", c.MaybeValue())
		}
	}
	assert.True(t, found, "node.id among the broker configs")

	meta, err := adm.BrokerMetadata(ctx)
	require.NoError(t, err)
	require.Len(t, meta.Brokers, 1)
	assert.Equal(t, int32(1), meta.Controller)
	assert.Equal(t, n.Addr().(*net.TCPAddr).Port, int(meta.Brokers[0].Port), "the bound port is advertised")

	_, err = adm.CreatePartitions(ctx, 2, "admin")
	require.NoError(t, err)
	topics, err := adm.ListTopics(ctx, "admin")
	require.NoError(t, err)
	assert.Len(t, topics["admin"].Partitions, 4)

	deleted, err := adm.DeleteTopic(ctx, "admin")
	require.NoError(t, err)
	require.NoError(t, deleted.Err)
	topics, err = adm.ListTopics(ctx)
	require.NoError(t, err)
	assert.False(t, topics.Has("admin"))
}

func TestRestartAppliesTopicConfigsToLoadedLogs(t *testing.T) {
	dir := t.TempDir()
	props := map[string]string{"log.dirs": filepath.Join(dir, "data"), "log.retention.hours": "1"}
	n := startNode(t, props)
	segment := "2048"
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := kadm.NewClient(client(t, n)).CreateTopic(ctx, 1, 1, map[string]*string{"segment.bytes": &segment}, "small-segments")
	require.NoError(t, err)
	require.NoError(t, resp.Err)
	stopNode(t, n)

	n2 := startNode(t, props)
	l, ok := n2.logs.GetLog(storage.TopicPartition{Topic: "small-segments", Partition: 0})
	require.True(t, ok)
	assert.Equal(t, int64(2048), l.Config().SegmentBytes, "the topic override survives a restart")
	assert.Equal(t, int64(3600000), l.Config().RetentionMs, "other keys keep the broker default")
	meta, ok := n2.logs.GetLog(storage.TopicPartition{Topic: "__cluster_metadata", Partition: 0})
	require.True(t, ok)
	assert.Equal(t, int64(-1), meta.Config().RetentionMs, "the metadata log is never deleted by retention")
	assert.Equal(t, int64(-1), meta.Config().RetentionBytes)
}

// TestAckedOffsetsHoldTheirValues produces from several goroutines to
// several partitions (so requests carry many partitions) and checks that
// every acknowledged (partition, offset) holds the value acknowledged there,
// the invariant the harness's inconsistent-offsets check relies on.
func TestAckedOffsetsHoldTheirValues(t *testing.T) {
	n := startNode(t, nil)
	const partitions = 4
	createTopic(t, n, "multi", partitions)
	cl := client(t, n, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DefaultProduceTopic("multi"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	type at struct {
		partition int32
		offset    int64
	}
	var mu sync.Mutex
	acked := map[at]string{}
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 500 {
				v := fmt.Sprintf("w%d-%d", w, i)
				cl.Produce(ctx, &kgo.Record{Partition: int32(i % partitions), Value: []byte(v)}, func(r *kgo.Record, err error) {
					if !assert.NoError(t, err) {
						return
					}
					mu.Lock()
					defer mu.Unlock()
					k := at{r.Partition, r.Offset}
					if prev, dup := acked[k]; dup {
						t.Errorf("offset %d of partition %d acknowledged for %s and %s", r.Offset, r.Partition, prev, v)
					}
					acked[k] = v
				})
			}
		}()
	}
	wg.Wait()
	require.NoError(t, cl.Flush(ctx))
	got := consumeN(t, n, "multi", 2000)
	require.Len(t, got, 2000)
	for _, r := range got {
		assert.Equal(t, acked[at{r.Partition, r.Offset}], string(r.Value), "partition %d offset %d", r.Partition, r.Offset)
	}
}
