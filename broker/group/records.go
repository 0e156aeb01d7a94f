package group

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"log/slog"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Record versions this coordinator writes: the ones Kafka 3.x writes when it
// does not need an expire timestamp (offset value v3, group value v3).
const (
	offsetKeyVersion   = 1
	offsetValueVersion = 3
	groupKeyVersion    = 2
	groupValueVersion  = 3
)

// committedOffset is one committed offset of a group.
type committedOffset struct {
	offset          int64
	leaderEpoch     int32
	metadata        string
	commitTimestamp int64
}

type topicPartition struct {
	topic     string
	partition int32
}

func offsetCommitRecord(group string, tp topicPartition, o committedOffset) Record {
	k := kmsg.NewOffsetCommitKey()
	k.Version = offsetKeyVersion
	k.Group = group
	k.Topic = tp.topic
	k.Partition = tp.partition
	v := kmsg.NewOffsetCommitValue()
	v.Version = offsetValueVersion
	v.Offset = o.offset
	v.LeaderEpoch = o.leaderEpoch
	v.Metadata = o.metadata
	v.CommitTimestamp = o.commitTimestamp
	return Record{Key: k.AppendTo(nil), Value: v.AppendTo(nil)}
}

// offsetTombstone deletes the committed offset of group on tp.
func offsetTombstone(group string, tp topicPartition) Record {
	k := kmsg.NewOffsetCommitKey()
	k.Version = offsetKeyVersion
	k.Group = group
	k.Topic = tp.topic
	k.Partition = tp.partition
	return Record{Key: k.AppendTo(nil)}
}

// groupTombstone deletes group's metadata.
func groupTombstone(group string) Record {
	k := kmsg.NewGroupMetadataKey()
	k.Version = groupKeyVersion
	k.Group = group
	return Record{Key: k.AppendTo(nil)}
}

func groupMetadataRecord(group string, v *kmsg.GroupMetadataValue) Record {
	k := kmsg.NewGroupMetadataKey()
	k.Version = groupKeyVersion
	k.Group = group
	v.Version = groupValueVersion
	return Record{Key: k.AppendTo(nil), Value: v.AppendTo(nil)}
}

// loadedPartition is what replaying one offsets partition yields: the latest
// group metadata and committed offsets per group, tombstones applied.
type loadedPartition struct {
	partition int32
	logger    *slog.Logger
	groups    map[string]*kmsg.GroupMetadataValue
	offsets   map[string]map[topicPartition]committedOffset
	skipped   int
	// open holds, per producer, the offsets of transactions still open at
	// the end of the replay.
	open map[int64]*loadedPartition
}

func newLoadedPartition(partition int32, logger *slog.Logger) *loadedPartition {
	return &loadedPartition{
		partition: partition,
		logger:    logger,
		groups:    map[string]*kmsg.GroupMetadataValue{},
		offsets:   map[string]map[topicPartition]committedOffset{},
	}
}

// apply folds one record into the state. It never fails: a record that does
// not decode is logged and skipped, so one bad record cannot keep a
// coordinator from loading.
func (l *loadedPartition) apply(key, value []byte) error {
	if err := l.applyRecord(key, value); err != nil {
		l.skipped++
		l.logger.Warn(fmt.Sprintf("Skipping unreadable record in %s-%d: %v", OffsetsTopic, l.partition, err))
	}
	return nil
}

func (l *loadedPartition) applyRecord(key, value []byte) error {
	if len(key) < 2 {
		return fmt.Errorf("key of %d bytes has no version", len(key))
	}
	switch version := int16(binary.BigEndian.Uint16(key)); version {
	case 0, 1:
		var k kmsg.OffsetCommitKey
		if err := k.ReadFrom(key); err != nil {
			return fmt.Errorf("decode offset commit key: %w", err)
		}
		tp := topicPartition{topic: k.Topic, partition: k.Partition}
		if value == nil {
			if offs := l.offsets[k.Group]; offs != nil {
				delete(offs, tp)
				if len(offs) == 0 {
					delete(l.offsets, k.Group)
				}
			}
			return nil
		}
		var v kmsg.OffsetCommitValue
		if err := v.ReadFrom(value); err != nil {
			return fmt.Errorf("decode offset commit value of group %q: %w", k.Group, err)
		}
		if v.Version < 3 {
			v.LeaderEpoch = -1
		}
		offs := l.offsets[k.Group]
		if offs == nil {
			offs = map[topicPartition]committedOffset{}
			l.offsets[k.Group] = offs
		}
		offs[tp] = committedOffset{offset: v.Offset, leaderEpoch: v.LeaderEpoch, metadata: v.Metadata, commitTimestamp: v.CommitTimestamp}
		return nil
	case 2:
		var k kmsg.GroupMetadataKey
		if err := k.ReadFrom(key); err != nil {
			return fmt.Errorf("decode group metadata key: %w", err)
		}
		if value == nil {
			delete(l.groups, k.Group)
			return nil
		}
		v := new(kmsg.GroupMetadataValue)
		// The decoded members' byte fields alias their input, and Replay
		// may reuse value's memory.
		if err := v.ReadFrom(bytes.Clone(value)); err != nil {
			return fmt.Errorf("decode group metadata value of group %q: %w", k.Group, err)
		}
		l.groups[k.Group] = v
		return nil
	default:
		// Versions 3 and up belong to the KIP-848 coordinator's records,
		// which a classic coordinator does not use.
		return fmt.Errorf("key version %d is not a classic group record", version)
	}
}
