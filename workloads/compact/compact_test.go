package compact

import (
	"context"
	"encoding/json"
	"io"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/faultline/faultline/checker"
	"github.com/faultline/faultline/workloads"
)

func TestGeneratorRetiresKeysAndIsSeeded(t *testing.T) {
	const n = 2000
	keysOf := func(seed int64) []int {
		g := NewGenerator(seed, Keys)
		var ks []int
		for range n {
			op, ok := g.Next(0)
			require.True(t, ok)
			pv, err := checker.ParsePut(op.Raw)
			require.NoError(t, err)
			require.Less(t, pv.Key, g.KeysUsed(), "KeysUsed bounds every key handed out")
			ks = append(ks, pv.Key)
		}
		return ks
	}
	assert.Zero(t, NewGenerator(7, Keys).KeysUsed(), "no put, no key")
	ks := keysOf(7)
	assert.Equal(t, ks, keysOf(7), "a pure function of its seed")
	assert.NotEqual(t, ks, keysOf(8))
	last := map[int]int{}
	for i, k := range ks {
		low := i / RetireEvery
		assert.GreaterOrEqual(t, k, low, "put %d", i)
		assert.Less(t, k, low+Keys, "put %d", i)
		last[k] = i
	}
	// Most keys are retired long before the end: their last put is far
	// from the last put of the run.
	retired := 0
	for _, i := range last {
		if i < n-Keys*RetireEvery {
			retired++
		}
	}
	assert.Greater(t, retired, n/RetireEvery-2*Keys, "keys written for the last time well before the end")
}

// txnOnKfake starts franz-go's fake cluster of one broker and the --txn
// workload on it (2 partitions, seed 5) with one client whose aborted
// puts are held open at most 20 ms; all closed when t ends.
func txnOnKfake(t *testing.T) (*kfake.Cluster, workloads.Workload, workloads.Client, context.Context) {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	require.NoError(t, err)
	t.Cleanup(c.Close)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	w, err := New(workloads.Options{Seeds: c.ListenAddrs(), Seed: 5, Txn: true, Acks: workloads.AcksAll, Idempotent: true,
		PartitionsPerTopic: 2, ReplicationFactor: 1})
	require.NoError(t, err)
	t.Cleanup(w.Close)
	wc, err := w.NewClient()
	require.NoError(t, err)
	t.Cleanup(wc.Close)
	wc.(*client).txn.maxHold = 20 * time.Millisecond
	return c, w, wc, ctx
}

// scanOnce runs the final phase's first scan, as process 1, for at most
// d, and records its invoke and completion.
func scanOnce(t *testing.T, ctx context.Context, w workloads.Workload, d time.Duration, record func(checker.Op)) (workloads.Final, checker.Op) {
	t.Helper()
	fin := w.Final(ctx, io.Discard)
	sc, err := fin.NewClient()
	require.NoError(t, err)
	t.Cleanup(sc.Close)
	op, ok := fin.Next(1)
	require.True(t, ok)
	op.Process = 1
	record(op)
	sctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	done := sc.Invoke(sctx, op)
	record(done)
	return fin, done
}

// TestTxnPutsAgainstKfake drives the --txn client against franz-go's fake
// cluster (which compacts nothing): committed puts are ok with their
// offset, aborted ones fail, the read_committed scan reaches every
// partition's end (a marker) and shows no aborted value, and the history
// checks valid.
func TestTxnPutsAgainstKfake(t *testing.T) {
	_, w, wc, ctx := txnOnKfake(t)
	assert.Equal(t, []string{"faultline-compact-1"}, w.(*workload).TransactionalIDs())

	var h checker.History
	record := func(op checker.Op) {
		op.Index, op.Time = int64(len(h)), int64(len(h))
		h = append(h, op)
	}
	g := w.Generator()
	types := map[checker.OpType]int{}
	failed := map[string]bool{}
	for range 60 {
		op, ok := g.Next(0)
		require.True(t, ok)
		record(op)
		done := wc.Invoke(ctx, op)
		record(done)
		types[done.Type]++
		pv, err := checker.ParsePut(done.Raw)
		require.NoError(t, err)
		require.NotNil(t, pv.Offset, "the send was answered: %s", done.Error)
		if done.Type == checker.Fail {
			assert.Equal(t, errAbortedOnPurpose, done.Error)
			if pv.Value != nil {
				failed[strconv.FormatInt(*pv.Value, 10)] = true
			}
		}
	}
	assert.Zero(t, types[checker.Info])
	assert.Greater(t, types[checker.OK], 30)
	assert.Greater(t, types[checker.Fail], 5, "about one in four aborted on purpose")

	_, done := scanOnce(t, ctx, w, time.Minute, record)
	require.Equal(t, checker.OK, done.Type, done.Error)
	for v := range failed {
		assert.NotContains(t, string(done.Raw), ","+v+"]", "an aborted value in the committed scan")
	}
	res := checker.Analyze(ctx, h, checker.Options{Txn: true})
	assert.Equal(t, checker.Valid, res.Valid, "%v", res.Anomalies)
}

// TestScanHeldByAnOpenTransactionIsExplained: a transaction left open on
// partition 0 holds its last stable offset, so the read_committed scan
// cannot reach the end of it; the final phase then says why (Stalls: every
// key the puts may have used on partition 0, with the high watermark, the
// last stable offset and the open transaction, seen open since the look
// after the scan stopped), and with that recorded the checker finds the
// committed puts above the transaction unseen once it has stayed open past
// its timeout.
func TestScanHeldByAnOpenTransactionIsExplained(t *testing.T) {
	c, w, wc, ctx := txnOnKfake(t)

	var h checker.History
	record := func(op checker.Op) {
		op.Index, op.Time = int64(len(h)), int64(len(h))
		h = append(h, op)
	}
	put := func(n int) {
		for range n {
			op, ok := w.Generator().Next(0)
			require.True(t, ok)
			record(op)
			done := wc.Invoke(ctx, op)
			require.NotEqual(t, checker.Info, done.Type, done.Error)
			record(done)
		}
	}
	put(10)
	open, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.TransactionalID("left-open"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	require.NoError(t, err)
	t.Cleanup(open.Close)
	require.NoError(t, open.BeginTransaction())
	require.NoError(t, open.ProduceSync(ctx, &kgo.Record{Topic: Topic, Partition: 0, Key: []byte("other"), Value: []byte("1")}).FirstErr())
	put(30)

	fin, done := scanOnce(t, ctx, w, 3*time.Second, record)
	require.Equal(t, checker.Fail, done.Type)
	assert.Contains(t, done.Error, "scan did not reach the end of partitions map[0:")
	fin.Update(done)
	require.False(t, fin.Done())

	require.Len(t, fin.(*final).seen, 1, "the look after the stopped scan found the open transaction")
	stalls := fin.(workloads.StallExplainer).Stalls(ctx)
	require.NotEmpty(t, stalls)
	for _, s := range stalls {
		assert.Equal(t, 0, s.Key%2, "only partition 0's keys")
		assert.Equal(t, int32(0), s.Partition)
		assert.Empty(t, s.Error)
		assert.Less(t, s.LastStable, s.HighWatermark, "held by the open transaction")
		assert.Positive(t, s.ListedAt)
		assert.Equal(t, wc.(*client).txn.timeout.Milliseconds(), s.TxnTimeoutMs, "the workload's transaction timeout")
		require.Len(t, s.OpenTxns, 1)
		assert.Equal(t, s.LastStable, s.OpenTxns[0].FirstOffset)
		assert.Less(t, s.OpenTxns[0].OpenForMs, time.Minute.Milliseconds(), "seen open since the look after the scan stopped")
	}
	compaction := func(stalls []checker.Stall) checker.CheckerResult {
		raw, err := json.Marshal(stalls)
		require.NoError(t, err)
		hs := append(slices.Clone(h), checker.Op{Index: int64(len(h)), Time: int64(len(h)), Process: checker.HarnessProcess, Type: checker.Info, F: checker.FStalledReads, Raw: raw})
		for _, r := range checker.Analyze(ctx, hs, checker.Options{Txn: true}).Checkers {
			if r.Name == "compaction" {
				return r
			}
		}
		t.Fatal("no compaction checker")
		return checker.CheckerResult{}
	}
	// Just seen open, the transaction proves nothing: a coordinator may
	// still abort it by its timeout.
	young := compaction(stalls)
	assert.Equal(t, checker.Unknown, young.Valid)
	assert.Contains(t, young.Error, "within its")
	// The same look a minute later: it stayed open past its timeout, so
	// the committed puts above it are out of every read_committed
	// reader's reach.
	for i := range stalls {
		stalls[i].OpenTxns[0].OpenForMs += time.Minute.Milliseconds()
	}
	old := compaction(stalls)
	assert.Equal(t, checker.Invalid, old.Valid)
	require.Contains(t, old.Anomalies, checker.AnomalyUnseen)
	assert.Contains(t, old.Anomalies[checker.AnomalyUnseen].Examples[0].Text, "held by the open transaction of producer")
}
