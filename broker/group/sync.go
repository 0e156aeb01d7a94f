package group

import (
	"bytes"
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// SyncGroup (key 14, v0-v5) hands each member its assignment. Members park
// until the leader's SyncGroup arrives and its assignment is committed to
// __consumer_offsets as a GroupMetadataValue; only then is the group Stable
// and every parked member answered. v5 checks the protocol type and name
// the member believes in.
func (c *Coordinator) SyncGroup(ctx context.Context, req *kmsg.SyncGroupRequest) *kmsg.SyncGroupResponse {
	resp, wait, store := c.sync(req)
	if store != nil {
		c.storeAssignment(store)
	}
	if wait != nil {
		select {
		case resp = <-wait:
		case <-ctx.Done():
			resp = syncError(codeRebalanceInProgress)
		case <-c.ctx.Done():
			resp = syncError(codeNotCoordinator)
		}
	}
	resp.Version = req.Version
	return resp
}

// pendingAssignment is a leader's assignment on its way to the log.
type pendingAssignment struct {
	g           *group
	generation  int32
	assignments map[string][]byte
}

func (c *Coordinator) sync(req *kmsg.SyncGroupRequest) (*kmsg.SyncGroupResponse, chan *kmsg.SyncGroupResponse, *pendingAssignment) {
	if req.Group == "" {
		return syncError(codeInvalidGroupID), nil, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, code := c.ownerLocked(req.Group); code != codeNone {
		return syncError(code), nil, nil
	}
	g := c.groups[req.Group]
	if g == nil {
		return syncError(codeUnknownMemberID), nil, nil
	}
	m, code := g.checkMember(req.MemberID, req.InstanceID)
	if code != codeNone {
		return syncError(code), nil, nil
	}
	if req.Generation != g.generation {
		return syncError(codeIllegalGeneration), nil, nil
	}
	if req.ProtocolType != nil && *req.ProtocolType != g.protocolType ||
		req.Protocol != nil && *req.Protocol != g.protocol {
		return syncError(codeInconsistentGroupProtocol), nil, nil
	}
	switch g.state {
	case statePreparingRebalance:
		return syncError(codeRebalanceInProgress), nil, nil
	case stateStable:
		delete(g.syncPending, m.id)
		c.scheduleSessionLocked(g, m)
		return c.syncResponseLocked(g, m), nil, nil
	case stateCompletingRebalance:
		delete(g.syncPending, m.id)
		m.answerSync(syncError(codeRebalanceInProgress))
		m.syncWait = make(chan *kmsg.SyncGroupResponse, 1)
		wait := m.syncWait
		if m.id != g.leader || g.assignmentPending {
			return nil, wait, nil
		}
		g.assignmentPending = true
		pa := &pendingAssignment{g: g, generation: g.generation, assignments: map[string][]byte{}}
		for _, a := range req.GroupAssignment {
			if g.members[a.MemberID] != nil {
				pa.assignments[a.MemberID] = bytes.Clone(a.MemberAssignment)
			}
		}
		return nil, wait, pa
	default:
		return syncError(codeUnknownMemberID), nil, nil
	}
}

func (c *Coordinator) syncResponseLocked(g *group, m *member) *kmsg.SyncGroupResponse {
	r := kmsg.NewPtrSyncGroupResponse()
	pt, pr := g.protocolType, g.protocol
	r.ProtocolType = &pt
	r.Protocol = &pr
	r.MemberAssignment = m.assignment
	if r.MemberAssignment == nil {
		r.MemberAssignment = []byte{}
	}
	return r
}

// storeAssignment writes the group with the leader's assignment to the log
// and, once it is committed, makes the group Stable and answers the parked
// members. If the group moved on meanwhile (a member left, a new rebalance
// began) nothing is written: whoever changed it answered the members.
func (c *Coordinator) storeAssignment(pa *pendingAssignment) {
	g := pa.g
	lock := c.appendLocks.Of(g.partition)
	lock.Lock()
	defer lock.Unlock()
	c.mu.Lock()
	still := func() bool {
		return c.liveLocked(g) && g.state == stateCompletingRebalance && g.generation == pa.generation && g.assignmentPending
	}
	if !still() {
		c.mu.Unlock()
		return
	}
	v := g.metadataValue(c.clock.Now())
	for i := range v.Members {
		v.Members[i].Assignment = pa.assignments[v.Members[i].MemberID]
	}
	rec := groupMetadataRecord(g.id, v)
	c.mu.Unlock()

	err := c.appendRecords(g.partition, []Record{rec})

	c.mu.Lock()
	defer c.mu.Unlock()
	if !still() {
		return
	}
	if err != nil {
		code := appendErrorCode(err)
		c.logger.Warn(fmt.Sprintf("Failed to persist the assignment of group %s generation %d: %v", g.id, g.generation, err))
		c.resetAssignmentLocked(g, code)
		c.prepareRebalanceLocked(g, "failed to persist the assignment")
		return
	}
	g.assignmentPending = false
	for _, m := range g.members {
		m.assignment = pa.assignments[m.id]
	}
	g.transition(stateStable, c.clock.Now())
	c.logger.Info(fmt.Sprintf("Assignment received from leader %s for group %s for generation %d. The group has %d members.", g.leader, g.id, g.generation, len(g.members)))
	for _, m := range g.members {
		if m.syncWait != nil {
			m.answerSync(c.syncResponseLocked(g, m))
			c.scheduleSessionLocked(g, m)
		}
	}
}
