package quorum

import (
	"context"
	"errors"
	"fmt"

	"github.com/faultline/faultline/broker/metadata"
	"github.com/faultline/faultline/broker/storage"
)

// MetadataTopic is the topic of the metadata log.
const MetadataTopic = "__cluster_metadata"

// MetadataTopicID is the fixed topic id of __cluster_metadata (Kafka's
// AAAAAAAAAAAAAAAAAAAAAQ).
var MetadataTopicID = metadata.Uuid{15: 1}

// MetadataPartition is the metadata log's partition.
var MetadataPartition = storage.TopicPartition{Topic: MetadataTopic, Partition: 0}

// ErrNotLeader: this node does not lead the quorum; retry on the leader
// (NOT_CONTROLLER).
var ErrNotLeader = errors.New("not the quorum leader")

// ErrClosed: the quorum was closed.
var ErrClosed = errors.New("quorum closed")

// Batch is one committed batch of metadata records.
type Batch struct {
	BaseOffset   int64
	LastOffset   int64
	Epoch        int32 // the quorum epoch (leader epoch) it was written in
	AppendTimeMs int64
	Records      []metadata.Record
}

// Merge appends next, the batch that follows b in the log, to b: replay
// delivers runs of consecutive batches as one.
func (b *Batch) Merge(next Batch) {
	b.LastOffset, b.Epoch, b.AppendTimeMs = next.LastOffset, next.Epoch, next.AppendTimeMs
	b.Records = append(b.Records, next.Records...)
}

// LeaderAndEpoch names the quorum leader; LeaderID is -1 when unknown.
type LeaderAndEpoch struct {
	LeaderID int32
	Epoch    int32
}

// ReplicaState is one voter's or observer's replication progress.
type ReplicaState struct {
	ReplicaID             int32
	LogEndOffset          int64
	LastFetchTimestamp    int64 // ms, -1 unknown
	LastCaughtUpTimestamp int64 // ms, -1 unknown
}

// Description is what DescribeQuorum reports.
type Description struct {
	LeaderID      int32
	LeaderEpoch   int32
	HighWatermark int64
	Voters        []ReplicaState
	Observers     []ReplicaState
}

// Quorum is the metadata log as the controller and the brokers use it.
type Quorum interface {
	// Append writes records as one batch and returns the offset of the last
	// one once the batch is committed. ErrNotLeader when this node cannot
	// append.
	Append(ctx context.Context, records []metadata.Record) (lastOffset int64, err error)
	// Subscribe calls fn with every committed batch from the start of the
	// log (during this replay consecutive batches may arrive merged into
	// one), then with each batch committed later, in order, never
	// concurrently for one subscriber. An error from fn during the initial
	// replay is returned; later errors are logged, and the subscriber keeps
	// receiving batches. cancel stops delivery.
	Subscribe(fn func(Batch) error) (cancel func(), err error)
	// Leader returns the current leader and epoch.
	Leader() LeaderAndEpoch
	// Describe reports the quorum's state for DescribeQuorum.
	Describe() Description
}

// LogOpener opens or creates a partition log; *storage.LogManager is one.
type LogOpener interface {
	GetOrCreateLog(tp storage.TopicPartition, cfg storage.LogConfig) (*storage.Log, error)
}

// FeedPublisher subscribes a metadata publisher to the quorum: every
// committed batch is applied to the publisher's image, which is published
// with the quorum leader as ControllerID.
func FeedPublisher(q Quorum, p *metadata.Publisher) (cancel func(), err error) {
	cancel, err = q.Subscribe(func(b Batch) error {
		return p.Update(func(cur *metadata.Image) (*metadata.Image, error) {
			next, err := cur.ApplyBatch(b.LastOffset, b.Records)
			if err != nil {
				return nil, fmt.Errorf("publish metadata up to offset %d: %w", b.LastOffset, err)
			}
			next.ControllerID = q.Leader().LeaderID
			return next, nil
		})
	})
	if err != nil {
		return nil, err
	}
	err = p.Update(func(cur *metadata.Image) (*metadata.Image, error) {
		return cur.WithControllerID(q.Leader().LeaderID), nil
	})
	return cancel, err
}
