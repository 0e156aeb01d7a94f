package group

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// LeaveGroup (key 13, v0-v5) removes members: one by member id before v3,
// a batch of member ids or group.instance.ids from v3 on, each with its own
// error code. A departure from a Stable group starts a rebalance.
func (c *Coordinator) LeaveGroup(_ context.Context, req *kmsg.LeaveGroupRequest) *kmsg.LeaveGroupResponse {
	resp := kmsg.NewPtrLeaveGroupResponse()
	resp.Version = req.Version
	leaving := req.Members
	if req.Version < 3 {
		lm := kmsg.NewLeaveGroupRequestMember()
		lm.MemberID = req.MemberID
		leaving = []kmsg.LeaveGroupRequestMember{lm}
	}
	top, codes := c.leave(req.Group, leaving)
	resp.ErrorCode = top
	if req.Version < 3 {
		if top == codeNone && len(codes) == 1 {
			resp.ErrorCode = codes[0]
		}
		return resp
	}
	if top != codeNone {
		return resp
	}
	for i, lm := range leaving {
		rm := kmsg.NewLeaveGroupResponseMember()
		rm.MemberID = lm.MemberID
		rm.InstanceID = lm.InstanceID
		rm.ErrorCode = codes[i]
		resp.Members = append(resp.Members, rm)
	}
	return resp
}

func (c *Coordinator) leave(groupID string, leaving []kmsg.LeaveGroupRequestMember) (int16, []int16) {
	if groupID == "" {
		return codeInvalidGroupID, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, code := c.ownerLocked(groupID); code != codeNone {
		return code, nil
	}
	codes := make([]int16, len(leaving))
	g := c.groups[groupID]
	for i, lm := range leaving {
		if g == nil {
			codes[i] = codeUnknownMemberID
			continue
		}
		codes[i] = c.leaveOneLocked(g, lm)
	}
	return codeNone, codes
}

func (c *Coordinator) leaveOneLocked(g *group, lm kmsg.LeaveGroupRequestMember) int16 {
	if lm.InstanceID != nil {
		id, ok := g.static[*lm.InstanceID]
		switch {
		case !ok:
			return codeUnknownMemberID
		case lm.MemberID != "" && lm.MemberID != id:
			return codeFencedInstanceID
		}
		m := g.members[id]
		if m == nil {
			return codeUnknownMemberID
		}
		c.removeMemberLocked(g, m, codeUnknownMemberID)
		return codeNone
	}
	if pm := g.pending[lm.MemberID]; pm != nil {
		stopTimer(pm.timer)
		delete(g.pending, lm.MemberID)
		c.tryCompleteJoinLocked(g)
		return codeNone
	}
	m := g.members[lm.MemberID]
	if m == nil {
		return codeUnknownMemberID
	}
	c.removeMemberLocked(g, m, codeUnknownMemberID)
	return codeNone
}
