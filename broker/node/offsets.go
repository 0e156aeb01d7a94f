package node

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/faultline/faultline/broker/config"
	"github.com/faultline/faultline/broker/group"
	"github.com/faultline/faultline/broker/metadata"
	"github.com/faultline/faultline/broker/replica"
	"github.com/faultline/faultline/broker/server"
	"github.com/faultline/faultline/broker/storage"
)

// offsetsLog is the group coordinator's view of __consumer_offsets, built on
// the controller (to create the topic) and the replica manager (to append
// with acks=all and to read back what is committed).
type offsetsLog struct {
	cfg        *config.Config
	md         metadata.Source
	controller server.Controller
	replicas   *replica.Manager
}

var _ group.OffsetsLog = (*offsetsLog)(nil)

// EnsureTopic implements group.OffsetsLog.
func (o *offsetsLog) EnsureTopic(ctx context.Context) error {
	if o.md.Image().Topic(group.OffsetsTopic) != nil {
		return nil
	}
	im := o.md.Image()
	live := int16(len(im.UnfencedBrokers()))
	rf := min(o.cfg.OffsetsTopicReplicationFactor, max(live, 1))
	return createInternalTopic(ctx, o.controller, group.OffsetsTopic, o.cfg.OffsetsTopicNumPartitions, rf, map[string]string{
		"cleanup.policy":   "compact",
		"compression.type": "producer",
		"segment.bytes":    strconv.Itoa(int(o.cfg.OffsetsTopicSegmentBytes)),
	})
}

// Append implements group.OffsetsLog.
func (o *offsetsLog) Append(ctx context.Context, partition int32, records []group.Record) error {
	_, err := o.replicas.AppendInternal(ctx, group.OffsetsTopic, partition, storageRecords(records))
	return offsetsAppendError(err)
}

// AppendTxn implements group.TxnOffsetsLog.
func (o *offsetsLog) AppendTxn(ctx context.Context, partition int32, producerID int64, epoch int16, records []group.Record) error {
	_, err := o.replicas.AppendInternalTxn(ctx, group.OffsetsTopic, partition, producerID, epoch, storageRecords(records))
	return offsetsAppendError(err)
}

// ReplayTxn implements group.TxnOffsetsLog, to the log end as Replay.
func (o *offsetsLog) ReplayTxn(ctx context.Context, partition int32, fn func(key, value []byte) error, open func(producerID int64, key, value []byte) error) error {
	return o.replicas.ReadToEndTxn(group.OffsetsTopic, partition, 0, func(_ int64, r storage.Record) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		return fn(r.Key, r.Value)
	}, func(pid int64, r storage.Record) error { return open(pid, r.Key, r.Value) })
}

func storageRecords(records []group.Record) []storage.Record {
	now := timeNowMs()
	recs := make([]storage.Record, len(records))
	for i, r := range records {
		recs[i] = storage.Record{TimestampMs: now, Key: r.Key, Value: r.Value}
	}
	return recs
}

func offsetsAppendError(err error) error {
	switch {
	case err == nil:
		return nil
	case notLeader(err):
		return fmt.Errorf("%w: %w", group.ErrNotLeader, err)
	case errors.Is(err, kerr.MessageTooLarge), errors.Is(err, kerr.RecordListTooLarge):
		return fmt.Errorf("%w: %w", group.ErrRecordTooLarge, err)
	default:
		return err
	}
}

// Replay implements group.OffsetsLog. It reads to the log end, not the
// high watermark: after a failover the new leader's high watermark can lag
// offsets that were committed (acknowledged) under the old leader.
func (o *offsetsLog) Replay(ctx context.Context, partition int32, fn func(key, value []byte) error) error {
	return replayToEnd(ctx, o.replicas, group.OffsetsTopic, partition, fn)
}

// replayToEnd hands fn the key and value of every record of a
// coordinator's partition to its log end, stopping when ctx ends.
func replayToEnd(ctx context.Context, replicas *replica.Manager, topic string, partition int32, fn func(key, value []byte) error) error {
	return replicas.ReadToEnd(topic, partition, 0, func(_ int64, r storage.Record) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		return fn(r.Key, r.Value)
	})
}

// timeNowMs is the wall clock in ms, for record timestamps.
func timeNowMs() int64 { return time.Now().UnixMilli() }
