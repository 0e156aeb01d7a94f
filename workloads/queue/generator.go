package queue

import (
	"math/rand/v2"
	"slices"
	"sort"

	"github.com/faultline/faultline/checker"
)

// GenOptions shape the operation mix. Zero values take the defaults noted.
type GenOptions struct {
	// ActiveKeys is how many keys are written at a time (default 8).
	ActiveKeys int
	// MaxWritesPerKey retires a key after this many sends and brings in a
	// fresh one (default 1024, as Jepsen), so no partition grows without
	// bound and many partitions get tested.
	MaxWritesPerKey int
	// Subscribe makes membership operations subscribe (consumer groups)
	// instead of assign.
	Subscribe bool
	// Mixed makes odd-numbered processes subscribe and even-numbered ones
	// assign, so one run mixes both (Subscribe is then ignored).
	Mixed bool
	// Txn makes every operation but assign/subscribe a txn of 1 to
	// TxnMopsMax micro-ops, each a send or a poll (Jepsen's txn generator).
	Txn bool
	// TxnMopsMax bounds a transaction's micro-ops (default 4, as Jepsen).
	TxnMopsMax int
	// MembershipOneIn is the odds of an assign/subscribe operation (default
	// 64: one in 64 operations, as Jepsen).
	MembershipOneIn int
}

func (o GenOptions) withDefaults() GenOptions {
	if o.ActiveKeys <= 0 {
		o.ActiveKeys = 8
	}
	if o.MaxWritesPerKey <= 0 {
		o.MaxWritesPerKey = 1024
	}
	if o.TxnMopsMax <= 0 {
		o.TxnMopsMax = 4
	}
	if o.MembershipOneIn <= 0 {
		o.MembershipOneIn = 64
	}
	return o
}

// Generator is the main phase's operation source: sends of unique values to
// the active keys, polls, and now and then an assign or subscribe, a third
// of them steered to keys that were sent to but not yet polled. It is a
// pure function of its seed and the completions it is told about.
type Generator struct {
	opts      GenOptions
	rng       *rand.Rand
	active    []int
	nextKey   int
	nextValue int64
	writes    map[int]int
	started   map[int]bool // processes that got their first assign
	unpolled  map[int]bool // keys sent to and not yet seen by a poll
	// maxOffset is the highest offset of each key that a send (ok, or
	// info with a known offset outside a transaction) or an ok poll
	// returned: where the final reads must get to.
	maxOffset map[int]int64
}

// NewGenerator returns a generator seeded with seed.
func NewGenerator(seed int64, opts GenOptions) *Generator {
	opts = opts.withDefaults()
	g := &Generator{
		opts:      opts,
		rng:       rand.New(rand.NewPCG(uint64(seed), uint64(seed)^0x9e3779b97f4a7c15)),
		writes:    map[int]int{},
		started:   map[int]bool{},
		unpolled:  map[int]bool{},
		maxOffset: map[int]int64{},
	}
	for range opts.ActiveKeys {
		g.active = append(g.active, g.nextKey)
		g.nextKey++
	}
	return g
}

// Keys returns every key the generator has used so far, sorted.
func (g *Generator) Keys() []int {
	keys := make([]int, g.nextKey)
	for i := range keys {
		keys[i] = i
	}
	return keys
}

func (g *Generator) membership(p int, keys []int) checker.Op {
	f := "assign"
	if (g.opts.Subscribe && !g.opts.Mixed) || (g.opts.Mixed && p%2 == 1) {
		f = "subscribe"
	}
	return checker.Op{Type: checker.Invoke, F: f, Keys: keys}
}

// Next returns the next operation for process p.
func (g *Generator) Next(p int) (checker.Op, bool) {
	if !g.started[p] {
		g.started[p] = true
		return g.membership(p, append([]int(nil), g.active...)), true
	}
	if g.rng.IntN(g.opts.MembershipOneIn) == 0 {
		return g.membership(p, g.pickKeys()), true
	}
	if g.opts.Txn {
		n := 1 + g.rng.IntN(g.opts.TxnMopsMax)
		mops := make([]checker.MicroOp, 0, n)
		for range n {
			if g.rng.IntN(2) == 0 {
				mops = append(mops, checker.MicroOp{F: "poll"})
			} else {
				mops = append(mops, g.nextSend())
			}
		}
		return checker.Op{Type: checker.Invoke, F: "txn", Mops: mops}, true
	}
	if g.rng.IntN(2) == 0 {
		return checker.Op{Type: checker.Invoke, F: "poll", Mops: []checker.MicroOp{{F: "poll"}}}, true
	}
	return checker.Op{Type: checker.Invoke, F: "send", Mops: []checker.MicroOp{g.nextSend()}}, true
}

// nextSend draws the next send: a fresh value to one of the active keys,
// retiring the key once it has had MaxWritesPerKey sends.
func (g *Generator) nextSend() checker.MicroOp {
	i := g.rng.IntN(len(g.active))
	k := g.active[i]
	v := g.nextValue
	g.nextValue++
	g.writes[k]++
	if g.writes[k] >= g.opts.MaxWritesPerKey {
		g.active[i] = g.nextKey
		g.nextKey++
	}
	return checker.MicroOp{F: "send", Key: k, Value: v}
}

// pickKeys chooses the keys of an assign/subscribe: a third of the time the
// keys sent to but not yet polled (so every write gets a chance to be
// read), otherwise a random non-empty subset of the active keys.
func (g *Generator) pickKeys() []int {
	if g.rng.IntN(3) == 0 && len(g.unpolled) > 0 {
		keys := make([]int, 0, len(g.unpolled))
		for k := range g.unpolled {
			keys = append(keys, k)
		}
		sort.Ints(keys)
		return keys
	}
	var keys []int
	for _, k := range g.active {
		if g.rng.IntN(2) == 0 {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		keys = append(keys, g.active[g.rng.IntN(len(g.active))])
	}
	return keys
}

// Update learns which keys were written and which were polled, and the
// highest offset seen of each key. An info send's micro-ops that completed
// before it failed carry real offsets (the broker assigned them), so they
// count like an ok send's, outside a transaction (an info transaction may
// have aborted); an info poll's data counts for nothing.
func (g *Generator) Update(c checker.Op) {
	if c.Type != checker.OK && c.Type != checker.Info {
		return
	}
	for _, m := range c.Mops {
		switch m.F {
		case "send":
			g.unpolled[m.Key] = true
			// An info transaction may have been aborted: read_committed
			// reads never return its records, so the final reads would
			// wait out their deadline for them.
			if m.Offset != nil && (c.Type == checker.OK || c.F != "txn") {
				g.noteOffset(m.Key, *m.Offset)
			}
		case "poll":
			if c.Type != checker.OK {
				continue
			}
			for k, pairs := range m.Polls {
				delete(g.unpolled, k)
				if n := len(pairs); n > 0 {
					g.noteOffset(k, pairs[n-1].Offset)
				}
			}
		}
	}
}

func (g *Generator) noteOffset(k int, off int64) {
	if cur, ok := g.maxOffset[k]; !ok || off > cur {
		g.maxOffset[k] = off
	}
}

// MaxOffsets returns a copy of the highest offset seen of each key.
func (g *Generator) MaxOffsets() map[int]int64 {
	out := make(map[int]int64, len(g.maxOffset))
	for k, v := range g.maxOffset {
		out[k] = v
	}
	return out
}

// FinalGenerator drives the final reads, after Jepsen's final polls: each
// process assigns every key, seeking to the beginning, then polls until,
// for every key, an ok poll has returned an offset at or past the key's
// target (the highest offset known for it). The harness runs it in rounds
// of fresh processes and bounds the phase with a deadline.
type FinalGenerator struct {
	keys    []int
	need    map[int]int64 // key -> highest offset still to be read
	started map[int]bool
}

// NewFinalGenerator returns the final-read generator for keys; targets
// holds the offset each key must be read up to (a key without a target
// holds no known record and needs no read, though it is assigned too).
func NewFinalGenerator(keys []int, targets map[int]int64) *FinalGenerator {
	need := map[int]int64{}
	for k, off := range targets {
		if off >= 0 {
			need[k] = off
		}
	}
	all := append([]int(nil), keys...)
	for k := range need {
		if !slices.Contains(all, k) {
			all = append(all, k)
		}
	}
	sort.Ints(all)
	return &FinalGenerator{keys: all, need: need, started: map[int]bool{}}
}

// Next hands out the assign first, then polls until everything was read.
func (f *FinalGenerator) Next(p int) (checker.Op, bool) {
	if !f.started[p] {
		f.started[p] = true
		return checker.Op{Type: checker.Invoke, F: "assign", Keys: append([]int(nil), f.keys...), SeekToBeginning: true}, true
	}
	if f.Done() {
		return checker.Op{}, false
	}
	return checker.Op{Type: checker.Invoke, F: "poll", Mops: []checker.MicroOp{{F: "poll"}}}, true
}

// Update marks offsets as read.
func (f *FinalGenerator) Update(c checker.Op) {
	if c.Type != checker.OK {
		return
	}
	for _, m := range c.Mops {
		for k, pairs := range m.Polls {
			target, waiting := f.need[k]
			if waiting && len(pairs) > 0 && pairs[len(pairs)-1].Offset >= target {
				delete(f.need, k)
			}
		}
	}
}

// Done reports whether every key was read to its end.
func (f *FinalGenerator) Done() bool { return len(f.need) == 0 }

// Missing returns the keys not yet read to their end, sorted.
func (f *FinalGenerator) Missing() []int {
	keys := make([]int, 0, len(f.need))
	for k := range f.need {
		keys = append(keys, k)
	}
	sort.Ints(keys)
	return keys
}
