package harness

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faultline/faultline/checker"
	"github.com/faultline/faultline/harness/shrink"
	"github.com/faultline/faultline/nemesis"
	"github.com/faultline/faultline/workloads"
	"github.com/faultline/faultline/workloads/queue"
)

func storedRun(t *testing.T, events []nemesis.Event) (string, Test) {
	t.Helper()
	dir := t.TempDir()
	orig := DefaultTest()
	orig.Name, orig.Seed = "stored", 99
	orig.Nemesis = nemesis.Spec{{Kind: nemesis.KindKill}, {Kind: nemesis.KindPartition}}
	b, err := json.Marshal(orig)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "test.json"), b, 0o644))
	if events != nil {
		require.NoError(t, writeSchedule(dir, events))
	}
	return dir, orig
}

func TestLoadReplayTakesTheRecordedSchedule(t *testing.T) {
	events := []nemesis.Event{
		{At: 15 * time.Second, Action: nemesis.ActionStart, Slot: 0, Kind: nemesis.KindKill, Mode: "one", Seed: 7, Nodes: []string{"n3"}},
		{At: 30 * time.Second, Action: nemesis.ActionStop, Slot: 0, Kind: nemesis.KindKill},
	}
	dir, orig := storedRun(t, events)
	for _, path := range []string{dir, filepath.Join(dir, "test.json")} {
		got, exact, warning, err := LoadReplay(path)
		require.NoError(t, err, path)
		assert.True(t, exact)
		assert.Empty(t, warning)
		assert.Equal(t, orig.Seed, got.Seed)
		assert.Equal(t, events, got.Schedule)
		require.NoError(t, got.Validate(workloads.Registry{"queue": queue.New}))
	}

	old, _ := storedRun(t, nil)
	got, exact, _, err := LoadReplay(old)
	require.NoError(t, err)
	assert.False(t, exact, "a run stored without schedule.json replays by seed")
	assert.Nil(t, got.Schedule)
}

func TestValidateRefusesAScheduleTheNemesisListDoesNotCover(t *testing.T) {
	tt := DefaultTest()
	tt.Nemesis = nemesis.Spec{{Kind: nemesis.KindKill}}
	tt.Schedule = []nemesis.Event{{At: time.Second, Action: nemesis.ActionStart, Slot: 0, Kind: nemesis.KindPartition}}
	err := tt.Validate(workloads.Registry{"queue": queue.New})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "which --nemesis kill gives to kill")
	tt.Schedule[0].Slot = 1
	err = tt.Validate(workloads.Registry{"queue": queue.New})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "slot 1, but --nemesis kill has 1")
}

func TestShrinkRefusesWhatItCannotShrink(t *testing.T) {
	reg := workloads.Registry{"queue": queue.New}
	old, _ := storedRun(t, nil)
	_, err := Shrink(context.Background(), old, ShrinkOptions{}, reg, io.Discard)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "no schedule.json")

	dir, _ := storedRun(t, []nemesis.Event{})
	require.NoError(t, os.WriteFile(filepath.Join(dir, "results.json"), []byte(`{"valid":true,"anomalies":{}}`), 0o644))
	_, err = Shrink(context.Background(), dir, ShrinkOptions{}, reg, io.Discard)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "only an invalid run can be shrunk")
}

func TestAnomalyClassesSkipAllowedOnes(t *testing.T) {
	res := checker.Result{Anomalies: map[string]checker.AnomalyReport{
		"lost-write": {Count: 2}, "poll-skip": {Count: 1, Allowed: true}, "duplicate": {Count: 1},
	}}
	assert.Equal(t, []string{"duplicate", "lost-write"}, anomalyClasses(res))
}

func TestShrinkCandidateKeepsWholeFaultsAndValidates(t *testing.T) {
	orig := DefaultTest()
	orig.Nemesis = nemesis.Spec{{Kind: nemesis.KindKill}, {Kind: nemesis.KindPartition}}
	events := []nemesis.Event{
		{At: 1 * time.Second, Action: nemesis.ActionStart, Slot: 0, Kind: nemesis.KindKill, Nodes: []string{"n1"}},
		{At: 2 * time.Second, Action: nemesis.ActionStart, Slot: 1, Kind: nemesis.KindPartition, Nodes: []string{"n2"}},
		{At: 3 * time.Second, Action: nemesis.ActionStop, Slot: 0, Kind: nemesis.KindKill},
		{At: 4 * time.Second, Action: nemesis.ActionStop, Slot: 1, Kind: nemesis.KindPartition},
		{At: 5 * time.Second, Action: nemesis.ActionStart, Slot: 0, Kind: nemesis.KindKill, Nodes: []string{"n3"}},
		{At: 6 * time.Second, Action: nemesis.ActionStop, Slot: 0, Kind: nemesis.KindKill},
	}
	require.Equal(t, []int{0, 1, 4}, nemesis.Pairs(events))
	c := shrinkCandidate(orig, events, shrink.Candidate{Faults: []int{1, 4}, TimeLimit: 20 * time.Second})
	assert.Equal(t, []nemesis.Event{events[1], events[3], events[4], events[5]}, c.Schedule)
	assert.Equal(t, Duration(20*time.Second), c.TimeLimit)
	require.NoError(t, c.Validate(workloads.Registry{"queue": queue.New}))
	none := shrinkCandidate(orig, events, shrink.Candidate{TimeLimit: time.Minute})
	assert.NotNil(t, none.Schedule, "no faults is an empty schedule, not a drawn one")
	assert.Empty(t, none.Schedule)
}

func TestLoadReplayReadsAnOlderFormatScheduleWithAWarning(t *testing.T) {
	dir, orig := storedRun(t, nil)
	// The format of runs stored before events named slots: a duration
	// string, op and a running id, targets.
	legacy := `[{"at":"15s","op":"start","id":0,"kind":"kill","mode":"one","targets":["n3"]},
		{"at":"20s","op":"start","id":1,"kind":"partition","mode":"one","targets":["n1"]},
		{"at":"30s","op":"stop","id":0,"kind":"kill"},{"at":"31s","op":"stop","id":1,"kind":"partition"}]`
	path := filepath.Join(dir, FileSchedule)
	require.NoError(t, os.WriteFile(path, []byte(legacy), 0o644))
	_, err := ReadSchedule(path)
	require.Error(t, err, "--schedule has no test.json to read it against")
	assert.Contains(t, err.Error(), "--replay")

	got, exact, warning, err := LoadReplay(dir)
	require.NoError(t, err)
	assert.True(t, exact)
	assert.Contains(t, warning, "older schedule format")
	assert.Equal(t, orig.Seed, got.Seed)
	assert.Equal(t, []nemesis.Event{
		{At: 15 * time.Second, Action: nemesis.ActionStart, Slot: 0, Kind: nemesis.KindKill, Mode: "one", Nodes: []string{"n3"}},
		{At: 20 * time.Second, Action: nemesis.ActionStart, Slot: 1, Kind: nemesis.KindPartition, Mode: "one", Nodes: []string{"n1"}},
		{At: 30 * time.Second, Action: nemesis.ActionStop, Slot: 0, Kind: nemesis.KindKill},
		{At: 31 * time.Second, Action: nemesis.ActionStop, Slot: 1, Kind: nemesis.KindPartition},
	}, got.Schedule)

	// Two kills in force at once do not fit one kill slot.
	require.NoError(t, os.WriteFile(path, []byte(`[{"at":"1s","op":"start","id":0,"kind":"kill"},{"at":"2s","op":"start","id":1,"kind":"kill"}]`), 0o644))
	_, _, _, err = LoadReplay(dir)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "no free slot")
	require.NoError(t, os.WriteFile(path, []byte(`{"not":"a schedule"}`), 0o644))
	_, _, _, err = LoadReplay(dir)
	assert.Error(t, err, "neither format")
}

// TestShrinkKeepsSequencesWholeAndComposedPartsApart runs the shrinker's
// search over a schedule with a composed entry (partition:one+kill:leaders,
// two slots) and a sequence (partition:lagging-then-leader, one start with
// its steps) on a synthetic predicate: the run fails iff the sequence and
// the kill part of the second composed round are in it.
func TestShrinkKeepsSequencesWholeAndComposedPartsApart(t *testing.T) {
	spec, err := nemesis.ParseSpec("partition:one+kill:leaders,partition:lagging-then-leader")
	require.NoError(t, err)
	require.Len(t, spec.Parts(), 3, "the composed entry has a slot per part")
	orig := DefaultTest()
	orig.Nemesis, orig.TimeLimit = spec, Duration(2*time.Minute)
	at := func(s int) time.Duration { return time.Duration(s) * time.Second }
	steps := []nemesis.Step{
		{Name: "choose-lagging", Nodes: []string{"n4", "n2"}},
		{Name: "isolate", After: at(0), Nodes: []string{"n4"}},
		{Name: "kill", After: at(10), Nodes: []string{"n1", "n3"}, Rule: "the rest of the ISR"},
	}
	events := []nemesis.Event{
		{At: at(5), Action: nemesis.ActionStart, Slot: 0, Kind: nemesis.KindPartition, Mode: "one", Nodes: []string{"n2"}},
		{At: at(8), Action: nemesis.ActionStart, Slot: 1, Kind: nemesis.KindKill, Mode: "leaders", Nodes: []string{"n1"}},
		{At: at(15), Action: nemesis.ActionStop, Slot: 1, Kind: nemesis.KindKill},
		{At: at(18), Action: nemesis.ActionStop, Slot: 0, Kind: nemesis.KindPartition},
		{At: at(30), Action: nemesis.ActionStart, Slot: 2, Kind: nemesis.KindPartition, Mode: "lagging-then-leader", Steps: steps},
		{At: at(50), Action: nemesis.ActionStop, Slot: 2, Kind: nemesis.KindPartition},
		{At: at(60), Action: nemesis.ActionStart, Slot: 0, Kind: nemesis.KindPartition, Mode: "one", Nodes: []string{"n5"}},
		{At: at(62), Action: nemesis.ActionStart, Slot: 1, Kind: nemesis.KindKill, Mode: "leaders", Nodes: []string{"n3"}},
		{At: at(70), Action: nemesis.ActionStop, Slot: 1, Kind: nemesis.KindKill},
		{At: at(72), Action: nemesis.ActionStop, Slot: 0, Kind: nemesis.KindPartition},
	}
	require.NoError(t, nemesis.ValidateEvents(spec, events))
	p := shrinkProblem(events, time.Duration(orig.TimeLimit))
	require.Equal(t, []int{0, 1, 4, 6, 7}, p.Faults, "five faults: each composed part, and the sequence once")
	assert.Equal(t, at(50), p.Ends[4])

	reg := workloads.Registry{"queue": queue.New}
	fails := func(c shrink.Candidate) bool {
		cand := shrinkCandidate(orig, events, c)
		require.NoError(t, cand.Validate(reg), "every candidate is a valid schedule: %v", c.Faults)
		sequence, lateKill := false, false
		for _, e := range cand.Schedule {
			if e.Action == nemesis.ActionStart && e.Slot == 2 {
				require.Equal(t, steps, e.Steps, "a sequence is kept with all its steps or not at all")
				sequence = true
			}
			lateKill = lateKill || (e.Action == nemesis.ActionStart && e.Kind == nemesis.KindKill && e.At == at(62))
		}
		return sequence && lateKill && c.TimeLimit >= at(75)
	}
	r := shrink.Minimize(p, fails, shrink.Options{MaxCandidates: 60})
	assert.Equal(t, []int{4, 7}, r.Best.Faults, "the sequence, and the kill part of the second round without its partition")
	assert.Equal(t, at(80), r.Best.TimeLimit, "the late kill ends at 70 s, plus 10 s to settle")
	best := shrinkCandidate(orig, events, r.Best)
	assert.Equal(t, []nemesis.Event{events[4], events[5], events[7], events[8]}, best.Schedule)
}
