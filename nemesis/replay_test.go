package nemesis

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faultline/faultline/checker"
)

// played runs events of spec on a fresh world without waiting and returns
// the runtime calls and the events as executed.
func played(t *testing.T, spec Spec, events []Event) ([]string, []Event) {
	t.Helper()
	w := diskWorld{newWorld(5)}
	s := &Schedule{Faults: spec.Faults(w, w), Events: events, Sleep: func(ctx context.Context, _ time.Duration) bool { return ctx.Err() == nil }}
	s.Run(context.Background(), func(checker.Op) {})
	return w.calls, s.Executed()
}

// canonicalCalls sorts each run of consecutive calls of the same verb: a
// fault that acts on several nodes at once (a power loss restarting them,
// a kill of a majority) calls the runtime from one goroutine per node, so
// their order within the run is the scheduler's, while the order between
// runs is the schedule's.
func canonicalCalls(calls []string) []string {
	out := slices.Clone(calls)
	verb := func(c string) string { v, _, _ := strings.Cut(c, " "); return v }
	for i := 0; i < len(out); {
		j := i + 1
		for j < len(out) && verb(out[j]) == verb(out[i]) {
			j++
		}
		slices.Sort(out[i:j])
		i = j
	}
	return out
}

// sameEvents compares executed schedules: everything equal, times within
// the few milliseconds the fake runs' own steps take.
func sameEvents(t *testing.T, want, got []Event) {
	t.Helper()
	require.Len(t, got, len(want))
	for i := range want {
		assert.InDelta(t, want[i].At, got[i].At, float64(50*time.Millisecond), "event %d", i)
		w, g := want[i], got[i]
		w.At, g.At = 0, 0
		assert.Equal(t, w, g, "event %d", i)
	}
}

func TestRecordedScheduleRoundTripsAndReplaysTheSameFaults(t *testing.T) {
	spec, err := ParseSpec("kill,pause,partition,power,power:follower-then-leader,disk-error,disk-slow,corrupt")
	require.NoError(t, err)
	events := Plan(spec, PlanOptions{Interval: 10 * time.Second, Limit: 10 * time.Minute, Cycle: true}, 42)
	calls, executed := played(t, spec, events)
	require.Len(t, executed, len(events))
	require.NoError(t, ValidateEvents(spec, executed))
	kinds := map[Kind]bool{}
	for _, e := range executed {
		kinds[e.Kind] = true
	}
	assert.Len(t, kinds, 7, "cycled, the plan meets every kind: %v", kinds)

	// schedule.json round-trips, and replaying it makes the same calls and
	// executes the same events.
	b, err := json.Marshal(executed)
	require.NoError(t, err)
	var back []Event
	require.NoError(t, json.Unmarshal(b, &back))
	assert.Equal(t, executed, back)
	replayCalls, replayEvents := played(t, spec, back)
	assert.Equal(t, canonicalCalls(calls), canonicalCalls(replayCalls), "the replay touches the same nodes the same way")
	sameEvents(t, executed, replayEvents)
}

func TestKeepPairsKeepsAFaultsStartAndStopTogether(t *testing.T) {
	spec, err := ParseSpec("kill,partition")
	require.NoError(t, err)
	_, executed := played(t, spec, Plan(spec, PlanOptions{Interval: 10 * time.Second, Limit: 2 * time.Minute, Overlap: true}, 7))
	ids := Pairs(executed)
	require.GreaterOrEqual(t, len(ids), 4)
	kept := KeepPairs(executed, []int{ids[1], ids[3]})
	require.Len(t, kept, 4)
	require.NoError(t, ValidateEvents(spec, kept))
	assert.Equal(t, executed[ids[1]], kept[0])
	assert.Equal(t, ActionStop, kept[len(kept)-1].Action)
	assert.Equal(t, executed[ids[1]].At, kept[0].At)
	assert.Less(t, time.Duration(0), PairEnd(executed, ids[1])-executed[ids[1]].At)
	_, got := played(t, spec, kept)
	require.Len(t, got, 4, "the kept faults, each started and stopped")
	assert.Equal(t, kept[0].Nodes, got[0].Nodes)
	assert.Equal(t, time.Duration(-1), PairEnd([]Event{{Action: ActionStart, Kind: KindKill}}, 0), "a fault never stopped")
}

func TestValidateEventsRefusesBrokenSchedules(t *testing.T) {
	spec := Spec{{Kind: KindKill}, {Kind: KindPartition}}
	start := Event{At: time.Second, Action: ActionStart, Slot: 0, Kind: KindKill}
	for name, events := range map[string][]Event{
		"stop without start": {{Action: ActionStop, Slot: 0, Kind: KindKill}},
		"wrong kind in slot": {{Action: ActionStart, Slot: 1, Kind: KindKill}},
		"slot out of range":  {{Action: ActionStart, Slot: 2, Kind: KindKill}},
		"out of order":       {start, {At: 0, Action: ActionStop, Slot: 0, Kind: KindKill}},
		"started twice":      {start, start},
		"bad action":         {{Action: "begin", Slot: 0, Kind: KindKill}},
		"bad mode":           {{Action: ActionStart, Slot: 1, Kind: KindPartition, Mode: "leaders"}},
		"negative time":      {{At: -1, Action: ActionStart, Slot: 0, Kind: KindKill}},
	} {
		assert.Error(t, ValidateEvents(spec, events), name)
	}
	assert.NoError(t, ValidateEvents(spec, []Event{start, {At: 2 * time.Second, Action: ActionStop, Slot: 0, Kind: KindKill}}))
}
