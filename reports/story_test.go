package reports

import (
	"context"
	"encoding/json"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faultline/faultline/checker"
)

// leaderLossInput is checker/testdata/leader-loss-two-faults: on t0-1 a
// write acknowledged by n1 is overwritten after n1 is killed at 4.0 s and
// n3 leads; on t0-2 one acknowledged by n2 is overwritten after n2 is cut
// off at 12.0 s and n1 leads.
func leaderLossInput(t *testing.T) Input {
	t.Helper()
	h, err := checker.ReadHistory(filepath.Join("..", "checker", "testdata", "leader-loss-two-faults.jsonl"))
	require.NoError(t, err)
	res := checker.Analyze(context.Background(), h, checker.Options{})
	require.Equal(t, checker.Invalid, res.Valid)
	return Input{Spec: Spec{Name: "leader-loss", PartitionsPerTopic: 4}, Result: res, History: h}
}

var tagPattern = regexp.MustCompile(`<[^>]*>`)

// storySteps returns the text of each step of the story with the given
// anchor, parsed out of the page.
func storySteps(t *testing.T, page, anchor string) []string {
	t.Helper()
	start := strings.Index(page, `<section class="story" id="`+anchor+`">`)
	require.GreaterOrEqual(t, start, 0, "story %s on the page", anchor)
	end := strings.Index(page[start:], "</section>")
	require.Greater(t, end, 0)
	body := page[start : start+end]
	var out []string
	for _, li := range regexp.MustCompile(`(?s)<li>(.*?)</li>`).FindAllStringSubmatch(body, -1) {
		out = append(out, unescape(tagPattern.ReplaceAllString(li[1], "")))
	}
	return out
}

func unescape(s string) string {
	return strings.NewReplacer("&#39;", "'", "&amp;", "&", "&lt;", "<", "&gt;", ">", "&#34;", `"`).Replace(s)
}

func TestStoryOfALeaderLoss(t *testing.T) {
	in := leaderLossInput(t)
	page := render(t, in)
	parseLoose(t, page)
	steps := storySteps(t, page, "story-2")
	assert.Equal(t, []string{
		"11.0 s send 202 → offset 1 acknowledged by n2 (leader of t0-2, epoch 3) (op 15)",
		"12.0 s the nemesis partitioned the network (n2 cut off from n1, n3)",
		"13.0 s n1 became leader of t0-2, epoch 4 (seen by the harness)",
		"14.0 s send 203 → offset 1 acknowledged by n1 (op 20): the same offset again",
		"16.0 s the nemesis healed the network partition",
		"20.2 s final read (op 26, up to offset 1): offset 1 holds 203; 202 is gone",
		"the checker counts on t0-2: 1 lost-write, 1 unseen, 1 inconsistent-offsets, 1 nonlinearizable",
	}, steps)
	assert.True(t, len(steps) >= 4 && len(steps) <= storyStepsMax)
}

func TestEachPartitionIsBlamedOnItsOwnFault(t *testing.T) {
	in := leaderLossInput(t)
	page := render(t, in)
	one := storySteps(t, page, "story-1")
	require.GreaterOrEqual(t, len(one), 4)
	assert.Equal(t, "3.0 s send 102 → offset 1 acknowledged by n1 (leader of t0-1, epoch 1) (op 4)", one[0])
	assert.Equal(t, "4.0 s the nemesis killed n1", one[1])
	assert.Equal(t, "5.0 s n3 became leader of t0-1, epoch 2 (seen by the harness)", one[2])
	for _, s := range one {
		assert.NotContains(t, s, "partitioned", "t0-1's story is not about t0-2's fault")
	}
	v := buildVerdict(in, analyze(in.History))
	all := v.Headline + "\n" + strings.Join(v.Sentences, "\n")
	assert.Contains(t, all, "on key 1 (t0-1) after the nemesis killed n1 at 4.0 s; on key 2 (t0-2) after the nemesis partitioned the network (n2 cut off from n1, n3) at 12.0 s",
		"each key is blamed on the fault overlapping its own window, not the earliest")
	assert.Contains(t, all, "2 offsets held two or more different values: on key 1 (t0-1) after the nemesis killed n1 at 4.0 s; on key 2 (t0-2) after the nemesis partitioned",
		"an overwrite is laid to the fault that followed the first write, not to the one before it")
}

func TestFaultBandsAreColouredAndLabelledByKind(t *testing.T) {
	page := render(t, leaderLossInput(t))
	for _, kind := range []string{"kill", "partition"} {
		contains(t, page, `<g class="series" data-series="fault-`+kind+`">`)
		contains(t, page, `<g class="legend" data-series="fault-`+kind+`"`)
		contains(t, page, `fill="`+faultColor(kind)+`" fill-opacity="0.18"`)
	}
	assert.NotEqual(t, faultColor("kill"), faultColor("partition"))
	contains(t, page, "<title>final reads from 19.9 s</title>")
	contains(t, page, `<g class="legend" data-series="final-reads"`)
	contains(t, page, "<title>leader n1, epoch 4, seen at 13.0 s</title>")
	contains(t, page, `<g class="legend" data-series="k2-leader"`)
	lacks(t, page, "(no error text)") // harness events are not client operations
}

// An anomaly other than a loss is laid only to a fault that began before
// it was first seen (once its last operation completed): a later fault
// within the writes' window is no cause, and a key seen before any fault
// says so.
func TestAnomalyIsNotBlamedOnALaterFault(t *testing.T) {
	var b historyBuilder
	w0 := b.send(0, 1, 200, 0, 5000, 4, checker.OK)
	r0 := b.poll(1, 1, 8000, 4, checker.Pair{Offset: 0, Value: 200})
	w1 := b.send(0, 2, 100, 0, 10000, 4, checker.OK)
	b.nemesis("kill", []string{"n1"}, 15000)
	b.nemesis("restart", []string{"n1"}, 17000)
	r1 := b.poll(1, 2, 20000, 4, checker.Pair{Offset: 0, Value: 100})
	b.nemesis("kill", []string{"n2"}, 30000)
	w2 := b.send(0, 2, 101, 1, 35000, 4, checker.OK)
	r2 := b.poll(1, 2, 36000, 4, checker.Pair{Offset: 1, Value: 101})
	b.nemesis("restart", []string{"n2"}, 40000)
	in := invalidInput()
	in.History = b.h
	a := analyze(in.History)
	// Key 2's writes span both kills, but its first example was seen at
	// 20 s, once its poll completed.
	key2 := []checker.Example{{Key: 2, Ops: []int64{w1, r1}}, {Key: 2, Ops: []int64{w2, r2}}}
	rep := checker.AnomalyReport{Count: 2, Examples: key2}
	for _, name := range []string{checker.AnomalyG1a, checker.AnomalyInconsistentOffsets} {
		st := anomalySentence(in, a, name, rep)
		assert.Contains(t, st.sentence, "on key 2 (t0-2) after the nemesis killed n1 at 15.0 s", "%s: the kill at 30 s came after it was seen at 20 s", name)
		assert.Equal(t, "first seen at 20.0 s", st.detail)
	}
	rep = checker.AnomalyReport{Count: 3, Examples: append(key2, checker.Example{Key: 1, Ops: []int64{w0, r0}})}
	st := anomalySentence(in, a, checker.AnomalyG1a, rep)
	assert.Contains(t, st.sentence, ": on key 1 (t0-1) before any fault; on key 2 (t0-2) after the nemesis killed n1 at 15.0 s")
	assert.Equal(t, "first seen at 8.0 s", st.detail, "key 1 showed once its poll completed")

	// The key's story lays it to the same fault as the verdict.
	in.Result = checker.Result{Valid: checker.Invalid, Anomalies: map[string]checker.AnomalyReport{checker.AnomalyG1a: {Count: 2, ByKey: map[int]int{2: 2}, Examples: key2}}}
	steps := storySteps(t, render(t, in), "story-2")
	assert.Contains(t, steps, "15.0 s the nemesis killed n1")
	for _, s := range steps {
		assert.NotContains(t, s, "killed n2", "the kill at 30 s came after key 2's anomaly was seen")
	}

	// Examples without a key (a fenced commit) follow the same rule.
	st = anomalySentence(in, a, checker.AnomalyFencedCommit, checker.AnomalyReport{Count: 2, Examples: []checker.Example{{Key: -1, Ops: []int64{w0}}, {Key: -1, Ops: []int64{w2}}}})
	assert.Equal(t, "2 transactions of fenced producers committed before any fault", st.sentence, "the first was seen at 5 s, before the kill at 30 s")
}

// TestStoryOfALossAfterRead: values polls read and the healed partition no
// longer holds (lost-after-read) tell a story that says they were read,
// then that they are gone, never that they were not read back.
func TestStoryOfALossAfterRead(t *testing.T) {
	var b historyBuilder
	b.send(0, 1, 100, 0, 1000, 4, checker.OK)
	b.send(0, 1, 101, 1, 1100, 4, checker.OK)
	b.poll(1, 1, 2000, 4, checker.Pair{Offset: 0, Value: 100}, checker.Pair{Offset: 1, Value: 101})
	b.nemesis("start-power", map[string]any{"mode": "all", "nodes": []string{"n1", "n2", "n3"}}, 5000)
	b.nemesis("stop-power", map[string]any{"nodes": []string{"n1", "n2", "n3"}}, 9000)
	raw, err := json.Marshal([]checker.Stall{{Key: 1, Topic: "t0", Partition: 1, HighWatermark: 0, LastStable: 0}})
	require.NoError(t, err)
	b.add(checker.Op{Time: ms(30000), Process: checker.HarnessProcess, Type: checker.Info, F: checker.FStalledReads, Raw: raw})
	res := checker.Analyze(context.Background(), b.h, checker.Options{})
	require.Contains(t, res.Anomalies, checker.AnomalyLostAfterRead)
	in := Input{Spec: testSpec("power"), Result: res, History: b.h}
	page := render(t, in)
	parseLoose(t, page)
	steps := strings.Join(storySteps(t, page, "story-1"), "\n")
	assert.Contains(t, steps, "send 100 → offset 0 acknowledged")
	assert.Contains(t, steps, "a poll read 100 at offset 0")
	assert.Contains(t, steps, "100, read before, is gone")
	assert.NotContains(t, steps, "never read back")
	contains(t, page, "2 values consumers had read were lost")
}
