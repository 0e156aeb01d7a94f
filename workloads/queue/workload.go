package queue

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/faultline/faultline/checker"
	"github.com/faultline/faultline/workloads"
)

// finalPollTimeout is a final read's poll wait (Jepsen: 1 s).
const finalPollTimeout = time.Second

// New is the queue workload's entry of the registry: one run's topics,
// generator and clients.
func New(o workloads.Options) (workloads.Workload, error) {
	opts := Options{
		Seeds:              o.Seeds,
		PartitionsPerTopic: o.PartitionsPerTopic,
		ReplicationFactor:  int16(o.ReplicationFactor),
		Acks:               o.Acks,
		DisableIdempotence: !o.Idempotent,
		Txn:                o.Txn,
		TxnRestartOneIn:    o.TxnRestartOneIn,
		TxnTimeout:         o.TxnTimeout,
		Seed:               o.Seed,
	}
	topics, err := NewTopics(opts)
	if err != nil {
		return nil, err
	}
	return &workload{opts: opts, topics: topics, subscribe: o.Subscribe, gen: NewGenerator(o.Seed, GenOptions{Subscribe: o.Subscribe, Mixed: o.MixedConsumers, Txn: o.Txn})}, nil
}

type workload struct {
	opts      Options
	subscribe bool
	topics    *Topics
	gen       *Generator
}

func (w *workload) Generator() workloads.Generator { return w.gen }

func (w *workload) NewClient() (workloads.Client, error) { return NewClient(w.opts, w.topics) }

// Identity implements workloads.Restartable: a transactional client's
// transactional.id.
func (w *workload) Identity(c workloads.Client) string {
	if qc, ok := c.(*Client); ok && qc.txn != nil {
		return qc.txn.id
	}
	return ""
}

// NewClientAs implements workloads.Restartable: a client whose producer
// takes over transactional.id identity (its own generator state, a new
// process).
func (w *workload) NewClientAs(identity string) (workloads.Client, error) {
	return newClient(w.opts, w.topics, identity)
}

func (w *workload) OwnsTopic(topic string) bool {
	_, ok := w.opts.Key(topic, 0)
	return ok
}

// TopicPartition is the topic-partition of key k (workloads.KeyPartitioner).
func (w *workload) TopicPartition(k int) (string, int32) { return w.opts.TopicPartition(k) }

// WritesPerKey is how many sends a key gets before the generator retires
// it (workloads.KeyRetirer).
func (w *workload) WritesPerKey() int { return w.gen.opts.MaxWritesPerKey }

func (w *workload) Close() { w.topics.Close() }

// Groups names the consumer group that subscribe operations join (the
// harness aims partition:coordinator at its coordinator); none when the
// generator never subscribes.
func (w *workload) Groups() []string {
	if !w.subscribe {
		return nil
	}
	return []string{w.opts.withDefaults().Group}
}

// TransactionalIDs returns the transactional.ids of the last clients made
// (at most 64; none without --txn), for faults aimed at their coordinators.
func (w *workload) TransactionalIDs() []string {
	if !w.opts.Txn {
		return nil
	}
	return workloads.RecentIDs(w.topics.clients.Load(), func(i int64) string { return txnID(w.topics.opts, i) })
}

// UsedTransactionalIDs returns the transactional.ids a transaction began
// under (at most workloads.TxnIDsMax) and how many more there were, for
// the harness's probe after the final reads.
func (w *workload) UsedTransactionalIDs() ([]string, int) {
	return w.topics.began.List(), w.topics.began.Dropped()
}

// Final reads every key from the beginning up to the highest offset known
// for it: the highest offset any send or poll returned (Jepsen's target;
// not a send of an info transaction) or, outside transactions and if
// higher, the last offset the healed cluster lists.
func (w *workload) Final(ctx context.Context, out io.Writer) workloads.Final {
	targets := w.gen.MaxOffsets()
	if w.opts.Txn {
		// A transactional partition ends with a commit or abort marker
		// that no read_committed poll returns, so its end offset is no
		// target: the reads go up to the offsets in the history.
		return w.final(targets)
	}
	ends, err := w.topics.EndOffsets(ctx, w.gen.Keys())
	if err != nil {
		fmt.Fprintf(out, "end offsets: %v (reading up to the offsets in the history)\n", err)
	}
	for k, end := range ends {
		if end > 0 && end-1 > targets[k] {
			targets[k] = end - 1
		}
	}
	return w.final(targets)
}

func (w *workload) final(targets map[int]int64) workloads.Final {
	opts := w.opts
	opts.PollTimeout = finalPollTimeout
	return &finalPhase{FinalGenerator: NewFinalGenerator(w.gen.Keys(), targets), opts: opts, topics: w.topics}
}

// finalPhase is the final generator with the clients of the final reads,
// whose polls wait longer.
type finalPhase struct {
	*FinalGenerator
	opts   Options
	topics *Topics
}

func (f *finalPhase) NewClient() (workloads.Client, error) { return NewClient(f.opts, f.topics) }

func (f *finalPhase) Missing() string { return fmt.Sprintf("keys %v", f.FinalGenerator.Missing()) }

// Stalls implements workloads.StallExplainer: for each key not read to
// its end, the partition's high watermark and last stable offset and,
// with Options.Txn, its open transactions, which is what stops
// read_committed reads. The high watermark also says whether the healed
// partition still holds what polls read before (the checker's
// lost-after-read).
func (f *finalPhase) Stalls(ctx context.Context) []checker.Stall {
	return f.topics.Stalls(ctx, f.FinalGenerator.Missing(), f.opts.Txn)
}
