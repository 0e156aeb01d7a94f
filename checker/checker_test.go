package checker

import (
	"bytes"
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func fixed(name string, v Validity, anomalies map[string]AnomalyReport) Checker {
	return Func{CheckerName: name, Fn: func(context.Context, History) CheckerResult {
		return CheckerResult{Valid: v, Anomalies: anomalies}
	}}
}

func TestMergeTakesTheWorst(t *testing.T) {
	cases := []struct {
		in   []Validity
		want Validity
	}{
		{nil, Valid},
		{[]Validity{Valid, Valid}, Valid},
		{[]Validity{Valid, Unknown}, Unknown},
		{[]Validity{Unknown, Invalid, Valid}, Invalid},
		{[]Validity{Invalid, Unknown}, Invalid},
	}
	for _, c := range cases {
		var rs []CheckerResult
		for _, v := range c.in {
			rs = append(rs, CheckerResult{Valid: v})
		}
		assert.Equal(t, c.want, Merge(rs...).Valid, "%v", c.in)
	}
}

func TestComposeMergesAnomalies(t *testing.T) {
	a := fixed("a", Invalid, map[string]AnomalyReport{"duplicate": {Count: 2, Examples: []Example{{Key: 1}, {Key: 2}}}})
	b := fixed("b", Valid, map[string]AnomalyReport{"duplicate": {Count: 1, Examples: []Example{{Key: 3}}}, "int-send-skip": {Count: 1, Allowed: true, Examples: []Example{}}})
	res := Compose(context.Background(), nil, time.Second, a, b, Noop{})
	assert.Equal(t, Invalid, res.Valid)
	assert.Equal(t, 3, res.Anomalies["duplicate"].Count)
	assert.Equal(t, []Example{{Key: 1}, {Key: 2}, {Key: 3}}, res.Anomalies["duplicate"].Examples)
	assert.Equal(t, []string{"duplicate"}, res.BadAnomalies())
	require.Len(t, res.Checkers, 3)
	assert.Equal(t, "noop", res.Checkers[2].Name)
}

func TestComposePanicIsUnknown(t *testing.T) {
	boom := Func{CheckerName: "boom", Fn: func(context.Context, History) CheckerResult { panic("index out of range") }}
	res := Compose(context.Background(), nil, time.Second, Noop{}, boom)
	assert.Equal(t, Unknown, res.Valid)
	assert.Equal(t, "boom", res.Checkers[1].Name)
	assert.Contains(t, res.Checkers[1].Error, "index out of range")
}

func TestComposeTimeoutIsUnknownAndDoesNotWait(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	stuck := Func{CheckerName: "stuck", Fn: func(context.Context, History) CheckerResult {
		<-release // ignores its context on purpose
		return CheckerResult{Valid: Invalid}
	}}
	done := make(chan Result)
	go func() { done <- Compose(context.Background(), nil, 10*time.Millisecond, stuck, Noop{}) }()
	select {
	case res := <-done:
		assert.Equal(t, Unknown, res.Valid)
		assert.Equal(t, "stuck", res.Checkers[0].Name)
		assert.Contains(t, res.Checkers[0].Error, "deadline")
		assert.Equal(t, Valid, res.Checkers[1].Valid)
	case <-time.After(time.Minute):
		t.Fatal("Compose waited for a checker that ignores its context")
	}
}

func TestComposeParentCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	blocked := Func{CheckerName: "blocked", Fn: func(ctx context.Context, _ History) CheckerResult {
		<-ctx.Done()
		return CheckerResult{Valid: Unknown, Error: "cancelled"}
	}}
	res := Compose(ctx, nil, 0, blocked)
	assert.Equal(t, Unknown, res.Valid)
}

func readTestdata(t *testing.T, name string) History {
	t.Helper()
	h, err := ReadHistory(filepath.Join("testdata", name+".jsonl"))
	require.NoError(t, err)
	return h
}

func TestSubscribeModeAllowsPollSkip(t *testing.T) {
	h := readTestdata(t, "poll-skip")
	assert.Equal(t, Invalid, Analyze(context.Background(), h, Options{}).Valid)
	res := Analyze(context.Background(), h, Options{Mode: ModeSubscribe})
	assert.Equal(t, Valid, res.Valid)
	assert.True(t, res.Anomalies[AnomalyPollSkip].Allowed)
	assert.Equal(t, ModeSubscribe, res.Mode)
}

func TestLinearTimeoutIsUnknown(t *testing.T) {
	h := readTestdata(t, "valid-basic")
	res := Analyze(context.Background(), h, Options{LinearOpsMax: 2})
	assert.Equal(t, Unknown, res.Valid)
	i := slices.IndexFunc(res.Checkers, func(c CheckerResult) bool { return c.Name == "linearizable" })
	require.GreaterOrEqual(t, i, 0)
	lin := res.Checkers[i]
	assert.Contains(t, lin.Error, "exceed the bound of 2")
}

func TestNonlinearizableVisualization(t *testing.T) {
	h := readTestdata(t, "nonlinearizable")
	res := Analyze(context.Background(), h, Options{})
	require.Contains(t, res.Visualizations, 0)
	assert.Contains(t, string(res.Visualizations[0]), "<html")
	var buf bytes.Buffer
	require.NoError(t, VisualizeKey(h, 0, Options{}, &buf))
	assert.Contains(t, buf.String(), "send 11 → @0")
	assert.Error(t, VisualizeKey(h, 42, Options{}, &buf))
}

func TestPerfAndStats(t *testing.T) {
	h := readTestdata(t, "valid-basic")
	res := Analyze(context.Background(), h, Options{UnavailableMin: time.Microsecond, ThroughputBucket: 5 * time.Microsecond})
	require.Len(t, res.Perf.Faults, 1)
	assert.Equal(t, Window{Start: 7000, End: 16000, Label: `kill ["n1"]`}, res.Perf.Faults[0])
	// Sends: invoked from 2000, ok at 6000, 8000, 11000.
	assert.Equal(t, []Window{
		{Start: 2000, End: 6000},
		{Start: 6000, End: 8000, Label: `kill ["n1"]`},
		{Start: 8000, End: 11000, Label: `kill ["n1"]`},
	}, res.Perf.Unavailable)
	q := res.Perf.LatencyQuantilesMs["send:ok"]
	assert.InDelta(t, 0.004, q["p50"], 1e-9) // latencies 4000, 5000, 2000 ns
	assert.InDelta(t, 0.005, q["max"], 1e-9)
	assert.Equal(t, int64(5000), res.Perf.ThroughputBucketNs)
	// send:ok completions at 6000, 8000 (bucket 1) and 11000 (bucket 2).
	assert.InDeltaSlice(t, []float64{0, 4e5, 2e5, 0, 0}, res.Perf.Throughput["send:ok"], 1e-6)
	// Acked at 6000 and 8000 (bucket 1), 11000 (bucket 2); read at 12000
	// (10, 11: bucket 2) and 14000 (12: bucket 2).
	assert.Equal(t, []int{0, 2, 0, 0, 0}, res.Perf.Unseen)
	lost := Analyze(context.Background(), readTestdata(t, "lost-write"), Options{})
	assert.Equal(t, 1, lost.Perf.Unseen[len(lost.Perf.Unseen)-1], "the lost value stays unseen")
	assert.Equal(t, 3, res.Stats.SendsOK)
	assert.Equal(t, 3, res.Stats.ValuesRead)
	assert.Equal(t, 1, res.Stats.Keys)
	assert.Equal(t, 3, res.Stats.ByF["send"][OK])
	assert.Equal(t, 4, res.Stats.Processes)
	info := Analyze(context.Background(), readTestdata(t, "valid-info-send"), Options{})
	assert.Equal(t, map[string]int{"request timed out": 1, "connection reset": 1}, info.Stats.InfoErrors)
}

func TestDisciplineViolationsAreWarnings(t *testing.T) {
	h, err := ReadHistory(filepath.Join("testdata", "valid-discipline-warnings.jsonl"))
	require.NoError(t, err, "a history that breaks the discipline still reads")
	err = h.Validate()
	require.Error(t, err)
	res := Analyze(context.Background(), h, Options{})
	assert.Equal(t, Valid, res.Valid, "it is analysed, not refused as unknown")
	require.Len(t, res.Warnings, 4, "one warning per violation")
	for i, want := range []string{"still pending", "no pending invoke", "after its op 5 ended info", "differs from its invoke"} {
		assert.Contains(t, err.Error(), want)
		assert.Contains(t, res.Warnings[i], want)
	}
	ok := History{{Index: 0, Process: 0, Type: Invoke, F: FSend}}
	assert.NoError(t, ok.Validate(), "a pending invoke at the end is allowed")
	backwards := History{{Index: 1, Time: 5, Process: 0, Type: Invoke, F: FSend}, {Index: 0, Time: 4, Process: 0, Type: OK, F: FSend}}
	err = backwards.Validate()
	require.Error(t, err)
	assert.True(t, strings.Contains(err.Error(), "indexes must increase") && strings.Contains(err.Error(), "before its invoke"))
}

func TestReusedProcessAfterInfo(t *testing.T) {
	// Jepsen's nonmonotonic-send test: process 0 sends offsets 3, 4, its
	// assign to key 1 alone ends info, and the same process then sends
	// offsets 1, 2 to key 0. Jepsen allows that order (the assign moved the
	// process away from key 0) and analyses the reused process; so do we,
	// with a warning.
	res := Analyze(context.Background(), readTestdata(t, "reused-process-assign-away"), Options{})
	assert.NotContains(t, res.Anomalies, AnomalyNonmonotonicSend)
	assert.NotContains(t, res.Anomalies, AnomalyUnseen, "the reused process's final reads count")
	require.NotEmpty(t, res.Warnings)
	assert.Contains(t, res.Warnings[0], "op 10: process 0 invokes again after its op 3 ended info")
	same := Analyze(context.Background(), readTestdata(t, "nonmonotonic-send"), Options{})
	assert.Contains(t, same.Anomalies, AnomalyNonmonotonicSend, "without the assign the order is kept")
}

func TestEmptyHistoryIsInvalid(t *testing.T) {
	for name, h := range map[string]History{
		"no ops":      nil,
		"assign only": readTestdata(t, "empty-history"),
	} {
		res := Analyze(context.Background(), h, Options{})
		assert.Equal(t, Invalid, res.Valid, name)
		require.Contains(t, res.Anomalies, AnomalyEmptyTransactionGraph, name)
		assert.Contains(t, res.Anomalies[AnomalyEmptyTransactionGraph].Examples[0].Text, "no completed send or poll", name)
	}
}

func TestSubViaAllowances(t *testing.T) {
	h := readTestdata(t, "poll-skip")
	assert.Equal(t, []string{ModeAssign}, Analyze(context.Background(), h, Options{}).SubVia)
	sub := Analyze(context.Background(), h, Options{Mode: ModeSubscribe})
	assert.Equal(t, []string{ModeSubscribe}, sub.SubVia)
	assert.True(t, sub.Anomalies[AnomalyPollSkip].Allowed, "sub-via subscribe allows poll-skip")
	mixed := History{
		{Index: 0, Process: 0, Type: Invoke, F: FAssign, Keys: []int{0}},
		{Index: 1, Process: 0, Type: OK, F: FAssign, Keys: []int{0}},
		{Index: 2, Process: 1, Type: Invoke, F: FSubscribe, Keys: []int{0}},
		{Index: 3, Process: 1, Type: OK, F: FSubscribe, Keys: []int{0}},
	}
	res := Analyze(context.Background(), mixed, Options{})
	assert.Equal(t, []string{ModeAssign, ModeSubscribe}, res.SubVia)
	assert.Equal(t, ModeSubscribe, res.Mode, "as Jepsen's (:subscribe (:sub-via test))")
}

// hardPartition is a key whose check is exponential: n sends of unknown
// outcome may each fill any of n+4 offsets nobody observed, but there are
// too few of them, so porcupine must try every subset before giving up.
func hardPartition(n int) History {
	var h History
	add := func(op Op) {
		op.Index = int64(len(h))
		op.Time = int64(len(h)+1) * 1000
		h = append(h, op)
	}
	for p := range n {
		add(Op{Process: p, Type: Invoke, F: FSend, Mops: []MicroOp{{F: FSend, Key: 0, Value: int64(100 + p)}}})
	}
	for p := range n {
		add(Op{Process: p, Type: Info, F: FSend, Mops: []MicroOp{{F: FSend, Key: 0, Value: int64(100 + p)}}})
	}
	zero, last := int64(0), int64(n+5)
	add(Op{Process: n, Type: Invoke, F: FSend, Mops: []MicroOp{{F: FSend, Key: 0, Value: 1}}})
	add(Op{Process: n, Type: OK, F: FSend, Mops: []MicroOp{{F: FSend, Key: 0, Value: 1, Offset: &zero, Completed: true}}})
	add(Op{Process: n, Type: Invoke, F: FSend, Mops: []MicroOp{{F: FSend, Key: 0, Value: 2}}})
	add(Op{Process: n, Type: OK, F: FSend, Mops: []MicroOp{{F: FSend, Key: 0, Value: 2, Offset: &last, Completed: true}}})
	return h
}

func TestLinearTimeoutOnHardPartition(t *testing.T) {
	h := hardPartition(40)
	require.NoError(t, h.Validate())
	res := LinearChecker(Options{LinearTimeout: 100 * time.Millisecond}).Check(context.Background(), h)
	assert.Equal(t, Unknown, res.Valid)
	assert.Contains(t, res.Error, "key 0: timed out after 100ms")
	small := LinearChecker(Options{}).Check(context.Background(), hardPartition(6))
	assert.Equal(t, Invalid, small.Valid, "with few enough sends the search finishes and finds no order")
}

func TestStatsCountWhatWasReadBack(t *testing.T) {
	res := Analyze(context.Background(), readTestdata(t, "valid-info-send"), Options{})
	assert.Equal(t, res.Stats.SendsOK, res.Stats.SendsOKRead, "a valid run read back every acknowledged write")
	assert.Equal(t, 3, res.Stats.SendsInfo, "two info sends and one never completed")
	assert.Equal(t, 1, res.Stats.SendsInfoRead, "only value 11 landed")
	lost := Analyze(context.Background(), readTestdata(t, "lost-write"), Options{})
	assert.Equal(t, lost.Stats.SendsOK-1, lost.Stats.SendsOKRead, "the lost write was not read back")
}
