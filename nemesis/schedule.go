package nemesis

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"time"

	"github.com/faultline/faultline/checker"
)

// Recorder takes nemesis operations into the history; the harness fills in
// index and time.
type Recorder func(op checker.Op)

// Schedule starts and stops faults, Jepsen-style: every Interval it starts
// one fault chosen at random (or the next one in order, with Cycle), and
// one Interval later stops it. Every start
// and stop is recorded as an invoke and a completion with f
// "start-<fault>" / "stop-<fault>" (the checker's convention for fault
// windows): ok when it worked, info when it failed or half-worked.
type Schedule struct {
	Faults   []Fault
	Interval time.Duration
	// Cycle starts the faults in the order Faults names them, round after
	// round, instead of drawing each at random, so that a short run still
	// meets every kind (their modes and nodes are still drawn).
	Cycle bool
	// Seed makes the choices (which fault, which mode, which nodes)
	// reproducible.
	Seed int64
	// StopTimeout bounds how long healing may take after the run ends.
	StopTimeout time.Duration
	// Sleep waits for d or until ctx ends; tests replace it to run a
	// schedule without waiting. Default: a timer.
	Sleep func(ctx context.Context, d time.Duration) bool
}

func timerSleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// Run executes the schedule until ctx ends, then stops the fault in force
// (heals) before returning. It never leaves a fault active.
func (s *Schedule) Run(ctx context.Context, record Recorder) {
	var active []Fault
	for _, f := range s.Faults {
		if _, noop := f.(Noop); !noop {
			active = append(active, f)
		}
	}
	if len(active) == 0 {
		<-ctx.Done()
		return
	}
	sleep := s.Sleep
	if sleep == nil {
		sleep = timerSleep
	}
	stopTimeout := s.StopTimeout
	if stopTimeout <= 0 {
		stopTimeout = time.Minute
	}
	rng := rand.New(rand.NewPCG(uint64(s.Seed), 0x6e656d65736973))
	for round := 0; ; round++ {
		if !sleep(ctx, s.Interval) || ctx.Err() != nil {
			return
		}
		f := active[round%len(active)]
		if !s.Cycle {
			f = active[rng.IntN(len(active))]
		}
		// A fault is started and stopped with contexts of its own, so the
		// end of the run never leaves one half-applied.
		startCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), stopTimeout)
		do(record, "start-"+f.Name(), func() (any, error) { return f.Start(startCtx, rng) })
		cancel()
		sleep(ctx, s.Interval)
		stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), stopTimeout)
		do(record, "stop-"+f.Name(), func() (any, error) { return f.Stop(stopCtx) })
		cancel()
		if ctx.Err() != nil {
			return
		}
	}
}

func do(record Recorder, f string, fn func() (any, error)) {
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
}
