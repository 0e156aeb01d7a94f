package txn

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// StateLog is __transaction_state as the coordinator sees it; the node
// implements it over the partition layer.
type StateLog interface {
	// EnsureTopic creates __transaction_state (50 partitions, replication
	// factor min(transaction.state.log.replication.factor, live
	// brokers), its transaction.state.log.* configs) if missing. It must
	// be idempotent; it need not wait for the topic to reach the image.
	EnsureTopic(ctx context.Context) error
	// Append writes one record to partition p with acks=all and returns
	// once it is committed, waiting at most timeout for that (a timeout
	// rather than a ctx deadline, so that an append that need not wait
	// arms no timer); an error wrapping ErrNotLeader when this broker does
	// not lead p (any more).
	Append(ctx context.Context, timeout time.Duration, partition int32, key, value []byte) error
	// Replay calls fn for every record of partition p from the log
	// start, in order. fn may not keep key or value.
	Replay(ctx context.Context, partition int32, fn func(key, value []byte) error) error
}

// ErrNotLeader tells the coordinator it lost a __transaction_state
// partition; clients then get NOT_COORDINATOR.
var ErrNotLeader = errors.New("not the leader of the transaction state partition")

// Marker is the end of one transaction, to be written to its partitions
// as a control batch (COMMIT or ABORT).
type Marker struct {
	ProducerID       int64
	ProducerEpoch    int16
	CoordinatorEpoch int32
	Commit           bool
	Partitions       []TopicPartition
}

// MarkerWriter sends markers to the leaders of their partitions
// (WriteTxnMarkers). It returns the partitions whose marker is not
// written yet (their leader is unknown, unreachable or answered a
// retriable error); the coordinator retries those. A partition that no
// longer exists counts as written. One round takes at most timeout (a
// local append arms a timer only if it has to wait for followers).
type MarkerWriter interface {
	WriteMarkers(ctx context.Context, timeout time.Duration, m Marker) (pending []TopicPartition)
}

// Config configures a Coordinator; zero fields take Kafka's defaults.
type Config struct {
	// NodeID is this broker: it coordinates the transactional ids of the
	// __transaction_state partitions it leads.
	NodeID int32
	// NumPartitions is transaction.state.log.num.partitions, used until
	// the topic exists (then its own count is).
	NumPartitions int32
	// MaxTimeoutMs is transaction.max.timeout.ms.
	MaxTimeoutMs int64
	// AbortIntervalMs is
	// transaction.abort.timed.out.transaction.cleanup.interval.ms.
	AbortIntervalMs int64
	// ExpirationMs is transactional.id.expiration.ms: a transactional id
	// with no transaction open that has not been used for this long is
	// forgotten (a tombstone in __transaction_state), so a producer that
	// comes back with it starts over with a new producer id. Default
	// 604800000 (7 days).
	ExpirationMs int64
	// ExpirationIntervalMs is
	// transaction.remove.expired.transaction.cleanup.interval.ms, how
	// often the coordinator looks for expired ids. Default 3600000.
	ExpirationIntervalMs int64
	// AppendTimeoutMs bounds one write to __transaction_state and one
	// round of markers (Kafka's request.timeout.ms; default 30000).
	AppendTimeoutMs int64
	// MarkerWaitMs is how long EndTxn waits for its markers before it
	// answers. Default 0: as in Kafka, EndTxn answers once the decision
	// (PrepareCommit or PrepareAbort) is durable in __transaction_state,
	// and the markers go on in the background, so a read_committed
	// consumer may see a committed transaction a moment after its
	// producer was told.
	MarkerWaitMs int64
	// BusyWaitMs is how long a request on a transactional id whose
	// markers are still being written waits for them before it is
	// answered CONCURRENT_TRANSACTIONS (Kafka's brokers retry that answer
	// for up to add.partitions.to.txn.retry.backoff.max.ms, 100 ms, when
	// they add a partition for a producer). Default 100.
	BusyWaitMs int64
	// CompleteDelayMs is how long the Complete record of a transaction
	// whose markers are written waits before it is written. The
	// transaction is decided everywhere once its markers are in, and a
	// producer that starts its next transaction within the delay writes
	// that transaction's first record instead: one write less per
	// transaction in __transaction_state (the add and the prepare, not
	// also the complete). A coordinator that fails over within
	// the delay finds the prepare record and writes the markers again,
	// as Kafka's does after a failover. -1: none, the record follows the
	// markers at once. Default 10.
	CompleteDelayMs int64
	// RetryBackoffMs spaces retries of markers and loads (default 100).
	RetryBackoffMs int64
	// NewProducerID allocates a producer id (the controller's block).
	NewProducerID func(ctx context.Context) (int64, error)
	// GroupPartition is the __consumer_offsets partition of a group, for
	// AddOffsetsToTxn.
	GroupPartition func(group string) int32
	Now            func() time.Time
	Logger         *slog.Logger
	Unsafe         Unsafe
}

// Unsafe are the transaction coordinator's planted bugs.
type Unsafe struct {
	// InitKeepsOpen (unsafe.txn.init.keeps.open): InitProducerId for a
	// transactional id with a transaction open answers that
	// transaction's producer id and epoch, so the producer it should
	// fence (a zombie) can still commit.
	InitKeepsOpen bool
	// TakeoverCommitsAborts (unsafe.txn.takeover.commits.aborts): a
	// coordinator that takes over a __transaction_state partition
	// finishes every prepared transaction it loads with commit markers,
	// the prepared aborts too.
	TakeoverCommitsAborts bool
	// TakeoverLeavesPrepared (unsafe.txn.takeover.leaves.prepared): a
	// coordinator that takes over a __transaction_state partition never
	// finishes the prepared transactions it loads, so every later request
	// of their transactional ids is answered CONCURRENT_TRANSACTIONS.
	TakeoverLeavesPrepared bool
}

func (c *Config) fillDefaults() {
	if c.NumPartitions == 0 {
		c.NumPartitions = 50
	}
	if c.MaxTimeoutMs == 0 {
		c.MaxTimeoutMs = 900000
	}
	if c.AbortIntervalMs == 0 {
		c.AbortIntervalMs = 10000
	}
	if c.ExpirationMs == 0 {
		c.ExpirationMs = 604800000
	}
	if c.ExpirationIntervalMs == 0 {
		c.ExpirationIntervalMs = 3600000
	}
	if c.AppendTimeoutMs == 0 {
		c.AppendTimeoutMs = 30000
	}
	if c.BusyWaitMs == 0 {
		c.BusyWaitMs = 100
	}
	if c.CompleteDelayMs == 0 {
		c.CompleteDelayMs = 10
	}
	if c.RetryBackoffMs == 0 {
		c.RetryBackoffMs = 100
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
}

func (c *Config) validate() error {
	switch {
	case c.NumPartitions < 1:
		return fmt.Errorf("transaction.state.log.num.partitions must be at least 1, got %d", c.NumPartitions)
	case c.MaxTimeoutMs < 1:
		return fmt.Errorf("transaction.max.timeout.ms must be at least 1, got %d", c.MaxTimeoutMs)
	case c.AbortIntervalMs < 1:
		return fmt.Errorf("transaction.abort.timed.out.transaction.cleanup.interval.ms must be at least 1, got %d", c.AbortIntervalMs)
	case c.MarkerWaitMs < 0 || c.BusyWaitMs < 0:
		return fmt.Errorf("marker and busy waits must not be negative, got %d and %d ms", c.MarkerWaitMs, c.BusyWaitMs)
	case c.NewProducerID == nil:
		return errors.New("transaction coordinator needs a producer id allocator")
	case c.GroupPartition == nil:
		return errors.New("transaction coordinator needs the group partitioner")
	}
	return nil
}

func ms(v int64) time.Duration { return time.Duration(v) * time.Millisecond }
