package nemesis

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/faultline/faultline/checker"
)

// Recorder takes nemesis operations into the history; the harness fills in
// index and time.
type Recorder func(op checker.Op)

// Schedule runs a list of timed events (Plan draws one; a stored
// schedule.json replays one) against the faults of its slots: at each
// event's time it starts or stops that fault. Every start and stop is
// recorded as an invoke and a completion with f "start-<fault>" /
// "stop-<fault>" (the checker's convention for fault windows): ok when it
// worked, info when it failed or half-worked. Events run one at a time, in
// order; one that takes long (a rolling restart, docker exec on a busy
// host) shifts those after it by as much, keeping their gaps, and the
// executed schedule records when each really ran.
type Schedule struct {
	// Faults are the faults of the spec's slots (Spec.Faults).
	Faults []Fault
	// Events is the schedule, sorted by At.
	Events []Event
	// StopTimeout bounds how long one start or stop may take, and
	// healing after the run ends.
	StopTimeout time.Duration
	// Sleep waits for d or until ctx ends; tests replace it to run a
	// schedule without waiting. Default: a timer.
	Sleep func(ctx context.Context, d time.Duration) bool

	mu       sync.Mutex
	executed []Event
}

func timerSleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// Executed returns the events as they ran: the time each began (from the
// start of Run, on the schedule's own clock: planned gaps plus the time
// the events before it took) and, for starts, the nodes the fault hit,
// including the stops that healed what was in force when the run ended.
// Fed back as Events with the same spec, it replays the run's faults.
func (s *Schedule) Executed() []Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.executed)
}

func (s *Schedule) note(e Event) {
	s.mu.Lock()
	s.executed = append(s.executed, e)
	s.mu.Unlock()
}

// Run executes the events until they are done or ctx ends; a fault still
// in force then (a start with no stop) holds until ctx ends. Either way it
// stops every fault still in force (heals), latest started first, before
// it returns. It never leaves a
// fault active. An event naming a slot out of range is skipped, and a stop
// of a fault not in force does nothing.
func (s *Schedule) Run(ctx context.Context, record Recorder) {
	sleep := s.Sleep
	if sleep == nil {
		sleep = timerSleep
	}
	stopTimeout := s.StopTimeout
	if stopTimeout <= 0 {
		stopTimeout = time.Minute
	}
	var active []int        // slots in force, in start order
	var shift time.Duration // how late the schedule runs
	// clock is the schedule's own time: the planned gaps slept plus the
	// time each event took, so a fake Sleep still gives exact times.
	var clock time.Duration
	step := func(e Event) {
		f := s.Faults[e.Slot]
		// A fault is started and stopped with contexts of its own, so the
		// end of the run never leaves one half-applied.
		limit := stopTimeout
		if l, ok := f.(interface{ timeout() time.Duration }); ok {
			limit = max(limit, l.timeout())
		}
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), limit)
		defer cancel()
		t0 := time.Now()
		ran := e
		ran.At = clock.Round(time.Millisecond)
		var seq *sequence
		switch e.Action {
		case ActionStart:
			rng := rand.New(rand.NewPCG(e.Seed, uint64(e.Slot)))
			var actx context.Context
			actx, seq = withSequence(WithAim(sctx, e.Mode, e.Nodes), e.Steps)
			v := do(record, "start-"+f.Name(), func() (any, error) { return f.Start(actx, rng) })
			if a, ok := v.(Aimed); ok && len(e.Nodes) == 0 {
				ran.Nodes = a.AimedAt()
			}
			ran.Steps = seq.executed()
			active = append(active, e.Slot)
		case ActionStop:
			do(record, "stop-"+f.Name(), func() (any, error) { return f.Stop(sctx) })
			active = slices.DeleteFunc(active, func(x int) bool { return x == e.Slot })
		}
		s.note(ran)
		clock += time.Since(t0)
		if seq != nil {
			clock += seq.skew // what a fake Sleep skipped of the sequence's waits
		}
	}
	for _, e := range s.Events {
		if e.Slot < 0 || e.Slot >= len(s.Faults) {
			continue
		}
		if _, noop := s.Faults[e.Slot].(Noop); noop {
			continue
		}
		inForce := slices.Contains(active, e.Slot)
		if (e.Action == ActionStart) == inForce || (e.Action != ActionStart && e.Action != ActionStop) {
			continue // a start of a fault in force, or a stop of one that is not
		}
		// An event that ran late (the ones before it took longer than
		// their gaps) shifts the rest, so the gaps between events stay as
		// planned: a kill still comes its seconds after the partition.
		due := e.At + shift
		if clock > due {
			shift, due = clock-e.At, clock
		}
		if wait := due - clock; wait > 0 {
			if !sleep(ctx, wait) || ctx.Err() != nil {
				break
			}
			clock = due
		}
		if ctx.Err() != nil {
			break
		}
		step(e)
	}
	if len(active) > 0 && ctx.Err() == nil {
		<-ctx.Done() // a start the events never stop holds to the end
	}
	// Heal latest first, except that a fault whose stop waits for the
	// cluster (membership waits for its node to rejoin every ISR) goes
	// after the others, which could keep it from rejoining.
	var waiting []int
	for i := len(active) - 1; i >= 0; i-- {
		slot := active[i]
		if w, ok := s.Faults[slot].(interface{ waitsOnStop() bool }); ok && w.waitsOnStop() {
			waiting = append(waiting, slot)
			continue
		}
		step(Event{Action: ActionStop, Slot: slot, Kind: kindOf(s.Faults[slot])})
	}
	for _, slot := range waiting {
		step(Event{Action: ActionStop, Slot: slot, Kind: kindOf(s.Faults[slot])})
	}
}

func kindOf(f Fault) Kind { return Kind(f.Name()) }

func do(record Recorder, f string, fn func() (any, error)) any {
	record(checker.Op{Process: checker.NemesisProcess, Type: checker.Invoke, F: f})
	v, err := fn()
	done := checker.Op{Process: checker.NemesisProcess, Type: checker.OK, F: f}
	if v != nil {
		if raw, jerr := json.Marshal(v); jerr == nil {
			done.Raw = raw
		}
	}
	if err != nil {
		done.Type, done.Error = checker.Info, err.Error()
	}
	record(done)
	return v
}
