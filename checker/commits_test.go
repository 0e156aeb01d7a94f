package checker

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// historyLines returns a function that appends one history line to b per
// call (a JSON op without its braces, index and time), numbering the ops
// from 0 with times 1 µs apart.
func historyLines(b *strings.Builder) func(format string, args ...any) {
	i := 0
	return func(format string, args ...any) {
		fmt.Fprintf(b, `{"index":%d,"time":%d,`, i, (i+1)*1000)
		fmt.Fprintf(b, format+"}\n", args...)
		i++
	}
}

// commitHistory: key 0 holds values 10..13 at offsets 0..3; process 0
// subscribes, polls offsets 0-2 and commits 3; then process 1 is assigned
// key 0 and polls from offset from.
func commitHistory(t *testing.T, from int) History {
	t.Helper()
	var b strings.Builder
	line := historyLines(&b)
	for o := 0; o < 4; o++ {
		line(`"process":2,"type":"invoke","f":"send","value":[["send",0,%d]]`, 10+o)
		line(`"process":2,"type":"ok","f":"send","value":[["send",0,[%d,%d]]]`, o, 10+o)
	}
	line(`"process":0,"type":"invoke","f":"subscribe","value":[0]`)
	line(`"process":0,"type":"ok","f":"subscribe","value":[0]`)
	line(`"process":0,"type":"invoke","f":"poll","value":[["poll"]]`)
	line(`"process":0,"type":"ok","f":"poll","value":[["poll",{"0":[[0,10],[1,11],[2,12]]}]],"rebalance-log":[{"keys":[0]}],"committed":{"0":3}`)
	line(`"process":1,"type":"invoke","f":"subscribe","value":[0]`)
	line(`"process":1,"type":"ok","f":"subscribe","value":[0]`)
	line(`"process":1,"type":"invoke","f":"poll","value":[["poll"]]`)
	var polls []string
	for o := from; o < 4; o++ {
		polls = append(polls, fmt.Sprintf("[%d,%d]", o, 10+o))
	}
	line(`"process":1,"type":"ok","f":"poll","value":[["poll",{"0":[%s]}]],"rebalance-log":[{"keys":[0]}]`, strings.Join(polls, ","))
	h, err := NewReader(strings.NewReader(b.String())).ReadAll()
	require.NoError(t, err)
	return h
}

// TestLostCommit: the consumer newly assigned key 0 resumes at the
// committed offset 3 (valid), or after it; going back to 1 after the
// commit of 3 was acknowledged is lost-commit, which subscribe mode does
// not allow (unlike the nonmonotonic-poll it also is to Jepsen).
func TestLostCommit(t *testing.T) {
	for _, from := range []int{3, 1} {
		res := Analyze(context.Background(), commitHistory(t, from), Options{Mode: ModeSubscribe})
		if from == 3 {
			assert.Equal(t, Valid, res.Valid)
			assert.NotContains(t, res.Anomalies, AnomalyLostCommit)
			continue
		}
		assert.Equal(t, Invalid, res.Valid)
		require.Contains(t, res.Anomalies, AnomalyLostCommit)
		a := res.Anomalies[AnomalyLostCommit]
		assert.False(t, a.Allowed)
		assert.Equal(t, 1, a.Count)
		assert.Equal(t, []int64{3, 1}, a.Examples[0].Offsets)
		assert.Equal(t, []int64{11, 15}, a.Examples[0].Ops, "the commit's op and the poll's")
	}
}

// offsetsHistory: key 0 holds values 10..15 at offsets 0..5, all sent by
// process 5. Process 0's transaction polls offsets 0-2 and commits offset
// 3 for the group; process 1's polls 0-4, sends offset 5 for the group and
// aborts. Process 2 then resumes key 0 at resume and polls from there.
// tail is appended before process 2's assign (further ops).
func offsetsHistory(t *testing.T, resume int, tail string) History {
	t.Helper()
	var b strings.Builder
	line := historyLines(&b)
	var sends, acks []string
	for o := range 6 {
		sends = append(sends, fmt.Sprintf(`["send",0,%d]`, 10+o))
		acks = append(acks, fmt.Sprintf(`["send",0,[%d,%d]]`, o, 10+o))
	}
	line(`"process":5,"type":"invoke","f":"txn","value":[%s]`, strings.Join(sends, ","))
	line(`"process":5,"type":"ok","f":"txn","value":[%s],"committed":{}`, strings.Join(acks, ","))
	line(`"process":0,"type":"invoke","f":"txn","value":[["poll"],["send",1,20]]`)
	line(`"process":0,"type":"ok","f":"txn","value":[["poll",{"0":[[0,10],[1,11],[2,12]]}],["send",1,[0,20]]],"committed":{"0":3}`)
	line(`"process":1,"type":"invoke","f":"txn","value":[["poll"],["send",1,21]]`)
	line(`"process":1,"type":"fail","f":"txn","value":[["poll",{"0":[[0,10],[1,11],[2,12],[3,13],[4,14]]}],["send",1,[1,21]]],"committed":{"0":5},"error":"aborted on purpose"`)
	if tail != "" {
		line("%s", tail)
	}
	line(`"process":2,"type":"invoke","f":"assign","value":[0]`)
	line(`"process":2,"type":"ok","f":"assign","value":[0],"committed":{"0":%d}`, resume)
	line(`"process":2,"type":"invoke","f":"poll","value":[["poll"]]`)
	var polls []string
	for o := resume; o < 6; o++ {
		polls = append(polls, fmt.Sprintf("[%d,%d]", o, 10+o))
	}
	line(`"process":2,"type":"ok","f":"poll","value":[["poll",{"0":[%s]}]]`, strings.Join(polls, ","))
	line(`"process":3,"type":"invoke","f":"assign","value":[0,1]`)
	line(`"process":3,"type":"ok","f":"assign","value":[0,1]`)
	line(`"process":3,"type":"invoke","f":"poll","value":[["poll"]]`)
	line(`"process":3,"type":"ok","f":"poll","value":[["poll",{"0":[[0,10],[1,11],[2,12],[3,13],[4,14],[5,15]],"1":[[0,20]]}]]`)
	h, err := NewReader(strings.NewReader(b.String())).ReadAll()
	require.NoError(t, err)
	return h
}

// TestAbortedOffsets: resuming at offset 3, which a committed transaction
// sent, is valid; resuming at 5, which only the aborted one sent, is
// aborted-offsets, unless a transaction that never completed (it could
// have committed 5) or a committed one that sent 5 too is in the history.
func TestAbortedOffsets(t *testing.T) {
	res := Analyze(context.Background(), offsetsHistory(t, 3, ""), Options{Mode: ModeAssign})
	assert.NotContains(t, res.Anomalies, AnomalyAbortedOffsets)

	res = Analyze(context.Background(), offsetsHistory(t, 5, ""), Options{Mode: ModeAssign})
	assert.Equal(t, Invalid, res.Valid)
	require.Contains(t, res.Anomalies, AnomalyAbortedOffsets)
	a := res.Anomalies[AnomalyAbortedOffsets]
	assert.Equal(t, 1, a.Count)
	require.NotEmpty(t, a.Examples)
	assert.Equal(t, []int64{4, 7}, a.Examples[0].Ops, "the aborted transaction's invoke and the assign that resumed")
	assert.Contains(t, a.Examples[0].Text, "resumed key 0 at offset 5")

	for name, tail := range map[string]string{
		"never completed": `"process":4,"type":"invoke","f":"txn","value":[["poll"]]`,
		"also committed":  `"process":4,"type":"ok","f":"txn","value":[["poll",{"0":[[4,14]]}]],"committed":{"0":5}`,
	} {
		res = Analyze(context.Background(), offsetsHistory(t, 5, tail), Options{Mode: ModeAssign})
		assert.NotContains(t, res.Anomalies, AnomalyAbortedOffsets, name)
	}
}

// TestAbortedOffsetsReadAfterTheAbort: an aborted transaction that finds
// its own offset as the group's once its abort is done (group-offsets)
// is aborted-offsets; finding the committed transaction's is not.
func TestAbortedOffsetsReadAfterTheAbort(t *testing.T) {
	for _, seen := range []int{3, 5} {
		h := offsetsHistory(t, 3, "")
		for i := range h {
			if h[i].Process == 1 && h[i].Type == Fail {
				h[i].GroupOffsets = map[int]int64{0: int64(seen)}
			}
		}
		var b strings.Builder
		w := NewWriter(&b)
		for _, op := range h {
			require.NoError(t, w.Write(op))
		}
		require.NoError(t, w.Flush())
		h, err := NewReader(strings.NewReader(b.String())).ReadAll()
		require.NoError(t, err)
		require.Equal(t, map[int]int64{0: int64(seen)}, h[5].GroupOffsets, "group-offsets survives the JSON codec")
		res := Analyze(context.Background(), h, Options{Mode: ModeAssign})
		if seen == 3 {
			assert.NotContains(t, res.Anomalies, AnomalyAbortedOffsets)
			continue
		}
		require.Contains(t, res.Anomalies, AnomalyAbortedOffsets)
		assert.Contains(t, res.Anomalies[AnomalyAbortedOffsets].Examples[0].Text, "after its transaction aborted")
	}
}

// TestFencedCommit: a transaction marked Fenced that committed is
// fenced-commit; one that failed, as it must, is not.
func TestFencedCommit(t *testing.T) {
	history := func(typ string) History {
		return parseLines(t, `{"index":0,"time":0,"process":0,"type":"invoke","f":"txn","value":[["send",0,1]]}
{"index":1,"time":1,"process":0,"type":"`+typ+`","f":"txn","value":[["send",0,[0,1]]],"committed":{},"fenced":true}
{"index":2,"time":2,"process":0,"type":"invoke","f":"txn","value":[["send",0,2]]}
{"index":3,"time":3,"process":0,"type":"ok","f":"txn","value":[["send",0,[2,2]]],"committed":{}}
{"index":4,"time":4,"process":1,"type":"invoke","f":"poll","value":[["poll"]]}
{"index":5,"time":5,"process":1,"type":"ok","f":"poll","value":[["poll",{"0":[[0,1],[2,2]]}]]}
`)
	}
	res := Analyze(context.Background(), history("ok"), Options{})
	assert.Equal(t, Invalid, res.Valid)
	require.Contains(t, res.Anomalies, AnomalyFencedCommit)
	fc := res.Anomalies[AnomalyFencedCommit]
	assert.Equal(t, 1, fc.Count)
	assert.Equal(t, []int64{0, 1}, fc.Examples[0].Ops)
	assert.Contains(t, fc.Examples[0].Text, "process 0's transaction (op 1) committed after a new producer with its transactional.id was initialized")

	res = Analyze(context.Background(), history("fail"), Options{})
	assert.NotContains(t, res.Anomalies, AnomalyFencedCommit)
	assert.Contains(t, res.BadAnomalies(), AnomalyG1a, "a fenced transaction's send read back is an aborted read")
}
