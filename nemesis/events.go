package nemesis

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/faultline/faultline/checker"
)

// Runner executes a fault schedule until ctx ends and heals before it
// returns: Schedule draws one from the seed, Fixed plays a given list of
// events (a replay, a shrinker's candidate, or a generator that resolves
// its events ahead of time).
type Runner interface {
	Run(ctx context.Context, record Recorder)
}

// Event ops.
const (
	OpStart = "start"
	OpStop  = "stop"
)

// Event is one step of a fault schedule as it was executed, plain data:
// at At (since the workload started) Op starts or stops the fault ID of
// Kind, on Targets (sorted) in Mode; a partition's Grudge says who drops
// whose packets; Commands holds the fault filesystem command each node got
// (power, disk-*) and Seeds what corrupt damaged each node with. A stop
// names the ID of its start and nothing else is needed to undo it.
//
// A generator that times its faults ahead but lets targets be chosen when
// each starts (by asking the cluster, as Schedule does) sets Resolve on the
// start and leaves Targets empty: Fixed then starts it as the fault of
// Kind pinned to Mode (any mode when empty) with its seeded rng. The
// EventLog of the run records what was resolved, so its replay is exact.
type Event struct {
	At       time.Duration     `json:"-"`
	Op       string            `json:"op"`
	ID       int               `json:"id"`
	Kind     Kind              `json:"kind"`
	Mode     string            `json:"mode,omitempty"`
	Targets  []string          `json:"targets,omitempty"`
	Grudge   Grudge            `json:"grudge,omitempty"`
	Commands map[string]string `json:"commands,omitempty"`
	Seeds    map[string]uint64 `json:"seeds,omitempty"`
	Resolve  bool              `json:"resolve,omitempty"`
}

type eventJSON Event

// MarshalJSON writes At as a Go duration string ("12.5s").
func (e Event) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		At string `json:"at"`
		eventJSON
	}{e.At.String(), eventJSON(e)})
}

// UnmarshalJSON reads what MarshalJSON writes.
func (e *Event) UnmarshalJSON(b []byte) error {
	var v struct {
		At string `json:"at"`
		eventJSON
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return fmt.Errorf("schedule event: %w", err)
	}
	at, err := time.ParseDuration(v.At)
	if err != nil {
		return fmt.Errorf("schedule event %d: at: %w", v.ID, err)
	}
	*e = Event(v.eventJSON)
	e.At = at
	return nil
}

// ValidateEvents checks a fixed schedule: known ops and kinds, times not
// negative and in order, every stop after a start of the same ID and kind,
// no ID started twice.
func ValidateEvents(events []Event) error {
	started := map[int]Kind{}
	var prev time.Duration
	for i, e := range events {
		switch {
		case e.At < 0:
			return fmt.Errorf("event %d: negative time %s", i, e.At)
		case e.At < prev:
			return fmt.Errorf("event %d: at %s before the event before it (%s)", i, e.At, prev)
		case !slices.Contains(kinds, e.Kind) || e.Kind == KindNone:
			return fmt.Errorf("event %d: unknown fault kind %q", i, e.Kind)
		}
		prev = e.At
		switch e.Op {
		case OpStart:
			if _, dup := started[e.ID]; dup {
				return fmt.Errorf("event %d: fault %d started twice", i, e.ID)
			}
			started[e.ID] = e.Kind
			if e.Resolve {
				if err := (FaultSpec{Kind: e.Kind, Mode: e.Mode}).validate(); err != nil {
					return fmt.Errorf("event %d: %w", i, err)
				}
			}
		case OpStop:
			k, ok := started[e.ID]
			if !ok || k != e.Kind {
				return fmt.Errorf("event %d: stop of %s %d that was not started", i, e.Kind, e.ID)
			}
		default:
			return fmt.Errorf("event %d: op must be start or stop, got %q", i, e.Op)
		}
	}
	return nil
}

// KeepFaults returns the events of the faults whose IDs are in ids (a start
// and its stop are kept or dropped together), in their order.
func KeepFaults(events []Event, ids []int) []Event {
	var out []Event
	for _, e := range events {
		if slices.Contains(ids, e.ID) {
			out = append(out, e)
		}
	}
	return out
}

// FaultIDs lists the IDs of the faults started in events, in start order.
func FaultIDs(events []Event) []int {
	var ids []int
	for _, e := range events {
		if e.Op == OpStart {
			ids = append(ids, e.ID)
		}
	}
	return ids
}

// EventLog turns the nemesis operations of a history into the events that
// were executed, so that a run can be replayed exactly. Observe every
// nemesis op in order with its time since the workload started.
type EventLog struct {
	events  []Event
	invoked map[string]time.Duration // f -> time of its pending invoke
	open    map[Kind][]int           // started, not yet stopped, by kind
	byID    map[int]Event
	next    int
}

// Observe takes one op; ops other than start-*/stop-* are ignored.
func (l *EventLog) Observe(at time.Duration, op checker.Op) {
	if op.Process != checker.NemesisProcess {
		return
	}
	if l.invoked == nil {
		l.invoked, l.open, l.byID = map[string]time.Duration{}, map[Kind][]int{}, map[int]Event{}
	}
	if op.Type == checker.Invoke {
		l.invoked[op.F] = at
		return
	}
	start, ok := l.invoked[op.F]
	if !ok {
		start = at
	}
	delete(l.invoked, op.F)
	var done struct {
		Mode   string            `json:"mode"`
		Nodes  []string          `json:"nodes"`
		Grudge Grudge            `json:"grudge"`
		Did    map[string]string `json:"did"`
		Seeds  map[string]uint64 `json:"seeds"`
	}
	_ = json.Unmarshal(op.Raw, &done)
	if k, ok := strings.CutPrefix(op.F, "start-"); ok {
		l.next++
		e := Event{At: start, Op: OpStart, ID: l.next, Kind: Kind(k), Mode: done.Mode,
			Targets: done.Nodes, Grudge: done.Grudge, Seeds: done.Seeds}
		if len(done.Grudge) > 0 {
			e.Targets = sortedNodes(done.Grudge)
		}
		if Kind(k) == KindPower || Kind(k).OnFaultFS() {
			e.Commands = done.Did
		}
		l.open[e.Kind] = append(l.open[e.Kind], e.ID)
		l.byID[e.ID] = e
		l.events = append(l.events, e)
		return
	}
	k, ok := strings.CutPrefix(op.F, "stop-")
	if !ok {
		return
	}
	open := l.open[Kind(k)]
	if len(open) == 0 {
		return
	}
	// The stop undoes the open fault of its kind that touched the nodes it
	// names (overlapping faults of one kind); else the oldest.
	pick := 0
	for i, id := range open {
		if slices.Equal(sortedCopy(l.byID[id].Targets), sortedCopy(done.Nodes)) {
			pick = i
			break
		}
	}
	id := open[pick]
	l.open[Kind(k)] = slices.Delete(open, pick, pick+1)
	l.events = append(l.events, Event{At: start, Op: OpStop, ID: id, Kind: Kind(k)})
}

// Events returns the events observed so far, in time order.
func (l *EventLog) Events() []Event {
	out := slices.Clone(l.events)
	sort.SliceStable(out, func(i, j int) bool { return out[i].At < out[j].At })
	return out
}

func sortedCopy(s []string) []string {
	c := slices.Clone(s)
	sort.Strings(c)
	return c
}

// Aimed is a fault that can be started on targets already chosen: the
// targets, grudge and commands of a recorded Event. Every fault of this
// package is one.
type Aimed interface {
	StartOn(ctx context.Context, e Event) (any, error)
}

// StartOn kills e's targets.
func (k *Kill) StartOn(ctx context.Context, e Event) (any, error) {
	return k.kill(ctx, e.Mode, e.Targets)
}

// StartOn pauses e's targets.
func (p *Pause) StartOn(ctx context.Context, e Event) (any, error) {
	return p.pause(ctx, e.Mode, e.Targets)
}

// StartOn installs e's grudge.
func (p *Partition) StartOn(ctx context.Context, e Event) (any, error) {
	return p.cutOff(ctx, e.Mode, e.Grudge)
}

// StartOn cuts the power of e's targets with e's commands (for
// follower-then-leader: the follower, then the leader, as recorded).
func (p *Power) StartOn(ctx context.Context, e Event) (any, error) {
	if p.Disk == nil {
		return DiskTargets{Mode: e.Mode}, errNoDisk
	}
	if e.Mode == PowerThenLeader {
		if len(e.Targets) != 2 {
			return DiskTargets{Mode: e.Mode}, fmt.Errorf("follower-then-leader: want two targets, got %v", e.Targets)
		}
		follower, leader := e.Targets[0], e.Targets[1]
		return p.followerThenLeaderOn(ctx, follower, leader, strings.TrimSuffix(e.Commands[follower], startedAgain))
	}
	return p.cut(ctx, e.Mode, e.Targets, e.Commands)
}

// StartOn applies e's command to e's targets.
func (d *DiskFault) StartOn(ctx context.Context, e Event) (any, error) {
	if d.Disk == nil {
		return DiskTargets{Mode: e.Mode}, errNoDisk
	}
	line := ""
	for _, n := range e.Targets {
		if c := e.Commands[n]; c != "" {
			line = c
			break
		}
	}
	if line == "" {
		return DiskTargets{Mode: e.Mode}, fmt.Errorf("%s: the event has no command", d.Kind)
	}
	return d.apply(ctx, e.Mode, e.Targets, line)
}

// StartOn kills e's targets and corrupts each with its recorded seed.
func (c *Corrupt) StartOn(ctx context.Context, e Event) (any, error) {
	if c.Disk == nil {
		return DiskTargets{Mode: e.Mode}, errNoDisk
	}
	return c.corrupt(ctx, e.Mode, e.Targets, func(n string) uint64 { return e.Seeds[n] })
}

// Fixed is the Runner of a given list of events: it waits until each
// event's time (since Run began) and starts or stops what the event says,
// on the event's targets, never drawing anything. Faults still in force
// when ctx ends are stopped, latest first, before Run returns. Operations
// are recorded as Schedule records them.
type Fixed struct {
	Events []Event
	// New builds a fault of an entry (NewFault gives Spec.Faults' one); a
	// fresh one per started event, so overlapping faults of a kind keep
	// apart what each must undo.
	New func(FaultSpec) Fault
	// Seed seeds the choices of events with Resolve set.
	Seed int64
	// StopTimeout bounds each start and stop (default a minute).
	StopTimeout time.Duration
	// Sleep waits for d or until ctx ends (default a timer); Since is the
	// time since Run began (default the wall clock). Tests replace both.
	Sleep func(ctx context.Context, d time.Duration) bool
	Since func() time.Duration
}

// Run plays the events until they are done or ctx ends, then heals.
func (s *Fixed) Run(ctx context.Context, record Recorder) {
	sleep, since := s.Sleep, s.Since
	if sleep == nil {
		sleep = timerSleep
	}
	if since == nil {
		began := time.Now()
		since = func() time.Duration { return time.Since(began) }
	}
	stopTimeout := s.StopTimeout
	if stopTimeout <= 0 {
		stopTimeout = time.Minute
	}
	type running struct {
		id int
		f  Fault
	}
	var active []running
	rng := rand.New(rand.NewPCG(uint64(s.Seed), 0x6669786564))
	step := func(name string, fn func(context.Context) (any, error)) {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), stopTimeout)
		defer cancel()
		do(record, name, func() (any, error) { return fn(sctx) })
	}
	for _, e := range s.Events {
		if wait := e.At - since(); wait > 0 && !sleep(ctx, wait) {
			break
		}
		if ctx.Err() != nil {
			break
		}
		switch e.Op {
		case OpStart:
			if e.Resolve {
				f := s.New(FaultSpec{Kind: e.Kind, Mode: e.Mode})
				active = append(active, running{e.ID, f})
				step("start-"+f.Name(), func(c context.Context) (any, error) { return f.Start(c, rng) })
				continue
			}
			f := s.New(FaultSpec{Kind: e.Kind})
			active = append(active, running{e.ID, f})
			step("start-"+f.Name(), func(c context.Context) (any, error) {
				aimed, ok := f.(Aimed)
				if !ok {
					return nil, errors.New("this fault cannot be replayed on given targets")
				}
				return aimed.StartOn(c, e)
			})
		case OpStop:
			i := slices.IndexFunc(active, func(r running) bool { return r.id == e.ID })
			if i < 0 {
				continue
			}
			f := active[i].f
			active = slices.Delete(active, i, i+1)
			step("stop-"+f.Name(), f.Stop)
		}
	}
	for i := len(active) - 1; i >= 0; i-- {
		step("stop-"+active[i].f.Name(), active[i].f.Stop)
	}
}

// NewFault builds the fault of one entry, as Spec.Faults would: the New
// of a Fixed schedule.
func NewFault(rt Runtime, c Cluster) func(FaultSpec) Fault {
	return func(f FaultSpec) Fault { return Spec{f}.Faults(rt, c)[0] }
}
