package workloads

import (
	"context"
	"io"
	"time"

	"github.com/faultline/faultline/checker"
)

// Client turns operations into calls on the system under test. One Client
// serves one process; a process whose operation ended info is retired and
// its Client closed, and a fresh process gets a new Client (Jepsen's rule).
type Client interface {
	// Invoke performs op (type invoke) and returns its completion: the same
	// operation with type ok, fail or info and the observed values filled in.
	// Invoke should return by ctx's deadline (a timed-out write is info);
	// the harness abandons a call that outlives it by 30 s, records it
	// info, and closes the client, perhaps while the call still runs.
	Invoke(ctx context.Context, op checker.Op) checker.Op
	// Close releases the client's connections. It may run while an
	// abandoned Invoke is still running, and must leave nothing that call
	// makes afterwards open.
	Close()
}

// DefaultRequestTimeout bounds a workload client's request when the
// workload sets none: the queue and compact workloads' default.
const DefaultRequestTimeout = 5 * time.Second

// TxnTimeoutOr is the transaction timeout a workload's producers ask for:
// set (--txn-timeout) when positive, else four request timeouts.
func TxnTimeoutOr(set, requestTimeout time.Duration) time.Duration {
	if set > 0 {
		return set
	}
	return 4 * requestTimeout
}

// RecentIDs are the ids of the last clients made, at most 64, when n
// clients were made so far and id names client i (from 1): what a
// workload's TransactionalIDs returns, for faults aimed at the
// coordinators of the ids in use.
func RecentIDs(n int64, id func(i int64) string) []string {
	var ids []string
	for i := max(1, n-63); i <= n; i++ {
		ids = append(ids, id(i))
	}
	return ids
}

// Generator produces the operations of a test, Jepsen-style: Next hands
// out the next operation for a process (or false when it has none now), and
// Update tells the generator how each operation completed. Generators are
// deterministic functions of their seed and of the completions they see;
// they are not safe for concurrent use (the harness serialises them).
type Generator interface {
	Next(process int) (checker.Op, bool)
	Update(completion checker.Op)
}

// Options are what a workload is built from: where the cluster is and the
// test's client settings.
type Options struct {
	// Seeds are the bootstrap brokers, host:port.
	Seeds []string
	// Seed makes the generator's choices reproducible.
	Seed int64
	// Acks is the producers' acks setting.
	Acks Acks
	// Idempotent enables the idempotent producer (with acks=all only).
	Idempotent         bool
	ReplicationFactor  int
	PartitionsPerTopic int
	// Subscribe makes consumers join a consumer group instead of assigning
	// partitions.
	Subscribe bool
	// MixedConsumers makes the consumers of odd-numbered workers subscribe
	// and the others assign, in one run.
	MixedConsumers bool
	// Txn makes operations transactions (workloads that have them; the
	// queue workload's --txn).
	Txn bool
	// TxnRestartOneIn is the odds that a committed transaction's producer
	// is restarted at once under its transactional.id (the queue
	// workload's --txn-restart-one-in; 0: the workload's default).
	TxnRestartOneIn int
	// TxnTimeout is the transactional producers' transaction.timeout.ms
	// (--txn-timeout, queue and compact workloads; 0: the workload's
	// default).
	TxnTimeout time.Duration
}

// Workload is one run's instance of a workload: the generator of the main
// phase and the clients that carry its operations out, then a final phase
// that reads back everything the run wrote.
type Workload interface {
	// Generator is the main phase's generator.
	Generator() Generator
	// NewClient connects the client of one process of the main phase.
	NewClient() (Client, error)
	// Final returns the final phase, built from what the main phase's
	// generator saw and what the healed cluster says within ctx; what it
	// could not learn is written to out, and the phase works without it.
	Final(ctx context.Context, out io.Writer) Final
	// OwnsTopic reports whether the workload made the topic, so that faults
	// aimed at partition leaders aim at the workload's partitions.
	OwnsTopic(topic string) bool
	// Close releases the workload's own connections.
	Close()
}

// Restartable is a workload whose crashed client can be succeeded under
// the same identity, as an exactly-once application restarted after a
// crash comes back with its transactional.id: the successor's
// InitProducerId must fence the crashed client and finish the transaction
// it left as it was decided (a prepared commit committed, anything else
// aborted). The harness hands every other crashed client on this way
// (crash-clients).
type Restartable interface {
	// Identity names what a successor of c takes over: "" when c has
	// nothing to hand on.
	Identity(c Client) string
	// NewClientAs connects a client under identity.
	NewClientAs(identity string) (Client, error)
}

// KeyPartitioner is a workload whose keys are each one topic-partition:
// it names the partition of a key, so that faults can aim at the
// partitions being written now.
type KeyPartitioner interface {
	TopicPartition(key int) (string, int32)
}

// KeyRetirer is a workload that stops writing a key after a number of
// sends (Jepsen's queue workload brings in a fresh key then), so that
// faults aimed at the partitions being written can pass over a key about
// to go quiet.
type KeyRetirer interface {
	WritesPerKey() int
}

// Final is a workload's last phase: rounds of fresh processes read until
// everything the run wrote was read, or the harness's deadline passes.
type Final interface {
	Generator
	// NewClient connects the client of one process of the final phase.
	NewClient() (Client, error)
	// Done reports whether everything was read.
	Done() bool
	// Missing says what is not read yet ("keys [3 5]").
	Missing() string
}

// StallExplainer is a Final that can say why its reads stopped short: the
// harness asks it when the final reads end unfinished and records what it
// returns in the history (a harness checker.FStalledReads event).
type StallExplainer interface {
	Stalls(ctx context.Context) []checker.Stall
}

// NoopClient completes every operation as ok without doing anything; it is
// the client of harness self-tests.
type NoopClient struct{}

// Invoke completes op as ok.
func (NoopClient) Invoke(_ context.Context, op checker.Op) checker.Op {
	op.Type = checker.OK
	return op
}

// Close does nothing.
func (NoopClient) Close() {}
