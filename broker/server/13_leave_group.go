package server

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

// LeaveGroup: v0-v5
//
// Behaviour:
//   - Handed to Groups.LeaveGroup. v0-v2 name one member (MemberID), v3+ a
//     batch (Members, KIP-345); Groups reads the field of the version.
//
// Version notes: v1 ThrottleMillis; v3 batched members; v4 flexible; v5
// reason.

func init() {
	register(api{key: 13, min: 0, max: 5, needs: needGroups, handle: handleLeaveGroup, fail: failLeaveGroup})
}

func handleLeaveGroup(s *Server, r *request) (kmsg.Response, error) {
	resp := s.backend.Groups.LeaveGroup(s.groupCtx(r), r.kreq.(*kmsg.LeaveGroupRequest))
	if resp == nil {
		return nil, errNoResponse
	}
	r.noteError(resp.ErrorCode)
	for _, m := range resp.Members {
		r.noteError(m.ErrorCode)
	}
	return resp, nil
}

func failLeaveGroup(req kmsg.Request, code int16) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.LeaveGroupResponse)
	resp.ErrorCode = code
	return resp
}
