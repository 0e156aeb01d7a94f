package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/faultline/faultline/checker"
	"github.com/faultline/faultline/workloads"
)

// runOnKfake runs a workload in process against franz-go's fake cluster
// (kfake, which has transactions but no compaction): the main phase for d
// with concurrency workers, then the final reads in rounds of fresh
// processes until they are done, and returns the recorded history.
func runOnKfake(t *testing.T, name string, opts workloads.Options, d time.Duration, concurrency int) checker.History {
	t.Helper()
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1))
	require.NoError(t, err)
	defer cluster.Close()
	opts.Seeds, opts.ReplicationFactor = cluster.ListenAddrs(), 1
	if opts.PartitionsPerTopic == 0 {
		opts.PartitionsPerTopic = 2
	}
	newWL, err := testWorkloads.Lookup(name)
	require.NoError(t, err)
	wl, err := newWL(opts)
	require.NoError(t, err)
	defer wl.Close()
	rec, err := NewRecorder(filepath.Join(t.TempDir(), "history.jsonl"))
	require.NoError(t, err)
	defer rec.Close()
	r := &run{t: DefaultTest(), rec: rec, out: io.Discard}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	r.runWorkers(context.Background(), ctx, wl.Generator(), wl.NewClient, nil, concurrency, 0, 0)
	cancel()
	fctx, fcancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer fcancel()
	final := wl.Final(fctx, io.Discard)
	base := 1000
	for round := 0; round < 10 && !final.Done() && fctx.Err() == nil; round++ {
		r.runWorkers(context.Background(), fctx, final, final.NewClient, nil, 1, base, 0)
		base++
	}
	require.True(t, final.Done(), "final reads did not finish: %s", final.Missing())
	// The probe of transactional ids, as a run makes it after the final
	// reads (none without --txn).
	r.workload = wl
	r.adm, err = kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...), kgo.RetryTimeout(5*time.Second))
	require.NoError(t, err)
	defer r.adm.Close()
	r.probeTxnIDs(fctx, true)
	return rec.History()
}

// TestTxnQueueOnKfakeIsValid runs `--txn` in process against kfake for a
// few seconds: transactions commit and abort, read_committed polls see
// only committed sends, and the checker finds the history valid.
func TestTxnQueueOnKfakeIsValid(t *testing.T) {
	h := runOnKfake(t, "queue", workloads.Options{Seed: 3, Txn: true, Idempotent: true, Acks: workloads.AcksAll}, 3*time.Second, 4)
	counts := map[checker.OpType]int{}
	reads := 0
	for _, op := range h {
		if op.F != checker.FTxn {
			continue
		}
		counts[op.Type]++
		if op.Type == checker.OK {
			for _, m := range op.Mops {
				for _, ps := range m.Polls {
					reads += len(ps)
				}
			}
		}
	}
	errs := map[string]int{}
	for _, op := range h {
		if op.F == checker.FTxn && op.Type == checker.Fail {
			errs[op.Error]++
		}
	}
	t.Logf("fail errors: %v", errs)
	require.Positive(t, counts[checker.OK], "transactions committed")
	require.Positive(t, counts[checker.Fail], "transactions aborted on purpose")
	require.Positive(t, reads, "committed transactions read records")
	res := checker.Analyze(context.Background(), h, checker.Options{Txn: true})
	require.Equal(t, checker.Valid, res.Valid, "bad anomalies %v", res.BadAnomalies())
	var probes []checker.TxnIDProbe
	for _, op := range h {
		probes = append(probes, op.TxnIDProbes()...)
	}
	require.NotEmpty(t, probes, "the transactional ids were probed")
	for _, p := range probes {
		assert.True(t, p.OK, "a new producer started under %s: %+v", p.ID, p)
	}
	assert.True(t, slices.ContainsFunc(res.Checkers, func(c checker.CheckerResult) bool {
		return c.Name == "transactional-ids" && c.Valid == checker.Valid
	}), "the transactional-ids check ran")
	t.Logf("txn ok %d fail %d info %d; anomalies: %v", counts[checker.OK], counts[checker.Fail], counts[checker.Info], anomalyCounts(res))
}

func anomalyCounts(res checker.Result) map[string]int {
	out := map[string]int{}
	for n, a := range res.Anomalies {
		out[n] = a.Count
	}
	return out
}

// TestCompactOnKfakeIsValid runs the compaction workload in process
// against kfake, which keeps the whole log (it does not compact): the
// latest value of every key is still last, and the history checks valid.
func TestCompactOnKfakeIsValid(t *testing.T) {
	h := runOnKfake(t, "compact", workloads.Options{Seed: 5, Idempotent: true, Acks: workloads.AcksAll}, 2*time.Second, 4)
	puts, scans := 0, 0
	for _, op := range h {
		switch {
		case op.F == checker.FPut && op.Type == checker.OK:
			puts++
		case op.F == checker.FScan && op.Type == checker.OK:
			scans++
		}
	}
	require.Positive(t, puts)
	require.Equal(t, 1, scans)
	res := checker.Analyze(context.Background(), h, checker.Options{})
	require.Equal(t, checker.Valid, res.Valid, "bad anomalies %v; checkers %+v", res.BadAnomalies(), res.Checkers)
	t.Logf("puts ok %d; anomalies: %v", puts, anomalyCounts(res))

	// Planted: the cleaner "dropped" the latest record of one key whose
	// latest put was a value, so the scan shows an older one last.
	for i := range h {
		if h[i].F != checker.FScan || h[i].Type != checker.OK {
			continue
		}
		scan, err := checker.ParseScan(h[i].Raw)
		require.NoError(t, err)
		planted := false
		out := map[string][][2]any{}
		for k, es := range scan {
			if !planted && len(es) > 1 && es[len(es)-1].Value != nil && es[len(es)-2].Value != nil {
				es, planted = es[:len(es)-1], true
			}
			for _, e := range es {
				var v any
				if e.Value != nil {
					v = *e.Value
				}
				out[fmt.Sprint(k)] = append(out[fmt.Sprint(k)], [2]any{e.Offset, v})
			}
		}
		require.True(t, planted)
		h[i].Raw, err = json.Marshal(out)
		require.NoError(t, err)
	}
	res = checker.Analyze(context.Background(), h, checker.Options{})
	require.Equal(t, checker.Invalid, res.Valid)
	require.Equal(t, []string{checker.AnomalyLostLatestValue}, res.BadAnomalies())
}
