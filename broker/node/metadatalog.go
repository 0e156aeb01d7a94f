package node

import (
	"context"
	"errors"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/faultline/faultline/broker/metadata"
	"github.com/faultline/faultline/broker/quorum"
	"github.com/faultline/faultline/broker/quorum/raftq"
	"github.com/faultline/faultline/broker/replica"
	"github.com/faultline/faultline/broker/server"
	"github.com/faultline/faultline/broker/storage"
)

// metadataLogReplicas serves Fetch of __cluster_metadata-0 on the
// controller listener, from the raft quorum's committed log: the way
// broker-only nodes (observers) follow the metadata log. Everything else is
// refused.
type metadataLogReplicas struct {
	q *raftq.Quorum

	mu      sync.Mutex
	changed chan struct{}
}

func newMetadataLogReplicas(q *raftq.Quorum) (*metadataLogReplicas, func(), error) {
	r := &metadataLogReplicas{q: q, changed: make(chan struct{})}
	cancel, err := q.Subscribe(func(quorum.Batch) error {
		r.mu.Lock()
		close(r.changed)
		r.changed = make(chan struct{})
		r.mu.Unlock()
		return nil
	})
	return r, cancel, err
}

var _ server.Replicas = (*metadataLogReplicas)(nil)

func isMetadataLog(topic string, partition int32) bool {
	return topic == quorum.MetadataTopic && partition == quorum.MetadataPartition.Partition
}

// Produce implements server.Replicas: nobody produces to the controller
// listener.
func (r *metadataLogReplicas) Produce(context.Context, string, int32, []byte, int16) replica.ProduceResult {
	return replica.ProduceResult{ErrorCode: kerr.NotLeaderForPartition.Code, BaseOffset: -1, LogAppendTime: -1, LogStartOffset: -1}
}

// Fetch implements server.Replicas: committed batches of the metadata log.
func (r *metadataLogReplicas) Fetch(_ context.Context, topic string, partition int32, req replica.FetchPartition) replica.FetchResult {
	res := replica.FetchResult{HighWatermark: -1, LastStableOffset: -1, LogStartOffset: -1, PreferredReplica: -1}
	if !isMetadataLog(topic, partition) {
		res.ErrorCode = kerr.UnknownTopicOrPartition.Code
		return res
	}
	data, hw, err := r.q.ReadCommitted(req.ReplicaID, req.FetchOffset, req.MaxBytes)
	switch {
	case errors.Is(err, storage.ErrOffsetOutOfRange):
		res.ErrorCode = kerr.OffsetOutOfRange.Code
		return res
	case err != nil:
		res.ErrorCode = kerr.KafkaStorageError.Code
		return res
	}
	res.HighWatermark, res.LastStableOffset, res.Records = hw, hw, data
	return res
}

// Changed implements server.Replicas: closed when a batch commits.
func (r *metadataLogReplicas) Changed() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.changed
}

// ListOffset implements server.Replicas.
func (r *metadataLogReplicas) ListOffset(context.Context, string, int32, int32, int64, int8) (int64, int64, int32, int16) {
	return -1, -1, -1, kerr.UnknownTopicOrPartition.Code
}

// DeleteRecords implements server.Replicas: the metadata log's start
// moves only with its snapshots.
func (r *metadataLogReplicas) DeleteRecords(context.Context, string, int32, int64) (int64, int16, string) {
	return -1, kerr.UnknownTopicOrPartition.Code, ""
}

// OffsetForLeaderEpoch implements server.Replicas.
func (r *metadataLogReplicas) OffsetForLeaderEpoch(context.Context, string, int32, int32, int32) (int32, int64, int16) {
	return -1, -1, kerr.UnknownTopicOrPartition.Code
}

// withMetadataTopic is the controller listener's metadata source: the
// node's image with __cluster_metadata added, so that the server accepts
// fetches of it.
type withMetadataTopic struct {
	src metadata.Source

	mu       sync.Mutex
	base, im *metadata.Image
}

func (w *withMetadataTopic) Image() *metadata.Image {
	base := w.src.Image()
	w.mu.Lock()
	defer w.mu.Unlock()
	if base == w.base {
		return w.im
	}
	im := *base
	t := &metadata.Topic{Name: quorum.MetadataTopic, ID: quorum.MetadataTopicID, Partitions: []metadata.Partition{{Partition: 0, Leader: -1}}}
	im.Topics = make(map[string]*metadata.Topic, len(base.Topics)+1)
	im.TopicsByID = make(map[metadata.Uuid]*metadata.Topic, len(base.TopicsByID)+1)
	for k, v := range base.Topics {
		im.Topics[k] = v
	}
	for k, v := range base.TopicsByID {
		im.TopicsByID[k] = v
	}
	im.Topics[t.Name], im.TopicsByID[t.ID] = t, t
	w.base, w.im = base, &im
	return w.im
}
