package checker

import (
	"context"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// queueEDN runs the "queue" checker on a history in Jepsen's notation.
func queueEDN(t *testing.T, edn string) CheckerResult {
	t.Helper()
	h, _, err := ReadEDNHistory(strings.NewReader(edn))
	require.NoError(t, err)
	return QueueChecker(Options{}).Check(context.Background(), h)
}

func TestDuplicateIsPlacedWhereTheOpMetIt(t *testing.T) {
	// Value :a sits at offsets 1 and 3 of :x. A poll reading 2 then 3
	// follows the log, and so does a poll reading 1 then 2; both polls by
	// one process pick up where the last left off.
	const sends = `{:process 0 :type :invoke :f :send :value [[:send :x :a] [:send :x :b]]}
{:process 0 :type :ok :f :send :value [[:send :x [1 :a]] [:send :x [2 :b]]]}
`
	res := queueEDN(t, sends+`{:process 1 :type :invoke :f :poll :value [[:poll]]}
{:process 1 :type :ok :f :poll :value [[:poll {:x [[2 :b] [3 :a]]}]]}
{:process 2 :type :invoke :f :poll :value [[:poll]]}
{:process 2 :type :ok :f :poll :value [[:poll {:x [[1 :a] [2 :b]]}]]}
{:process 2 :type :invoke :f :poll :value [[:poll]]}
{:process 2 :type :ok :f :poll :value [[:poll {:x [[3 :a]]}]]}`)
	require.Contains(t, res.Anomalies, AnomalyDuplicate)
	assert.Equal(t, []int64{1, 3}, res.Anomalies[AnomalyDuplicate].Examples[0].Offsets)
	for _, a := range []string{AnomalyIntNonmonotonicPoll, AnomalyIntPollSkip, AnomalyNonmonotonicPoll, AnomalyPollSkip} {
		assert.NotContains(t, res.Anomalies, a)
	}

	// Reading the later copy before the earlier one still goes backwards.
	res = queueEDN(t, sends+`{:process 1 :type :invoke :f :poll :value [[:poll]]}
{:process 1 :type :ok :f :poll :value [[:poll {:x [[3 :a] [1 :a]]}]]}`)
	require.Contains(t, res.Anomalies, AnomalyIntNonmonotonicPoll)
	ex := res.Anomalies[AnomalyIntNonmonotonicPoll].Examples[0]
	assert.Equal(t, []int64{3, 1}, ex.Offsets)
	assert.Equal(t, int64(-2), *ex.Delta)
}

func TestInfoPollKeepsTheProcessPosition(t *testing.T) {
	// As in Jepsen, an info poll is checked against the process's last ok
	// poll but does not move it, even when the process goes on polling.
	res := queueEDN(t, `{:process 0 :type :invoke :f :send :value [[:send :x :a] [:send :x :b] [:send :x :c]]}
{:process 0 :type :ok :f :send :value [[:send :x [0 :a]] [:send :x [1 :b]] [:send :x [2 :c]]]}
{:process 1 :type :invoke :f :poll :value [[:poll]]}
{:process 1 :type :ok :f :poll :value [[:poll {:x [[0 :a]]}]]}
{:process 1 :type :invoke :f :poll :value [[:poll]]}
{:process 1 :type :info :f :poll :value [[:poll {:x [[1 :b]]}]]}
{:process 1 :type :invoke :f :poll :value [[:poll]]}
{:process 1 :type :ok :f :poll :value [[:poll {:x [[2 :c]]}]]}`)
	require.Contains(t, res.Anomalies, AnomalyPollSkip)
	ex := res.Anomalies[AnomalyPollSkip].Examples[0]
	assert.Equal(t, []int64{0, 2}, ex.Offsets)
	assert.Equal(t, int64(2), *ex.Delta)
	assert.Len(t, ex.Skipped, 1)
}

// TestUnseenNamesWhatHeldTheFinalReads: where the harness recorded why the
// final reads stopped short (a stalled-reads event), the unseen example
// says it: the open transaction holding the last stable offset, or that
// none held the reads, or that the offsets could not be read.
func TestUnseenNamesWhatHeldTheFinalReads(t *testing.T) {
	for stall, want := range map[string]string{
		`"high-watermark":6,"last-stable-offset":2,"open-transactions":[{"producer-id":9,"epoch":3,"first-offset":2}]`: "read_committed reads of t0-0 stop at its last stable offset 2, below its high watermark 6: held by the open transaction of producer 9 epoch 3 from offset 2",
		`"high-watermark":6,"last-stable-offset":2,"error":"producers: NOT_LEADER_OR_FOLLOWER"`:                        "its open transactions could not be listed (producers: NOT_LEADER_OR_FOLLOWER)",
		`"high-watermark":6,"last-stable-offset":6`:                                                                    "whose last stable offset is its high watermark 6: no open transaction held them",
		`"high-watermark":6,"last-stable-offset":5`:                                                                    "below its last stable offset 5 (high watermark 6), so no open transaction held them",
		`"high-watermark":3,"last-stable-offset":3`:                                                                    "whose high watermark 3, listed after them, is at or below the offsets these were acknowledged at: the healed cluster no longer holds them",
		`"high-watermark":-1,"last-stable-offset":-1,"error":"high watermark: context deadline exceeded"`:              "whose offsets the harness could not read (high watermark: context deadline exceeded)",
	} {
		var b strings.Builder
		line := historyLines(&b)
		line(`"process":0,"type":"invoke","f":"txn","value":[["send",0,10]]`)
		line(`"process":0,"type":"ok","f":"txn","value":[["send",0,[4,10]]],"committed":{}`)
		line(`"process":"harness","type":"info","f":"stalled-reads","value":[{"key":0,"topic":"t0","partition":0,%s}]`, stall)
		h, err := NewReader(strings.NewReader(b.String())).ReadAll()
		require.NoError(t, err)
		res := Analyze(context.Background(), h, Options{Txn: true, SkipLinear: true})
		require.Contains(t, res.Anomalies, AnomalyUnseen)
		assert.Contains(t, res.Anomalies[AnomalyUnseen].Examples[0].Text, want)
	}
}

// TestLostAfterRead: values polls read that lie, at every offset they
// were seen at, at or above the high watermark the harness listed once the
// final reads stopped short are lost-after-read; a value with a copy below
// it, one no poll read (unseen instead), one only an info poll read, an
// aborted send read back (G1a instead), a key whose high watermark could
// not be listed or whose cluster did not recover, and a history without a
// stalled-reads event are not.
func TestLostAfterRead(t *testing.T) {
	type run struct {
		lines []string
		opts  Options
	}
	analyze := func(r run, stall string) Result {
		var b strings.Builder
		line := historyLines(&b)
		for _, l := range r.lines {
			line("%s", l)
		}
		if stall != "" {
			line(`"process":"harness","type":"info","f":"stalled-reads","value":[{"key":0,"topic":"t0","partition":0,%s}]`, stall)
		}
		h, err := NewReader(strings.NewReader(b.String())).ReadAll()
		require.NoError(t, err)
		r.opts.SkipLinear = true
		return Analyze(context.Background(), h, r.opts)
	}
	plain := run{lines: []string{
		`"process":0,"type":"invoke","f":"send","value":[["send",0,10],["send",0,11],["send",0,12]]`,
		`"process":0,"type":"ok","f":"send","value":[["send",0,[0,10]],["send",0,[1,11]],["send",0,[2,12]]]`,
		`"process":1,"type":"invoke","f":"poll","value":[["poll"]]`,
		`"process":1,"type":"ok","f":"poll","value":[["poll",{"0":[[0,10],[1,11],[2,12]]}]]`,
	}}
	res := analyze(plain, `"high-watermark":1,"last-stable-offset":1`)
	assert.Equal(t, Invalid, res.Valid)
	assert.Equal(t, []string{AnomalyLostAfterRead}, slices.Collect(maps.Keys(res.Anomalies)), "nothing else is wrong with the history")
	rep := res.Anomalies[AnomalyLostAfterRead]
	assert.Equal(t, 2, rep.Count)
	assert.Equal(t, map[int]int{0: 2}, rep.ByKey)
	ex := rep.Examples[0]
	assert.Equal(t, []int64{11, 12}, ex.Values)
	assert.Equal(t, int64(1), *ex.Offset)
	assert.Equal(t, []int64{1}, ex.Ops, "the example names the send, once")
	assert.Contains(t, ex.Text, "at offsets 1 to 2")
	assert.Contains(t, ex.Text, "high watermark was then 1")

	// A high watermark of 0: everything read is gone.
	res = analyze(plain, `"high-watermark":0,"last-stable-offset":0`)
	assert.Equal(t, 3, res.Anomalies[AnomalyLostAfterRead].Count)

	// A partition the healed cluster no longer lists holds nothing.
	res = analyze(plain, `"high-watermark":-1,"last-stable-offset":-1,"missing":true,"error":"high watermark: not listed"`)
	require.Contains(t, res.Anomalies, AnomalyLostAfterRead)
	assert.Equal(t, 3, res.Anomalies[AnomalyLostAfterRead].Count)
	assert.Contains(t, res.Anomalies[AnomalyLostAfterRead].Examples[0].Text, "no longer lists")
	res = analyze(run{lines: append(slices.Clone(plain.lines),
		`"process":0,"type":"invoke","f":"send","value":[["send",0,13]]`,
		`"process":0,"type":"ok","f":"send","value":[["send",0,[3,13]]]`,
	)}, `"high-watermark":-1,"last-stable-offset":-1,"missing":true`)
	require.Contains(t, res.Anomalies, AnomalyUnseen)
	assert.Contains(t, res.Anomalies[AnomalyUnseen].Examples[0].Text, "no longer lists", "unseen says where its values went")

	for name, stall := range map[string]string{
		"high watermark above the reads": `"high-watermark":3,"last-stable-offset":3`,
		"high watermark unknown":         `"high-watermark":-1,"last-stable-offset":-1,"error":"high watermark: context deadline exceeded"`,
		"cluster not recovered":          `"high-watermark":1,"last-stable-offset":1,"unrecovered":true`,
		"missing, not recovered":         `"high-watermark":-1,"last-stable-offset":-1,"missing":true,"unrecovered":true`,
		"no stalled-reads event":         "",
	} {
		res := analyze(plain, stall)
		assert.NotContains(t, res.Anomalies, AnomalyLostAfterRead, name)
	}

	// 10 is read again at offset 3, above the high watermark, but its
	// copy at 0 is below it: not lost. Offset 2 holds two values, both
	// read: both lost. 13, acknowledged at 4 and never read, is unseen,
	// and its example says the healed cluster no longer holds it; 14 was
	// read only by an info poll.
	res = analyze(run{lines: append(slices.Clone(plain.lines),
		`"process":2,"type":"invoke","f":"poll","value":[["poll"]]`,
		`"process":2,"type":"ok","f":"poll","value":[["poll",{"0":[[2,99],[3,10]]}]]`,
		`"process":0,"type":"invoke","f":"send","value":[["send",0,13]]`,
		`"process":0,"type":"ok","f":"send","value":[["send",0,[4,13]]]`,
		`"process":3,"type":"invoke","f":"poll","value":[["poll"]]`,
		`"process":3,"type":"info","f":"poll","value":[["poll",{"0":[[5,14]]}]]`,
	)}, `"high-watermark":1,"last-stable-offset":1`)
	require.Contains(t, res.Anomalies, AnomalyLostAfterRead)
	assert.ElementsMatch(t, []int64{11, 12, 99}, res.Anomalies[AnomalyLostAfterRead].Examples[0].Values)
	require.Contains(t, res.Anomalies, AnomalyUnseen)
	assert.Equal(t, 1, res.Anomalies[AnomalyUnseen].Count)
	assert.Contains(t, res.Anomalies[AnomalyUnseen].Examples[0].Text, "no longer holds them")

	// In a transactional run, an aborted send read back is G1a's alone.
	res = analyze(run{opts: Options{Txn: true}, lines: []string{
		`"process":0,"type":"invoke","f":"txn","value":[["send",0,10],["send",0,11]]`,
		`"process":0,"type":"ok","f":"txn","value":[["send",0,[0,10]],["send",0,[1,11]]]`,
		`"process":0,"type":"invoke","f":"txn","value":[["send",0,12]]`,
		`"process":0,"type":"fail","f":"txn","value":[["send",0,[3,12]]]`,
		`"process":1,"type":"invoke","f":"txn","value":[["poll"]]`,
		`"process":1,"type":"ok","f":"txn","value":[["poll",{"0":[[0,10],[1,11],[3,12]]}]]`,
	}}, `"high-watermark":1,"last-stable-offset":1`)
	require.Contains(t, res.Anomalies, AnomalyLostAfterRead)
	assert.Equal(t, []int64{11}, res.Anomalies[AnomalyLostAfterRead].Examples[0].Values)
	assert.Contains(t, res.Anomalies, AnomalyG1a)
}
