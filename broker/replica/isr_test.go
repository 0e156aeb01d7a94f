package replica

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faultline/faultline/broker/metadata"
	"github.com/faultline/faultline/broker/storage"
)

// blockingSender holds every AlterPartition until the test answers it.
type blockingSender struct {
	got    chan ISRChange
	answer chan ISRResult
}

func (s blockingSender) AlterPartition(ctx context.Context, ch ISRChange) (ISRResult, error) {
	s.got <- ch
	select {
	case res := <-s.answer:
		return res, nil
	case <-ctx.Done():
		return ISRResult{}, ctx.Err()
	}
}

// TestHighWatermarkCountsPendingISRMember (KIP-497's maximal ISR): while
// the AlterPartition that adds replica 3 to the ISR is in flight, the
// controller may already have committed it and may elect replica 3, so
// the leader advances the high watermark only over offsets replica 3 has
// too.
func TestHighWatermarkCountsPendingISRMember(t *testing.T) {
	ctx := context.Background()
	lm, err := storage.NewLogManager(storage.OS, []string{t.TempDir()}, storage.ManagerOptions{})
	require.NoError(t, err)
	_, err = lm.Load()
	require.NoError(t, err)
	defer func() { require.NoError(t, lm.Shutdown(0)) }()
	m, err := New(Config{NodeID: 1, Logs: lm, ReplicaLagTimeMaxMs: 60000})
	require.NoError(t, err)
	im := metadata.NewImage("cluster")
	for id := int32(1); id <= 3; id++ {
		im.Brokers[id] = metadata.Broker{ID: id, Epoch: 1, Host: "127.0.0.1", Port: 1}
	}
	tp := &metadata.Topic{Name: "topic", ID: metadata.Uuid{1}, Partitions: []metadata.Partition{{Partition: 0, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2}, Leader: 1}}}
	im.Topics["topic"], im.TopicsByID[tp.ID] = tp, tp
	m.ApplyImage(nil, im)
	require.Equal(t, OnlineReplica, m.State("topic", 0))
	fetch := func(id int32, offset int64) {
		t.Helper()
		res := m.Fetch(ctx, "topic", 0, FetchPartition{ReplicaID: id, ReplicaEpoch: 1, CurrentLeaderEpoch: 0, FetchOffset: offset, LastFetchedEpoch: -1, LogStartOffset: 0, MaxBytes: 1 << 20})
		require.Equal(t, int16(0), res.ErrorCode)
	}

	require.Equal(t, int16(0), m.Produce(ctx, "topic", 0, batch("a", "b"), 1).ErrorCode)
	fetch(2, 2)
	require.Equal(t, int64(2), m.HighWatermark("topic", 0))
	fetch(3, 2) // replica 3 caught up: the leader proposes it

	sender := blockingSender{got: make(chan ISRChange), answer: make(chan ISRResult)}
	loop, err := NewISRLoop(ISRLoopConfig{Manager: m, Sender: sender})
	require.NoError(t, err)
	checked := make(chan struct{})
	go func() {
		defer close(checked)
		loop.Check(ctx)
	}()
	ch := <-sender.got
	require.Equal(t, []int32{1, 2, 3}, ch.NewISR)

	// In flight: replica 2 fetches a new write, replica 3 has not yet.
	require.Equal(t, int16(0), m.Produce(ctx, "topic", 0, batch("c"), 1).ErrorCode)
	fetch(2, 3)
	assert.Equal(t, int64(2), m.HighWatermark("topic", 0), "offset 2 is not on replica 3, which the controller may already count in the ISR")
	fetch(3, 3)
	assert.Equal(t, int64(3), m.HighWatermark("topic", 0))

	sender.answer <- ISRResult{LeaderEpoch: 0, PartitionEpoch: 1, ISR: []int32{1, 2, 3}}
	<-checked
	assert.Equal(t, []int32{1, 2, 3}, m.isr(storage.TopicPartition{Topic: "topic", Partition: 0}))
}
