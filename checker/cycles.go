package checker

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Cycle anomaly names, as Elle (and Jepsen's Kafka checker through it)
// spells them.
const (
	AnomalyG1c         = "G1c"
	AnomalyG0Process   = "G0-process"
	AnomalyG1cProcess  = "G1c-process"
	AnomalyG0Realtime  = "G0-realtime"
	AnomalyG1cRealtime = "G1c-realtime"
)

// Dependency kinds of the transaction graph (CycleStep.Type).
const (
	DepWW       = "ww"
	DepWR       = "wr"
	DepProcess  = "process"
	DepRealtime = "realtime"
)

// edge kinds as bits.
const (
	kWW uint8 = 1 << iota
	kWR
	kProcess
	kRealtime
)

func kindName(k uint8) string {
	switch k {
	case kWW:
		return DepWW
	case kWR:
		return DepWR
	case kProcess:
		return DepProcess
	}
	return DepRealtime
}

// CycleStep is one edge of a dependency cycle: operation From must precede
// operation To, and why. For ww, From sent Value to Key at Offset and To
// sent Value2, the next value of Key's log, at Offset2; for wr, From sent
// Value to Key at Offset and To polled it; for process, both are Process's
// operations and From completed before To was invoked; for realtime, From
// completed before To was invoked.
type CycleStep struct {
	Type    string `json:"type"`
	From    int64  `json:"from"`
	To      int64  `json:"to"`
	Key     *int   `json:"key,omitempty"`
	Value   *int64 `json:"value,omitempty"`
	Offset  *int64 `json:"offset,omitempty"`
	Value2  *int64 `json:"value2,omitempty"`
	Offset2 *int64 `json:"offset2,omitempty"`
	Process *int   `json:"process,omitempty"`
	Text    string `json:"text"`
}

// tedge is one dependency from a vertex (a completion's position) to to.
type tedge struct {
	to     int32
	kind   uint8
	key    int
	v1, v2 int64
}

// txnGraph is the dependency graph over the completions of send, poll and
// txn operations.
type txnGraph struct {
	q   *queue
	out [][]tedge // by history position
}

func (g *txnGraph) link(from, to int32, e tedge) {
	if from == to || from < 0 || to < 0 {
		return
	}
	e.to = to
	g.out[from] = append(g.out[from], e)
}

// buildGraph draws the edges: ww between the writers of consecutive values
// of each key's version order, wr from the writer of each value to every op
// that polled it, process between consecutive ok ops of one process, and
// realtime from each ok op to the ops invoked after it completed
// (transitively reduced, as Elle's realtime graph is).
func buildGraph(q *queue, keys []int) *txnGraph {
	g := &txnGraph{q: q, out: make([][]tedge, len(q.h))}
	for _, k := range keys {
		kd := q.keys[k]
		prev := int64(0)
		has := false
		for i, v := range kd.rep {
			vi := kd.lookup(v)
			if vi == nil || vi.repIdx != int32(i) {
				continue // a later copy of a duplicate
			}
			if has {
				if pi := kd.lookup(prev); pi != nil && pi.writer >= 0 && vi.writer >= 0 {
					g.link(pi.writer, vi.writer, tedge{kind: kWW, key: k, v1: prev, v2: v})
				}
			}
			prev, has = v, true
		}
	}
	procLast := map[int]int32{}
	var frontier []int32
	preds := map[int32][]int32{}
	for pos := range q.h {
		op := &q.h[pos]
		if !op.IsClient() || !hasMops(op.F) {
			continue
		}
		if op.Type == Invoke {
			end := int32(pos)
			if c := q.p.partner[pos]; c >= 0 {
				end = c
			}
			preds[end] = slices.Clone(frontier)
			for _, f := range frontier {
				g.link(f, end, tedge{kind: kRealtime})
			}
			if q.p.partner[pos] >= 0 {
				continue
			}
		}
		for _, kv := range q.reads(pos) {
			kd := q.keys[kv.key]
			for _, pr := range kv.pairs {
				if vi := kd.lookup(pr.Value); vi != nil && vi.writer >= 0 {
					g.link(vi.writer, int32(pos), tedge{kind: kWR, key: kv.key, v1: pr.Value})
				}
			}
		}
		if op.Type != OK {
			continue
		}
		if last, ok := procLast[op.Process]; ok {
			g.link(last, int32(pos), tedge{kind: kProcess})
		}
		procLast[op.Process] = int32(pos)
		drop := preds[int32(pos)]
		frontier = slices.DeleteFunc(frontier, func(f int32) bool { return slices.Contains(drop, f) })
		frontier = append(frontier, int32(pos))
		delete(preds, int32(pos))
	}
	for i := range g.out {
		es := g.out[i]
		slices.SortFunc(es, func(a, b tedge) int {
			if a.to != b.to {
				return int(a.to - b.to)
			}
			return int(a.kind) - int(b.kind)
		})
		g.out[i] = slices.CompactFunc(es, func(a, b tedge) bool { return a.to == b.to && a.kind == b.kind })
	}
	return g
}

// sccs returns the strongly connected components of more than one vertex
// of the subgraph of edges whose kind is in kinds (Tarjan's algorithm,
// iterative so that a long chain cannot overflow the stack).
func (g *txnGraph) sccs(kinds uint8) [][]int32 {
	n := len(g.out)
	index := make([]int32, n)
	low := make([]int32, n)
	onStack := make([]bool, n)
	for i := range index {
		index[i] = -1
	}
	var stack []int32
	var out [][]int32
	next := int32(0)
	type frame struct {
		v int32
		e int
	}
	for root := range n {
		if index[root] >= 0 || len(g.out[root]) == 0 {
			continue
		}
		call := []frame{{v: int32(root)}}
		index[root], low[root] = next, next
		next++
		stack = append(stack, int32(root))
		onStack[root] = true
		for len(call) > 0 {
			f := &call[len(call)-1]
			v := f.v
			if f.e < len(g.out[v]) {
				e := g.out[v][f.e]
				f.e++
				if e.kind&kinds == 0 {
					continue
				}
				w := e.to
				if index[w] < 0 {
					index[w], low[w] = next, next
					next++
					stack = append(stack, w)
					onStack[w] = true
					call = append(call, frame{v: w})
				} else if onStack[w] {
					low[v] = min(low[v], index[w])
				}
				continue
			}
			call = call[:len(call)-1]
			if len(call) > 0 {
				u := call[len(call)-1].v
				low[u] = min(low[u], low[v])
			}
			if low[v] == index[v] {
				var comp []int32
				for {
					w := stack[len(stack)-1]
					stack = stack[:len(stack)-1]
					onStack[w] = false
					comp = append(comp, w)
					if w == v {
						break
					}
				}
				if len(comp) > 1 {
					slices.Sort(comp)
					out = append(out, comp)
				}
			}
		}
	}
	return out
}

// cycleSearchBudget bounds the edges one search may visit, so a huge
// component cannot stall the checker; a search out of budget keeps the
// shortest cycle found so far.
const cycleSearchBudget = 2_000_000

// cycleStartsMax bounds the start vertices tried in one component.
const cycleStartsMax = 32

// shortestCycle finds a short cycle within comp using only edges of kinds
// and containing at least one edge of each kind in required: breadth-first
// from up to cycleStartsMax start vertices over (vertex, kinds seen) states,
// keeping the shortest. It returns the cycle's edges as (from, edge) pairs.
func (g *txnGraph) shortestCycle(ctx context.Context, comp []int32, kinds, required uint8) []cedge {
	in := make(map[int32]bool, len(comp))
	for _, v := range comp {
		in[v] = true
	}
	budget := cycleSearchBudget
	var best []cedge
	starts := 0
	for _, s := range comp {
		if starts >= cycleStartsMax || budget <= 0 || ctx.Err() != nil {
			break
		}
		if required != 0 && !slices.ContainsFunc(g.out[s], func(e tedge) bool { return e.kind&required != 0 && in[e.to] }) {
			continue
		}
		starts++
		type state struct {
			v    int32
			mask uint8
		}
		type back struct {
			prev state
			e    tedge
		}
		seen := map[state]back{}
		start := state{v: s}
		frontier := []state{start}
		var found []cedge
		for depth := 0; len(frontier) > 0 && found == nil && budget > 0; depth++ {
			if best != nil && depth+1 >= len(best) {
				break // nothing shorter than best from here
			}
			var nextF []state
			for _, st := range frontier {
				for _, e := range g.out[st.v] {
					budget--
					if e.kind&kinds == 0 || !in[e.to] {
						continue
					}
					ns := state{v: e.to, mask: st.mask | e.kind&required}
					if e.to == s {
						if ns.mask != required {
							continue
						}
						found = []cedge{{from: st.v, e: e}}
						for cur := st; cur != start; cur = seen[cur].prev {
							b := seen[cur]
							found = append(found, cedge{from: b.prev.v, e: b.e})
						}
						slices.Reverse(found)
						break
					}
					if _, ok := seen[ns]; ok || ns == start {
						continue
					}
					seen[ns] = back{prev: st, e: e}
					nextF = append(nextF, ns)
				}
				if found != nil {
					break
				}
			}
			frontier = nextF
		}
		if found != nil && (best == nil || len(found) < len(best)) {
			best = found
		}
		if best != nil && len(best) == 2 {
			break // no cycle is shorter
		}
	}
	return best
}

type cedge struct {
	from int32
	e    tedge
}

// cycleSpec is one of Elle's cycle anomalies: the edge kinds the cycle may
// use and those it must use.
type cycleSpec struct {
	name            string
	kinds, required uint8
	// readOrder marks the G1c family: a cycle that needs no ww edge is an
	// anomaly under read_committed (every wr, process and realtime edge
	// orders the two transactions' commits), one through a ww edge is
	// allowed, because Kafka does not isolate writes.
	readOrder bool
}

var cycleSpecs = []cycleSpec{
	{name: AnomalyG0, kinds: kWW},
	{name: AnomalyG1c, kinds: kWW | kWR, required: kWR, readOrder: true},
	{name: AnomalyG0Process, kinds: kWW | kProcess, required: kWW | kProcess},
	{name: AnomalyG1cProcess, kinds: kWW | kWR | kProcess, required: kWR | kProcess, readOrder: true},
	{name: AnomalyG0Realtime, kinds: kWW | kRealtime, required: kWW | kRealtime},
	{name: AnomalyG1cRealtime, kinds: kWW | kWR | kRealtime, required: kWR | kRealtime, readOrder: true},
}

// runCycles is the "cycles" checker: Elle's cycle search over the
// dependency graph of the history's transactions (every send, poll and
// txn completion is one).
func runCycles(ctx context.Context, h History, p *pairing, opts Options) CheckerResult {
	res := CheckerResult{Name: "cycles", Valid: Valid}
	q, keys, ok := buildQueue(ctx, h, p, opts)
	if !ok {
		return unknown(res, ctx)
	}
	g := buildGraph(q, keys)
	res.Anomalies = map[string]AnomalyReport{}
	for _, spec := range cycleSpecs {
		if ctx.Err() != nil {
			return unknown(res, ctx)
		}
		var rep AnomalyReport
		rep.Allowed = true
		var bad, fine []Example
		for _, comp := range g.sccs(spec.kinds) {
			var cyc []cedge
			strict := false
			if spec.readOrder {
				// Look for a cycle without ww edges first.
				if cyc = g.shortestCycle(ctx, comp, spec.kinds&^kWW, spec.required); cyc != nil {
					strict = true
				}
			}
			if cyc == nil {
				cyc = g.shortestCycle(ctx, comp, spec.kinds, spec.required)
			}
			if cyc == nil {
				continue
			}
			ex := g.explain(spec.name, cyc, strict)
			rep.Count++
			if strict {
				rep.Allowed = false
				bad = append(bad, ex)
			} else {
				fine = append(fine, ex)
			}
			if rep.ByKey == nil {
				rep.ByKey = map[int]int{}
			}
			rep.ByKey[ex.Key]++
		}
		if rep.Count == 0 {
			continue
		}
		// Cycles that make the result invalid come first, shortest first.
		byLen := func(a, b Example) int { return len(a.Steps) - len(b.Steps) }
		slices.SortStableFunc(bad, byLen)
		slices.SortStableFunc(fine, byLen)
		all := append(bad, fine...)
		rep.Examples = all[:min(len(all), opts.ExamplesMax)]
		if !rep.Allowed {
			res.Valid = Invalid
		}
		res.Anomalies[spec.name] = rep
	}
	return res
}

// explain spells a cycle out as an Example: its operations, one step per
// edge with the key, values and offsets that make the edge hold.
func (g *txnGraph) explain(name string, cyc []cedge, strict bool) Example {
	q := g.q
	ex := Example{Key: -1}
	var parts []string
	for _, c := range cyc {
		from, to := q.index(c.from), q.index(c.e.to)
		ex.Ops = append(ex.Ops, from)
		st := CycleStep{Type: kindName(c.e.kind), From: from, To: to}
		switch c.e.kind {
		case kWW:
			kd := q.keys[c.e.key]
			st.Key, st.Value, st.Value2 = ptr(c.e.key), ptr(c.e.v1), ptr(c.e.v2)
			st.Offset, st.Offset2 = g.offsetOf(kd, c.e.v1), g.offsetOf(kd, c.e.v2)
			st.Text = fmt.Sprintf("op %d sent %d to key %d%s, and op %d sent %d, the next value in key %d's log%s",
				from, c.e.v1, c.e.key, atOffset(st.Offset), to, c.e.v2, c.e.key, atOffset(st.Offset2))
		case kWR:
			kd := q.keys[c.e.key]
			st.Key, st.Value = ptr(c.e.key), ptr(c.e.v1)
			st.Offset = g.offsetOf(kd, c.e.v1)
			st.Text = fmt.Sprintf("op %d sent %d to key %d%s, and op %d polled it", from, c.e.v1, c.e.key, atOffset(st.Offset), to)
		case kProcess:
			st.Process = ptr(q.h[c.from].Process)
			st.Text = fmt.Sprintf("op %d and op %d are process %d's, and op %d completed before op %d was invoked", from, to, *st.Process, from, to)
		default:
			st.Text = fmt.Sprintf("op %d completed (at %s) before op %d was invoked (at %s)",
				from, nanos(q.h[c.from].Time), to, nanos(g.invokeTime(c.e.to)))
		}
		if ex.Key < 0 && st.Key != nil {
			ex.Key = *st.Key
		}
		ex.Steps = append(ex.Steps, st)
		parts = append(parts, st.Text)
	}
	opsText := make([]string, 0, len(ex.Ops)+1)
	for _, o := range ex.Ops {
		opsText = append(opsText, fmt.Sprint(o))
	}
	opsText = append(opsText, fmt.Sprint(ex.Ops[0]))
	why := "allowed: it runs through a ww edge, and Kafka does not isolate writes"
	switch {
	case strict:
		why = "each edge orders the two transactions' commits, so no order of commits explains it"
	case !strings.HasPrefix(name, "G1c"):
		why = "allowed: Kafka does not isolate writes"
	}
	ex.Text = fmt.Sprintf("%s cycle of %d operations, ops %s (%s): %s", name, len(ex.Ops), strings.Join(opsText, " → "), why, strings.Join(parts, "; "))
	return ex
}

func (g *txnGraph) offsetOf(kd *keyData, v int64) *int64 {
	if vi := kd.lookup(v); vi != nil && vi.repIdx >= 0 {
		return ptr(kd.offsets[vi.repIdx])
	}
	return nil
}

// invokeTime is the time the op completing at pos was invoked.
func (g *txnGraph) invokeTime(pos int32) int64 {
	if inv := g.q.p.partner[pos]; inv >= 0 && g.q.h[pos].Type != Invoke {
		return g.q.h[inv].Time
	}
	return g.q.h[pos].Time
}

func atOffset(o *int64) string {
	if o == nil {
		return ""
	}
	return fmt.Sprintf(" at offset %d", *o)
}

func nanos(t int64) string { return time.Duration(t).String() }

// CycleChecker returns Elle's cycle search as a Checker named "cycles".
func CycleChecker(opts Options) Checker {
	return Func{CheckerName: "cycles", Fn: func(ctx context.Context, h History) CheckerResult {
		return runCycles(ctx, h, pair(h), opts.resolve(h))
	}}
}
