package group

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/faultline/faultline/broker/config"
)

// OffsetsTopic is the name of the internal topic holding committed offsets
// and group metadata.
const OffsetsTopic = "__consumer_offsets"

// Record is one key/value record of __consumer_offsets. A nil Value is a
// tombstone.
type Record struct {
	Key   []byte
	Value []byte
}

// OffsetsLog is the __consumer_offsets topic as the coordinator sees it. The
// node implements it over the partition layer.
type OffsetsLog interface {
	// EnsureTopic creates __consumer_offsets (offsets.topic.num.partitions,
	// replication factor min(offsets.topic.replication.factor, live
	// brokers)) if missing. It is called by concurrent FindCoordinator
	// requests while the topic is absent from the image, so it must be
	// idempotent (an "already exists" answer is success). It need not
	// wait for the topic to reach the image.
	EnsureTopic(ctx context.Context) error
	// Append writes key/value records to partition p with acks=all
	// semantics; returns once committed. It returns an error wrapping
	// ErrNotLeader when this broker does not lead p (any more), and one
	// wrapping ErrRecordTooLarge when the batch exceeds the topic's limits.
	// The coordinator bounds each call with offsets.commit.timeout.ms
	// through ctx, and holds the partition's append lock meanwhile.
	Append(ctx context.Context, partition int32, records []Record) error
	// Replay calls fn for every committed record of partition p from the
	// log start, in order. fn may keep neither key nor value: Replay may
	// reuse their memory. Replay fails (and is retried) while this broker
	// cannot read p as its leader.
	Replay(ctx context.Context, partition int32, fn func(key, value []byte) error) error
}

// ErrNotLeader tells the coordinator that this broker lost the leadership of
// an offsets partition; clients then get NOT_COORDINATOR.
var ErrNotLeader = errors.New("not the leader of the offsets partition")

// ErrRecordTooLarge tells the coordinator that a commit was too large for the
// log; clients then get INVALID_COMMIT_OFFSET_SIZE.
var ErrRecordTooLarge = errors.New("record too large for the offsets partition")

// Timer is a scheduled callback that can be cancelled.
type Timer interface {
	// Stop prevents the callback from running if it has not started yet.
	Stop() bool
}

// Clock is the coordinator's source of time. Tests use a fake one so that
// session timeouts and rebalance delays expire without sleeping.
type Clock interface {
	Now() time.Time
	// AfterFunc calls f on its own goroutine once d has passed.
	AfterFunc(d time.Duration, f func()) Timer
}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }

// Unsafe are the coordinator's planted bugs.
type Unsafe struct {
	// KeepAbortedOffsets (unsafe.txn.offsets.kept.on.abort): CompleteTxn
	// makes an aborted transaction's offsets the groups' committed
	// offsets, as a commit's.
	KeepAbortedOffsets bool
}

// Config configures a Coordinator. Field names mirror the broker's config
// keys; zero values mean Kafka's default (broker/config's) except where
// noted.
type Config struct {
	// NodeID is this broker's node.id: the coordinator owns the offsets
	// partitions this node leads.
	NodeID int32
	// OffsetsTopicNumPartitions is offsets.topic.num.partitions; used to
	// place groups until the topic exists, after which its actual
	// partition count is used, as Kafka does.
	OffsetsTopicNumPartitions int32
	// GroupInitialRebalanceDelayMs is group.initial.rebalance.delay.ms.
	// Unlike the other fields, 0 means 0: set it from the broker config;
	// DefaultConfig has Kafka's default.
	GroupInitialRebalanceDelayMs int64
	// GroupMinSessionTimeoutMs is group.min.session.timeout.ms.
	GroupMinSessionTimeoutMs int64
	// GroupMaxSessionTimeoutMs is group.max.session.timeout.ms.
	GroupMaxSessionTimeoutMs int64
	// GroupMaxSize is group.max.size.
	GroupMaxSize int32
	// OffsetMetadataMaxBytes is offset.metadata.max.bytes.
	OffsetMetadataMaxBytes int32
	// OffsetsCommitTimeoutMs is offsets.commit.timeout.ms: how long an
	// append to __consumer_offsets may wait for its commit before the
	// request fails with COORDINATOR_NOT_AVAILABLE.
	OffsetsCommitTimeoutMs int64
	// LoadRetryBackoffMs is how long to wait before replaying an offsets
	// partition again after Replay failed (no Kafka key; default 1000).
	LoadRetryBackoffMs int64
	// Unsafe plants bugs (the broker's unsafe.* switches); all off in
	// every real config.
	Unsafe Unsafe
	// Clock drives every timeout; default the wall clock.
	Clock Clock
	// Logger receives the coordinator's log lines; default slog.Default().
	Logger *slog.Logger
}

// DefaultConfig returns Kafka's defaults for node 0.
func DefaultConfig() Config {
	return Config{
		OffsetsTopicNumPartitions:    config.DefaultOffsetsTopicNumPartitions,
		GroupInitialRebalanceDelayMs: config.DefaultGroupInitialRebalanceDelayMs,
		GroupMinSessionTimeoutMs:     config.DefaultGroupMinSessionTimeoutMs,
		GroupMaxSessionTimeoutMs:     config.DefaultGroupMaxSessionTimeoutMs,
		GroupMaxSize:                 config.DefaultGroupMaxSize,
		OffsetMetadataMaxBytes:       config.DefaultOffsetMetadataMaxBytes,
		OffsetsCommitTimeoutMs:       config.DefaultOffsetsCommitTimeoutMs,
		LoadRetryBackoffMs:           1000,
	}
}

func (c *Config) fillDefaults() {
	d := DefaultConfig()
	if c.OffsetsTopicNumPartitions == 0 {
		c.OffsetsTopicNumPartitions = d.OffsetsTopicNumPartitions
	}
	if c.GroupMinSessionTimeoutMs == 0 {
		c.GroupMinSessionTimeoutMs = d.GroupMinSessionTimeoutMs
	}
	if c.GroupMaxSessionTimeoutMs == 0 {
		c.GroupMaxSessionTimeoutMs = d.GroupMaxSessionTimeoutMs
	}
	if c.GroupMaxSize == 0 {
		c.GroupMaxSize = d.GroupMaxSize
	}
	if c.OffsetMetadataMaxBytes == 0 {
		c.OffsetMetadataMaxBytes = d.OffsetMetadataMaxBytes
	}
	if c.OffsetsCommitTimeoutMs == 0 {
		c.OffsetsCommitTimeoutMs = d.OffsetsCommitTimeoutMs
	}
	if c.LoadRetryBackoffMs == 0 {
		c.LoadRetryBackoffMs = d.LoadRetryBackoffMs
	}
	if c.Clock == nil {
		c.Clock = realClock{}
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

func (c *Config) validate() error {
	switch {
	case c.OffsetsTopicNumPartitions < 1:
		return fmt.Errorf("offsets.topic.num.partitions must be at least 1, got %d", c.OffsetsTopicNumPartitions)
	case c.GroupInitialRebalanceDelayMs < 0:
		return fmt.Errorf("group.initial.rebalance.delay.ms must not be negative, got %d", c.GroupInitialRebalanceDelayMs)
	case c.GroupMinSessionTimeoutMs < 0:
		return fmt.Errorf("group.min.session.timeout.ms must not be negative, got %d", c.GroupMinSessionTimeoutMs)
	case c.GroupMaxSessionTimeoutMs < c.GroupMinSessionTimeoutMs:
		return fmt.Errorf("group.max.session.timeout.ms (%d) must not be below group.min.session.timeout.ms (%d)",
			c.GroupMaxSessionTimeoutMs, c.GroupMinSessionTimeoutMs)
	case c.GroupMaxSize < 1:
		return fmt.Errorf("group.max.size must be at least 1, got %d", c.GroupMaxSize)
	case c.OffsetMetadataMaxBytes < 0:
		return fmt.Errorf("offset.metadata.max.bytes must not be negative, got %d", c.OffsetMetadataMaxBytes)
	case c.OffsetsCommitTimeoutMs < 1:
		return fmt.Errorf("offsets.commit.timeout.ms must be at least 1, got %d", c.OffsetsCommitTimeoutMs)
	case c.LoadRetryBackoffMs < 0:
		return fmt.Errorf("load retry backoff must not be negative, got %d ms", c.LoadRetryBackoffMs)
	}
	return nil
}

type clientKey struct{}

type clientInfo struct {
	id, host string
}

// WithClient attaches the request header's client id and the peer's host to
// ctx. Member ids are then "clientId-UUID" and DescribeGroups reports them,
// as in Kafka; without it both are empty.
func WithClient(ctx context.Context, clientID, clientHost string) context.Context {
	return context.WithValue(ctx, clientKey{}, clientInfo{id: clientID, host: clientHost})
}

func clientFrom(ctx context.Context) clientInfo {
	ci, _ := ctx.Value(clientKey{}).(clientInfo)
	return ci
}
