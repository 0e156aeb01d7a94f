package replica

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/faultline/faultline/broker/metadata"
	"github.com/faultline/faultline/broker/storage"
)

// leaderOnErrorFS is a one-broker replica manager leading "topic"-0 on an
// error FS, with flushMessages as flush.messages (0: Kafka's default), and
// one record already written.
func leaderOnErrorFS(t *testing.T, flushMessages int64) (*Manager, *storage.LogManager, *storage.ErrorFS) {
	efs := storage.NewErrorFS(storage.OS)
	lm, err := storage.NewLogManager(efs, []string{t.TempDir()}, storage.ManagerOptions{})
	require.NoError(t, err)
	_, err = lm.Load()
	require.NoError(t, err)
	t.Cleanup(func() { _ = lm.Shutdown(0) })
	settings := func(map[string]string) (Settings, error) {
		s := Settings{Log: storage.DefaultLogConfig(), MinInsyncReplicas: 1}
		if flushMessages > 0 {
			s.Log.FlushIntervalMessages = flushMessages
		}
		return s, nil
	}
	m, err := New(Config{NodeID: 1, Logs: lm, TopicSettings: settings})
	require.NoError(t, err)
	im := metadata.NewImage("cluster")
	im.Brokers[1] = metadata.Broker{ID: 1, Epoch: 1, Host: "127.0.0.1", Port: 1}
	tp := &metadata.Topic{Name: "topic", ID: metadata.Uuid{1}, Partitions: []metadata.Partition{{Partition: 0, Replicas: []int32{1}, ISR: []int32{1}, Leader: 1}}}
	im.Topics["topic"], im.TopicsByID[tp.ID] = tp, tp
	m.ApplyImage(nil, im)
	require.Equal(t, OnlineReplica, m.State("topic", 0))
	require.Equal(t, int16(0), m.Produce(context.Background(), "topic", 0, batch("before"), -1).ErrorCode)
	return m, lm, efs
}

// TestProduceOnFullDiskIsRefusedAndServesAgain: a write refused with
// ENOSPC answers KAFKA_STORAGE_ERROR (retriable), leaves the log end where
// it was, and the partition takes writes again once there is space: a full
// disk does not take the log dir offline.
func TestProduceOnFullDiskIsRefusedAndServesAgain(t *testing.T) {
	ctx := context.Background()
	m, lm, efs := leaderOnErrorFS(t, 0)
	removeFault := efs.Inject(storage.Rule{Op: storage.OpWrite, Path: ".log", Mode: storage.FaultShortWrite, KeepBytes: 20, Err: syscall.ENOSPC})
	res := m.Produce(ctx, "topic", 0, batch("full"), -1)
	require.Equal(t, kerr.KafkaStorageError.Code, res.ErrorCode)
	assert.True(t, kerr.ErrorForCode(res.ErrorCode).(*kerr.Error).Retriable, "clients retry KAFKA_STORAGE_ERROR")
	l, ok := lm.GetLog(storage.TopicPartition{Topic: "topic", Partition: 0})
	require.True(t, ok)
	assert.Equal(t, int64(1), l.LogEndOffset(), "nothing of the refused write is in the log")

	removeFault()
	res = m.Produce(ctx, "topic", 0, batch("after"), -1)
	require.Equal(t, int16(0), res.ErrorCode, "space is back: %v", kerr.ErrorForCode(res.ErrorCode))
	assert.Equal(t, int64(1), res.BaseOffset)
	assert.Empty(t, lm.OfflineDirs())
}

// TestProduceAfterFailedFsyncIsNeverAcknowledged: an fsync that fails under
// flush.messages=1 takes the log dir offline: the produce and its retry get
// KAFKA_STORAGE_ERROR, and so do they and fetches once the disk answers
// again (no fsync is retried as if the failure had not happened).
func TestProduceAfterFailedFsyncIsNeverAcknowledged(t *testing.T) {
	ctx := context.Background()
	m, lm, efs := leaderOnErrorFS(t, 1)

	removeFault := efs.Inject(storage.Rule{Op: storage.OpSync, Path: ".log"})
	res := m.Produce(ctx, "topic", 0, idempotent(7, 0, "p0", "p1"), -1)
	require.Equal(t, kerr.KafkaStorageError.Code, res.ErrorCode, "the fsync failed")
	res = m.Produce(ctx, "topic", 0, idempotent(7, 0, "p0", "p1"), -1)
	assert.Equal(t, kerr.KafkaStorageError.Code, res.ErrorCode, "the retry is not acknowledged before an fsync succeeds (got offset %d)", res.BaseOffset)

	removeFault()
	res = m.Produce(ctx, "topic", 0, idempotent(7, 0, "p0", "p1"), -1)
	assert.Equal(t, kerr.KafkaStorageError.Code, res.ErrorCode, "the retry is refused once fsyncs work again (got offset %d)", res.BaseOffset)
	for _, offset := range []int64{0, 1} {
		fr := m.Fetch(ctx, "topic", 0, FetchPartition{ReplicaID: -1, CurrentLeaderEpoch: -1, FetchOffset: offset, LastFetchedEpoch: -1, MaxBytes: 1 << 20})
		assert.Equal(t, kerr.KafkaStorageError.Code, fr.ErrorCode, "a fetch at %d of a partition on an offline dir", offset)
		assert.Empty(t, fr.Records)
	}
	l, ok := lm.GetLog(storage.TopicPartition{Topic: "topic", Partition: 0})
	require.True(t, ok)
	assert.Equal(t, int64(1), l.RecoveryPoint(), "nothing after the failed fsync became durable")
	require.Eventually(t, func() bool { return len(lm.OfflineDirs()) == 1 }, 5*time.Second, 10*time.Millisecond, "the log dir is offline")
}

// TestWriteTxnMarkersAnswersEachPartition: one call writes the markers of
// every partition it leads, each answered on its own: the open
// transaction's partition gets its COMMIT (the last stable offset passes
// it), a partition it does not know UNKNOWN_TOPIC_OR_PARTITION, and a
// marker from an older producer epoch INVALID_PRODUCER_EPOCH.
func TestWriteTxnMarkersAnswersEachPartition(t *testing.T) {
	ctx := context.Background()
	m, lm, _ := leaderOnErrorFS(t, 0)
	_, err := m.AppendInternalTxn(ctx, "topic", 0, 7, 3, []storage.Record{{Value: []byte("in txn")}})
	require.NoError(t, err)
	l, ok := lm.GetLog(storage.TopicPartition{Topic: "topic", Partition: 0})
	require.True(t, ok)
	require.Equal(t, int64(1), l.LastStableOffset(), "the open transaction holds the LSO")

	codes := m.WriteTxnMarkers(ctx, []TxnMarker{
		{Topic: "topic", Partition: 0, ProducerID: 7, ProducerEpoch: 3, Commit: true},
		{Topic: "missing", Partition: 0, ProducerID: 7, ProducerEpoch: 3, Commit: true},
	})
	assert.Equal(t, []int16{0, kerr.UnknownTopicOrPartition.Code}, codes)
	assert.Equal(t, int64(3), l.LogEndOffset(), "the record and its marker")
	assert.Equal(t, l.LogEndOffset(), l.LastStableOffset(), "the commit ends the transaction")

	codes = m.WriteTxnMarkers(ctx, []TxnMarker{{Topic: "topic", Partition: 0, ProducerID: 7, ProducerEpoch: 2, Commit: false}})
	assert.Equal(t, []int16{kerr.InvalidProducerEpoch.Code}, codes)
	assert.Equal(t, int64(3), l.LogEndOffset(), "a fenced marker writes nothing")
}
