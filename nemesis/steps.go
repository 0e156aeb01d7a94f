package nemesis

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"
)

// Step is one step of a sequence mode's start as it ran (power:after-
// fsync-error, partition:lagging-then-leader, corrupt:bit-flip-then-leader,
// lagging-failover, ...): what it did (Name), when (After, since the start
// began, on the schedule's clock), to whom (Nodes), on which partition
// ("t0-2") when it chose one, and by which rule the nodes were resolved
// when the live cluster chose them ("the active controller"). The start's
// Event holds its steps (Event.Steps); fed back, a replay drives the
// recorded nodes and partition at the recorded times instead of resolving
// them again, and notes where the live cluster disagreed (Live, Note).
type Step struct {
	Name      string        `json:"step"`
	After     time.Duration `json:"after"`
	Rule      string        `json:"rule,omitempty"`
	Nodes     []string      `json:"nodes,omitempty"`
	Partition string        `json:"partition,omitempty"`
	// Did is what the step reported doing beyond its nodes (the file a
	// bit flip damaged).
	Did string `json:"did,omitempty"`
	// Live, on a replay, is what the rule resolved to against the live
	// cluster where that differs from the recorded Nodes or Partition
	// (which the replay drove regardless); Note says so in words.
	Live []string `json:"live,omitempty"`
	Note string   `json:"note,omitempty"`
}

// sequence records a start's steps and, on a replay, hands back the
// recorded ones. Its clock is the wall time since the start began plus
// what its waits were asked to wait beyond what they took (a fake Sleep in
// tests returns at once, and the steps still get the times planned).
type sequence struct {
	mu       sync.Mutex
	t0       time.Time
	skew     time.Duration
	recorded []Step
	steps    []Step
}

type sequenceKey struct{}

// withSequence returns a context whose fault records its steps into the
// returned sequence, replaying recorded when it is not empty.
func withSequence(ctx context.Context, recorded []Step) (context.Context, *sequence) {
	s := &sequence{t0: time.Now(), recorded: recorded}
	return context.WithValue(ctx, sequenceKey{}, s), s
}

// sequenceOf returns the context's sequence, or a fresh one that records
// into nothing (a fault started outside a Schedule).
func sequenceOf(ctx context.Context) *sequence {
	if s, ok := ctx.Value(sequenceKey{}).(*sequence); ok {
		return s
	}
	return &sequence{t0: time.Now()}
}

func (s *sequence) now() time.Duration { return time.Since(s.t0) + s.skew }

// executed returns the steps taken.
func (s *sequence) executed() []Step {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.steps)
}

// step begins the next step: live is the step as resolved against the
// live cluster now (liveErr when that failed). Without a recording it is
// recorded and returned with liveErr. On a replay whose next recorded
// step has the same name, the recorded nodes and partition are returned
// instead, with no error, and a disagreement of the live resolution is
// noted on the step.
func (s *sequence) step(live Step, liveErr error) (Step, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	live.After = s.now().Round(time.Millisecond)
	k := len(s.steps)
	if k >= len(s.recorded) || s.recorded[k].Name != live.Name {
		if k < len(s.recorded) {
			live.Note = fmt.Sprintf("replay: the recording has %q here, not %q: resolved against the live cluster", s.recorded[k].Name, live.Name)
		}
		s.steps = append(s.steps, live)
		return live, liveErr
	}
	rec := s.recorded[k]
	out := live
	out.Nodes, out.Partition = slices.Clone(rec.Nodes), rec.Partition
	if len(rec.Nodes) == 0 && len(live.Nodes) > 0 {
		out.Nodes = live.Nodes // recorded before it resolved anything
	}
	switch {
	case liveErr != nil:
		out.Note = fmt.Sprintf("replay: the live cluster resolved %s to nothing (%v); drove the recorded %s", ruleOf(live), liveErr, describeStep(rec))
	case !sameNodes(live.Nodes, rec.Nodes) || live.Partition != rec.Partition:
		out.Live = live.Nodes
		out.Note = fmt.Sprintf("replay: the live cluster disagreed: %s is %s now; drove the recorded %s", ruleOf(live), describeStep(live), describeStep(rec))
	}
	s.steps = append(s.steps, out)
	return out, nil
}

// wait waits before the next step: d (sequenceWaitDefault when zero) with
// sleep, or, on a replay, until the recorded time of the next step. False
// when ctx ended first.
func (s *sequence) wait(ctx context.Context, sleep func(context.Context, time.Duration) bool, d time.Duration) bool {
	s.mu.Lock()
	k := len(s.steps)
	if k < len(s.recorded) {
		d = s.recorded[k].After - s.now()
	} else if d <= 0 {
		d = sequenceWaitDefault
	}
	s.mu.Unlock()
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.Now()
	ok := sequenceWait(ctx, sleep, d)
	if ok {
		s.mu.Lock()
		s.skew += max(0, d-time.Since(t))
		s.mu.Unlock()
	}
	return ok
}

// annotate sets the note of the last step taken.
func (s *sequence) annotate(note string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.steps) > 0 {
		s.steps[len(s.steps)-1].Note = note
	}
}

// recordingEnded reports whether the start replays a recording that has
// no step left: the recorded start stopped here (it failed).
func (s *sequence) recordingEnded() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.recorded) > 0 && len(s.steps) >= len(s.recorded)
}

// recordedNext is the recorded next step, false when the start is not a
// replay of one (or has no more recorded steps).
func (s *sequence) recordedNext() (Step, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if k := len(s.steps); k < len(s.recorded) {
		return s.recorded[k], true
	}
	return Step{}, false
}

func ruleOf(st Step) string {
	if st.Rule != "" {
		return st.Rule
	}
	return st.Name + "'s target"
}

func describeStep(st Step) string {
	out := fmt.Sprint(st.Nodes)
	if st.Partition != "" {
		out += " on " + st.Partition
	}
	return out
}

func sameNodes(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// ReplayNotes lists, in words, where a replay's live cluster disagreed
// with the recording it drove (the Notes of the executed events' steps).
func ReplayNotes(events []Event) []string {
	var out []string
	for _, e := range events {
		for _, st := range e.Steps {
			if st.Note != "" {
				out = append(out, fmt.Sprintf("%s:%s started at %s, its step %s %s in: %s", e.Kind, e.Mode, e.At, st.Name, st.After, st.Note))
			}
		}
	}
	return out
}
