package checker_test

import (
	"bytes"
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/faultline/faultline/checker"
	"github.com/faultline/faultline/checker/synth"
)

// cpuTime is this process's user+system CPU time. The benchmarks report it
// per op next to wall time, because on a shared machine wall time mostly
// measures the neighbours.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func reportCPU(b *testing.B, start time.Duration) {
	b.ReportMetric((cpuTime()-start).Seconds()/float64(b.N), "cpu-s/op")
}

func synthHistory(ops int) checker.History {
	return synth.Generate(synth.Config{Seed: 1, Ops: ops, Processes: 10, KeysActive: 4, WritesPerKey: 1024,
		InfoPercent: 1, FailPercent: 1, NemesisEvery: 20000})
}

// BenchmarkAnalyze is the whole check (queue, porcupine, perf) of a
// synthetic valid history; ops/s = history lines per second.
func BenchmarkAnalyze(b *testing.B) {
	for _, n := range []int{100_000, 1_000_000} {
		h := synthHistory(n)
		b.Run(fmt.Sprintf("ops=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			cpu := cpuTime()
			for b.Loop() {
				res := checker.Analyze(context.Background(), h, checker.Options{})
				if res.Valid != checker.Valid {
					b.Fatalf("synthetic history checks %s: %v %v", res.Valid, res.Anomalies, res.Checkers)
				}
			}
			reportCPU(b, cpu)
			b.ReportMetric(float64(len(h))*float64(b.N)/b.Elapsed().Seconds(), "ops/s")
		})
	}
}

// BenchmarkQueue is the Jepsen analyses alone.
func BenchmarkQueue(b *testing.B) {
	for _, n := range []int{100_000, 1_000_000} {
		h := synthHistory(n)
		b.Run(fmt.Sprintf("ops=%d", n), func(b *testing.B) {
			c := checker.QueueChecker(checker.Options{})
			cpu := cpuTime()
			for b.Loop() {
				c.Check(context.Background(), h)
			}
			reportCPU(b, cpu)
			b.ReportMetric(float64(len(h))*float64(b.N)/b.Elapsed().Seconds(), "ops/s")
		})
	}
}

// BenchmarkDecode is history.jsonl decoding; ops/s = lines per second.
func BenchmarkDecode(b *testing.B) {
	h := synthHistory(100_000)
	var buf bytes.Buffer
	w := checker.NewWriter(&buf)
	for _, op := range h {
		if err := w.Write(op); err != nil {
			b.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(buf.Len()))
	cpu := cpuTime()
	for b.Loop() {
		if _, err := checker.NewReader(bytes.NewReader(buf.Bytes())).ReadAll(); err != nil {
			b.Fatal(err)
		}
	}
	reportCPU(b, cpu)
	b.ReportMetric(float64(len(h))*float64(b.N)/b.Elapsed().Seconds(), "ops/s")
}

// BenchmarkLinearPartition is porcupine on one partition (one key) against
// the number of operations on it.
func BenchmarkLinearPartition(b *testing.B) {
	for _, sends := range []int{500, 2000, 8000} {
		h := synth.Generate(synth.Config{Seed: 2, Ops: sends * 4, Processes: 10, KeysActive: 1,
			WritesPerKey: 1 << 30, InfoPercent: 1, FailPercent: 1})
		b.Run(fmt.Sprintf("lines=%d", len(h)), func(b *testing.B) {
			c := checker.LinearChecker(checker.Options{})
			cpu := cpuTime()
			for b.Loop() {
				if r := c.Check(context.Background(), h); r.Valid != checker.Valid {
					b.Fatalf("partition checks %s: %s", r.Valid, r.Error)
				}
			}
			reportCPU(b, cpu)
		})
	}
}

// BenchmarkCycles is the cycle search alone (graph, Tarjan, BFS) on a
// synthetic valid history; ops/s = history lines per second.
func BenchmarkCycles(b *testing.B) {
	for _, n := range []int{100_000, 1_000_000} {
		h := synthHistory(n)
		b.Run(fmt.Sprintf("ops=%d", n), func(b *testing.B) {
			c := checker.CycleChecker(checker.Options{})
			start := cpuTime()
			for b.Loop() {
				if r := c.Check(context.Background(), h); r.Valid != checker.Valid {
					b.Fatalf("synthetic history: %v %v", r.Valid, r.Error)
				}
			}
			reportCPU(b, start)
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "ops/s")
		})
	}
}
