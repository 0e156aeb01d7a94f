package nemesis

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faultline/faultline/checker"
)

func TestParseSpecComposed(t *testing.T) {
	s, err := ParseSpec("partition:one+kill:leaders,pause+packet:delay")
	require.NoError(t, err)
	assert.Equal(t, Spec{
		{Kind: KindPartition, Mode: PartitionOne, With: []FaultSpec{{Kind: KindKill, Mode: TargetLeaders}}},
		{Kind: KindPause, With: []FaultSpec{{Kind: KindPacket, Mode: PacketDelay}}},
	}, s)
	assert.Equal(t, "partition:one+kill:leaders,pause+packet:delay", s.String())
	assert.Equal(t, []FaultSpec{{Kind: KindPartition, Mode: PartitionOne}, {Kind: KindKill, Mode: TargetLeaders}, {Kind: KindPause}, {Kind: KindPacket, Mode: PacketDelay}}, s.Parts())
	assert.True(t, s.Has(KindKill), "a composed part counts")
	assert.True(t, s.NeedsNetAdmin())
	raw, err := json.Marshal(s)
	require.NoError(t, err)
	var back Spec
	require.NoError(t, json.Unmarshal(raw, &back))
	assert.Equal(t, s, back)
	for spec, want := range map[string]string{
		"kill+kill:one":     "kill composed with itself",
		"none+kill":         "none cannot be composed",
		"kill+":             "empty fault",
		"kill+chaos":        `unknown nemesis "chaos"`,
		"packet:slow":       `packet: unknown mode "slow" (known: delay, loss, duplicate, reorder, latency)`,
		"rolling-restart:x": "rolling-restart: takes no mode",
	} {
		_, err := ParseSpec(spec)
		assert.ErrorContains(t, err, want, spec)
	}
}

// inForce replays events and returns, for each event, the slots in force
// after it; it fails on a stop of a fault not in force or a start of one in
// force.
func inForce(t *testing.T, events []Event) []map[int]bool {
	t.Helper()
	cur := map[int]bool{}
	var out []map[int]bool
	for i, e := range events {
		if i > 0 {
			require.GreaterOrEqual(t, e.At, events[i-1].At, "sorted by time")
		}
		switch e.Action {
		case ActionStart:
			require.False(t, cur[e.Slot], "event %d starts slot %d twice", i, e.Slot)
			cur[e.Slot] = true
		case ActionStop:
			require.True(t, cur[e.Slot], "event %d stops slot %d not in force", i, e.Slot)
			delete(cur, e.Slot)
		}
		snap := map[int]bool{}
		for k := range cur {
			snap[k] = true
		}
		out = append(out, snap)
	}
	require.Empty(t, cur, "the plan stops every fault it starts")
	return out
}

func TestPlanSameSeedSameSchedule(t *testing.T) {
	spec, err := ParseSpec("kill,partition,packet,partition:one+kill:leaders")
	require.NoError(t, err)
	for _, overlap := range []bool{false, true} {
		o := PlanOptions{Interval: 10 * time.Second, Limit: 10 * time.Minute, Overlap: overlap}
		a, b, c := Plan(spec, o, 7), Plan(spec, o, 7), Plan(spec, o, 8)
		require.NotEmpty(t, a)
		assert.Equal(t, a, b, "overlap=%v", overlap)
		assert.NotEqual(t, a, c, "overlap=%v", overlap)
		inForce(t, a)
		for _, e := range a {
			if e.Action == ActionStart {
				assert.Less(t, e.At, o.Limit, "nothing starts after the time limit")
				if e.Kind != KindRollingRestart {
					assert.NotEmpty(t, e.Mode, "the mode is drawn in the plan")
				}
			}
		}
	}
}

func TestPlanSequentialIsOneEntryAtATimeWithStagger(t *testing.T) {
	spec, err := ParseSpec("kill,pause,partition:one+kill:leaders")
	require.NoError(t, err)
	o := PlanOptions{Interval: 10 * time.Second, Limit: 30 * time.Minute}
	events := Plan(spec, o, 3)
	gaps := map[time.Duration]bool{}
	for i, snap := range inForce(t, events) {
		switch len(snap) {
		case 0, 1:
		case 2:
			assert.True(t, snap[2] && snap[3], "only the composed entry holds two faults at once, at event %d: %v", i, snap)
		default:
			t.Fatalf("more than one entry in force at event %d: %v", i, snap)
		}
		if i > 0 {
			gaps[events[i].At-events[i-1].At] = true
		}
	}
	assert.Greater(t, len(gaps), 10, "gaps are staggered, not fixed")
	// The composed entry starts partition first and stops it last.
	for i, e := range events {
		if e.Slot == 3 && e.Action == ActionStart {
			assert.Equal(t, ActionStart, events[i-1].Action)
			assert.Equal(t, 2, events[i-1].Slot, "partition starts before the kill composed with it")
		}
		if e.Slot == 2 && e.Action == ActionStop {
			assert.Equal(t, 3, events[i-1].Slot, "the kill stops before the partition")
		}
	}
}

func TestPlanOverlapComposesKindsWithStablePeriods(t *testing.T) {
	spec, err := ParseSpec("kill,partition,pause")
	require.NoError(t, err)
	o := PlanOptions{Interval: 5 * time.Second, Limit: 20 * time.Minute, Overlap: true}
	events := Plan(spec, o, 11)
	snaps := inForce(t, events)
	most := 0
	for _, s := range snaps {
		most = max(most, len(s))
	}
	assert.Equal(t, 3, most, "a kill, a partition and a pause are in force together at some point")
	// Rounds of 4×Interval after a stable Interval: nothing in force
	// during a stable period.
	round, stable := 4*o.Interval, o.Interval
	for i, e := range events {
		if e.Action != ActionStart {
			continue
		}
		inRound := (e.At - stable) % (round + stable)
		assert.Less(t, inRound, round, "event %d at %s starts in a stable period", i, e.At)
	}
	for i, s := range snaps {
		if len(s) == 0 {
			continue
		}
		at := events[i].At
		assert.LessOrEqual(t, (at-stable)%(round+stable), round, "a fault in force after its round's end at %s", at)
	}
}

func TestScheduleRunsEventsAndRecordsThemForReplay(t *testing.T) {
	spec, err := ParseSpec("kill,partition,pause:one")
	require.NoError(t, err)
	events := Plan(spec, PlanOptions{Interval: time.Second, Limit: time.Minute, Overlap: true}, 5)
	run := func(events []Event) ([]string, []Event) {
		w := newWorld(5)
		s := &Schedule{Faults: spec.Faults(w, w), Events: events, Sleep: func(ctx context.Context, _ time.Duration) bool { return true }}
		s.Run(context.Background(), func(checker.Op) {})
		return w.calls, s.Executed()
	}
	calls, executed := run(events)
	require.Len(t, executed, len(events))
	for i, e := range executed {
		assert.Equal(t, events[i].Slot, e.Slot)
		assert.InDelta(t, events[i].At, e.At, float64(100*time.Millisecond), "a fake sleep keeps the planned times")
		if e.Action == ActionStart {
			assert.NotEmpty(t, e.Nodes, "the nodes hit are recorded")
		}
	}
	// Replaying the executed schedule makes the same calls, and pinned
	// nodes win over a different seed.
	again, _ := run(executed)
	assert.Equal(t, calls, again)
	for i := range executed {
		executed[i].Seed++
	}
	pinned, _ := run(executed)
	assert.Equal(t, calls, pinned)
}

func TestScheduleHealsAStartWithoutStop(t *testing.T) {
	spec, err := ParseSpec("kill:one")
	require.NoError(t, err)
	w := newWorld(3)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	s := &Schedule{Faults: spec.Faults(w, w), Events: []Event{{Action: ActionStart, Slot: 0, Kind: KindKill, Mode: TargetOne, Nodes: []string{"n2"}}, {Action: ActionStop, Slot: 5}}}
	s.Run(ctx, func(checker.Op) {})
	assert.Equal(t, []string{"kill n2", "start n2"}, w.calls)
	ex := s.Executed()
	require.Len(t, ex, 2)
	assert.Equal(t, ActionStop, ex[1].Action, "the heal at the end is part of the executed schedule")
}

// slowWorld's kills take a while, as a docker exec on a busy host does.
type slowWorld struct{ *fakeWorld }

func (w slowWorld) Kill(ctx context.Context, n string) error {
	time.Sleep(30 * time.Millisecond)
	return w.fakeWorld.Kill(ctx, n)
}

func TestScheduleKeepsGapsAfterASlowEvent(t *testing.T) {
	spec, err := ParseSpec("kill:one,pause:one")
	require.NoError(t, err)
	w := slowWorld{newWorld(3)}
	events := []Event{
		{At: 0, Action: ActionStart, Slot: 0, Kind: KindKill, Mode: TargetOne},
		{At: 10 * time.Millisecond, Action: ActionStop, Slot: 0, Kind: KindKill},
		{At: 500 * time.Millisecond, Action: ActionStart, Slot: 1, Kind: KindPause, Mode: TargetOne},
	}
	var slept []time.Duration
	s := &Schedule{Faults: spec.Faults(w, w), Events: events, Sleep: func(_ context.Context, d time.Duration) bool { slept = append(slept, d); return true }}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel() // the pause in force at the end holds until then
	s.Run(ctx, func(checker.Op) {})
	require.Len(t, slept, 1, "the stop that is already late runs at once; the pause waits")
	assert.InDelta(t, float64(490*time.Millisecond), float64(slept[0]), float64(5*time.Millisecond), "its planned gap after the stop is kept: %v", slept)
}

func TestMembershipHealsLastAtTheEnd(t *testing.T) {
	spec, err := ParseSpec("membership,partition:one")
	require.NoError(t, err)
	w := newISRWorld()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	s := &Schedule{Faults: spec.Faults(w, w), Events: []Event{
		{Action: ActionStart, Slot: 0, Kind: KindMembership, Nodes: []string{"n3"}},
		{Action: ActionStart, Slot: 1, Kind: KindPartition, Mode: PartitionOne, Nodes: []string{"n3"}},
	}}
	s.Run(ctx, func(checker.Op) {})
	ex := s.Executed()
	require.Len(t, ex, 4)
	assert.Equal(t, []int{1, 0}, []int{ex[2].Slot, ex[3].Slot}, "the partition is healed before membership waits for its node")
}
