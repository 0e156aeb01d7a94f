package group

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Heartbeat (key 12, v0-v4) keeps a member's session alive and tells it
// when to rejoin: REBALANCE_IN_PROGRESS while the group prepares a
// rebalance, ILLEGAL_GENERATION for an old generation, UNKNOWN_MEMBER_ID for
// a member the group does not have.
func (c *Coordinator) Heartbeat(_ context.Context, req *kmsg.HeartbeatRequest) *kmsg.HeartbeatResponse {
	resp := kmsg.NewPtrHeartbeatResponse()
	resp.Version = req.Version
	resp.ErrorCode = c.heartbeat(req)
	return resp
}

func (c *Coordinator) heartbeat(req *kmsg.HeartbeatRequest) int16 {
	if req.Group == "" {
		return codeInvalidGroupID
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, code := c.ownerLocked(req.Group); code != codeNone {
		return code
	}
	g := c.groups[req.Group]
	if g == nil {
		return codeUnknownMemberID
	}
	m, code := g.checkMember(req.MemberID, req.InstanceID)
	if code != codeNone {
		return code
	}
	if req.Generation != g.generation {
		return codeIllegalGeneration
	}
	switch g.state {
	case statePreparingRebalance:
		c.scheduleSessionLocked(g, m)
		return codeRebalanceInProgress
	case stateCompletingRebalance, stateStable:
		c.scheduleSessionLocked(g, m)
		return codeNone
	default:
		return codeUnknownMemberID
	}
}
