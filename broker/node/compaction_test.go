package node

import (
	"context"
	"fmt"
	"math/rand"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/faultline/faultline/broker/group"
	"github.com/faultline/faultline/broker/storage"
)

// TestCompactedTopicServesTheLatestValuePerKey writes keyed upserts and
// tombstones with a kgo producer to a compacted topic, lets the broker's
// cleaner thread compact it, and reads it back from the start with a kgo
// consumer: every key's latest value (or its tombstone) is there, and the
// older values are gone.
func TestCompactedTopicServesTheLatestValuePerKey(t *testing.T) {
	n := startNode(t, map[string]string{"log.cleaner.backoff.ms": "50"})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cfg := map[string]*string{}
	for k, v := range map[string]string{"cleanup.policy": "compact", "segment.bytes": "8192", "min.cleanable.dirty.ratio": "0.01"} {
		cfg[k] = &v
	}
	adm := kadm.NewClient(client(t, n))
	resp, err := adm.CreateTopic(ctx, 1, 1, cfg, "kv")
	require.NoError(t, err)
	require.NoError(t, resp.Err)

	cl := client(t, n, kgo.DefaultProduceTopic("kv"), kgo.ProducerLinger(0))
	rng := rand.New(rand.NewSource(7))
	latest := map[string]*string{}
	const writes, keys = 6000, 80
	recs := make([]*kgo.Record, 0, writes)
	// payload is a lower bound on the bytes the writes take on disk. The
	// log's size cannot serve as the "before": the cleaner thread may have
	// compacted most of the topic by the time the last write is answered.
	payload := int64(0)
	for i := 0; i < writes; i++ {
		k := fmt.Sprintf("key-%d", rng.Intn(keys))
		r := &kgo.Record{Key: []byte(k)}
		if rng.Intn(8) > 0 {
			v := fmt.Sprintf("%s@%d", k, i)
			r.Value = []byte(v)
			latest[k] = &v
		} else {
			latest[k] = nil
		}
		payload += int64(len(r.Key) + len(r.Value))
		recs = append(recs, r)
	}
	for i := 0; i < len(recs); i += 100 {
		require.NoError(t, cl.ProduceSync(ctx, recs[i:min(i+100, len(recs))]...).FirstErr())
	}
	// A keyless record is refused, as Kafka does for a compacted topic.
	assert.Error(t, cl.ProduceSync(ctx, &kgo.Record{Value: []byte("no key")}).FirstErr())

	l, ok := n.logs.GetLog(storage.TopicPartition{Topic: "kv", Partition: 0})
	require.True(t, ok)
	require.True(t, l.Config().Compacts())
	require.Eventually(t, func() bool { return l.Size() < payload/3 }, 30*time.Second, 20*time.Millisecond,
		"the cleaner thread compacts the topic")

	end := listEnd(t, n, "kv")
	consumer := client(t, n, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"kv": {0: kgo.NewOffset().AtStart()}}))
	got := map[string]*string{}
	read := 0
	for i := 0; ; i++ {
		require.Less(t, i, 1000, "poll loop bounded")
		fs := consumer.PollFetches(ctx)
		require.NoError(t, fs.Err0())
		done := false
		fs.EachRecord(func(r *kgo.Record) {
			read++
			if r.Value == nil {
				got[string(r.Key)] = nil
			} else {
				v := string(r.Value)
				got[string(r.Key)] = &v
			}
			done = done || r.Offset == end-1
		})
		if done {
			break
		}
	}
	assert.Equal(t, latest, got, "every key's latest value, tombstones included")
	assert.Less(t, read, writes/3, "older values are gone")
	assert.GreaterOrEqual(t, read, len(latest))
}

// TestConsumerOffsetsTopicIsCompacted checks that __consumer_offsets is
// created with cleanup.policy=compact, as Kafka's is.
func TestConsumerOffsetsTopicIsCompacted(t *testing.T) {
	n := startNode(t, map[string]string{"offsets.topic.num.partitions": "1"})
	createTopic(t, n, "orders", 1)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	adm := kadm.NewClient(client(t, n))
	offsets := kadm.Offsets{}
	offsets.Add(kadm.Offset{Topic: "orders", Partition: 0, At: 0, LeaderEpoch: -1})
	_, err := adm.CommitOffsets(ctx, "g", offsets)
	require.NoError(t, err)
	l, ok := n.logs.GetLog(storage.TopicPartition{Topic: group.OffsetsTopic, Partition: 0})
	require.True(t, ok)
	assert.Equal(t, storage.CleanupCompact, l.Config().CleanupPolicy)
}
