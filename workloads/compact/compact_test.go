package compact

import (
	"context"
	"io"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"

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
			ks = append(ks, pv.Key)
		}
		return ks
	}
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

// TestTxnPutsAgainstKfake drives the --txn client against franz-go's fake
// cluster (which compacts nothing): committed puts are ok with their
// offset, aborted ones fail, the read_committed scan reaches every
// partition's end (a marker) and shows no aborted value, and the history
// checks valid.
func TestTxnPutsAgainstKfake(t *testing.T) {
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

	fin := w.Final(ctx, io.Discard)
	sc, err := fin.NewClient()
	require.NoError(t, err)
	t.Cleanup(sc.Close)
	op, ok := fin.Next(1)
	require.True(t, ok)
	op.Process = 1
	record(op)
	done := sc.Invoke(ctx, op)
	record(done)
	require.Equal(t, checker.OK, done.Type, done.Error)
	for v := range failed {
		assert.NotContains(t, string(done.Raw), ","+v+"]", "an aborted value in the committed scan")
	}
	res := checker.Analyze(ctx, h, checker.Options{Txn: true})
	assert.Equal(t, checker.Valid, res.Valid, "%v", res.Anomalies)
}
