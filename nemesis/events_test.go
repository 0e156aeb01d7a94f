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

// fakeClock is the time of a schedule run without waiting: sleeping
// advances it.
type fakeClock struct{ now time.Duration }

func (c *fakeClock) sleep(ctx context.Context, d time.Duration) bool {
	c.now += d
	return ctx.Err() == nil
}

// generated runs a seeded Schedule of spec for cycles fault rounds and
// returns the runtime calls and the events its ops describe.
func generated(t *testing.T, seed int64, spec string, cycles int) ([]string, []Event) {
	t.Helper()
	w := diskWorld{newWorld(5)}
	parsed, err := ParseSpec(spec)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	clock, sleeps := &fakeClock{}, 0
	s := &Schedule{Faults: parsed.Faults(w, w), Interval: 10 * time.Second, Seed: seed,
		Sleep: func(ctx context.Context, d time.Duration) bool {
			if sleeps++; sleeps > 2*cycles {
				cancel()
				return false
			}
			return clock.sleep(ctx, d)
		}}
	var log EventLog
	s.Run(ctx, func(op checker.Op) { log.Observe(clock.now, op) })
	return w.calls, log.Events()
}

// replayed plays events with a Fixed schedule on a fresh world and returns
// the runtime calls and the events it executed.
func replayed(t *testing.T, events []Event) ([]string, []Event) {
	t.Helper()
	w := diskWorld{newWorld(5)}
	clock := &fakeClock{}
	f := &Fixed{Events: events, New: NewFault(w, w), Sleep: clock.sleep, Since: func() time.Duration { return clock.now }}
	var log EventLog
	f.Run(context.Background(), func(op checker.Op) { log.Observe(clock.now, op) })
	return w.calls, log.Events()
}

func TestRecordedScheduleRoundTripsAndReplaysTheSameFaults(t *testing.T) {
	calls, events := generated(t, 42, "kill,pause,partition,power,power:follower-then-leader,disk-error,disk-slow,corrupt", 16)
	require.Len(t, events, 32)
	require.NoError(t, ValidateEvents(events))
	kinds := map[Kind]bool{}
	for _, e := range events {
		kinds[e.Kind] = true
	}
	assert.Len(t, kinds, 7, "the seed should draw most kinds: %v", kinds)

	b, err := json.Marshal(events)
	require.NoError(t, err)
	assert.Contains(t, string(b), `"at":"10s"`)
	var back []Event
	require.NoError(t, json.Unmarshal(b, &back))
	assert.Equal(t, events, back)

	replayCalls, replayEvents := replayed(t, back)
	assert.Equal(t, calls, replayCalls, "the replay touches the same nodes the same way")
	assert.Equal(t, events, replayEvents, "and executes the same events at the same times")
}

func TestFixedScheduleKeepsAFaultsStartAndStopTogetherAndHealsAtTheEnd(t *testing.T) {
	_, events := generated(t, 7, "kill,partition", 6)
	ids := FaultIDs(events)
	require.Len(t, ids, 6)
	kept := KeepFaults(events, []int{ids[1], ids[4]})
	require.Len(t, kept, 4)
	require.NoError(t, ValidateEvents(kept))
	_, got := replayed(t, kept)
	assert.Equal(t, withoutIDs(kept), withoutIDs(got), "the kept faults, at their times (numbered afresh)")

	// A schedule cut short by the end of the run still heals what it
	// started.
	w := diskWorld{newWorld(5)}
	ctx, cancel := context.WithCancel(context.Background())
	clock := &fakeClock{}
	f := &Fixed{Events: []Event{{At: time.Second, Op: OpStart, ID: 1, Kind: KindKill, Targets: []string{"n2"}},
		{At: time.Hour, Op: OpStop, ID: 1, Kind: KindKill}}, New: NewFault(w, w),
		Sleep: func(ctx context.Context, d time.Duration) bool {
			if d > time.Minute {
				cancel()
				return false
			}
			return clock.sleep(ctx, d)
		}, Since: func() time.Duration { return clock.now }}
	f.Run(ctx, func(checker.Op) {})
	assert.Equal(t, []string{"kill n2", "start n2"}, w.calls)
}

func TestValidateEventsRefusesBrokenSchedules(t *testing.T) {
	start := Event{At: time.Second, Op: OpStart, ID: 1, Kind: KindKill}
	for name, events := range map[string][]Event{
		"stop without start": {{Op: OpStop, ID: 1, Kind: KindKill}},
		"unknown kind":       {{Op: OpStart, ID: 1, Kind: "flood"}},
		"out of order":       {start, {At: 0, Op: OpStop, ID: 1, Kind: KindKill}},
		"started twice":      {start, start},
		"bad op":             {{Op: "begin", ID: 1, Kind: KindKill}},
		"bad resolved mode":  {{Op: OpStart, ID: 1, Kind: KindPartition, Mode: "leaders", Resolve: true}},
	} {
		assert.Error(t, ValidateEvents(events), name)
	}
	var e Event
	assert.Error(t, json.Unmarshal([]byte(`{"at":"soon","op":"start"}`), &e))
}

func withoutIDs(events []Event) []Event {
	out := make([]Event, len(events))
	for i, e := range events {
		e.ID = 0
		out[i] = e
	}
	return out
}

// TestFixedResolvesTheTargetsOfAGeneratorsEvents: an event that leaves its
// targets to be chosen at start is drawn from the seed, recorded as
// resolved, and the recording replays exactly.
func TestFixedResolvesTheTargetsOfAGeneratorsEvents(t *testing.T) {
	timed := []Event{
		{At: 5 * time.Second, Op: OpStart, ID: 1, Kind: KindKill, Mode: TargetLeaders, Resolve: true},
		{At: 8 * time.Second, Op: OpStart, ID: 2, Kind: KindPartition, Resolve: true},
		{At: 12 * time.Second, Op: OpStop, ID: 1, Kind: KindKill},
		{At: 20 * time.Second, Op: OpStop, ID: 2, Kind: KindPartition},
	}
	require.NoError(t, ValidateEvents(timed))
	run := func(seed int64, events []Event) ([]string, []Event) {
		w := diskWorld{newWorld(5)}
		clock := &fakeClock{}
		f := &Fixed{Events: events, Seed: seed, New: NewFault(w, w), Sleep: clock.sleep, Since: func() time.Duration { return clock.now }}
		var log EventLog
		f.Run(context.Background(), func(op checker.Op) { log.Observe(clock.now, op) })
		return w.calls, log.Events()
	}
	calls, resolved := run(5, timed)
	again, _ := run(5, timed)
	assert.Equal(t, calls, again, "same seed, same choices")
	require.Len(t, resolved, 4)
	assert.Equal(t, TargetLeaders, resolved[0].Mode)
	assert.Subset(t, []string{"n1", "n3"}, resolved[0].Targets, "kill:leaders hit a leader")
	assert.False(t, resolved[0].Resolve)
	assert.NotEmpty(t, resolved[1].Grudge)
	replayCalls, _ := replayed(t, resolved)
	assert.Equal(t, calls, replayCalls, "the recording of a resolved run replays exactly")
}
