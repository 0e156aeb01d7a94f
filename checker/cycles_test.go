package checker

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// parseLines reads history.jsonl lines given as one string.
func parseLines(t *testing.T, lines string) History {
	t.Helper()
	h, err := NewReader(strings.NewReader(lines)).ReadAll()
	require.NoError(t, err)
	return h
}

func cycles(t *testing.T, lines string) CheckerResult {
	t.Helper()
	h := parseLines(t, lines)
	return CycleChecker(Options{}).Check(context.Background(), h)
}

// TestJepsenG0 is kafka_test.clj's g0-test (keys x, y as 0, 1; values a, b
// as 1, 2): two sends write both keys in opposite orders.
func TestJepsenG0(t *testing.T) {
	res := cycles(t, `{"index":0,"time":0,"process":0,"type":"invoke","f":"send","value":[["send",0,1],["send",1,1]]}
{"index":1,"time":1,"process":1,"type":"invoke","f":"send","value":[["send",0,2],["send",1,2]]}
{"index":2,"time":2,"process":0,"type":"ok","f":"send","value":[["send",0,[0,1]],["send",1,[1,1]]]}
{"index":3,"time":3,"process":1,"type":"ok","f":"send","value":[["send",0,[1,2]],["send",1,[0,2]]]}
`)
	require.Contains(t, res.Anomalies, AnomalyG0)
	g0 := res.Anomalies[AnomalyG0]
	assert.True(t, g0.Allowed)
	assert.Equal(t, Valid, res.Valid)
	require.Len(t, g0.Examples, 1)
	ex := g0.Examples[0]
	assert.Equal(t, []int64{2, 3}, ex.Ops)
	require.Len(t, ex.Steps, 2)
	s0, s1 := ex.Steps[0], ex.Steps[1]
	assert.Equal(t, CycleStep{Type: DepWW, From: 2, To: 3, Key: ptr(0), Value: ptr(int64(1)), Offset: ptr(int64(0)), Value2: ptr(int64(2)), Offset2: ptr(int64(1)), Text: s0.Text}, s0)
	assert.Equal(t, CycleStep{Type: DepWW, From: 3, To: 2, Key: ptr(1), Value: ptr(int64(2)), Offset: ptr(int64(0)), Value2: ptr(int64(1)), Offset2: ptr(int64(1)), Text: s1.Text}, s1)
	assert.NotContains(t, res.Anomalies, AnomalyG1c)
}

// TestJepsenG1cPureWR is kafka_test.clj's g1c-pure-wr-test: each
// transaction read the other's write, which read_committed forbids.
func TestJepsenG1cPureWR(t *testing.T) {
	res := cycles(t, `{"index":0,"time":0,"process":0,"type":"invoke","f":"txn","value":[["send",0,1],["poll"]]}
{"index":1,"time":1,"process":1,"type":"invoke","f":"txn","value":[["send",1,2],["poll"]]}
{"index":2,"time":2,"process":0,"type":"ok","f":"txn","value":[["send",0,[0,1]],["poll",{"1":[[0,2]]}]]}
{"index":3,"time":3,"process":1,"type":"ok","f":"txn","value":[["send",1,[0,2]],["poll",{"0":[[0,1]]}]]}
`)
	assert.Equal(t, Invalid, res.Valid)
	g1c := res.Anomalies[AnomalyG1c]
	require.Equal(t, 1, g1c.Count)
	assert.False(t, g1c.Allowed)
	steps := g1c.Examples[0].Steps
	require.Len(t, steps, 2)
	for _, s := range steps {
		assert.Equal(t, DepWR, s.Type)
	}
	assert.Equal(t, int64(2), steps[0].From)
	assert.Equal(t, 0, *steps[0].Key)
	assert.Equal(t, int64(1), *steps[0].Value)
	assert.Equal(t, int64(3), steps[1].From)
	assert.Equal(t, 1, *steps[1].Key)
}

// TestJepsenG1cWWWR is kafka_test.clj's g1c-ww-wr-test: the cycle needs
// a ww edge, which Kafka's lack of write isolation allows (Jepsen allows
// G1c when it infers ww edges).
func TestJepsenG1cWWWR(t *testing.T) {
	res := cycles(t, `{"index":0,"time":0,"process":0,"type":"invoke","f":"txn","value":[["send",0,1],["send",1,3]]}
{"index":1,"time":1,"process":1,"type":"invoke","f":"txn","value":[["poll"],["send",1,2]]}
{"index":2,"time":2,"process":0,"type":"ok","f":"txn","value":[["send",0,[0,1]],["send",1,[2,3]]]}
{"index":3,"time":3,"process":1,"type":"ok","f":"txn","value":[["poll",{"0":[[0,1]]}],["send",1,[1,2]]]}
`)
	g1c := res.Anomalies[AnomalyG1c]
	require.Equal(t, 1, g1c.Count)
	assert.True(t, g1c.Allowed)
	assert.Equal(t, Valid, res.Valid)
	steps := g1c.Examples[0].Steps
	require.Len(t, steps, 2)
	assert.Equal(t, []string{DepWR, DepWW}, []string{steps[0].Type, steps[1].Type})
	assert.Equal(t, int64(1), *steps[1].Offset)
	assert.Equal(t, int64(2), *steps[1].Offset2)
}

// TestG1cPrefersCycleWithoutWW: in one component holding both a cycle
// through a ww edge and a pure wr cycle, the pure one is reported and makes
// the result invalid.
func TestG1cPrefersCycleWithoutWW(t *testing.T) {
	res := cycles(t, `{"index":0,"time":0,"process":0,"type":"invoke","f":"txn","value":[["send",0,1],["send",2,5],["poll"]]}
{"index":1,"time":1,"process":1,"type":"invoke","f":"txn","value":[["send",1,2],["send",2,6],["poll"]]}
{"index":2,"time":2,"process":0,"type":"ok","f":"txn","value":[["send",0,[0,1]],["send",2,[1,5]],["poll",{"1":[[0,2]]}]]}
{"index":3,"time":3,"process":1,"type":"ok","f":"txn","value":[["send",1,[0,2]],["send",2,[0,6]],["poll",{"0":[[0,1]]}]]}
`)
	g1c := res.Anomalies[AnomalyG1c]
	require.Equal(t, 1, g1c.Count)
	assert.False(t, g1c.Allowed)
	for _, s := range g1c.Examples[0].Steps {
		assert.Equal(t, DepWR, s.Type)
	}
}

// TestPlantedAbortedReadInTxnHistory: a transactional history in which a
// poll returned a value of an aborted transaction is invalid with G1a.
func TestPlantedAbortedReadInTxnHistory(t *testing.T) {
	h := parseLines(t, `{"index":0,"time":0,"process":0,"type":"invoke","f":"txn","value":[["send",0,1],["send",1,2]]}
{"index":1,"time":1,"process":0,"type":"ok","f":"txn","value":[["send",0,[0,1]],["send",1,[0,2]]]}
{"index":2,"time":2,"process":0,"type":"invoke","f":"txn","value":[["send",0,3],["poll"]]}
{"index":3,"time":3,"process":0,"type":"fail","f":"txn","value":[["send",0,[2,3]],["poll",{}]],"error":"aborted on purpose"}
{"index":4,"time":4,"process":1,"type":"invoke","f":"assign","value":[0,1],"seek-to-beginning":true}
{"index":5,"time":5,"process":1,"type":"ok","f":"assign","value":[0,1],"seek-to-beginning":true}
{"index":6,"time":6,"process":1,"type":"invoke","f":"poll","value":[["poll"]]}
{"index":7,"time":7,"process":1,"type":"ok","f":"poll","value":[["poll",{"0":[[0,1],[2,3]],"1":[[0,2]]}]]}
`)
	res := Analyze(context.Background(), h, Options{})
	assert.Equal(t, Invalid, res.Valid)
	assert.Contains(t, res.BadAnomalies(), AnomalyG1a)
	assert.True(t, res.Txn)
}

// TestCycleSearchIsBounded: a long run of interleaved transactions whose
// sends collide on few keys (G0 cycles everywhere, one big component)
// finishes promptly and reports its allowed cycles; and a long chain of
// dependencies does not overflow Tarjan's stack.
func TestCycleSearchIsBounded(t *testing.T) {
	var b strings.Builder
	idx := 0
	line := func(format string, args ...any) {
		fmt.Fprintf(&b, `{"index":%d,"time":%d,`, idx, idx)
		fmt.Fprintf(&b, format, args...)
		b.WriteString("}\n")
		idx++
	}
	offs := map[int]int{}
	const n = 4000
	for i := 0; i < n; i += 2 {
		// Two processes' txns overlap and write keys k, k+1 in opposite
		// orders.
		k := (i / 2) % 3
		v := int64(i)
		line(`"process":0,"type":"invoke","f":"txn","value":[["send",%d,%d],["send",%d,%d]]`, k, v, k+1, v)
		line(`"process":1,"type":"invoke","f":"txn","value":[["send",%d,%d],["send",%d,%d]]`, k, v+1, k+1, v+1)
		a0, b1 := offs[k], offs[k+1]
		offs[k] += 2
		offs[k+1] += 2
		line(`"process":0,"type":"ok","f":"txn","value":[["send",%d,[%d,%d]],["send",%d,[%d,%d]]]`, k, a0, v, k+1, b1+1, v)
		line(`"process":1,"type":"ok","f":"txn","value":[["send",%d,[%d,%d]],["send",%d,[%d,%d]]]`, k, a0+1, v+1, k+1, b1, v+1)
	}
	res := cycles(t, b.String())
	assert.Equal(t, Valid, res.Valid)
	assert.Positive(t, res.Anomalies[AnomalyG0].Count)
	assert.LessOrEqual(t, len(res.Anomalies[AnomalyG0].Examples), ExamplesMax)
}

// TestAbortedReadByAFailedOp: a read_committed poll that returned an
// aborted record is G1a even when the op that polled it failed (a poll is
// no part of its op's transaction); and the aborted record, once placed in
// the log by that read, is skipped by every other poll without a
// poll-skip or int-poll-skip: read_committed must pass over it.
func TestAbortedReadByAFailedOp(t *testing.T) {
	h := parseLines(t, `{"index":0,"time":0,"process":0,"type":"invoke","f":"txn","value":[["send",0,1]]}
{"index":1,"time":1,"process":0,"type":"ok","f":"txn","value":[["send",0,[0,1]]]}
{"index":2,"time":2,"process":0,"type":"invoke","f":"txn","value":[["send",0,2]]}
{"index":3,"time":3,"process":0,"type":"fail","f":"txn","value":[["send",0,[1,2]]],"error":"aborted on purpose"}
{"index":4,"time":4,"process":0,"type":"invoke","f":"txn","value":[["send",0,3]]}
{"index":5,"time":5,"process":0,"type":"ok","f":"txn","value":[["send",0,[3,3]]]}
{"index":6,"time":6,"process":1,"type":"invoke","f":"txn","value":[["poll"],["send",1,4]]}
{"index":7,"time":7,"process":1,"type":"fail","f":"txn","value":[["poll",{"0":[[1,2]]}],["send",1,4]],"error":"aborted on purpose"}
{"index":8,"time":8,"process":2,"type":"invoke","f":"poll","value":[["poll"]]}
{"index":9,"time":9,"process":2,"type":"ok","f":"poll","value":[["poll",{"0":[[0,1]]}]]}
{"index":10,"time":10,"process":2,"type":"invoke","f":"poll","value":[["poll"]]}
{"index":11,"time":11,"process":2,"type":"ok","f":"poll","value":[["poll",{"0":[[3,3]]}]]}
{"index":12,"time":12,"process":3,"type":"invoke","f":"poll","value":[["poll"]]}
{"index":13,"time":13,"process":3,"type":"ok","f":"poll","value":[["poll",{"0":[[0,1],[3,3]]}]]}
`)
	res := Analyze(context.Background(), h, Options{})
	assert.Equal(t, Invalid, res.Valid)
	g1a := res.Anomalies[AnomalyG1a]
	require.Equal(t, 1, g1a.Count)
	assert.Equal(t, "op 7 (itself failed) read value 2 of key 0 at offset 1, whose send op 3 failed", g1a.Examples[0].Text)
	assert.Equal(t, []string{AnomalyG1a}, res.BadAnomalies(), "the aborted record between offsets 0 and 3 is no skip")
}
