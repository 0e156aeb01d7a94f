package nemesis

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"time"
)

// Action says whether an event starts or stops its fault.
type Action string

// The actions of a schedule's events.
const (
	ActionStart Action = "start"
	ActionStop  Action = "stop"
)

// Event is one step of a fault schedule, as data: at At (nanoseconds from
// the start of the workload phase) start or stop the fault in slot Slot
// (an index into Spec.Parts and Spec.Faults). A start names the fault's
// Kind and the Mode drawn for it, and Seed, which alone makes the fault's
// own random choices (which nodes, which power-loss variant), so that an
// event keeps its meaning when others are removed from the list. Nodes,
// when set, pins the targets: the fault hits exactly these nodes instead of
// choosing (a partition reads them per mode: the isolated node, one side
// of halves, the ring's order). A stop names only its slot (Kind and Mode
// repeated for reading). Steps, for a start of a sequence mode (two
// faults in a row whose later targets the live cluster decides: the lagging
// replica, the rest of an ISR, the current leader), are its steps as they
// ran; fed back, the replay drives their nodes at their times (Step).
//
// A schedule is a []Event sorted by At; Plan draws one from a seed, and the
// schedule that ran is written as schedule.json (Schedule.Executed), with
// the times it really ran at and the nodes each start hit: feeding it back
// as Schedule.Events replays the faults exactly.
type Event struct {
	At     time.Duration `json:"at"`
	Action Action        `json:"action"`
	Slot   int           `json:"slot"`
	Kind   Kind          `json:"kind"`
	Mode   string        `json:"mode,omitempty"`
	Seed   uint64        `json:"seed,omitempty"`
	Nodes  []string      `json:"nodes,omitempty"`
	Steps  []Step        `json:"steps,omitempty"`
}

// PlanOptions shape a drawn schedule.
type PlanOptions struct {
	// Interval is the mean time between events (Jepsen's interval): each
	// gap is drawn uniform in [0, 2×Interval) (Jepsen's stagger), and
	// faults composed in one entry start and stop Interval/2 apart on
	// average.
	Interval time.Duration
	// Limit is how long the schedule runs (the test's time limit): no
	// fault starts after it.
	Limit time.Duration
	// Stable is the fault-free period between rounds (default Interval):
	// everything is healed and nothing starts.
	Stable time.Duration
	// Overlap lets the entries of different kinds run on timelines of
	// their own within a round (Jepsen's combined packages): a kill may
	// start during a partition and end after it. Without it one entry is
	// in force at a time, and a round is one entry.
	Overlap bool
	// Round is the length of a round with Overlap (default 4×Interval).
	Round time.Duration
	// Cycle takes the entries in the order the list names them, round
	// after round, instead of drawing each at random, so that a short run
	// still meets every kind (modes and nodes are still drawn). Without
	// Overlap only.
	Cycle bool
}

// randomModes are the modes a fault of the kind chooses from when its
// entry names none.
func (k Kind) randomModes() []string {
	switch k {
	case KindKill, KindPause, KindStop, KindPower, KindDiskError, KindDiskFull, KindDiskSlow, KindCorrupt:
		return ProcessTargetModes
	case KindPartition:
		return PartitionModes
	case KindLaggingFailover:
		return LaggingModes
	case KindPacket:
		return PacketModes
	}
	return nil
}

// planner draws a schedule's events.
type planner struct {
	o      PlanOptions
	rng    *rand.Rand
	slots  [][]int // entry index -> its slots, in start order
	parts  []FaultSpec
	events []Event
}

// stagger draws a gap uniform in [0, 2d), in whole milliseconds.
func (p *planner) stagger(d time.Duration) time.Duration {
	if d < time.Millisecond {
		return 0
	}
	return time.Duration(p.rng.Int64N(int64(2*d/time.Millisecond))) * time.Millisecond
}

// entry schedules one round of entry e from t: its parts start one after
// another and stop in the reverse order, each stop no later than end (when
// end > 0). It returns when the last part stopped.
func (p *planner) entry(e int, t, end time.Duration) time.Duration {
	slots := p.slots[e]
	clamp := func(t time.Duration) time.Duration {
		if end > 0 {
			return min(t, end)
		}
		return t
	}
	for i, slot := range slots {
		if i > 0 {
			t = clamp(t + p.stagger(p.o.Interval/2))
		}
		part := p.parts[slot]
		mode := part.Mode
		if mode == "" {
			if modes := part.Kind.randomModes(); len(modes) > 0 {
				mode = modes[p.rng.IntN(len(modes))]
			}
		}
		p.events = append(p.events, Event{At: t, Action: ActionStart, Slot: slot, Kind: part.Kind, Mode: mode, Seed: p.rng.Uint64() >> 1})
	}
	t = clamp(t + p.stagger(p.o.Interval))
	for i := len(slots) - 1; i >= 0; i-- {
		if i < len(slots)-1 {
			t = clamp(t + p.stagger(p.o.Interval/2))
		}
		part := p.parts[slots[i]]
		p.events = append(p.events, Event{At: t, Action: ActionStop, Slot: slots[i], Kind: part.Kind})
	}
	return t
}

// Plan draws the schedule of spec for a run of o.Limit: a pure function of
// its arguments (same seed, same schedule). Rounds alternate with stable
// periods; the first round starts after one stable period. Without
// Overlap each round is one entry, chosen at random; with it every kind of
// the list has a timeline of its own in each round (its entries chosen at
// random, a staggered gap before each start and each stop), all stopped
// by the round's end. Entries of kind none are never scheduled.
func Plan(spec Spec, o PlanOptions, seed int64) []Event {
	if o.Interval <= 0 || o.Limit <= 0 {
		return nil
	}
	if o.Stable <= 0 {
		o.Stable = o.Interval
	}
	if o.Round <= 0 {
		o.Round = 4 * o.Interval
	}
	p := &planner{o: o, rng: rand.New(rand.NewPCG(uint64(seed), 0x706c616e)), parts: spec.Parts()}
	var entries []int
	slot := 0
	for i, f := range spec {
		n := len(f.Parts())
		p.slots = append(p.slots, nil)
		for j := range n {
			p.slots[i] = append(p.slots[i], slot+j)
		}
		slot += n
		if f.Kind != KindNone {
			entries = append(entries, i)
		}
	}
	if len(entries) == 0 {
		return nil
	}
	// groups: entries by the kind they start with, so that two entries
	// of one kind are never in force together.
	var groups [][]int
	byKind := map[Kind]int{}
	for _, e := range entries {
		k := spec[e].Kind
		g, ok := byKind[k]
		if !ok {
			g = len(groups)
			byKind[k] = g
			groups = append(groups, nil)
		}
		groups[g] = append(groups[g], e)
	}
	t := time.Duration(0)
	for round := 0; ; round++ {
		t += o.Stable
		if t >= o.Limit {
			break
		}
		if !o.Overlap {
			e := entries[round%len(entries)]
			if !o.Cycle {
				e = entries[p.rng.IntN(len(entries))]
			}
			t = p.entry(e, t+p.stagger(o.Interval), 0)
			continue
		}
		end := t + o.Round
		for _, g := range groups {
			for at := t + p.stagger(o.Interval); at < end && at < o.Limit; at += p.stagger(o.Interval) {
				at = p.entry(g[p.rng.IntN(len(g))], at, end)
			}
		}
		t = end
	}
	// Sorted by time; events at one time keep the order they were drawn
	// in, which keeps each entry's own order (a composed part never stops
	// before it started).
	slices.SortStableFunc(p.events, func(a, b Event) int { return cmp.Compare(a.At, b.At) })
	return p.events
}

// aim carries an event's mode and pinned nodes to the fault it starts.
type aim struct {
	mode  string
	nodes []string
}

type aimKey struct{}

// WithAim returns a context that makes a fault started with it use mode
// (when not empty) and hit exactly nodes (when not empty).
func WithAim(ctx context.Context, mode string, nodes []string) context.Context {
	return context.WithValue(ctx, aimKey{}, aim{mode: mode, nodes: nodes})
}

func aimOf(ctx context.Context) aim {
	a, _ := ctx.Value(aimKey{}).(aim)
	return a
}

// pickMode returns the mode the event pinned, else one of modes (all when
// modes is empty) drawn with rng.
func pickMode(ctx context.Context, rng *rand.Rand, modes, all []string) string {
	if m := aimOf(ctx).mode; m != "" {
		return m
	}
	return pick(rng, modes, all)
}

// fork draws, before a fault chooses its targets, the generator of its
// own choices (faultfs commands, corruption seeds): a replay pins the
// targets and so draws none, and the choices after them stay the same.
func fork(rng *rand.Rand) *rand.Rand {
	return rand.New(rand.NewPCG(rng.Uint64(), rng.Uint64()))
}

// pinnedNodes returns the event's pinned nodes, sorted, or nil.
func pinnedNodes(ctx context.Context) []string {
	nodes := aimOf(ctx).nodes
	if len(nodes) == 0 {
		return nil
	}
	out := append([]string(nil), nodes...)
	sort.Strings(out)
	return out
}

// Aimed is a fault's start result that names the nodes it hit, in the form
// an Event's Nodes pins them.
type Aimed interface{ AimedAt() []string }

// AimedAt returns the nodes hit.
func (t Targets) AimedAt() []string { return t.Nodes }

// AimedAt returns the nodes hit, but for bit-flip-then-leader only the
// node flipped (the first): the rest of its partition's ISR that it then
// killed are a step of the sequence (Event.Steps), which the live cluster
// decided.
func (t DiskTargets) AimedAt() []string {
	if t.Mode == CorruptBitFlipThenLeader && len(t.Nodes) > 1 {
		return t.Nodes[:1]
	}
	return t.Nodes
}

// AimedAt returns the nodes that pin the same grudge (Event.Nodes).
func (p PartitionStart) AimedAt() []string { return p.Nodes }

// ValidateEvents checks a fixed schedule against the spec whose slots it
// names: known actions, times not negative and in order, every slot in
// range and of the kind its event says, no start of a fault in force and
// no stop of one that is not.
func ValidateEvents(spec Spec, events []Event) error {
	parts := spec.Parts()
	inForce := map[int]bool{}
	var prev time.Duration
	for i, e := range events {
		switch {
		case e.At < 0:
			return fmt.Errorf("event %d: negative time %s", i, e.At)
		case e.At < prev:
			return fmt.Errorf("event %d: at %s before the event before it (%s)", i, e.At, prev)
		case e.Slot < 0 || e.Slot >= len(parts):
			return fmt.Errorf("event %d: slot %d, but --nemesis %s has %d", i, e.Slot, spec, len(parts))
		case parts[e.Slot].Kind != e.Kind:
			return fmt.Errorf("event %d: a %s fault in slot %d, which --nemesis %s gives to %s", i, e.Kind, e.Slot, spec, parts[e.Slot].Kind)
		}
		prev = e.At
		switch e.Action {
		case ActionStart:
			if inForce[e.Slot] {
				return fmt.Errorf("event %d: %s (slot %d) started while in force", i, e.Kind, e.Slot)
			}
			if e.Mode != "" {
				if err := (FaultSpec{Kind: e.Kind, Mode: e.Mode}).validate(); err != nil {
					return fmt.Errorf("event %d: %w", i, err)
				}
			}
			inForce[e.Slot] = true
		case ActionStop:
			if !inForce[e.Slot] {
				return fmt.Errorf("event %d: stop of %s (slot %d), which is not in force", i, e.Kind, e.Slot)
			}
			inForce[e.Slot] = false
		default:
			return fmt.Errorf("event %d: action must be start or stop, got %q", i, e.Action)
		}
	}
	return nil
}

// Pairs names the faults of a schedule: the index in events of each start,
// in order (a start and the next stop of its slot are one fault).
func Pairs(events []Event) []int {
	var ids []int
	for i, e := range events {
		if e.Action == ActionStart {
			ids = append(ids, i)
		}
	}
	return ids
}

// PairEnd is when the fault started at events[start] stops, or -1 when
// the schedule never stops it.
func PairEnd(events []Event, start int) time.Duration {
	if i := pairStop(events, start); i >= 0 {
		return events[i].At
	}
	return -1
}

func pairStop(events []Event, start int) int {
	for i := start + 1; i < len(events); i++ {
		if events[i].Slot == events[start].Slot && events[i].Action == ActionStop {
			return i
		}
	}
	return -1
}

// KeepPairs returns the events of the faults whose starts (Pairs) are in
// starts, each with its stop, in their order: a start and its stop are
// kept or dropped together.
func KeepPairs(events []Event, starts []int) []Event {
	keep := map[int]bool{}
	for _, s := range starts {
		if s < 0 || s >= len(events) || events[s].Action != ActionStart {
			continue
		}
		keep[s] = true
		if i := pairStop(events, s); i >= 0 {
			keep[i] = true
		}
	}
	var out []Event
	for i, e := range events {
		if keep[i] {
			out = append(out, e)
		}
	}
	return out
}
