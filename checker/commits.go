package checker

import (
	"fmt"
	"sort"
)

// AnomalyLostCommit is a consumer group going back behind an offset it
// had committed: a consumer newly assigned a key (its rebalance log names
// the key) first polls it below the highest offset whose commit the group
// coordinator acknowledged before that poll began. A correct coordinator
// failover keeps every acknowledged commit, so the group resumes at or
// after it; one that lost commits rewinds the group (faultline's own
// check: Jepsen's allows nonmonotonic-poll across rebalances and so
// cannot tell a lost commit from a rebalance).
const AnomalyLostCommit = "lost-commit"

// commitMark is the highest committed offset of a key as of history
// position pos.
type commitMark struct {
	pos    int32
	offset int64
}

// commitWatch is a key newly assigned to a process: its first poll must
// start at bound or later.
type commitWatch struct {
	bound     int64
	commitPos int32 // position of the commit that set bound
}

// lostCommits walks the history in order for lost-commit.
func (q *queue) lostCommits() {
	marks := map[int][]commitMark{}
	watches := map[int]map[int]commitWatch{}
	committedBefore := func(k int, pos int32) (commitMark, bool) {
		ms := marks[k]
		i := sort.Search(len(ms), func(i int) bool { return ms[i].pos >= pos })
		if i == 0 {
			return commitMark{}, false
		}
		return ms[i-1], true
	}
	for pos := range q.h {
		op := &q.h[pos]
		if op.Type == Invoke || !op.IsClient() {
			continue
		}
		if op.Type == Info || op.F == FAssign {
			// A crashed process's next consumer, or one that assigns
			// itself partitions, reads from where it chooses.
			delete(watches, op.Process)
			continue
		}
		if op.F != FPoll || op.Type != OK {
			continue
		}
		inv := int32(pos)
		if p := q.p.partner[pos]; p >= 0 {
			inv = int32(p)
		}
		for _, r := range op.RebalanceLog {
			for _, k := range r.Keys {
				if m, ok := committedBefore(k, inv); ok {
					if watches[op.Process] == nil {
						watches[op.Process] = map[int]commitWatch{}
					}
					watches[op.Process][k] = commitWatch{bound: m.offset, commitPos: m.pos}
				}
			}
		}
		for _, kv := range q.reads(pos) {
			w, ok := watches[op.Process][kv.key]
			if !ok || len(kv.pairs) == 0 {
				continue
			}
			delete(watches[op.Process], kv.key)
			if first := kv.pairs[0]; first.Offset < w.bound {
				q.report(AnomalyLostCommit, Example{
					Key: kv.key, Offset: ptr(first.Offset), Offsets: []int64{w.bound, first.Offset},
					Ops: []int64{q.index(w.commitPos), op.Index},
					Text: fmt.Sprintf("process %d was assigned key %d and polled it from offset %d in op %d, below offset %d the group had committed in op %d",
						op.Process, kv.key, first.Offset, op.Index, w.bound, q.index(w.commitPos)),
				})
			}
		}
		for k, o := range op.Committed {
			ms := marks[k]
			if n := len(ms); n > 0 && ms[n-1].offset >= o {
				continue
			}
			marks[k] = append(ms, commitMark{pos: int32(pos), offset: o})
		}
	}
}
