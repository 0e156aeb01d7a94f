package harness

import (
	"context"
	"io"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/faultline/faultline/checker"
	"github.com/faultline/faultline/workloads"
	"github.com/faultline/faultline/workloads/queue"
)

// countedGen hands out at most limit operations of gen, so a benchmark runs
// b.N operations.
type countedGen struct {
	gen   workloads.Generator
	limit int64
	n     atomic.Int64
}

func (c *countedGen) Next(p int) (checker.Op, bool) {
	if c.n.Add(1) > c.limit {
		return checker.Op{}, false
	}
	return c.gen.Next(p)
}

func (c *countedGen) Update(op checker.Op) { c.gen.Update(op) }

// benchWorkers measures the harness side of the main phase: workers,
// generator, queue clients and the recorder streaming history.jsonl,
// against kfake (an in-process fake broker), so the broker's cost and the
// machine's other load count as little as possible. It reports recorded
// operations (completions) per second. Client start-up is inside the timed
// region, so give it enough operations to amortise it:
//
//	go test -run '^$' -bench WorkersKfake -benchtime 20000x ./harness/
func benchWorkers(b *testing.B, concurrency int) {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		b.Fatal(err)
	}
	defer cluster.Close()
	wl, err := queue.New(workloads.Options{Seeds: cluster.ListenAddrs(), Seed: 1, ReplicationFactor: 1, Idempotent: true})
	if err != nil {
		b.Fatal(err)
	}
	defer wl.Close()
	rec, err := NewRecorder(filepath.Join(b.TempDir(), "history.jsonl"))
	if err != nil {
		b.Fatal(err)
	}
	defer rec.Close()
	r := &run{t: DefaultTest(), rec: rec, out: io.Discard}
	gen := &countedGen{gen: wl.Generator(), limit: int64(b.N)}
	b.ReportAllocs()
	b.ResetTimer()
	r.runWorkers(context.Background(), context.Background(), gen, wl.NewClient, nil, concurrency, 0, 0)
	b.StopTimer()
	c := rec.Counts()
	done := c[checker.OK] + c[checker.Fail] + c[checker.Info]
	if done == 0 {
		b.Fatal("no operation completed")
	}
	b.ReportMetric(float64(done)/b.Elapsed().Seconds(), "ops/s")
}

func BenchmarkWorkersKfake10(b *testing.B) { benchWorkers(b, 10) }
func BenchmarkWorkersKfake40(b *testing.B) { benchWorkers(b, 40) }
