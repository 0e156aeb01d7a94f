package group

import (
	"bytes"
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// JoinGroup (key 11, v0-v9) adds a member to a group or rejoins one, and
// parks until the join phase of the rebalance completes. v4+ members joining
// without an id first get MEMBER_ID_REQUIRED with the id to use (KIP-394);
// static members (v5+ group.instance.id) get no such round trip and replace
// the member that held their instance id. v0 has no rebalance timeout: the
// session timeout is used.
func (c *Coordinator) JoinGroup(ctx context.Context, req *kmsg.JoinGroupRequest) *kmsg.JoinGroupResponse {
	resp, wait := c.join(ctx, req)
	if wait != nil {
		select {
		case resp = <-wait:
		case <-ctx.Done():
			resp = joinError(req.MemberID, codeRebalanceInProgress)
		case <-c.ctx.Done():
			resp = joinError(req.MemberID, codeNotCoordinator)
		}
	}
	resp.Version = req.Version
	return resp
}

func (c *Coordinator) join(ctx context.Context, req *kmsg.JoinGroupRequest) (*kmsg.JoinGroupResponse, chan *kmsg.JoinGroupResponse) {
	if req.Group == "" {
		return joinError(req.MemberID, codeInvalidGroupID), nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	p, code := c.ownerLocked(req.Group)
	if code != codeNone {
		return joinError(req.MemberID, code), nil
	}
	if s := int64(req.SessionTimeoutMillis); s < c.cfg.GroupMinSessionTimeoutMs || s > c.cfg.GroupMaxSessionTimeoutMs {
		return joinError(req.MemberID, codeInvalidSessionTimeout), nil
	}
	g := c.groups[req.Group]
	if g == nil {
		if req.MemberID != "" {
			return joinError(req.MemberID, codeUnknownMemberID), nil
		}
		g = newGroup(req.Group, p, c.clock.Now())
	}
	if !g.supportsProtocols(req.ProtocolType, req.Protocols) {
		return joinError(req.MemberID, codeInconsistentGroupProtocol), nil
	}
	c.groups[g.id] = g

	rebalanceMs := req.RebalanceTimeoutMillis
	if req.Version == 0 || rebalanceMs <= 0 {
		rebalanceMs = req.SessionTimeoutMillis
	}
	ci := clientFrom(ctx)
	update := func(m *member) {
		m.clientID, m.clientHost = ci.id, ci.host
		m.sessionTimeoutMs = req.SessionTimeoutMillis
		m.rebalanceTimeoutMs = rebalanceMs
		m.protocolType = req.ProtocolType
		// Copies: the coordinator keeps these beyond the request.
		m.protocols = make([]kmsg.JoinGroupRequestProtocol, len(req.Protocols))
		for i, p := range req.Protocols {
			m.protocols[i] = kmsg.JoinGroupRequestProtocol{Name: p.Name, Metadata: bytes.Clone(p.Metadata)}
		}
	}

	if req.MemberID == "" {
		if req.InstanceID != nil {
			if old := g.members[g.static[*req.InstanceID]]; old != nil {
				m := c.replaceStaticLocked(g, old, newMemberID(ci.id))
				resp, wait := c.rejoinLocked(g, m, req, update)
				if g.state == stateStable {
					// No rebalance: the new member id must reach the
					// log some other way, or a failover would bring the
					// fenced id back.
					c.persistGroupAsync(g)
				}
				return resp, wait
			}
		}
		if len(g.members)+len(g.pending) >= int(c.cfg.GroupMaxSize) {
			return joinError("", codeGroupMaxSizeReached), nil
		}
		id := newMemberID(ci.id)
		if req.InstanceID == nil && req.Version >= 4 {
			c.addPendingLocked(g, id, req.SessionTimeoutMillis)
			return joinError(id, codeMemberIDRequired), nil
		}
		m := &member{id: id, instanceID: req.InstanceID}
		update(m)
		return nil, c.addMemberLocked(g, m)
	}

	if pm := g.pending[req.MemberID]; pm != nil {
		stopTimer(pm.timer)
		delete(g.pending, req.MemberID)
		m := &member{id: req.MemberID, instanceID: req.InstanceID}
		update(m)
		return nil, c.addMemberLocked(g, m)
	}
	m, code := g.checkMember(req.MemberID, req.InstanceID)
	if code != codeNone {
		return joinError(req.MemberID, code), nil
	}
	return c.rejoinLocked(g, m, req, update)
}

// rejoinLocked handles a JoinGroup of a known member.
func (c *Coordinator) rejoinLocked(g *group, m *member, req *kmsg.JoinGroupRequest, update func(*member)) (*kmsg.JoinGroupResponse, chan *kmsg.JoinGroupResponse) {
	switch g.state {
	case statePreparingRebalance:
		update(m)
		wait := c.parkJoinLocked(m)
		c.tryCompleteJoinLocked(g)
		return nil, wait
	case stateCompletingRebalance:
		// The member lost our JoinGroup answer: send it again unless its
		// subscription changed, which needs a new rebalance.
		if sameProtocols(m.protocols, req.Protocols) {
			c.scheduleSessionLocked(g, m)
			return c.joinResponseLocked(g, m), nil
		}
		update(m)
		wait := c.parkJoinLocked(m)
		c.prepareRebalanceLocked(g, fmt.Sprintf("updating metadata for member %s during CompletingRebalance", m.id))
		return nil, wait
	case stateStable:
		// The leader rejoining forces a rebalance, so that it can react to
		// changes the member metadata does not show (new partitions).
		if m.id != g.leader && sameProtocols(m.protocols, req.Protocols) {
			c.scheduleSessionLocked(g, m)
			return c.joinResponseLocked(g, m), nil
		}
		update(m)
		wait := c.parkJoinLocked(m)
		c.prepareRebalanceLocked(g, fmt.Sprintf("leader or member %s rejoined with new metadata", m.id))
		return nil, wait
	default:
		return joinError(m.id, codeUnknownMemberID), nil
	}
}

func (c *Coordinator) parkJoinLocked(m *member) chan *kmsg.JoinGroupResponse {
	// A JoinGroup parked earlier for the same member came from a client
	// that gave up on it; it gets an answer so its handler can return.
	m.answerJoin(joinError(m.id, codeRebalanceInProgress))
	m.joinWait = make(chan *kmsg.JoinGroupResponse, 1)
	return m.joinWait
}

// addMemberLocked adds a new member, parked in JoinGroup, and starts or
// joins a rebalance.
func (c *Coordinator) addMemberLocked(g *group, m *member) chan *kmsg.JoinGroupResponse {
	if len(g.members) == 0 {
		g.protocolType = m.protocolType
	}
	g.members[m.id] = m
	if m.instanceID != nil {
		g.static[*m.instanceID] = m.id
	}
	if g.leader == "" {
		g.leader = m.id
	}
	g.newMemberAdded = true
	wait := c.parkJoinLocked(m)
	c.scheduleSessionLocked(g, m)
	switch g.state {
	case stateEmpty, stateStable, stateCompletingRebalance:
		c.prepareRebalanceLocked(g, "adding new member "+m.id)
	case statePreparingRebalance:
		c.tryCompleteJoinLocked(g)
	}
	return wait
}

// addPendingLocked remembers a member id handed out with
// MEMBER_ID_REQUIRED; the member has a session timeout to come back with it.
func (c *Coordinator) addPendingLocked(g *group, id string, sessionTimeoutMs int32) {
	pm := &pendingMember{}
	g.pending[id] = pm
	pm.timer = c.clock.AfterFunc(msDuration(int64(sessionTimeoutMs)), func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if !c.liveLocked(g) || g.pending[id] != pm {
			return
		}
		delete(g.pending, id)
		c.logger.Info(fmt.Sprintf("Pending member %s in group %s has been removed after session timeout expiration", id, g.id))
		c.tryCompleteJoinLocked(g)
		c.forgetIfUnusedLocked(g)
	})
}

// replaceStaticLocked gives a static member a new member id, fencing the
// old one: its parked requests get FENCED_INSTANCE_ID.
func (c *Coordinator) replaceStaticLocked(g *group, old *member, newID string) *member {
	stopTimer(old.sessionTimer)
	old.answerJoin(joinError(old.id, codeFencedInstanceID))
	old.answerSync(syncError(codeFencedInstanceID))
	delete(g.members, old.id)
	m := &member{
		id:                 newID,
		instanceID:         old.instanceID,
		clientID:           old.clientID,
		clientHost:         old.clientHost,
		sessionTimeoutMs:   old.sessionTimeoutMs,
		rebalanceTimeoutMs: old.rebalanceTimeoutMs,
		protocolType:       old.protocolType,
		protocols:          old.protocols,
		assignment:         old.assignment,
	}
	g.members[newID] = m
	g.static[*m.instanceID] = newID
	if g.leader == old.id {
		g.leader = newID
	}
	if g.syncPending[old.id] {
		delete(g.syncPending, old.id)
		g.syncPending[newID] = true
	}
	c.scheduleSessionLocked(g, m)
	c.logger.Info(fmt.Sprintf("Static member %s of group %s with unknown member id rejoins, assigning new member id %s", *m.instanceID, g.id, newID))
	return m
}

// forgetIfUnusedLocked drops a group that a JoinGroup created but that never
// got a member, a generation or an offset, so that clients which gave up
// after MEMBER_ID_REQUIRED leave nothing behind.
func (c *Coordinator) forgetIfUnusedLocked(g *group) {
	if g.state == stateEmpty && g.generation == 0 && len(g.members) == 0 && len(g.pending) == 0 && len(g.offsets) == 0 {
		delete(c.groups, g.id)
	}
}
