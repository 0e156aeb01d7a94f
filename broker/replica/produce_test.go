package replica

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/faultline/faultline/broker/metadata"
	"github.com/faultline/faultline/broker/storage"
)

// TestProduceRetryAfterFailedFsyncIsNotAcknowledged: with
// log.flush.interval.messages=1 an idempotent produce whose fsync fails
// gets KAFKA_STORAGE_ERROR; the producer's retry of the same batch (same
// producer id, epoch and sequence) is answered with the same error while
// fsyncs fail, and with the original offset once one succeeds.
func TestProduceRetryAfterFailedFsyncIsNotAcknowledged(t *testing.T) {
	ctx := context.Background()
	efs := storage.NewErrorFS(storage.OS)
	lm, err := storage.NewLogManager(efs, []string{t.TempDir()}, storage.ManagerOptions{})
	require.NoError(t, err)
	_, err = lm.Load()
	require.NoError(t, err)
	defer func() { _ = lm.Shutdown(0) }()
	flushEach := func(map[string]string) (Settings, error) {
		s := Settings{Log: storage.DefaultLogConfig(), MinInsyncReplicas: 1}
		s.Log.FlushIntervalMessages = 1
		return s, nil
	}
	m, err := New(Config{NodeID: 1, Logs: lm, TopicSettings: flushEach})
	require.NoError(t, err)
	im := metadata.NewImage("cluster")
	im.Brokers[1] = metadata.Broker{ID: 1, Epoch: 1, Host: "127.0.0.1", Port: 1}
	tp := &metadata.Topic{Name: "topic", ID: metadata.Uuid{1}, Partitions: []metadata.Partition{{Partition: 0, Replicas: []int32{1}, ISR: []int32{1}, Leader: 1}}}
	im.Topics["topic"], im.TopicsByID[tp.ID] = tp, tp
	m.ApplyImage(nil, im)
	require.Equal(t, OnlineReplica, m.State("topic", 0))
	require.Equal(t, int16(0), m.Produce(ctx, "topic", 0, batch("before"), -1).ErrorCode)

	removeFault := efs.Inject(storage.Rule{Op: storage.OpSync, Path: ".log"})
	res := m.Produce(ctx, "topic", 0, idempotent(7, 0, "p0", "p1"), -1)
	require.Equal(t, kerr.KafkaStorageError.Code, res.ErrorCode, "the fsync failed")
	res = m.Produce(ctx, "topic", 0, idempotent(7, 0, "p0", "p1"), -1)
	assert.Equal(t, kerr.KafkaStorageError.Code, res.ErrorCode, "the retry is not acknowledged before an fsync succeeds (got offset %d)", res.BaseOffset)

	removeFault()
	res = m.Produce(ctx, "topic", 0, idempotent(7, 0, "p0", "p1"), -1)
	require.Equal(t, int16(0), res.ErrorCode)
	assert.Equal(t, int64(1), res.BaseOffset, "the original offset")
	l, ok := lm.GetLog(storage.TopicPartition{Topic: "topic", Partition: 0})
	require.True(t, ok)
	assert.Equal(t, int64(3), l.RecoveryPoint(), "durable up to the batch's end")
}
