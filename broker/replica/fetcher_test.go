package replica

import (
	"context"
	"errors"
	"math"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/faultline/faultline/broker/metadata"
	"github.com/faultline/faultline/broker/storage"
)

// followerOf makes node 2 a follower of node 1 for topic-0 at epoch 0,
// with no network: the test hands it fetch answers.
func followerOf(tb testing.TB) (*Manager, *storage.Log) {
	tb.Helper()
	lm, err := storage.NewLogManager(storage.OS, []string{tb.TempDir()}, storage.ManagerOptions{})
	require.NoError(tb, err)
	_, err = lm.Load()
	require.NoError(tb, err)
	tb.Cleanup(func() { require.NoError(tb, lm.Shutdown(0)) })
	return followerOn(tb, lm)
}

// followerOn is followerOf on a loaded LogManager the caller owns.
func followerOn(tb testing.TB, lm *storage.LogManager) (*Manager, *storage.Log) {
	tb.Helper()
	m, err := New(Config{NodeID: 2, Logs: lm})
	require.NoError(tb, err)
	im := metadata.NewImage("cluster")
	tp := &metadata.Topic{Name: "topic", ID: metadata.Uuid{1}, Partitions: []metadata.Partition{{Partition: 0, Replicas: []int32{1, 2}, ISR: []int32{1, 2}, Leader: 1}}}
	im.Topics["topic"], im.TopicsByID[tp.ID] = tp, tp
	im.Brokers[1] = metadata.Broker{ID: 1, Host: "127.0.0.1", Port: 1}
	m.ApplyImage(nil, im)
	l, ok := lm.GetLog(storage.TopicPartition{Topic: "topic", Partition: 0})
	require.True(tb, ok)
	return m, l
}

// FuzzApplyFetchResponse feeds arbitrary leader answers (records, high
// watermark, diverging epoch, error, log start) to a follower: it must
// never panic, and the log must stay consistent: start <= HW <= end.
func FuzzApplyFetchResponse(f *testing.F) {
	f.Add(batch("a", "b"), int64(2), int32(-1), int64(-1), int16(0), int64(0))
	f.Add([]byte{}, int64(0), int32(0), int64(0), int16(0), int64(0))
	f.Add([]byte{}, int64(0), int32(-1), int64(-1), kerr.OffsetOutOfRange.Code, int64(7))
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 9, 0, 0, 0, 1}, int64(99), int32(-1), int64(-1), int16(0), int64(0))
	m, l := followerOf(f)
	f.Fuzz(func(t *testing.T, records []byte, hw int64, divEpoch int32, divEnd int64, code int16, logStart int64) {
		res := LeaderData{ErrorCode: code, HighWatermark: hw, LogStartOffset: logStart, Records: append([]byte(nil), records...)}
		if divEpoch >= 0 || divEnd >= 0 {
			res.DivergingEpoch = &DivergingEpoch{Epoch: divEpoch, EndOffset: divEnd}
		}
		_ = m.ApplyFetchResponse("topic", 0, 0, res)
		start, end, h := l.LogStartOffset(), l.LogEndOffset(), l.HighWatermark()
		if start > end || h > end || h < 0 {
			t.Fatalf("inconsistent log after a fetch answer: start %d, HW %d, end %d", start, h, end)
		}
		if _, ok := m.FollowerPosition("topic", 0); !ok {
			t.Fatal("the follower lost its role")
		}
	})
}

// stubDialer answers every fetch with a fixed response or error.
type stubDialer struct {
	resp kmsg.Response
	err  error
	reqs chan *kmsg.FetchRequest
}

func (d *stubDialer) Dial(context.Context, int32, string) (BrokerClient, error) { return d, nil }

func (d *stubDialer) Request(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	select {
	case d.reqs <- req.(*kmsg.FetchRequest):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return d.resp, d.err
}

func (d *stubDialer) Close() {}

// TestFetcherRequest: the fetch carries the follower's identity, position
// and limits, and a refused partition is not asked for again until the
// next image.
func TestFetcherRequest(t *testing.T) {
	m, _ := followerOf(t)
	resp := kmsg.NewPtrFetchResponse()
	rt := kmsg.NewFetchResponseTopic()
	rt.Topic, rt.TopicID = "topic", [16]byte{1}
	rp := kmsg.NewFetchResponseTopicPartition()
	rp.ErrorCode = kerr.FencedLeaderEpoch.Code
	rt.Partitions = append(rt.Partitions, rp)
	resp.Topics = append(resp.Topics, rt)
	d := &stubDialer{resp: resp, reqs: make(chan *kmsg.FetchRequest)}
	f, err := NewFetcher(FetcherConfig{Manager: m, Dialer: d, BackoffMs: 60000})
	require.NoError(t, err)
	defer f.Stop()
	f.ApplyImage(nil, m.image.Load())
	assert.Equal(t, []int32{1}, f.Sources())

	req := <-d.reqs
	assert.Equal(t, int32(2), req.ReplicaID)
	assert.Equal(t, int32(2), req.ReplicaState.ID)
	assert.Equal(t, int32(500), req.MaxWaitMillis)
	assert.Equal(t, int32(1), req.MinBytes)
	require.Len(t, req.Topics, 1)
	assert.Equal(t, [16]byte{1}, req.Topics[0].TopicID)
	require.Len(t, req.Topics[0].Partitions, 1)
	p := req.Topics[0].Partitions[0]
	assert.Equal(t, int32(0), p.CurrentLeaderEpoch)
	assert.Equal(t, int64(0), p.FetchOffset)
	assert.Equal(t, int32(-1), p.LastFetchedEpoch)
	assert.Equal(t, int32(1<<20), p.PartitionMaxBytes)

	// FENCED_LEADER_EPOCH: nothing more until a new image.
	require.Eventually(t, func() bool {
		f.mu.Lock()
		s := f.sources[1]
		f.mu.Unlock()
		s.mu.Lock()
		defer s.mu.Unlock()
		return !s.parts[storage.TopicPartition{Topic: "topic", Partition: 0}].blockedUntil.IsZero()
	}, waitFor, tick)
	select {
	case <-d.reqs:
		t.Fatal("a refused partition was fetched again before the next image")
	default:
	}
	f.ApplyImage(nil, m.image.Load())
	<-d.reqs
}

// TestFetcherTransportError: a failing connection is redialled after the
// backoff, and Stop returns while requests fail.
func TestFetcherTransportError(t *testing.T) {
	m, _ := followerOf(t)
	d := &stubDialer{err: errors.New("connection reset"), reqs: make(chan *kmsg.FetchRequest)}
	f, err := NewFetcher(FetcherConfig{Manager: m, Dialer: d, BackoffMs: 1})
	require.NoError(t, err)
	f.ApplyImage(nil, m.image.Load())
	<-d.reqs
	<-d.reqs
	f.Stop()
	assert.Empty(t, f.Sources())
}

// TestFetcherMaxLag: the lag is the leader's high watermark minus this
// broker's log end after each answer.
func TestFetcherMaxLag(t *testing.T) {
	m, _ := followerOf(t)
	resp := kmsg.NewPtrFetchResponse()
	rt := kmsg.NewFetchResponseTopic()
	rt.Topic, rt.TopicID = "topic", [16]byte{1}
	rp := kmsg.NewFetchResponseTopicPartition()
	rp.HighWatermark = 10
	rt.Partitions = append(rt.Partitions, rp)
	resp.Topics = append(resp.Topics, rt)
	d := &stubDialer{resp: resp, reqs: make(chan *kmsg.FetchRequest, 1)}
	f, err := NewFetcher(FetcherConfig{Manager: m, Dialer: d})
	require.NoError(t, err)
	defer f.Stop()
	assert.Equal(t, int64(0), f.MaxLag())
	f.ApplyImage(nil, m.image.Load())
	require.Eventually(t, func() bool { return f.MaxLag() == 10 }, waitFor, tick)
}

// TestFollowerTruncationCheckpointsRecoveryPoint: right after a follower
// truncates its divergent tail, recovery-point-offset-checkpoint holds no
// offset above the new log end, so a crash then cannot skip the recovery
// of what the follower appends next.
func TestFollowerTruncationCheckpointsRecoveryPoint(t *testing.T) {
	lm, err := storage.NewLogManager(storage.OS, []string{t.TempDir()}, storage.ManagerOptions{})
	require.NoError(t, err)
	_, err = lm.Load()
	require.NoError(t, err)
	defer func() { require.NoError(t, lm.Shutdown(0)) }()
	m, l := followerOn(t, lm)
	for off := int64(0); off < 10; off++ {
		records := storage.BuildBatch(values("v"), storage.BatchOptions{BaseOffset: off})
		require.NoError(t, m.ApplyFetchResponse("topic", 0, 0, LeaderData{HighWatermark: off, Records: records}))
	}
	require.NoError(t, l.Flush())
	require.NoError(t, lm.CheckpointRecoveryPoints())
	checkpointed := func() int64 {
		cp, err := storage.ReadOffsetCheckpoint(storage.OS, filepath.Join(filepath.Dir(l.Dir()), storage.RecoveryPointCheckpointFile))
		require.NoError(t, err)
		return cp[storage.TopicPartition{Topic: "topic", Partition: 0}]
	}
	require.Equal(t, int64(10), checkpointed())

	require.NoError(t, m.ApplyFetchResponse("topic", 0, 0, LeaderData{HighWatermark: 4, DivergingEpoch: &DivergingEpoch{Epoch: 0, EndOffset: 4}}))
	require.Equal(t, int64(4), l.LogEndOffset())
	assert.LessOrEqual(t, checkpointed(), int64(4))
}

// TestListOffsetsOfNewLeaderBelowEpochStart: a follower that held offsets
// 0..4 but knew the high watermark only up to 2 becomes leader at epoch 1.
// Until its high watermark reaches the epoch's start (5), the latest
// offset is OFFSET_NOT_AVAILABLE (KIP-207): offsets up to 5 may have been
// committed and read under the old leader, and an answer of 2 would move
// a consumer backwards. The earliest offset is answered as always.
func TestListOffsetsOfNewLeaderBelowEpochStart(t *testing.T) {
	ctx := context.Background()
	m, l := followerOf(t)
	records := storage.BuildBatch(values("a", "b", "c", "d", "e"), storage.BatchOptions{})
	require.NoError(t, m.ApplyFetchResponse("topic", 0, 0, LeaderData{HighWatermark: 2, Records: records}))
	require.Equal(t, int64(2), l.HighWatermark())

	next := metadata.NewImage("cluster")
	next.Brokers[1] = metadata.Broker{ID: 1, Host: "127.0.0.1", Port: 1}
	tp := &metadata.Topic{Name: "topic", ID: metadata.Uuid{1}, Partitions: []metadata.Partition{{Partition: 0, Replicas: []int32{1, 2}, ISR: []int32{1, 2}, Leader: 2, LeaderEpoch: 1, PartitionEpoch: 1}}}
	next.Topics["topic"], next.TopicsByID[tp.ID] = tp, tp
	m.ApplyImage(nil, next)
	require.Equal(t, OnlineReplica, m.State("topic", 0))
	require.Equal(t, int64(2), m.HighWatermark("topic", 0))

	_, _, _, code := m.ListOffset(ctx, "topic", 0, 1, -1, 0)
	assert.Equal(t, kerr.OffsetNotAvailable.Code, code, "latest")
	_, _, _, code = m.ListOffset(ctx, "topic", 0, 1, math.MaxInt64, 0)
	assert.Equal(t, kerr.OffsetNotAvailable.Code, code, "a timestamp no record below the high watermark reaches")
	off, _, _, code := m.ListOffset(ctx, "topic", 0, 1, -3, 0)
	assert.Equal(t, int16(0), code, "max timestamp, found below the high watermark")
	assert.Less(t, off, int64(2))
	off, _, _, code = m.ListOffset(ctx, "topic", 0, 1, -2, 0)
	assert.Equal(t, int16(0), code, "earliest")
	assert.Equal(t, int64(0), off)

	// Follower 1 fetches from 5: the high watermark reaches the epoch
	// start and the latest offset is answered again.
	res := m.Fetch(ctx, "topic", 0, FetchPartition{ReplicaID: 1, ReplicaEpoch: -1, CurrentLeaderEpoch: 1, FetchOffset: 5, LastFetchedEpoch: 0, LogStartOffset: 0, MaxBytes: 1 << 20})
	require.Equal(t, int16(0), res.ErrorCode)
	off, _, epoch, code := m.ListOffset(ctx, "topic", 0, 1, -1, 0)
	assert.Equal(t, int16(0), code)
	assert.Equal(t, int64(5), off)
	assert.Equal(t, int32(1), epoch)
}

// TestFollowerAboveLeaderEndTruncatesToItsHighWatermark: a fetch answered
// OFFSET_OUT_OF_RANGE from above the leader's log end (one made without a
// last fetched epoch, which no divergence check can place) cuts the log
// back to the leader's high watermark, as Kafka's followers without an
// epoch cache do; an answer that leaves nothing to cut is an error to back
// off on.
func TestFollowerAboveLeaderEndTruncatesToItsHighWatermark(t *testing.T) {
	m, l := followerOf(t)
	for off := int64(0); off < 6; off++ {
		records := storage.BuildBatch(values("v"), storage.BatchOptions{BaseOffset: off})
		require.NoError(t, m.ApplyFetchResponse("topic", 0, 0, LeaderData{HighWatermark: 2, Records: records}))
	}
	require.Equal(t, int64(6), l.LogEndOffset())

	assert.Error(t, m.ApplyFetchResponse("topic", 0, 0, LeaderData{ErrorCode: kerr.OffsetOutOfRange.Code, HighWatermark: 6}))
	assert.Equal(t, int64(6), l.LogEndOffset())

	require.NoError(t, m.ApplyFetchResponse("topic", 0, 0, LeaderData{ErrorCode: kerr.OffsetOutOfRange.Code, HighWatermark: 3}))
	assert.Equal(t, int64(3), l.LogEndOffset())
}
