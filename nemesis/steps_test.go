package nemesis

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faultline/faultline/checker"
)

// liveWorld is a fakeWorld whose partitions (and controller) a test
// changes between a run and its replay, and whose sleeps are only counted.
type liveWorld struct {
	*fakeWorld
	mu    sync.Mutex
	parts []PartitionState
	flip  string // the file Corrupt reports
	slept []time.Duration
}

func (l *liveWorld) Partitions(context.Context) ([]PartitionState, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]PartitionState(nil), l.parts...), nil
}
func (l *liveWorld) PowerLoss(_ context.Context, n, line string) error {
	l.log("power " + n + " " + line)
	return nil
}
func (l *liveWorld) DiskFault(_ context.Context, n, line string) error {
	l.log("disk " + n + " " + line)
	return nil
}
func (l *liveWorld) HealDisk(_ context.Context, n string) error { l.log("heal-disk " + n); return nil }
func (l *liveWorld) Corrupt(_ context.Context, n string, _ uint64, kind string) (string, error) {
	l.log("corrupt " + n + " " + kind)
	return `{"kind":"bit-flip","file":"` + l.flip + `"}`, nil
}
func (l *liveWorld) sleep(ctx context.Context, d time.Duration) bool {
	l.mu.Lock()
	l.slept = append(l.slept, d)
	l.mu.Unlock()
	return ctx.Err() == nil
}

// newLiveWorld has five nodes, n2 the controller, and t0-0..2 with full
// ISRs.
func newLiveWorld() *liveWorld {
	w := &liveWorld{fakeWorld: newWorld(5), flip: "t0-1/00000000000000000000.log"}
	w.ctl = "n2"
	w.parts = []PartitionState{
		{Topic: "t0", Partition: 0, Leader: "n1", Replicas: []string{"n1", "n3", "n4"}, ISR: []string{"n1", "n3", "n4"}},
		{Topic: "t0", Partition: 1, Leader: "n3", Replicas: []string{"n3", "n4", "n5"}, ISR: []string{"n3", "n4", "n5"}},
		{Topic: "t0", Partition: 2, Leader: "n5", Replicas: []string{"n5", "n1", "n3"}, ISR: []string{"n5", "n1", "n3"}},
	}
	return w
}

// playOn runs events of spec on w without waiting (the faults' own
// sequence waits are counted in w.slept, not waited) and returns the
// runtime calls and the events as executed.
func playOn(t *testing.T, w *liveWorld, spec Spec, events []Event) ([]string, []Event) {
	t.Helper()
	faults := spec.Faults(w, w)
	for _, f := range faults {
		switch f := f.(type) {
		case *Power:
			f.Sleep = w.sleep
		case *Partition:
			f.Sleep = w.sleep
		case *Corrupt:
			f.Sleep = w.sleep
		}
	}
	s := &Schedule{Faults: faults, Events: events, Sleep: noWait}
	s.Run(context.Background(), func(checker.Op) {})
	return w.calls, s.Executed()
}

// sameSteps compares executed schedules: equal but for times, which agree
// within the milliseconds the fake steps take.
func sameSteps(t *testing.T, want, got []Event) {
	t.Helper()
	require.Len(t, got, len(want))
	for i := range want {
		w, g := want[i], got[i]
		assert.InDelta(t, w.At, g.At, float64(50*time.Millisecond), "event %d", i)
		require.Len(t, g.Steps, len(w.Steps), "event %d", i)
		for j := range w.Steps {
			assert.InDelta(t, w.Steps[j].After, g.Steps[j].After, float64(50*time.Millisecond), "event %d step %d", i, j)
		}
		w.At, g.At = 0, 0
		w.Steps, g.Steps = stepsUntimed(w.Steps), stepsUntimed(g.Steps)
		assert.Equal(t, w, g, "event %d", i)
	}
}

func stepsUntimed(steps []Step) []Step {
	out := make([]Step, len(steps))
	for i, s := range steps {
		s.After = 0
		out[i] = s
	}
	return out
}

func stepOf(t *testing.T, events []Event, kind Kind, name string) Step {
	t.Helper()
	for _, e := range events {
		if e.Kind != kind {
			continue
		}
		for _, s := range e.Steps {
			if s.Name == name {
				return s
			}
		}
	}
	require.Failf(t, "no step", "%s step %s in %+v", kind, name, events)
	return Step{}
}

func TestSequenceSchedulesAreTheSameForTheSameSeed(t *testing.T) {
	spec, err := ParseSpec("partition:lagging-then-leader,power:after-fsync-error,corrupt:bit-flip-then-leader")
	require.NoError(t, err)
	plan := func(seed int64) []Event {
		return Plan(spec, PlanOptions{Interval: 20 * time.Second, Limit: 5 * time.Minute, Cycle: true}, seed)
	}
	require.Equal(t, plan(3), plan(3))
	callsA, a := playOn(t, newLiveWorld(), spec, plan(3))
	callsB, b := playOn(t, newLiveWorld(), spec, plan(3))
	assert.ElementsMatch(t, callsA, callsB, "the same calls (power cuts and starts run at once, in any order)")
	sameSteps(t, a, b)
	kill := stepOf(t, a, KindPartition, "kill")
	assert.NotEmpty(t, kill.Nodes, "the resolved targets are in the schedule")
	assert.Equal(t, sequenceWaitDefault, kill.After.Round(time.Second), "the step's time is the sequence's wait")
	assert.Equal(t, []string{"n1", "n2", "n3", "n4", "n5"}, stepOf(t, a, KindPower, "power-cut").Nodes)
	assert.Equal(t, "t0-1", stepOf(t, a, KindCorrupt, "kill").Partition)
}

func TestReplayDrivesTheRecordedLaggingNodeControllerAndVictims(t *testing.T) {
	spec := Spec{{Kind: KindPartition, Mode: PartitionLaggingThenLeader}}
	events := Plan(spec, PlanOptions{Interval: 20 * time.Second, Limit: time.Minute}, 5)
	require.NotEmpty(t, events)
	calls, recorded := playOn(t, newLiveWorld(), spec, events)
	choice := stepOf(t, recorded, KindPartition, "choose-lagging")
	require.Len(t, choice.Nodes, 2)
	assert.Equal(t, "n2", choice.Nodes[1], "the controller the lagging node keeps")
	kill := stepOf(t, recorded, KindPartition, "kill")

	// The stored schedule round-trips; the live cluster of the replay has
	// another controller and other ISRs.
	b, err := json.Marshal(recorded)
	require.NoError(t, err)
	var back []Event
	require.NoError(t, json.Unmarshal(b, &back))
	require.Equal(t, recorded, back)
	live := newLiveWorld()
	live.ctl = "n4"
	for i := range live.parts {
		live.parts[i].ISR = live.parts[i].Replicas[:1]
	}
	replayCalls, replayed := playOn(t, live, spec, back)
	assert.Equal(t, calls, replayCalls, "the same nodes cut off from the same peers, the same nodes killed")
	sameSteps(t, recorded, stripNotes(replayed))
	again := stepOf(t, replayed, KindPartition, "choose-lagging")
	assert.Equal(t, choice.Nodes, again.Nodes)
	assert.Contains(t, again.Note, "the live cluster disagreed")
	assert.Contains(t, again.Note, "n4", "the note names what the live cluster had")
	assert.Equal(t, kill.Nodes, stepOf(t, replayed, KindPartition, "kill").Nodes)
	notes := ReplayNotes(replayed)
	require.NotEmpty(t, notes)
	assert.True(t, strings.HasPrefix(notes[0], "partition:lagging-then-leader started at "), notes[0])
	assert.Empty(t, ReplayNotes(recorded), "a run that replays nothing notes nothing")
}

// stripNotes drops what a replay adds to the steps it drove.
func stripNotes(events []Event) []Event {
	out := make([]Event, len(events))
	for i, e := range events {
		e.Steps = append([]Step(nil), e.Steps...)
		for j := range e.Steps {
			e.Steps[j].Note, e.Steps[j].Live = "", nil
		}
		out[i] = e
	}
	return out
}

func TestReplayWaitsTheRecordedTimeBetweenSteps(t *testing.T) {
	spec := Spec{{Kind: KindPower, Mode: PowerAfterSlowFsync}}
	events := []Event{{At: time.Second, Action: ActionStart, Kind: KindPower, Mode: PowerAfterSlowFsync, Seed: 9},
		{At: 40 * time.Second, Action: ActionStop, Kind: KindPower}}
	w := newLiveWorld()
	_, recorded := playOn(t, w, spec, events)
	assert.Equal(t, []time.Duration{sequenceWaitDefault}, w.slept)
	// As if the run had waited 4 s: the replay waits 4 s, not the default.
	recorded[0].Steps[1].After = 4 * time.Second
	live := newLiveWorld()
	calls, replayed := playOn(t, live, spec, recorded)
	require.Len(t, live.slept, 1)
	assert.InDelta(t, 4*time.Second, live.slept[0], float64(50*time.Millisecond))
	assert.InDelta(t, 4*time.Second, stepOf(t, replayed, KindPower, "power-cut").After, float64(50*time.Millisecond))
	assert.ElementsMatch(t, w.calls, calls, "the same disk faults and power cuts (at once, in any order)")
	assert.Empty(t, ReplayNotes(replayed))
}

func TestReplayOfBitFlipThenLeaderKillsTheRecordedISR(t *testing.T) {
	spec := Spec{{Kind: KindCorrupt, Mode: CorruptBitFlipThenLeader}}
	events := Plan(spec, PlanOptions{Interval: 20 * time.Second, Limit: time.Minute}, 8)
	w := newLiveWorld()
	calls, recorded := playOn(t, w, spec, events)
	require.Len(t, recorded[0].Nodes, 1, "the event pins the flipped node only")
	kill := stepOf(t, recorded, KindCorrupt, "kill")
	assert.Equal(t, "t0-1", kill.Partition)

	live := newLiveWorld()
	live.flip = "t0-0/00000000000000000000.log" // the data differs: another batch
	replayCalls, replayed := playOn(t, live, spec, recorded)
	assert.Equal(t, calls, replayCalls, "the recorded rest of t0-1's ISR killed")
	flip := stepOf(t, replayed, KindCorrupt, "kill-and-flip")
	assert.Contains(t, flip.Note, "t0-0/00000000000000000000.log")
	assert.Contains(t, stepOf(t, replayed, KindCorrupt, "kill").Note, "t0-0")

	// A schedule stored before steps pinned the flipped node, then the
	// nodes killed: only the first is flipped.
	old := []Event{{At: time.Second, Action: ActionStart, Kind: KindCorrupt, Mode: CorruptBitFlipThenLeader, Seed: 1, Nodes: []string{"n4", "n3", "n5"}},
		{At: 20 * time.Second, Action: ActionStop, Kind: KindCorrupt}}
	live = newLiveWorld()
	oldCalls, _ := playOn(t, live, spec, old)
	require.GreaterOrEqual(t, len(oldCalls), 2)
	assert.Equal(t, []string{"kill n4", "corrupt n4 bit-flip"}, oldCalls[:2])
	assert.NotContains(t, oldCalls, "corrupt n3 bit-flip")
}

func TestReplayOfLaggingFailoverKillsTheRecordedLeaderAndSaysTheLiveOneDiffered(t *testing.T) {
	w := newISRWorld()
	spec := Spec{{Kind: KindLaggingFailover, Mode: LaggingCut}}
	events := []Event{{At: 0, Action: ActionStart, Kind: KindLaggingFailover, Mode: LaggingCut, Seed: 4},
		{At: time.Second, Action: ActionStop, Kind: KindLaggingFailover}}
	run := func(w *isrWorld, events []Event) []Event {
		s := &Schedule{Faults: spec.Faults(w, w), Events: events, Sleep: noWait}
		s.Faults[0].(*LaggingFailover).Network = w
		s.Run(context.Background(), func(checker.Op) {})
		return s.Executed()
	}
	recorded := run(w, events)
	lag, kill := recorded[0].Steps[0], recorded[0].Steps[1]
	require.Equal(t, "lag", lag.Name)
	assert.Equal(t, "t-0", lag.Partition)
	assert.Equal(t, []string{"n1"}, kill.Nodes)

	// In the replay's cluster another node leads t/0.
	live := newISRWorld()
	other := "n2"
	if lag.Nodes[0] == "n2" {
		other = "n3"
	}
	live.part.Leader = other
	replayed := run(live, recorded)
	assert.Contains(t, live.calls, "kill n1", "the recorded leader is killed")
	assert.NotContains(t, live.calls, "kill "+other)
	got := replayed[0].Steps[1]
	assert.Equal(t, []string{"n1"}, got.Nodes)
	assert.Equal(t, []string{other}, got.Live)
	assert.Contains(t, got.Note, "disagreed")
	assert.Equal(t, lag.Nodes, replayed[0].Steps[0].Nodes, "the recorded follower lagged")
}

func TestSequenceStepWithoutARecordingReturnsTheLiveResolution(t *testing.T) {
	_, seq := withSequence(context.Background(), nil)
	st, err := seq.step(Step{Name: "kill", Nodes: []string{"n1"}}, nil)
	require.NoError(t, err)
	assert.Equal(t, []string{"n1"}, st.Nodes)
	_, err = seq.step(Step{Name: "kill"}, assert.AnError)
	assert.ErrorIs(t, err, assert.AnError, "no recording to fall back on")

	_, seq = withSequence(context.Background(), []Step{{Name: "kill", Nodes: []string{"n3"}}, {Name: "heal"}})
	st, err = seq.step(Step{Name: "kill", Nodes: nil}, assert.AnError)
	require.NoError(t, err, "the recorded nodes stand in for a failed resolution")
	assert.Equal(t, []string{"n3"}, st.Nodes)
	assert.Contains(t, st.Note, "resolved")
	st, _ = seq.step(Step{Name: "start", Nodes: []string{"n5"}}, nil)
	assert.Equal(t, []string{"n5"}, st.Nodes, "a step the recording does not have is resolved live")
	assert.Contains(t, st.Note, `"heal"`)
}
