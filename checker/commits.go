package checker

import (
	"fmt"
	"maps"
	"slices"
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
		inv := q.p.invoke(pos)
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

// AnomalyAbortedOffsets is a consumer group's committed offset that only
// aborted transactions sent: an assign of a transactional client (its
// Committed holds the group's committed offsets it resumed from, read with
// RequireStable) or an aborted txn operation (its GroupOffsets, read once
// the abort was done) found, for a key, an offset that txn operations
// which definitely aborted sent to their transactions (TxnOffsetCommit)
// and no committed or indeterminate one did. A broker
// must drop a transaction's offsets when it aborts, as it drops its
// records; one that applies them makes an exactly-once application skip
// the records the aborted transaction had consumed (faultline's own check:
// Jepsen's client keeps no group offsets across processes).
const AnomalyAbortedOffsets = "aborted-offsets"

// abortedOffsets checks every ok assign that resumed from the group's
// committed offsets, and every GroupOffsets, against the offsets txn
// operations sent to their transactions (their Committed). Nothing is
// reported when some txn operation's offsets are unknown (an invoke never
// completed, cut short by Ctrl-C, or a completion without Committed from a
// history of another tool), since it could have committed any; faultline's
// client records what it sent even on an op it ends info, and an empty map
// where a TxnOffsetCommit failed and may yet land. The check assumes the
// group and its topics are the run's own.
func (q *queue) abortedOffsets() {
	kept := map[int]map[int64]bool{}     // key -> offsets a committed or indeterminate txn sent
	aborted := map[int]map[int64]int32{} // key -> offset -> invoke position of the first aborted txn that sent it
	type observation struct {
		pos     int32
		offsets map[int]int64
	}
	var observed []observation
	for pos := range q.h {
		op := &q.h[pos]
		if !op.IsClient() {
			continue
		}
		if op.Type == Invoke {
			if op.F == FTxn && q.p.partner[pos] < 0 {
				return // never completed: it may have committed any offsets
			}
			continue
		}
		if len(op.GroupOffsets) > 0 {
			observed = append(observed, observation{int32(pos), op.GroupOffsets})
		}
		switch {
		case op.F == FAssign && op.Type == OK && len(op.Committed) > 0:
			observed = append(observed, observation{int32(pos), op.Committed})
		case op.F != FTxn:
		case op.Committed == nil && op.Type != Fail:
			return
		case op.Type == Fail:
			inv := q.p.invoke(pos)
			for k, o := range op.Committed {
				if aborted[k] == nil {
					aborted[k] = map[int64]int32{}
				}
				if first, ok := aborted[k][o]; !ok || inv < first {
					aborted[k][o] = inv
				}
			}
		default:
			for k, o := range op.Committed {
				if kept[k] == nil {
					kept[k] = map[int64]bool{}
				}
				kept[k][o] = true
			}
		}
	}
	for _, ob := range observed {
		op := &q.h[ob.pos]
		for _, k := range slices.Sorted(maps.Keys(ob.offsets)) {
			o := ob.offsets[k]
			by, ok := aborted[k][o]
			if !ok || kept[k][o] || by > ob.pos {
				continue // a committed or indeterminate txn sent it too, or the first aborted one began after it was read
			}
			how := "resumed key %[2]d at offset %[3]d, the group's committed offset,"
			if op.F == FTxn {
				how = "read key %[2]d's committed offset of the group as %[3]d after its transaction aborted,"
			}
			q.report(AnomalyAbortedOffsets, Example{
				Key: k, Offset: ptr(o), Ops: []int64{q.index(by), op.Index},
				Text: fmt.Sprintf("process %[1]d "+how+" in op %[4]d; only aborted transactions sent that offset, the first invoked at op %[5]d, and no committed one did",
					op.Process, k, o, op.Index, q.index(by)),
			})
		}
	}
}

// AnomalyFencedCommit is a transaction whose commit succeeded although a
// newer producer with the same transactional.id had been initialized
// before the commit was sent (the op is Fenced): InitProducerId must fence
// the older producer, abort its open transaction and refuse its EndTxn, or
// a zombie instance of an exactly-once application commits alongside its
// successor (faultline's own check: Jepsen's client never shares a
// transactional.id).
const AnomalyFencedCommit = "fenced-commit"

// fencedCommits reports every ok txn operation marked Fenced.
func (q *queue) fencedCommits() {
	for pos := range q.h {
		op := &q.h[pos]
		if !op.IsClient() || op.F != FTxn || op.Type != OK || !op.Fenced {
			continue
		}
		q.report(AnomalyFencedCommit, Example{Key: -1, Ops: []int64{q.index(q.p.invoke(pos)), op.Index},
			Text: fmt.Sprintf("process %d's transaction (op %d) committed after a new producer with its transactional.id was initialized, which should have fenced it", op.Process, op.Index)})
	}
}
