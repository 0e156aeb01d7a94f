package server

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Heartbeat: v0-v4
//
// Behaviour:
//   - Handed to Groups.Heartbeat, which answers REBALANCE_IN_PROGRESS,
//     ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID and so on.
//
// Version notes: v1 ThrottleMillis; v3 group instance id; v4 flexible.

func init() {
	register(api{key: 12, min: 0, max: 4, needs: needGroups, handle: handleHeartbeat, fail: failHeartbeat})
}

func handleHeartbeat(s *Server, r *request) (kmsg.Response, error) {
	resp := s.backend.Groups.Heartbeat(s.groupCtx(r), r.kreq.(*kmsg.HeartbeatRequest))
	if resp == nil {
		return nil, errNoResponse
	}
	r.noteError(resp.ErrorCode)
	return resp, nil
}

func failHeartbeat(req kmsg.Request, code int16) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.HeartbeatResponse)
	resp.ErrorCode = code
	return resp
}
