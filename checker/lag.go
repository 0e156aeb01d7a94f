package checker

import (
	"maps"
	"slices"
	"sort"
)

// RealtimeLag is Jepsen's realtime lag of one key in one poll: a lower
// bound on how long before the poll began the highest offset its process
// had reached in the key had already stopped being the key's last one.
type RealtimeLag struct {
	Time    int64 `json:"time"` // when the poll was invoked, ns
	Process int   `json:"process"`
	Key     int   `json:"key"`
	LagNs   int64 `json:"lag-ns"`
}

// tailStep says that offsets up to offset existed by time t.
type tailStep struct {
	offset, t int64
}

// realtimeLags computes kafka.clj's realtime-lag and calls visit with each
// lag in history order. First, for every key, when each offset was known to
// exist: an ok or info op that polled an offset or was told one for a send
// proves that offset and every lower one existed at its completion. Then
// each process's position per key is followed: an ok assign keeps the
// positions of the keys it still names and puts the new ones before
// offset 0, or before the offset it resumed at (its Committed), an ok
// subscribe forgets them all, and every ok poll or txn raises them to the
// highest offsets it touched. A process that sought to the beginning (the
// final reads) rereads the logs on purpose and has no lag from then on:
// Jepsen counts it, which makes its worst lag the run's length. The
// lag of a key in that poll is the time from when its next offset was
// known to exist to the poll's invoke, or 0.
//
// Memory is O(keys + processes × keys); each key's knowledge is a
// staircase of offsets known by increasing times, so offsets far apart
// cost nothing.
func realtimeLags(h History, p *pairing, visit func(RealtimeLag)) {
	known := map[int][]tailStep{}
	for i := range h {
		op := &h[i]
		if !op.IsClient() || (op.Type != OK && op.Type != Info) {
			continue
		}
		for k, o := range maxOffsets(op) {
			steps := known[k]
			// History order is time order: a step known earlier already
			// covers an offset at or below the last one.
			if o >= 0 && (len(steps) == 0 || o > steps[len(steps)-1].offset) {
				known[k] = append(steps, tailStep{offset: o, t: op.Time})
			}
		}
	}
	// existedAt is when offset o of key k was first known to exist, or
	// false when it never was.
	existedAt := func(k int, o int64) (int64, bool) {
		steps := known[k]
		j := sort.Search(len(steps), func(j int) bool { return steps[j].offset >= o })
		if j == len(steps) {
			return 0, false
		}
		return steps[j].t, true
	}

	positions := map[int]map[int]int64{} // process -> key -> highest offset reached
	rereading := map[int]bool{}          // processes that sought to the beginning
	for i := range h {
		op := &h[i]
		if !op.IsClient() || op.Type != OK {
			continue
		}
		switch {
		case op.F == FAssign:
			old := positions[op.Process]
			seek := p.seeksToBeginning(h, i)
			if seek {
				rereading[op.Process] = true
			}
			pos := make(map[int]int64, len(op.Keys))
			for _, k := range op.Keys {
				pos[k] = -1
				if o, ok := old[k]; ok && !seek {
					pos[k] = o
				} else if c, ok := op.Committed[k]; ok && !seek {
					pos[k] = c - 1 // resumed at the group's committed offset
				}
			}
			positions[op.Process] = pos
		case op.F == FSubscribe:
			positions[op.Process] = map[int]int64{}
		case op.F == FPoll || op.F == FTxn:
			pos := positions[op.Process]
			if pos == nil {
				pos = map[int]int64{}
				positions[op.Process] = pos
			}
			for k, o := range maxOffsets(op) {
				if cur, ok := pos[k]; !ok || o > cur {
					pos[k] = o
				}
			}
			if rereading[op.Process] {
				// Reading a whole log again on purpose (the final
				// reads): its lag is the run's length, not a consumer
				// falling behind.
				continue
			}
			invoked := h[p.invoke(i)].Time
			for _, k := range slices.Sorted(maps.Keys(pos)) {
				lag := int64(0)
				if t, ok := existedAt(k, pos[k]+1); ok && t < invoked {
					lag = invoked - t
				}
				visit(RealtimeLag{Time: invoked, Process: op.Process, Key: k, LagNs: lag})
			}
		}
	}
}

// worstRealtimeLag is the largest realtime lag (the first of equals), nil
// when no ok poll was made.
func worstRealtimeLag(h History, p *pairing) *RealtimeLag {
	var worst *RealtimeLag
	realtimeLags(h, p, func(l RealtimeLag) {
		if worst == nil || l.LagNs > worst.LagNs {
			worst = &l
		}
	})
	return worst
}

// maxOffsets is kafka.clj's op->max-offsets: per key, the highest offset
// the op polled or was told for a send; -1 for a key polled with nothing
// returned.
func maxOffsets(op *Op) map[int]int64 {
	out := map[int]int64{}
	raise := func(k int, o int64) {
		if cur, ok := out[k]; !ok || o > cur {
			out[k] = o
		}
	}
	for _, m := range op.Mops {
		switch {
		case m.F == FPoll && (op.F == FPoll || op.F == FTxn):
			for k, pairs := range m.Polls {
				raise(k, -1)
				for _, pr := range pairs {
					raise(k, pr.Offset)
				}
			}
		case m.F == FSend && (op.F == FSend || op.F == FTxn) && m.Offset != nil:
			raise(m.Key, *m.Offset)
		}
	}
	return out
}
