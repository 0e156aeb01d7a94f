package raftq

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/faultline/faultline/broker/quorum"
	"github.com/faultline/faultline/broker/storage"
)

// stepBatchMax bounds how many received messages or proposals one turn of
// the raft goroutine takes before handling a Ready.
const stepBatchMax = 256

// run is the raft goroutine: the only one that touches the RawNode. Each
// turn takes one input (a tick, received messages, proposals, a local
// event) and then handles the Ready: persist, send, hand committed entries
// to the applier, Advance.
func (q *Quorum) run() {
	defer q.wg.Done()
	ticker := time.NewTicker(q.cfg.TickInterval)
	defer ticker.Stop()
	if len(q.voters) == 1 {
		// The only voter has nobody to wait for: it elects itself at
		// once instead of after an election timeout.
		if err := q.rn.Campaign(); err != nil {
			q.fail(fmt.Errorf("campaign as the only voter: %w", err))
			return
		}
		if err := q.handleReadies(nil); err != nil {
			if !errors.Is(err, quorum.ErrClosed) {
				q.fail(err)
			}
			return
		}
	}
	for {
		var accepted []*proposal
		select {
		case <-q.stopC:
			return
		case <-ticker.C:
			q.rn.Tick()
			q.onTick()
		case m := <-q.recvC:
			q.step(m)
			for i := 1; i < stepBatchMax; i++ {
				select {
				case m = <-q.recvC:
					q.step(m)
					continue
				default:
				}
				break
			}
		case p := <-q.propC:
			accepted = q.propose(p, accepted)
			for i := 1; i < stepBatchMax; i++ {
				select {
				case p = <-q.propC:
					accepted = q.propose(p, accepted)
					continue
				default:
				}
				break
			}
		case <-q.eventsC:
			q.eventsMu.Lock()
			evs := q.events
			q.events = nil
			q.eventsMu.Unlock()
			for _, ev := range evs {
				ev()
			}
		}
		if err := q.handleReadies(accepted); err != nil {
			if !errors.Is(err, quorum.ErrClosed) {
				q.fail(err)
			}
			return
		}
	}
}

// readiesMax bounds how many Readies one turn of the raft goroutine
// handles.
const readiesMax = 16

// handleReadies handles the Ready of this turn's input and those that
// follow from it without another input: a lone voter's own append
// acknowledgement, stepped in Advance, commits its entries and makes the
// next Ready, which must not wait for the next tick.
func (q *Quorum) handleReadies(accepted []*proposal) error {
	if err := q.handleReady(accepted); err != nil {
		return err
	}
	for i := 1; i < readiesMax && q.rn.HasReady(); i++ {
		if err := q.handleReady(nil); err != nil {
			return err
		}
	}
	return nil
}

// fail stops the quorum after an error it cannot recover from (a failed
// write: raft must not go on believing something is durable).
func (q *Quorum) fail(err error) {
	q.logger.Error("Metadata quorum stopped after a storage failure; restart the node", "err", err)
	q.mu.Lock()
	if q.failed == nil {
		q.failed = err
	}
	for i, p := range q.waiters {
		p.done <- proposalResult{err: err}
		delete(q.waiters, i)
	}
	q.mu.Unlock()
	q.stop()
}

func (q *Quorum) step(m *raftpb.Message) {
	from := m.GetFrom()
	if from != 0 {
		q.mu.Lock()
		q.lastHeardMs[from] = q.cfg.Now().UnixMilli()
		q.mu.Unlock()
	}
	if err := q.rn.Step(m); err != nil && !errors.Is(err, raft.ErrStepPeerNotFound) {
		q.logger.Debug("Raft rejected a message", "from", NodeID(from), "type", m.GetType().String(), "err", err)
	}
}

// propose hands p to raft; accepted collects the proposals raft appended,
// in order.
func (q *Quorum) propose(p *proposal, accepted []*proposal) []*proposal {
	if st := q.rn.BasicStatus(); st.RaftState != raft.StateLeader {
		p.done <- proposalResult{err: q.notLeader(st.Lead)}
		return accepted
	}
	if err := q.rn.Propose(p.data); err != nil {
		p.done <- proposalResult{err: fmt.Errorf("%w: proposal dropped: %w", quorum.ErrNotLeader, err)}
		return accepted
	}
	return append(accepted, p)
}

func (q *Quorum) notLeader(lead uint64) error {
	if lead == 0 {
		return fmt.Errorf("%w: no leader known", quorum.ErrNotLeader)
	}
	return fmt.Errorf("%w: node %d leads", quorum.ErrNotLeader, NodeID(lead))
}

// handleReady processes one Ready. accepted are the proposals raft appended
// since the last Ready: the last len(accepted) new entries are theirs.
func (q *Quorum) handleReady(accepted []*proposal) error {
	if !q.rn.HasReady() {
		if len(accepted) > 0 {
			return errors.New("raft accepted proposals without a Ready")
		}
		return nil
	}
	rd := q.rn.Ready()
	if len(accepted) > 0 {
		if err := q.registerProposals(rd.Entries, accepted); err != nil {
			return err
		}
	}
	// Messages that do not vouch for local durability (a leader's appends
	// and heartbeats, vote requests) go out before the disk writes, so
	// that the leader's fsync overlaps its followers' (Raft thesis 10.2.1;
	// etcd raft sends the same ones early with asynchronous storage
	// writes). Votes and append acknowledgements wait for the writes.
	late := q.sendEarly(rd.Messages)
	if !raft.IsEmptySnap(rd.Snapshot) {
		if err := q.installSnapshot(rd.Snapshot); err != nil {
			return err
		}
	}
	if len(rd.Entries) > 0 {
		if err := q.persistEntries(rd.Entries); err != nil {
			return err
		}
		if err := q.mem.Append(rd.Entries); err != nil {
			return fmt.Errorf("raft log: %w", err)
		}
	}
	if !raft.IsEmptyHardState(rd.HardState) {
		if err := q.saveHardState(rd.HardState); err != nil {
			return err
		}
	}
	if rd.SoftState != nil || !raft.IsEmptyHardState(rd.HardState) {
		q.updateLeader()
	}
	if rd.SoftState != nil {
		q.logTransition(*rd.SoftState)
	}
	q.tr.Send(late)
	if len(rd.CommittedEntries) > 0 {
		if err := q.commit(rd.CommittedEntries); err != nil {
			return err
		}
	}
	if rd.SoftState != nil && rd.SoftState.RaftState != raft.StateLeader {
		q.failWaitersOnStepDown(rd.SoftState.Lead, q.rn.BasicStatus().GetCommit())
	}
	q.rn.Advance(rd)
	return nil
}

// failWaitersOnStepDown ends the Appends still waiting for a commit when
// this voter stops leading, as Kafka's controller answers NOT_CONTROLLER
// on resignation: the caller learns at once instead of waiting for a heal.
// Entries up to commit are committed and get their answer when applied;
// the outcome of the later ones is unknown (a newer leader may still
// commit them), so callers retry, as after any NOT_CONTROLLER.
func (q *Quorum) failWaitersOnStepDown(lead, commit uint64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for i, p := range q.waiters {
		if i <= commit {
			continue
		}
		p.done <- proposalResult{err: fmt.Errorf("%w (left the leadership before the batch committed; a newer leader may still commit it)", q.notLeader(lead))}
		delete(q.waiters, i)
	}
}

// sendEarly sends the messages whose sending does not depend on this
// Ready's writes and returns the others: the responses raft queues until
// the state they vote on is durable (MsgAppResp, MsgVoteResp,
// MsgPreVoteResp).
func (q *Quorum) sendEarly(msgs []*raftpb.Message) (late []*raftpb.Message) {
	var early []*raftpb.Message
	for _, m := range msgs {
		switch m.GetType() {
		case raftpb.MsgAppResp, raftpb.MsgVoteResp, raftpb.MsgPreVoteResp:
			late = append(late, m)
		default:
			early = append(early, m)
		}
	}
	if len(early) > 0 {
		q.tr.Send(early)
	}
	return late
}

func (q *Quorum) registerProposals(ents []*raftpb.Entry, accepted []*proposal) error {
	if len(ents) < len(accepted) {
		return fmt.Errorf("raft appended %d entries for %d proposals", len(ents), len(accepted))
	}
	ours := ents[len(ents)-len(accepted):]
	q.mu.Lock()
	defer q.mu.Unlock()
	for i, p := range accepted {
		if !bytes.Equal(ours[i].GetData(), p.data) {
			return fmt.Errorf("raft entry %d does not hold the proposal appended for it", ours[i].GetIndex())
		}
		p.index, p.term = ours[i].GetIndex(), ours[i].GetTerm()
		if old := q.waiters[p.index]; old != nil {
			old.done <- proposalResult{err: fmt.Errorf("%w: the batch was replaced by a newer leader's entry", quorum.ErrNotLeader)}
		}
		q.waiters[p.index] = p
	}
	return nil
}

// persistEntries writes entries to the metadata log, one batch each,
// cutting a conflicting tail first, and fsyncs.
func (q *Quorum) persistEntries(ents []*raftpb.Entry) error {
	first := ents[0].GetIndex()
	q.mu.Lock()
	last := q.offsets.lastIndex()
	base, ok := q.offsets.endOffset(first - 1)
	q.mu.Unlock()
	if !ok {
		return fmt.Errorf("raft entry %d does not follow the metadata log (last index %d)", first, last)
	}
	if first <= last {
		if err := q.log.TruncateTo(base); err != nil {
			return fmt.Errorf("truncate the metadata log to offset %d (raft index %d): %w", base, first, err)
		}
		q.mu.Lock()
		q.offsets.truncateFrom(first)
		q.mu.Unlock()
		q.logger.Info(fmt.Sprintf("Truncated the metadata log to offset %d: raft replaced entries from index %d", base, first))
	}
	nowMs := q.cfg.Now().UnixMilli()
	st := q.rn.BasicStatus()
	for _, e := range ents {
		if e.GetType() != raftpb.EntryNormal {
			return fmt.Errorf("raft entry %d has type %s; the quorum has static voters", e.GetIndex(), e.GetType())
		}
		if e.GetTerm() > maxTerm {
			return fmt.Errorf("raft entry %d has term %d, beyond a leader epoch", e.GetIndex(), e.GetTerm())
		}
		var batch []byte
		if len(e.GetData()) == 0 {
			lead := int32(-1)
			if st.GetTerm() == e.GetTerm() && st.Lead != 0 {
				lead = NodeID(st.Lead)
			}
			batch = leaderChangeBatch(lead, q.voters, nowMs)
		} else {
			batch = slices.Clone(e.GetData())
		}
		info, err := q.log.AppendAsLeader(batch, termEpoch(e.GetTerm()), nowMs)
		if err != nil {
			return fmt.Errorf("append raft entry %d to the metadata log: %w", e.GetIndex(), err)
		}
		if info.FirstOffset != base {
			return fmt.Errorf("raft entry %d landed at offset %d, expected %d", e.GetIndex(), info.FirstOffset, base)
		}
		base = info.LastOffset + 1
		q.mu.Lock()
		err = q.offsets.add(base)
		q.mu.Unlock()
		if err != nil {
			return err
		}
	}
	if err := q.log.Flush(); err != nil {
		return fmt.Errorf("fsync the metadata log: %w", err)
	}
	return nil
}

// leaderChangeBatch is the batch of a new leader's empty raft entry: a
// control batch with Kafka's LeaderChangeMessage (version 0) naming the
// leader (-1 when the writer does not know it) and the voters.
func leaderChangeBatch(leader int32, voters []int32, nowMs int64) []byte {
	v := []byte{0, 0} // version
	v = append(v, byte(leader>>24), byte(leader>>16), byte(leader>>8), byte(leader))
	v = append(v, byte(len(voters)+1)) // compact array length, voters < 127
	for _, id := range voters {
		v = append(v, byte(id>>24), byte(id>>16), byte(id>>8), byte(id), 0)
	}
	v = append(v, 1, 0) // no granting voters, no tagged fields
	return storage.BuildBatch([]storage.Record{{TimestampMs: nowMs, Key: controlKey(controlLeaderChange), Value: v}}, storage.BatchOptions{Control: true})
}

// saveHardState writes quorum-state when the term or the vote changed
// (raft must not send a message that depends on them before they are
// durable). A change of the commit index alone is written at the next
// tick: a lost commit index is relearned from the leader.
func (q *Quorum) saveHardState(st *raftpb.HardState) error {
	hs := hardState{Term: st.GetTerm(), Vote: st.GetVote(), Commit: st.GetCommit()}
	if err := q.mem.SetHardState(&raftpb.HardState{Term: new(hs.Term), Vote: new(hs.Vote), Commit: new(hs.Commit)}); err != nil {
		return err
	}
	changed := hs.Term != q.hs.Term || hs.Vote != q.hs.Vote
	q.hs = hs
	if !changed {
		q.hsDirty = true
		return nil
	}
	q.hsDirty = false
	if err := writeQuorumState(q.cfg.FS, q.dir, hs, q.cfg.ClusterID, q.voters); err != nil {
		return fmt.Errorf("write %s: %w", QuorumStateFile, err)
	}
	return nil
}

// commit hands committed entries, with their offsets, to the applier.
func (q *Quorum) commit(ents []*raftpb.Entry) error {
	items := make([]applyItem, 0, len(ents))
	q.mu.Lock()
	for _, e := range ents {
		base, ok1 := q.offsets.endOffset(e.GetIndex() - 1)
		end, ok2 := q.offsets.endOffset(e.GetIndex())
		if !ok1 || !ok2 {
			q.mu.Unlock()
			return fmt.Errorf("committed raft entry %d is not in the metadata log", e.GetIndex())
		}
		items = append(items, applyItem{index: e.GetIndex(), term: e.GetTerm(), baseOffset: base, endOffset: end, data: e.GetData()})
	}
	last := items[len(items)-1]
	q.commitIndex = last.index
	q.mu.Unlock()
	q.log.UpdateHighWatermark(last.endOffset)
	// The high watermark Describe reports, before the applier answers
	// the Appends this commits: a caller told its append committed finds
	// it below the high watermark.
	q.updateLeader()
	q.ap.enqueue(items...)
	return nil
}

// installSnapshot installs a snapshot sent by the leader: the applier
// writes it and restarts the log at its end (so that a Subscribe never sees
// the log and the snapshot disagree), then raft's storage takes it.
func (q *Quorum) installSnapshot(snap *raftpb.Snapshot) error {
	h, recs, err := DecodeSnapshot(snap.GetData())
	if err != nil {
		return fmt.Errorf("install snapshot from the leader: %w", err)
	}
	md := snap.GetMetadata()
	if h.RaftIndex != md.GetIndex() || h.RaftTerm != md.GetTerm() {
		return fmt.Errorf("install snapshot from the leader: header says index %d term %d, raft says index %d term %d", h.RaftIndex, h.RaftTerm, md.GetIndex(), md.GetTerm())
	}
	done := make(chan error, 1)
	q.ap.enqueue(applyItem{snapshot: &receivedSnapshot{header: h, records: recs, data: snap.GetData(), done: done}})
	select {
	case err := <-done:
		if err != nil {
			return err
		}
	case <-q.stopC:
		return quorum.ErrClosed
	}
	q.mu.Lock()
	q.offsets.reset(h.RaftIndex, h.EndOffset)
	q.mu.Unlock()
	if err := q.mem.ApplySnapshot(snap); err != nil {
		return fmt.Errorf("install snapshot from the leader: %w", err)
	}
	q.logger.Info(fmt.Sprintf("Installed metadata snapshot %s from the leader", SnapshotFileName(h.EndOffset, h.Epoch())))
	return nil
}

// compactTo runs on the raft goroutine after the applier wrote a snapshot:
// raft's storage takes it, keeps CompactionLagEntries entries behind it,
// and the metadata log starts at the snapshot's end.
func (q *Quorum) compactTo(h SnapshotHeader, data []byte) {
	cs := &raftpb.ConfState{}
	for _, v := range q.voters {
		cs.Voters = append(cs.Voters, RaftID(v))
	}
	if _, err := q.mem.CreateSnapshot(h.RaftIndex, cs, data); err != nil {
		if !errors.Is(err, raft.ErrSnapOutOfDate) {
			q.logger.Warn("Failed to hand a metadata snapshot to raft", "err", err)
		}
		return
	}
	if h.RaftIndex > q.cfg.CompactionLagEntries {
		to := h.RaftIndex - q.cfg.CompactionLagEntries
		if err := q.mem.Compact(to); err == nil {
			q.mu.Lock()
			q.offsets.compactTo(to)
			q.mu.Unlock()
		} else if !errors.Is(err, raft.ErrCompacted) {
			q.logger.Warn("Failed to compact the raft log", "err", err)
		}
	}
	if err := q.log.IncrementLogStartOffset(h.EndOffset); err != nil {
		q.logger.Warn(fmt.Sprintf("Failed to move the metadata log start to snapshot offset %d", h.EndOffset), "err", err)
		return
	}
	q.deleteOldSnapshots(h.EndOffset)
}

// snapshotsKept is how many snapshot files stay on disk.
const snapshotsKept = 2

func (q *Quorum) deleteOldSnapshots(newest int64) {
	files, err := listSnapshots(q.cfg.FS, q.dir, snapshotSuffix)
	if err != nil {
		return
	}
	for i, f := range files {
		if i < snapshotsKept || f.endOffset >= newest {
			continue
		}
		if err := q.cfg.FS.Remove(fmt.Sprintf("%s/%s", q.dir, f.name)); err != nil {
			q.logger.Warn(fmt.Sprintf("Failed to delete old metadata snapshot %s", f.name), "err", err)
		}
	}
}

// logTransition logs a change of raft role the way Kafka's KRaft logs its
// quorum state transitions.
func (q *Quorum) logTransition(ss raft.SoftState) {
	epoch := termEpoch(q.hs.Term)
	leo := q.offsets.logEndOffset()
	switch ss.RaftState {
	case raft.StateLeader:
		q.logger.Info(fmt.Sprintf("Completed transition to Leader(localId=%d, epoch=%d, logEndOffset=%d, voters=%v)", q.cfg.NodeID, epoch, leo, q.voters))
	case raft.StateFollower:
		if ss.Lead != 0 {
			q.logger.Info(fmt.Sprintf("Completed transition to Follower(localId=%d, leaderId=%d, epoch=%d, logEndOffset=%d)", q.cfg.NodeID, NodeID(ss.Lead), epoch, leo))
		} else {
			q.logger.Info(fmt.Sprintf("Completed transition to Unattached(localId=%d, epoch=%d, logEndOffset=%d)", q.cfg.NodeID, epoch, leo))
		}
	case raft.StatePreCandidate:
		q.logger.Info(fmt.Sprintf("Completed transition to Prospective(localId=%d, epoch=%d, logEndOffset=%d): no leader heard, asking the voters", q.cfg.NodeID, epoch, leo))
	case raft.StateCandidate:
		q.logger.Info(fmt.Sprintf("Completed transition to Candidate(localId=%d, epoch=%d, logEndOffset=%d)", q.cfg.NodeID, epoch, leo))
	}
}

// onTick writes a commit-only hard state change and refreshes what
// Describe reports.
func (q *Quorum) onTick() {
	if q.hsDirty {
		if err := writeQuorumState(q.cfg.FS, q.dir, q.hs, q.cfg.ClusterID, q.voters); err != nil {
			q.logger.Warn(fmt.Sprintf("Failed to write %s", QuorumStateFile), "err", err)
		} else {
			q.hsDirty = false
		}
	}
	q.updateLeader()
}

// updateLeader refreshes the leader, epoch and description that Leader and
// Describe hand out without touching the RawNode.
func (q *Quorum) updateLeader() {
	st := q.rn.BasicStatus()
	nowMs := q.cfg.Now().UnixMilli()
	le := quorum.LeaderAndEpoch{LeaderID: -1, Epoch: termEpoch(st.GetTerm())}
	if st.Lead != 0 {
		le.LeaderID = NodeID(st.Lead)
	}
	var progress map[uint64]uint64
	if st.RaftState == raft.StateLeader {
		progress = map[uint64]uint64{}
		for id, pr := range q.rn.Status().Progress {
			progress[id] = pr.Match
		}
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.leader = le
	hw, _ := q.offsets.endOffset(q.commitIndex)
	leo := q.offsets.logEndOffset()
	d := quorum.Description{LeaderID: le.LeaderID, LeaderEpoch: le.Epoch, HighWatermark: hw}
	for _, v := range q.voters {
		rs := quorum.ReplicaState{ReplicaID: v, LogEndOffset: -1, LastFetchTimestamp: -1, LastCaughtUpTimestamp: -1}
		id := RaftID(v)
		switch {
		case id == q.id:
			rs.LogEndOffset, rs.LastFetchTimestamp, rs.LastCaughtUpTimestamp = leo, nowMs, nowMs
		case progress != nil:
			if off, ok := q.offsets.endOffset(progress[id]); ok {
				rs.LogEndOffset = off
				if off >= leo {
					q.caughtUpMs[id] = nowMs
				}
			}
			if ms, ok := q.lastHeardMs[id]; ok {
				rs.LastFetchTimestamp = ms
			}
			if ms, ok := q.caughtUpMs[id]; ok {
				rs.LastCaughtUpTimestamp = ms
			}
		}
		d.Voters = append(d.Voters, rs)
	}
	q.desc = d
}

// Receive implements Receiver.
func (q *Quorum) Receive(m *raftpb.Message) {
	select {
	case q.recvC <- m:
	default: // raft retransmits
	}
}

// ReportUnreachable implements Receiver.
func (q *Quorum) ReportUnreachable(to uint64) {
	q.post(func() { q.rn.ReportUnreachable(to) })
}

// ReportSnapshot implements Receiver.
func (q *Quorum) ReportSnapshot(to uint64, failed bool) {
	status := raft.SnapshotFinish
	if failed {
		status = raft.SnapshotFailure
	}
	q.post(func() { q.rn.ReportSnapshot(to, status) })
}

// eventsMax bounds the queue of local events; beyond it events are
// dropped (they are reports raft can live without, and the queue only
// grows when the raft goroutine has stopped).
const eventsMax = 4096

// post runs fn on the raft goroutine.
func (q *Quorum) post(fn func()) {
	q.eventsMu.Lock()
	if len(q.events) < eventsMax {
		q.events = append(q.events, fn)
	}
	q.eventsMu.Unlock()
	select {
	case q.eventsC <- struct{}{}:
	default:
	}
}
