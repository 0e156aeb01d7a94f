package synth

import (
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"

	"github.com/faultline/faultline/checker"
)

// An Injection plants one anomaly in a valid history. Anomaly names the
// anomaly it must cause; Also lists anomalies the same change may cause as
// well (a lost value also leaves a hole in some poll, for instance).
type Injection struct {
	Anomaly string
	Also    []string
	// Apply changes a copy of h; it returns an error when h offers no place
	// for the anomaly.
	Apply func(h checker.History, rng *rand.Rand) (checker.History, error)
}

// Injections lists every anomaly synth can plant.
func Injections() []Injection {
	return []Injection{
		{Anomaly: checker.AnomalyLostWrite, Also: []string{checker.AnomalyUnseen, checker.AnomalyIntPollSkip, checker.AnomalyPollSkip, checker.AnomalyNonlinearizable}, Apply: injectLostWrite},
		{Anomaly: checker.AnomalyUnseen, Apply: injectUnseen},
		{Anomaly: checker.AnomalyDuplicate, Also: []string{checker.AnomalyIntNonmonotonicPoll, checker.AnomalyNonlinearizable}, Apply: injectDuplicate},
		{Anomaly: checker.AnomalyInconsistentOffsets, Also: []string{checker.AnomalyNonlinearizable}, Apply: injectInconsistent},
		{Anomaly: checker.AnomalyG1a, Also: []string{checker.AnomalyNonlinearizable}, Apply: injectG1a},
		{Anomaly: checker.AnomalyPollSkip, Also: []string{checker.AnomalyNonlinearizable}, Apply: injectPollSkip},
		{Anomaly: checker.AnomalyLostAfterRead, Apply: injectLostAfterRead},
	}
}

// clone copies h deeply enough that editing polls and types of the copy
// leaves h alone.
func clone(h checker.History) checker.History {
	out := slices.Clone(h)
	for i := range out {
		if out[i].Mops == nil {
			continue
		}
		out[i].Mops = slices.Clone(out[i].Mops)
		for j := range out[i].Mops {
			if p := out[i].Mops[j].Polls; p != nil {
				cp := make(map[int][]checker.Pair, len(p))
				for k, v := range p {
					cp[k] = slices.Clone(v)
				}
				out[i].Mops[j].Polls = cp
			}
		}
	}
	return out
}

type kv struct {
	k int
	v int64
}

// okSends maps each acknowledged (key, value) to its completion position
// and offset.
func okSends(h checker.History) map[kv][2]int64 {
	out := map[kv][2]int64{}
	for i, op := range h {
		if op.Type != checker.OK || op.F != checker.FSend {
			continue
		}
		for _, m := range op.Mops {
			if m.Offset != nil {
				out[kv{m.Key, m.Value}] = [2]int64{int64(i), *m.Offset}
			}
		}
	}
	return out
}

// readers lists, per (key, value), the positions of ok polls that read it.
func readers(h checker.History) map[kv][]int {
	out := map[kv][]int{}
	for i, op := range h {
		if op.Type != checker.OK || op.F != checker.FPoll {
			continue
		}
		for _, m := range op.Mops {
			for k, pairs := range m.Polls {
				for _, p := range pairs {
					out[kv{k, p.Value}] = append(out[kv{k, p.Value}], i)
				}
			}
		}
	}
	return out
}

func pick[T any](rng *rand.Rand, xs []T) T { return xs[rng.IntN(len(xs))] }

func sortedKVs[V any](m map[kv]V) []kv {
	return slices.SortedFunc(maps.Keys(m), func(a, b kv) int {
		if a.k != b.k {
			return a.k - b.k
		}
		return int(a.v - b.v)
	})
}

// dropRead removes value v of key k from the ok poll at pos.
func dropRead(h checker.History, pos, k int, v int64) {
	for j := range h[pos].Mops {
		m := &h[pos].Mops[j]
		if pairs, ok := m.Polls[k]; ok {
			m.Polls[k] = slices.DeleteFunc(pairs, func(p checker.Pair) bool { return p.Value == v })
		}
	}
}

// injectLostWrite erases every read of an acknowledged value that is not the
// last of its key, so some later offset is read but it never is.
func injectLostWrite(h checker.History, rng *rand.Rand) (checker.History, error) {
	sends, reads := okSends(h), readers(h)
	last := map[int]int64{}
	for x, s := range sends {
		last[x.k] = max(last[x.k], s[1])
	}
	var candidates []kv
	for _, x := range sortedKVs(sends) {
		if sends[x][1] < last[x.k] && len(reads[x]) > 0 {
			candidates = append(candidates, x)
		}
	}
	if len(candidates) == 0 {
		return nil, fmt.Errorf("no acknowledged value below its key's last offset")
	}
	return eraseReads(h, reads, pick(rng, candidates)), nil
}

// injectUnseen erases the reads of the highest acknowledged value of a key,
// so it is never seen but nothing after it is read either.
func injectUnseen(h checker.History, rng *rand.Rand) (checker.History, error) {
	sends, reads := okSends(h), readers(h)
	top := map[int]kv{}
	for _, x := range sortedKVs(sends) {
		if t, ok := top[x.k]; !ok || sends[x][1] > sends[t][1] {
			top[x.k] = x
		}
	}
	// The key's top offset must hold an acknowledged value (not an applied
	// info send above it).
	var candidates []kv
	for _, k := range slices.Sorted(maps.Keys(top)) {
		x := top[k]
		if len(reads[x]) > 0 && !readBeyond(h, k, sends[x][1]) {
			candidates = append(candidates, x)
		}
	}
	if len(candidates) == 0 {
		return nil, fmt.Errorf("no key whose last offset holds an acknowledged value")
	}
	return eraseReads(h, reads, pick(rng, candidates)), nil
}

// eraseReads returns a copy of h in which no poll returns x.
func eraseReads(h checker.History, reads map[kv][]int, x kv) checker.History {
	out := clone(h)
	for _, pos := range reads[x] {
		dropRead(out, pos, x.k, x.v)
	}
	return out
}

func readBeyond(h checker.History, k int, offset int64) bool {
	for _, op := range h {
		for _, m := range op.Mops {
			for _, p := range m.Polls[k] {
				if p.Offset > offset {
					return true
				}
			}
		}
	}
	return false
}

// lastPollOf returns the position of the last ok poll that read key k.
func lastPollOf(h checker.History, k int) int {
	for i := len(h) - 1; i >= 0; i-- {
		if h[i].Type == checker.OK && h[i].F == checker.FPoll {
			for _, m := range h[i].Mops {
				if len(m.Polls[k]) > 0 {
					return i
				}
			}
		}
	}
	return -1
}

// injectDuplicate makes the final read of a key return one of its values
// again at the next offset.
func injectDuplicate(h checker.History, rng *rand.Rand) (checker.History, error) {
	sends := okSends(h)
	if len(sends) == 0 {
		return nil, fmt.Errorf("no acknowledged send")
	}
	x := pick(rng, sortedKVs(sends))
	pos := lastPollOf(h, x.k)
	if pos < 0 {
		return nil, fmt.Errorf("key %d is never read", x.k)
	}
	out := clone(h)
	for j := range out[pos].Mops {
		m := &out[pos].Mops[j]
		if pairs := m.Polls[x.k]; len(pairs) > 0 {
			m.Polls[x.k] = append(pairs, checker.Pair{Offset: pairs[len(pairs)-1].Offset + 1, Value: x.v})
		}
	}
	return out, nil
}

// injectInconsistent makes one of two polls of a value return, at its
// offset, a value nobody sent.
func injectInconsistent(h checker.History, rng *rand.Rand) (checker.History, error) {
	reads := readers(h)
	var candidates []kv
	for _, x := range sortedKVs(reads) {
		if len(reads[x]) >= 2 {
			candidates = append(candidates, x)
		}
	}
	if len(candidates) == 0 {
		return nil, fmt.Errorf("no value is read twice")
	}
	// Another poll still reads the real value, so it is not lost.
	x := pick(rng, candidates)
	pos := pick(rng, reads[x])
	out := clone(h)
	for j := range out[pos].Mops {
		m := &out[pos].Mops[j]
		for n, p := range m.Polls[x.k] {
			if p.Value == x.v {
				m.Polls[x.k][n].Value = -1 - x.v
			}
		}
	}
	return out, nil
}

// injectG1a turns an acknowledged, read send into a failed one.
func injectG1a(h checker.History, rng *rand.Rand) (checker.History, error) {
	sends, reads := okSends(h), readers(h)
	var candidates []kv
	for _, x := range sortedKVs(sends) {
		if len(reads[x]) > 0 {
			candidates = append(candidates, x)
		}
	}
	if len(candidates) == 0 {
		return nil, fmt.Errorf("no acknowledged send is read")
	}
	x := pick(rng, candidates)
	out := clone(h)
	pos := sends[x][0]
	out[pos].Type = checker.Fail
	out[pos].Mops = []checker.MicroOp{{F: checker.FSend, Key: x.k, Value: x.v}}
	return out, nil
}

// injectPollSkip drops the last record a consumer's poll returned for a key
// that the same consumer polls again next, so its next poll starts one
// offset further on. The record stays visible to the final reads.
func injectPollSkip(h checker.History, rng *rand.Rand) (checker.History, error) {
	type cand struct{ pos, k int }
	var candidates []cand
	last := map[int]map[int]int{} // process -> key -> position of last ok poll reading it
	for i, op := range h {
		if op.Type == checker.Invoke || op.Process == checker.NemesisProcess {
			continue
		}
		if op.F == checker.FAssign && op.Type == checker.OK {
			keep := map[int]int{}
			for _, k := range op.Keys {
				if p, ok := last[op.Process][k]; ok {
					keep[k] = p
				}
			}
			last[op.Process] = keep
		}
		if op.F != checker.FPoll || op.Type != checker.OK || op.SeekToBeginning {
			continue
		}
		if last[op.Process] == nil {
			last[op.Process] = map[int]int{}
		}
		for k, pairs := range op.Mops[0].Polls {
			if len(pairs) == 0 {
				continue
			}
			if p, ok := last[op.Process][k]; ok && len(h[p].Mops[0].Polls[k]) >= 2 {
				candidates = append(candidates, cand{p, k})
			}
			last[op.Process][k] = i
		}
	}
	if len(candidates) == 0 {
		return nil, fmt.Errorf("no consumer polls a key twice in a row")
	}
	slices.SortFunc(candidates, func(a, b cand) int {
		if a.pos != b.pos {
			return a.pos - b.pos
		}
		return a.k - b.k
	})
	c := pick(rng, candidates)
	out := clone(h)
	m := &out[c.pos].Mops[0]
	m.Polls[c.k] = m.Polls[c.k][:len(m.Polls[c.k])-1]
	return out, nil
}

// injectLostAfterRead has the final reads of a key stop short (a
// stalled-reads event at the end) with its partition's high watermark at
// the highest offset any poll read of it, or (one time in three) with the
// partition no longer listed at all: the value read there was committed
// and the healed partition no longer holds it.
func injectLostAfterRead(h checker.History, rng *rand.Rand) (checker.History, error) {
	top := map[int]int64{}
	for _, op := range h {
		if op.Type != checker.OK {
			continue
		}
		for _, m := range op.Mops {
			for k, pairs := range m.Polls {
				for _, p := range pairs {
					if o, ok := top[k]; !ok || p.Offset > o {
						top[k] = p.Offset
					}
				}
			}
		}
	}
	if len(top) == 0 {
		return nil, fmt.Errorf("no key was read")
	}
	k := pick(rng, slices.Sorted(maps.Keys(top)))
	stall := checker.Stall{Key: k, Topic: fmt.Sprintf("t%d", k), Partition: 0, HighWatermark: top[k], LastStable: top[k]}
	if rng.IntN(3) == 0 { // the whole partition is gone
		stall.HighWatermark, stall.LastStable, stall.Missing = -1, -1, true
	}
	raw, err := json.Marshal([]checker.Stall{stall})
	if err != nil {
		return nil, err
	}
	out := clone(h)
	var at int64
	if n := len(out); n > 0 {
		at = out[n-1].Time + 1
	}
	return append(out, checker.Op{Index: int64(len(out)), Time: at, Process: checker.HarnessProcess, Type: checker.Info, F: checker.FStalledReads, Raw: raw}), nil
}
