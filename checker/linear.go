package checker

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"
)

// The linearizability check treats each key (one topic-partition) as a log
// and asks porcupine whether the sends and polls on it can be ordered, within
// their real-time intervals, as operations on one sequential log:
//
//   - an acknowledged send appends its value at exactly the offset it
//     returned (in txn mode at that offset or later: commit markers take
//     offsets too);
//   - a send that ended info (or was never completed) may or may not have
//     appended, whatever offset it reported: its return time is open. If
//     an acknowledged send or a poll observed its value, it must have
//     appended at that offset; if nobody did, it either fills an offset
//     nobody observed ("hole") or did nothing;
//   - an ok poll returns, for this key, a slice of offsets that were all
//     appended before it, contiguous (consecutive offsets; in txn mode
//     merely increasing).
//
// The model's state is two words, the next offset and a chained hash of the
// values appended so far, so states compare in O(1) and porcupine's cache
// stays small. The value at an offset is checked against the reference log
// built from every observation (an offset holding two values is
// inconsistent-offsets, which the queue checker reports), so Step costs
// O(len(poll)) and never blocks: porcupine's timeout is honoured between
// steps.

// linState is the model state of one key's log.
type linState struct {
	next int64
	hash uint64
}

// linStep is one send or poll of an operation, projected on one key.
type linStep struct {
	poll   bool
	value  int64
	offset int64 // send: acknowledged offset, -1 when unknown
	pairs  []Pair
	// rebalanced marks a poll of a key named in the op's rebalance log: its
	// pairs may come from before and after a seek, so only each pair, not
	// their contiguity, is checked.
	rebalanced bool
}

// linInput is one operation projected on one key.
type linInput struct {
	index    int64
	definite bool // the op completed ok; otherwise its sends may not have happened
	steps    []linStep
}

// refLog is everything observed about one key's log.
type refLog struct {
	byOffset  map[int64][]int64 // offset -> distinct values seen there
	valueAt   map[int64]int64   // value -> lowest offset it was seen at
	minOffset int64
	maxOffset int64
	// prevKnown maps each observed offset to the observed offset before it
	// (minOffset-1 for the first); built by seal for txn mode.
	prevKnown map[int64]int64
}

// seal indexes the observed offsets once every observation is in.
func (r *refLog) seal() {
	offsets := slices.Sorted(maps.Keys(r.byOffset))
	r.prevKnown = make(map[int64]int64, len(offsets))
	prev := r.minOffset - 1
	for _, o := range offsets {
		r.prevKnown[o] = prev
		prev = o
	}
}

// canAppend reports whether a record may land at offset o when the log
// ends at next: exactly at next, or in txn mode after a gap that no
// observation fills (commit markers and aborted records take offsets).
// Allowing any larger offset would let porcupine try appends in the wrong
// order and search exponentially.
func (r *refLog) canAppend(o, next int64, txn bool) bool {
	if o == next {
		return true
	}
	if !txn || o < next {
		return false
	}
	prev, ok := r.prevKnown[o]
	return ok && prev < next
}

func (r *refLog) add(o, v int64) {
	vs := r.byOffset[o]
	if !slices.Contains(vs, v) {
		r.byOffset[o] = append(vs, v)
	}
	if prev, ok := r.valueAt[v]; !ok || o < prev {
		r.valueAt[v] = o
	}
	if len(r.byOffset) == 1 || o < r.minOffset {
		r.minOffset = o
	}
	if len(r.byOffset) == 1 || o > r.maxOffset {
		r.maxOffset = o
	}
}

func (r *refLog) hole(o int64) bool {
	if o >= r.maxOffset {
		return false
	}
	_, seen := r.byOffset[o]
	return !seen
}

func mix(h uint64, o, v int64) uint64 {
	x := h ^ (uint64(v) * 0x9e3779b97f4a7c15) ^ uint64(o)<<1
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}

const holeValue = -0x5eed

// logModel is the porcupine model for one key.
func logModel(ref *refLog, txn bool) porcupine.Model {
	step := func(state, input, _ any) (bool, any) {
		s := state.(linState)
		in := input.(*linInput)
		for _, st := range in.steps {
			switch {
			case st.poll:
				prev := int64(-1)
				for i, p := range st.pairs {
					if p.Offset >= s.next || p.Offset < ref.minOffset {
						return false, s
					}
					if i > 0 && !st.rebalanced && (p.Offset <= prev || !txn && p.Offset != prev+1) {
						return false, s
					}
					if !slices.Contains(ref.byOffset[p.Offset], p.Value) {
						return false, s
					}
					prev = p.Offset
				}
			case st.offset >= 0:
				if !ref.canAppend(st.offset, s.next, txn) {
					return false, s
				}
				s = linState{next: st.offset + 1, hash: mix(s.hash, st.offset, st.value)}
			default:
				if o, seen := ref.valueAt[st.value]; seen {
					if !ref.canAppend(o, s.next, txn) {
						return false, s
					}
					s = linState{next: o + 1, hash: mix(s.hash, o, st.value)}
				} else if !txn && ref.hole(s.next) {
					s = linState{next: s.next + 1, hash: mix(s.hash, s.next, holeValue)}
				}
			}
		}
		return true, s
	}
	return porcupine.Model{
		Init:  func() any { return linState{next: ref.minOffset} },
		Step:  step,
		Equal: func(a, b any) bool { return a.(linState) == b.(linState) },
		Hash: func(s any) uint64 {
			st := s.(linState)
			return st.hash ^ uint64(st.next)*0x9e3779b97f4a7c15
		},
		DescribeOperation: func(input, _ any) string { return describeLinInput(input.(*linInput)) },
		DescribeState: func(s any) string {
			st := s.(linState)
			return fmt.Sprintf("next offset %d, log hash %016x", st.next, st.hash)
		},
		DescribeOperationMetadata: func(m any) string {
			if m == nil {
				return ""
			}
			return fmt.Sprintf("op %v", m)
		},
	}
}

func describeLinInput(in *linInput) string {
	var b strings.Builder
	for i, st := range in.steps {
		if i > 0 {
			b.WriteString("; ")
		}
		switch {
		case st.poll:
			b.WriteString("poll →")
			for j, p := range st.pairs {
				if j == 8 && len(st.pairs) > 10 {
					fmt.Fprintf(&b, " … %d more", len(st.pairs)-j)
					break
				}
				fmt.Fprintf(&b, " %d:%d", p.Offset, p.Value)
			}
		case st.offset >= 0:
			fmt.Fprintf(&b, "send %d → @%d", st.value, st.offset)
		case in.definite:
			fmt.Fprintf(&b, "send %d → @?", st.value)
		default:
			fmt.Fprintf(&b, "send %d → info", st.value)
		}
	}
	return b.String()
}

// partition is one key's porcupine history and reference log.
type partition struct {
	key int
	ops []porcupine.Operation
	ref *refLog
}

// partitions projects the history on each key. Failed operations are left
// out (they did not happen); ok operations keep their interval; info
// operations and invokes never completed get an open end (after the last
// operation of the history) and only their sends. In txn mode a record a
// poll returned whose send definitely failed (an aborted transaction's) is
// left out of the log too: read_committed passes over it, and reading it
// is G1a, the queue checker's to report.
//
// In txn mode each send and poll of a transaction is a separate operation
// with the transaction's interval: Kafka appends a transaction's records as
// they are produced, interleaved with other producers', so the log model
// must not make a transaction one atomic append.
func partitions(h History, p *pairing, txn bool) map[int]*partition {
	parts := map[int]*partition{}
	part := func(k int) *partition {
		pt, ok := parts[k]
		if !ok {
			pt = &partition{key: k, ref: &refLog{byOffset: map[int64][]int64{}, valueAt: map[int64]int64{}}}
			parts[k] = pt
		}
		return pt
	}
	var horizon int64
	for i := range h {
		horizon = max(horizon, h[i].Time)
	}
	horizon++
	var aborted map[int]map[int64]bool
	if txn {
		aborted = abortedValues(h)
	}
	committedPairs := func(k int, pairs []Pair) []Pair {
		if aborted[k] == nil {
			return pairs
		}
		return slices.DeleteFunc(slices.Clone(pairs), func(pr Pair) bool { return aborted[k][pr.Value] })
	}
	clients := map[int]map[int]int{} // key -> process -> dense client id
	for pos := range h {
		op := &h[pos]
		if !op.IsClient() || !hasMops(op.F) {
			continue
		}
		var inv, done *Op
		switch {
		case op.Type == Invoke && p.partner[pos] < 0:
			inv = op
		case op.Type == OK || op.Type == Info:
			done = op
			if j := p.partner[pos]; j >= 0 {
				inv = &h[j]
			}
		default:
			continue
		}
		if inv == nil {
			continue
		}
		definite := done != nil && done.Type == OK
		mops := inv.Mops
		ret := horizon
		if done != nil {
			if done.Mops != nil {
				mops = done.Mops
			}
			if definite {
				ret = done.Time
			}
		}
		index := inv.Index
		if done != nil {
			index = done.Index
		}
		rebalanced := map[int]bool{}
		if done != nil {
			for _, r := range done.RebalanceLog {
				for _, k := range r.Keys {
					rebalanced[k] = true
				}
			}
		}
		byKey := map[int]*linInput{}
		var order []int
		in := func(k int) *linInput {
			li, ok := byKey[k]
			if !ok {
				li = &linInput{index: index, definite: definite}
				byKey[k] = li
				order = append(order, k)
			}
			return li
		}
		for _, m := range mops {
			switch {
			case m.F == FSend:
				// Only an acknowledged send's offset binds it. An info
				// send may report one (a transaction whose sends were
				// answered and whose commit was not) and still never
				// have been committed, as Jepsen's checker holds: it is
				// placed where its value was read, if anywhere.
				o := int64(-1)
				if m.Offset != nil && definite {
					o = *m.Offset
					part(m.Key).ref.add(o, m.Value)
				}
				li := in(m.Key)
				li.steps = append(li.steps, linStep{value: m.Value, offset: o})
			case m.F == FPoll && m.Polls != nil && definite:
				for _, k := range slices.Sorted(maps.Keys(m.Polls)) {
					pairs := committedPairs(k, m.Polls[k])
					if len(pairs) == 0 {
						continue
					}
					for _, pr := range pairs {
						part(k).ref.add(pr.Offset, pr.Value)
					}
					li := in(k)
					li.steps = append(li.steps, linStep{poll: true, pairs: pairs, rebalanced: rebalanced[k]})
				}
			}
		}
		for _, k := range order {
			pt := part(k)
			ids := clients[k]
			if ids == nil {
				ids = map[int]int{}
				clients[k] = ids
			}
			id, ok := ids[inv.Process]
			if !ok {
				id = len(ids)
				ids[inv.Process] = id
			}
			li := byKey[k]
			if !txn || len(li.steps) == 1 {
				pt.ops = append(pt.ops, porcupine.Operation{
					ClientId: id, Input: li, Call: inv.Time, Return: max(ret, inv.Time), Metadata: index,
				})
				continue
			}
			for _, st := range li.steps {
				one := &linInput{index: li.index, definite: li.definite, steps: []linStep{st}}
				pt.ops = append(pt.ops, porcupine.Operation{
					ClientId: id, Input: one, Call: inv.Time, Return: max(ret, inv.Time), Metadata: index,
				})
			}
		}
	}
	// Info polls and failed polls are not in the partitions, but what they
	// returned is still an observation of the log.
	for pos := range h {
		op := &h[pos]
		if !op.IsClient() || op.Type == OK || op.Type == Invoke || !hasMops(op.F) {
			continue
		}
		for _, m := range op.Mops {
			if m.F == FPoll {
				for k, pairs := range m.Polls {
					if pt, ok := parts[k]; ok {
						for _, pr := range committedPairs(k, pairs) {
							pt.ref.add(pr.Offset, pr.Value)
						}
					}
				}
			}
		}
	}
	for _, pt := range parts {
		pt.ref.seal()
	}
	return parts
}

// abortedValues are, by key, the values sent by ops that definitely
// failed.
func abortedValues(h History) map[int]map[int64]bool {
	out := map[int]map[int64]bool{}
	for i := range h {
		op := &h[i]
		if !op.IsClient() || op.Type != Fail || !hasMops(op.F) {
			continue
		}
		for _, m := range op.Mops {
			if m.F != FSend {
				continue
			}
			if out[m.Key] == nil {
				out[m.Key] = map[int64]bool{}
			}
			out[m.Key][m.Value] = true
		}
	}
	return out
}

// runLinear runs porcupine on each key.
func runLinear(ctx context.Context, h History, p *pairing, opts Options) CheckerResult {
	res := CheckerResult{Name: "linearizable", Valid: Valid}
	parts := partitions(h, p, opts.txn)
	keys := slices.Sorted(maps.Keys(parts))
	type outcome struct {
		key    int
		result porcupine.CheckResult
		reason string
	}
	outcomes := make([]outcome, len(keys))
	work := make(chan int)
	var wg sync.WaitGroup
	for range max(1, runtime.GOMAXPROCS(0)) {
		wg.Go(func() {
			for i := range work {
				pt := parts[keys[i]]
				o := outcome{key: pt.key}
				switch {
				case ctx.Err() != nil:
					o.result, o.reason = porcupine.Unknown, "not checked: "+context.Cause(ctx).Error()
				case len(pt.ops) > opts.LinearOpsMax:
					o.result, o.reason = porcupine.Unknown, fmt.Sprintf("%d operations exceed the bound of %d per partition", len(pt.ops), opts.LinearOpsMax)
				default:
					timeout := opts.LinearTimeout
					if dl, ok := ctx.Deadline(); ok {
						timeout = min(timeout, max(time.Until(dl), time.Millisecond))
					}
					o.result = porcupine.CheckOperationsTimeout(logModel(pt.ref, opts.txn), pt.ops, timeout)
					if o.result == porcupine.Unknown {
						o.reason = fmt.Sprintf("timed out after %v", timeout)
					}
				}
				outcomes[i] = o
			}
		})
	}
	for i := range keys {
		work <- i
	}
	close(work)
	wg.Wait()

	var unknownKeys []string
	var illegal []int
	for _, o := range outcomes {
		switch o.result {
		case porcupine.Illegal:
			illegal = append(illegal, o.key)
		case porcupine.Unknown:
			unknownKeys = append(unknownKeys, fmt.Sprintf("key %d: %s", o.key, o.reason))
		}
	}
	if len(unknownKeys) > 0 {
		res.Valid = Unknown
		shown := unknownKeys[:min(len(unknownKeys), violationsShown)]
		res.Error = fmt.Sprintf("%d of %d partitions undecided: %s", len(unknownKeys), len(keys), strings.Join(shown, "; "))
	}
	if len(illegal) > 0 {
		res.Valid = Invalid
		a := AnomalyReport{Count: len(illegal), Examples: []Example{}, ByKey: map[int]int{}}
		for _, k := range illegal {
			a.ByKey[k] = 1
		}
		for i, k := range illegal {
			if len(a.Examples) >= opts.ExamplesMax {
				break
			}
			pt := parts[k]
			ex := Example{
				Key: k, Count: len(pt.ops), Result: string(porcupine.Illegal),
				Text: fmt.Sprintf("the %d sends and polls on key %d cannot be ordered as operations on one log", len(pt.ops), k),
			}
			// The verbose check explains where the order breaks and feeds
			// the visualization; it costs more, so only for a few keys.
			if i < opts.VisualizeMax && len(pt.ops) <= opts.VisualizeOpsMax && ctx.Err() == nil {
				model := logModel(pt.ref, opts.txn)
				result, info := porcupine.CheckOperationsVerbose(model, pt.ops, opts.LinearTimeout)
				if result == porcupine.Illegal {
					explain(&ex, pt, model, info)
					var buf bytes.Buffer
					if err := porcupine.Visualize(model, info, &buf); err == nil {
						if res.Visualizations == nil {
							res.Visualizations = map[int][]byte{}
						}
						res.Visualizations[k] = buf.Bytes()
					}
				}
			}
			a.Examples = append(a.Examples, ex)
		}
		res.Anomalies = map[string]AnomalyReport{AnomalyNonlinearizable: a}
	}
	return res
}

// explain names, in ex, the longest order porcupine found and the first
// operation it could not place after it.
func explain(ex *Example, pt *partition, model porcupine.Model, info porcupine.LinearizationInfo) {
	partials := info.PartialLinearizationsOperations()
	if len(partials) == 0 {
		return
	}
	var longest []porcupine.Operation
	for _, seq := range partials[0] {
		if len(seq) > len(longest) {
			longest = seq
		}
	}
	placed := map[any]bool{}
	state := model.Init()
	for _, op := range longest {
		placed[op.Input] = true
		_, state = model.Step(state, op.Input, op.Output)
	}
	var stuck *porcupine.Operation
	for i := range pt.ops {
		op := &pt.ops[i]
		if !placed[op.Input] && (stuck == nil || op.Call < stuck.Call) {
			stuck = op
		}
	}
	if stuck == nil {
		return
	}
	in := stuck.Input.(*linInput)
	next := state.(linState).next
	ex.Offset = ptr(next)
	ex.Ops = []int64{in.index}
	if n := len(longest); n > 0 {
		ex.Ops = append([]int64{longest[n-1].Input.(*linInput).index}, ex.Ops...)
	}
	ex.Text = fmt.Sprintf("on key %d at most %d of %d operations can be ordered as one log; after them the log ends at offset %d and op %d (%s) cannot come next",
		pt.key, len(longest), len(pt.ops), next, in.index, describeLinInput(in))
}

func visualize(pt *partition, opts Options, w io.Writer) error {
	if len(pt.ops) > opts.VisualizeOpsMax {
		return fmt.Errorf("key %d has %d operations, more than the %d a visualization shows", pt.key, len(pt.ops), opts.VisualizeOpsMax)
	}
	model := logModel(pt.ref, opts.txn)
	_, info := porcupine.CheckOperationsVerbose(model, pt.ops, opts.LinearTimeout)
	if err := porcupine.Visualize(model, info, w); err != nil {
		return fmt.Errorf("visualize key %d: %w", pt.key, err)
	}
	return nil
}

// VisualizeKey writes porcupine's HTML visualization of key's partition
// (its linearization, or the longest partial ones when there is none) to w.
func VisualizeKey(h History, key int, opts Options, w io.Writer) error {
	opts = opts.resolve(h)
	p := pair(h)
	pt, ok := partitions(h, p, opts.txn)[key]
	if !ok {
		return fmt.Errorf("visualize: no send or poll touches key %d", key)
	}
	return visualize(pt, opts, w)
}
