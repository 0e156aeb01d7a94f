package storage

import (
	"fmt"
	"math"
	"strings"

	"github.com/faultline/faultline/broker/config"
)

// Timestamp types of message.timestamp.type.
const (
	TimestampCreateTime    = "CreateTime"
	TimestampLogAppendTime = "LogAppendTime"
)

// LogConfig is the per-log configuration (Kafka's topic-level configs).
type LogConfig struct {
	SegmentBytes          int64  // segment.bytes
	SegmentMs             int64  // segment.ms
	IndexIntervalBytes    int32  // index.interval.bytes
	SegmentIndexBytes     int32  // segment.index.bytes
	FlushIntervalMessages int64  // flush.messages; <= 0 or MaxInt64: never
	FlushIntervalMs       int64  // flush.ms; <= 0 or MaxInt64: never
	RetentionMs           int64  // retention.ms; < 0: unlimited
	RetentionBytes        int64  // retention.bytes; < 0: unlimited
	MaxMessageBytes       int32  // max.message.bytes
	MessageTimestampType  string // CreateTime or LogAppendTime
	// MessageTimestampBeforeMaxMs and MessageTimestampAfterMaxMs are
	// message.timestamp.before.max.ms and message.timestamp.after.max.ms
	// (KIP-937): a CreateTime batch whose timestamps lie further in the past
	// or future than these is refused with ErrInvalidTimestamp. Unlike
	// Kafka, 0 (the zero value) means no limit.
	MessageTimestampBeforeMaxMs int64
	MessageTimestampAfterMaxMs  int64
	// CompressionType is compression.type: "producer" (the default; ""
	// means it) keeps each batch as the producer compressed it;
	// "uncompressed", "gzip", "snappy", "lz4" or "zstd" re-encodes batches
	// with that codec on the leader's append, as Kafka does.
	CompressionType string
	// CleanupPolicy is cleanup.policy: "delete" (default; "" means it),
	// "compact" or "compact,delete". A log whose policy includes compact
	// is cleaned by the LogManager's cleaner (cleaner.go) and refuses
	// records without a key; a compact-only log is never trimmed by
	// retention.ms/retention.bytes.
	CleanupPolicy string
	// DeleteRetentionMs is delete.retention.ms: a tombstone (and a batch's
	// delete horizon) lives this long after the cleaner first kept it.
	DeleteRetentionMs int64
	// MinCompactionLagMs is min.compaction.lag.ms: a segment whose newest
	// record is younger than this is not cleaned yet.
	MinCompactionLagMs int64
	// MinCleanableDirtyRatio is min.cleanable.dirty.ratio: the share of
	// the cleanable bytes not cleaned yet from which a log is cleaned.
	MinCleanableDirtyRatio float64
}

// Compacts reports whether the cleanup policy includes compact.
func (c LogConfig) Compacts() bool { return strings.Contains(c.CleanupPolicy, CleanupCompact) }

// Cleanup policies.
const (
	CleanupDelete        = "delete"
	CleanupCompact       = "compact"
	CleanupCompactDelete = "compact,delete"
)

// targetCompression is the codec appends are re-encoded with, and false
// for "producer" (keep the producer's codec).
func (c LogConfig) targetCompression() (Compression, bool) {
	switch c.CompressionType {
	case "uncompressed", "none":
		return CompressionNone, true
	case "gzip":
		return CompressionGzip, true
	case "snappy":
		return CompressionSnappy, true
	case "lz4":
		return CompressionLZ4, true
	case "zstd":
		return CompressionZstd, true
	}
	return CompressionNone, false
}

// retentionApplies reports whether time and size retention delete segments.
func (c LogConfig) retentionApplies() bool { return c.CleanupPolicy != CleanupCompact }

// DefaultLogConfig returns Kafka's defaults, those of broker/config.
func DefaultLogConfig() LogConfig {
	return LogConfig{
		SegmentBytes:                config.DefaultLogSegmentBytes,
		SegmentMs:                   config.DefaultLogRollMs,
		IndexIntervalBytes:          config.DefaultLogIndexIntervalBytes,
		SegmentIndexBytes:           config.DefaultLogIndexSizeMaxBytes,
		FlushIntervalMessages:       config.DefaultLogFlushIntervalMessages,
		FlushIntervalMs:             config.DefaultLogFlushSchedulerIntervalMs,
		RetentionMs:                 config.DefaultLogRetentionMs,
		RetentionBytes:              config.DefaultLogRetentionBytes,
		MaxMessageBytes:             config.DefaultMessageMaxBytes,
		MessageTimestampType:        config.DefaultLogMessageTimestampType,
		MessageTimestampBeforeMaxMs: config.DefaultLogMessageTimestampBeforeMaxMs,
		MessageTimestampAfterMaxMs:  config.DefaultLogMessageTimestampAfterMaxMs,
		CompressionType:             config.DefaultCompressionType,
		CleanupPolicy:               config.DefaultLogCleanupPolicy,
		DeleteRetentionMs:           config.DefaultLogCleanerDeleteRetentionMs,
		MinCompactionLagMs:          config.DefaultLogCleanerMinCompactionLagMs,
		MinCleanableDirtyRatio:      config.DefaultLogCleanerMinCleanableRatio,
	}
}

// Validate rejects values Kafka rejects, naming the key.
func (c LogConfig) Validate() error {
	switch {
	case c.SegmentBytes < BatchHeaderSize:
		return fmt.Errorf("segment.bytes %d: must be at least %d", c.SegmentBytes, BatchHeaderSize)
	case c.SegmentBytes > math.MaxInt32:
		return fmt.Errorf("segment.bytes %d: must be at most %d", c.SegmentBytes, int64(math.MaxInt32))
	case c.SegmentMs < 1:
		return fmt.Errorf("segment.ms %d: must be at least 1", c.SegmentMs)
	case c.IndexIntervalBytes < 0:
		return fmt.Errorf("index.interval.bytes %d: must be at least 0", c.IndexIntervalBytes)
	case c.SegmentIndexBytes < offsetIndexEntrySize*4:
		return fmt.Errorf("segment.index.bytes %d: must be at least %d", c.SegmentIndexBytes, offsetIndexEntrySize*4)
	case c.MaxMessageBytes < 0:
		return fmt.Errorf("max.message.bytes %d: must be at least 0", c.MaxMessageBytes)
	case c.MessageTimestampType != TimestampCreateTime && c.MessageTimestampType != TimestampLogAppendTime:
		return fmt.Errorf("message.timestamp.type %q: must be CreateTime or LogAppendTime", c.MessageTimestampType)
	case c.CleanupPolicy != "" && c.CleanupPolicy != CleanupDelete && c.CleanupPolicy != CleanupCompact && c.CleanupPolicy != CleanupCompactDelete && c.CleanupPolicy != "delete,compact":
		return fmt.Errorf("cleanup.policy %q: must be delete, compact or compact,delete", c.CleanupPolicy)
	case c.DeleteRetentionMs < 0:
		return fmt.Errorf("delete.retention.ms %d: must be at least 0", c.DeleteRetentionMs)
	case c.MinCompactionLagMs < 0:
		return fmt.Errorf("min.compaction.lag.ms %d: must be at least 0", c.MinCompactionLagMs)
	}
	return nil
}

func flushEnabled(v int64) bool { return v > 0 && v != math.MaxInt64 }
