package node

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// BenchmarkTransactions: one op is 4 sends to the bench topic, flushed,
// and in mode=txn the transaction around them (BeginTransaction, 4 sends,
// Flush, EndTransaction commit); mode=plain is the same 4 sends from an
// idempotent producer. The target is txn at no less than
// half the plain throughput; BenchmarkTransactionsRatio measures it with
// the two modes interleaved. Compare with
//
//	go test -run '^$' -bench Transactions -count 6 ./broker/node/ | tee txn.txt
//	go run golang.org/x/perf/cmd/benchstat@latest -col /mode -row /broker txn.txt
//
// cpu-µs/op is the process's CPU time (user and system, client and
// broker together) per op, from getrusage: steadier than wall time on
// shared cores, and the bound once several producers run.
//
// broker=faultline runs at the default transaction.version 2 (KIP-890 part
// 2: the leaders add the partitions, every EndTxn bumps the epoch);
// broker=faultline-tv0 finalizes no feature, so the client sends
// AddPartitionsToTxn itself (Kafka 3.x's protocol).
func BenchmarkTransactions(b *testing.B) {
	peers := append(benchPeers(), benchPeer{"faultline-tv0", func(b *testing.B) []string {
		n := startNode(b, map[string]string{"faultline.transaction.version": "0"})
		return []string{n.Addr().String()}
	}})
	for _, peer := range peers {
		for _, mode := range []string{"plain", "txn"} {
			b.Run("broker="+peer.name+"/mode="+mode, func(b *testing.B) {
				seeds := peer.start(b)
				benchCreateTopic(b, seeds)
				txnID := ""
				if mode == "txn" {
					txnID = "bench-" + peer.name
				}
				cl := newTxnBenchProducer(b, seeds, txnID)
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
				defer cancel()
				value := make([]byte, benchValueBytes)
				var sending, ending time.Duration
				op := func() {
					s, e, err := txnBenchOp(ctx, cl, mode == "txn", value)
					if err != nil {
						b.Fatal(err)
					}
					sending, ending = sending+s, ending+e
				}
				op() // warm up: producer id, coordinator, topic metadata
				sending, ending = 0, 0
				cpu0 := cpuTime()
				b.ResetTimer()
				for b.Loop() {
					op()
				}
				b.ReportMetric(float64(4*b.N)/b.Elapsed().Seconds(), "records/s")
				b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
				// Where an op's time goes: begin, the sends and their flush
				// (under transaction.version 2 the leaders add the partitions
				// meanwhile), and EndTxn.
				b.ReportMetric(float64(sending.Microseconds())/float64(b.N), "send-µs/op")
				b.ReportMetric(float64(ending.Microseconds())/float64(b.N), "end-µs/op")
				if mode == "txn" {
					b.StopTimer()
					if n := benchTopicEnd(b, cl, "__transaction_state"); n > 0 {
						b.ReportMetric(float64(n)/float64(b.N+1), "state-records/op")
					}
				}
			})
		}
	}
}

// txnBenchOp is the transaction benchmarks' op: 4 sends of value,
// flushed, and with txn the transaction around them (BeginTransaction, the
// sends, Flush, EndTransaction commit). It returns how long the sends and
// their flush took, and then the EndTxn.
func txnBenchOp(ctx context.Context, cl *kgo.Client, txn bool, value []byte) (sending, ending time.Duration, err error) {
	start := time.Now()
	if txn {
		if err := cl.BeginTransaction(); err != nil {
			return 0, 0, err
		}
	}
	var failed atomic.Pointer[error]
	for range 4 {
		cl.Produce(ctx, &kgo.Record{Value: value}, func(_ *kgo.Record, err error) {
			if err != nil {
				failed.CompareAndSwap(nil, &err)
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		return 0, 0, err
	}
	if err := failed.Load(); err != nil {
		return 0, 0, *err
	}
	flushed := time.Now()
	if txn {
		if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
			return 0, 0, err
		}
	}
	return flushed.Sub(start), time.Since(flushed), nil
}

// BenchmarkTransactionsRatio measures the target directly: one
// broker, an idempotent and a transactional producer, and the op of
// BenchmarkTransactions run by each in turn, in alternating runs of
// ratioChunk ops, so that both modes see the same machine. A shared
// machine drifts by more than the target's margin between two
// sub-benchmarks run a minute apart; alternating cancels that drift. It
// reports records/s in transactions over plain records/s (txn/plain, the
// target is at least 0.5), the same from CPU time (cpu-txn/plain: the
// process's CPU per plain op over per transaction), and each mode's
// µs/op. The chunks keep the work a transaction leaves behind (its
// markers) in its own mode, but at a chunk's first op.
func BenchmarkTransactionsRatio(b *testing.B) {
	const ratioChunk = 64
	for _, peer := range benchPeers() {
		b.Run("broker="+peer.name, func(b *testing.B) {
			seeds := peer.start(b)
			benchCreateTopic(b, seeds)
			clients := [2]*kgo.Client{newTxnBenchProducer(b, seeds, ""), newTxnBenchProducer(b, seeds, "bench-ratio-"+peer.name)}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			value := make([]byte, benchValueBytes)
			for mode, cl := range clients { // warm up
				if _, _, err := txnBenchOp(ctx, cl, mode == 1, value); err != nil {
					b.Fatal(err)
				}
			}
			var wall, cpu [2]time.Duration
			var ops [2]int
			for i := 0; b.Loop(); i++ {
				mode := (i / ratioChunk) % 2
				start, cpu0 := time.Now(), cpuTime()
				if _, _, err := txnBenchOp(ctx, clients[mode], mode == 1, value); err != nil {
					b.Fatal(err)
				}
				wall[mode] += time.Since(start)
				cpu[mode] += cpuTime() - cpu0
				ops[mode]++
			}
			if ops[0] == 0 || ops[1] == 0 {
				return // too short a run to compare
			}
			per := func(d time.Duration, n int) float64 { return float64(d.Microseconds()) / float64(n) }
			b.ReportMetric(per(wall[0], ops[0])/per(wall[1], ops[1]), "txn/plain")
			b.ReportMetric(per(cpu[0], ops[0])/per(cpu[1], ops[1]), "cpu-txn/plain")
			b.ReportMetric(per(wall[0], ops[0]), "plain-µs/op")
			b.ReportMetric(per(wall[1], ops[1]), "txn-µs/op")
		})
	}
}

// newTxnBenchProducer is the transaction benchmarks' producer: round robin
// over the bench topic's partitions, no linger, transactional under txnID
// unless it is empty (then idempotent); closed when b ends.
func newTxnBenchProducer(b *testing.B, seeds []string, txnID string) *kgo.Client {
	b.Helper()
	opts := []kgo.Opt{kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic(benchTopic),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()), kgo.ProducerLinger(0)}
	if txnID != "" {
		opts = append(opts, kgo.TransactionalID(txnID))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(cl.Close)
	return cl
}

// benchTopicEnd sums a topic's end offsets; 0 when the broker has no such
// topic (kfake keeps no __transaction_state).
func benchTopicEnd(b *testing.B, cl *kgo.Client, topic string) int64 {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err != nil {
		return 0
	}
	var n int64
	ends.Each(func(o kadm.ListedOffset) {
		if o.Err == nil {
			n += o.Offset
		}
	})
	return n
}

// BenchmarkTransactionsConcurrent is BenchmarkTransactions' op run by 8
// producers at once (each with its own transactional id in mode=txn), so
// that throughput is bound by the CPU both ends spend per op rather than
// by one producer's round trips. ns/op is wall time over all producers'
// ops.
func BenchmarkTransactionsConcurrent(b *testing.B) {
	const producers = 8
	for _, peer := range benchPeers() {
		for _, mode := range []string{"plain", "txn"} {
			b.Run("broker="+peer.name+"/mode="+mode, func(b *testing.B) {
				seeds := peer.start(b)
				benchCreateTopic(b, seeds)
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
				defer cancel()
				value := make([]byte, benchValueBytes)
				clients := make([]*kgo.Client, producers)
				for i := range clients {
					txnID := ""
					if mode == "txn" {
						txnID = fmt.Sprintf("bench-%s-%d", peer.name, i)
					}
					clients[i] = newTxnBenchProducer(b, seeds, txnID)
				}
				op := func(cl *kgo.Client) error {
					_, _, err := txnBenchOp(ctx, cl, mode == "txn", value)
					return err
				}
				for _, cl := range clients { // warm up
					if err := op(cl); err != nil {
						b.Fatal(err)
					}
				}
				var left atomic.Int64
				left.Store(int64(b.N))
				errs := make(chan error, producers)
				b.ResetTimer()
				var wg sync.WaitGroup
				for _, cl := range clients {
					wg.Go(func() {
						for left.Add(-1) >= 0 {
							if err := op(cl); err != nil {
								errs <- err
								return
							}
						}
					})
				}
				wg.Wait()
				b.StopTimer()
				select {
				case err := <-errs:
					b.Fatal(err)
				default:
				}
				b.ReportMetric(float64(4*b.N)/b.Elapsed().Seconds(), "records/s")
			})
		}
	}
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
