package synth

import (
	"math/rand/v2"
	"slices"

	"github.com/faultline/faultline/checker"
)

// Config shapes a generated history. Zero fields take the defaults named.
type Config struct {
	Seed uint64
	// Ops is the approximate number of history lines (default 10 000).
	Ops int
	// Processes is the number of concurrent client workers (default 10).
	Processes int
	// KeysActive is how many keys are written at once (default 4);
	// WritesPerKey how many sends a key takes before it is rotated out
	// (default 1024, as Jepsen).
	KeysActive   int
	WritesPerKey int
	// InfoPercent and FailPercent are the shares of sends ending info or
	// fail (defaults 1 and 1). Half the info sends are applied.
	InfoPercent int
	FailPercent int
	// Nemesis adds start-kill/stop-kill ops every NemesisEvery ops
	// (default 0: none).
	NemesisEvery int
	// Txn sends in transactions ("txn" ops of one to three sends, all or
	// nothing); Subscribe records consumer assignment as subscribe ops.
	Txn       bool
	Subscribe bool
}

func (c Config) withDefaults() Config {
	if c.Ops <= 0 {
		c.Ops = 10000
	}
	if c.Processes <= 0 {
		c.Processes = 10
	}
	if c.KeysActive <= 0 {
		c.KeysActive = 4
	}
	if c.WritesPerKey <= 0 {
		c.WritesPerKey = 1024
	}
	if c.InfoPercent < 0 {
		c.InfoPercent = 0
	}
	if c.FailPercent < 0 {
		c.FailPercent = 0
	}
	return c
}

type worker struct {
	process  int
	pending  *checker.Op // the invoke in flight
	assigned []int
	position map[int]int // key -> next offset to read
}

type gen struct {
	cfg    Config
	rng    *rand.Rand
	h      checker.History
	now    int64
	logs   map[int][]int64 // key -> values by offset
	active []int
	writes map[int]int
	next   int // next key to activate
	value  int64
	procs  int
}

// Generate returns a valid history of about cfg.Ops lines.
func Generate(cfg Config) checker.History {
	cfg = cfg.withDefaults()
	g := &gen{
		cfg:    cfg,
		rng:    rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x5eed)),
		logs:   map[int][]int64{},
		writes: map[int]int{},
		h:      make(checker.History, 0, cfg.Ops+cfg.Ops/10),
	}
	for range cfg.KeysActive {
		g.activate()
	}
	workers := make([]*worker, cfg.Processes)
	for i := range workers {
		workers[i] = g.newWorker()
	}
	faultOn := false
	for len(g.h) < cfg.Ops {
		g.now += 1000 + g.rng.Int64N(50000)
		if cfg.NemesisEvery > 0 && len(g.h)%cfg.NemesisEvery == 0 {
			f := "start-kill"
			if faultOn {
				f = "stop-kill"
			}
			faultOn = !faultOn
			g.emit(checker.Op{Process: checker.NemesisProcess, Type: checker.Invoke, F: f, Raw: []byte(`["n1"]`)})
			g.now += 1000
			g.emit(checker.Op{Process: checker.NemesisProcess, Type: checker.Info, F: f, Raw: []byte(`["n1"]`)})
			continue
		}
		i := g.rng.IntN(len(workers))
		w := workers[i]
		if w.pending == nil {
			g.invoke(w)
			continue
		}
		if retired := g.complete(w); retired {
			workers[i] = g.newWorker()
		}
	}
	for i, w := range workers {
		if w.pending != nil {
			g.now += 1000
			if g.complete(w) {
				workers[i] = g.newWorker()
			}
		}
	}
	g.finalReads()
	return g.h
}

func (g *gen) newWorker() *worker {
	w := &worker{process: g.procs, position: map[int]int{}}
	g.procs++
	return w
}

func (g *gen) activate() {
	g.active = append(g.active, g.next)
	g.logs[g.next] = nil
	g.next++
}

func (g *gen) emit(op checker.Op) checker.Op {
	op.Index = int64(len(g.h))
	op.Time = g.now
	g.h = append(g.h, op)
	return op
}

func (g *gen) invoke(w *worker) {
	var op checker.Op
	switch r := g.rng.IntN(100); {
	case r < 3 || len(w.assigned) == 0 && r < 50:
		n := 1 + g.rng.IntN(min(3, len(g.active)))
		keys := slices.Clone(g.active)
		g.rng.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
		keys = keys[:n]
		slices.Sort(keys)
		f := checker.FAssign
		if g.cfg.Subscribe {
			f = checker.FSubscribe
		}
		op = checker.Op{Process: w.process, Type: checker.Invoke, F: f, Keys: keys}
	case r < 50:
		op = checker.Op{Process: w.process, Type: checker.Invoke, F: checker.FPoll, Mops: []checker.MicroOp{{F: checker.FPoll}}}
	default:
		n, f := 1, checker.FSend
		if g.cfg.Txn {
			n, f = 1+g.rng.IntN(3), checker.FTxn
		}
		op = checker.Op{Process: w.process, Type: checker.Invoke, F: f}
		for range n {
			k := g.active[g.rng.IntN(len(g.active))]
			g.value++
			op.Mops = append(op.Mops, checker.MicroOp{F: checker.FSend, Key: k, Value: g.value})
			g.writes[k]++
			if g.writes[k] >= g.cfg.WritesPerKey {
				g.active = slices.DeleteFunc(g.active, func(x int) bool { return x == k })
				g.activate()
			}
		}
	}
	op = g.emit(op)
	w.pending = &op
}

// complete finishes w's pending op, applying its effect at this instant; it
// reports whether the process retired (its op ended info).
func (g *gen) complete(w *worker) bool {
	inv := *w.pending
	w.pending = nil
	done := checker.Op{Process: w.process, F: inv.F, Type: checker.OK}
	switch inv.F {
	case checker.FAssign, checker.FSubscribe:
		done.Keys = inv.Keys
		keep := map[int]int{}
		for _, k := range inv.Keys {
			if p, ok := w.position[k]; ok {
				keep[k] = p
			} else {
				keep[k] = max(0, len(g.logs[k])-3)
			}
		}
		w.position, w.assigned = keep, inv.Keys
	case checker.FPoll:
		polls := map[int][]checker.Pair{}
		for _, k := range w.assigned {
			log := g.logs[k]
			from := w.position[k]
			to := min(len(log), from+1+g.rng.IntN(8))
			if to <= from {
				continue
			}
			pairs := make([]checker.Pair, 0, to-from)
			for o := from; o < to; o++ {
				pairs = append(pairs, checker.Pair{Offset: int64(o), Value: log[o]})
			}
			polls[k] = pairs
			w.position[k] = to
		}
		done.Mops = []checker.MicroOp{{F: checker.FPoll, Polls: polls}}
	case checker.FSend, checker.FTxn:
		switch r := g.rng.IntN(100); {
		case r < g.cfg.FailPercent:
			done.Type = checker.Fail
			done.Mops = inv.Mops
			done.Error = "NOT_ENOUGH_REPLICAS"
		case r < g.cfg.FailPercent+g.cfg.InfoPercent:
			done.Type = checker.Info
			done.Mops = inv.Mops
			done.Error = "request timed out"
			if g.rng.IntN(2) == 0 {
				for _, m := range inv.Mops {
					g.logs[m.Key] = append(g.logs[m.Key], m.Value)
				}
			}
		default:
			for _, m := range inv.Mops {
				o := int64(len(g.logs[m.Key]))
				g.logs[m.Key] = append(g.logs[m.Key], m.Value)
				done.Mops = append(done.Mops, checker.MicroOp{F: checker.FSend, Key: m.Key, Value: m.Value, Offset: &o, Completed: true})
			}
		}
	}
	g.emit(done)
	return done.Type == checker.Info
}

// finalReads assigns every key from the beginning on a fresh process and
// polls each key to its end, at most 1000 records per poll.
func (g *gen) finalReads() {
	w := g.newWorker()
	keys := make([]int, 0, len(g.logs))
	for k := range g.logs {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	g.now += 1000
	g.emit(checker.Op{Process: w.process, Type: checker.Invoke, F: checker.FAssign, Keys: keys, SeekToBeginning: true})
	g.now += 1000
	g.emit(checker.Op{Process: w.process, Type: checker.OK, F: checker.FAssign, Keys: keys, SeekToBeginning: true})
	for _, k := range keys {
		log := g.logs[k]
		for from := 0; from < len(log); from += 1000 {
			to := min(len(log), from+1000)
			pairs := make([]checker.Pair, 0, to-from)
			for o := from; o < to; o++ {
				pairs = append(pairs, checker.Pair{Offset: int64(o), Value: log[o]})
			}
			g.now += 1000
			g.emit(checker.Op{Process: w.process, Type: checker.Invoke, F: checker.FPoll, Mops: []checker.MicroOp{{F: checker.FPoll}}})
			g.now += 1000
			g.emit(checker.Op{Process: w.process, Type: checker.OK, F: checker.FPoll,
				Mops: []checker.MicroOp{{F: checker.FPoll, Polls: map[int][]checker.Pair{k: pairs}}}})
		}
	}
}
