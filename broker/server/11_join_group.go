package server

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

// JoinGroup: v0-v9
//
// Behaviour:
//   - Handed to Groups.JoinGroup (classic group protocol). The request may
//     be held by the coordinator until the rebalance completes (up to the
//     rebalance timeout), which only delays this connection's later
//     responses: requests of a connection run concurrently.
//   - v4+: a new member without an id gets MEMBER_ID_REQUIRED and its
//     assigned id, and joins again (KIP-394) — Groups' decision.
//
// Version notes: v1 rebalance timeout; v2 ThrottleMillis; v4 member id
// required; v5 group instance id (static membership); v6 flexible; v7
// protocol type in the response; v8 reason; v9 SkipAssignment.

func init() {
	register(api{key: 11, min: 0, max: 9, needs: needGroups, handle: handleJoinGroup, fail: failJoinGroup})
}

func handleJoinGroup(s *Server, r *request) (kmsg.Response, error) {
	resp := s.backend.Groups.JoinGroup(s.groupCtx(r), r.kreq.(*kmsg.JoinGroupRequest))
	if resp == nil {
		return nil, errNoResponse
	}
	r.noteError(resp.ErrorCode)
	return resp, nil
}

func failJoinGroup(req kmsg.Request, code int16) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
	resp.ErrorCode, resp.Generation = code, -1
	return resp
}
