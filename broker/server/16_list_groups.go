package server

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ListGroups: v0-v4
//
// Behaviour:
//   - Handed to Groups.ListGroups: the groups this coordinator owns, with
//     their state (v4+), filtered by StatesFilter when given.
//
// Version notes: v1 ThrottleMillis; v3 flexible; v4 states and the states
// filter. v5 (group types, KIP-848) is not served.

func init() {
	register(api{key: 16, min: 0, max: 4, needs: needGroups, handle: handleListGroups, fail: failListGroups})
}

func handleListGroups(s *Server, r *request) (kmsg.Response, error) {
	resp := s.backend.Groups.ListGroups(r.ctx, r.kreq.(*kmsg.ListGroupsRequest))
	if resp == nil {
		return nil, errNoResponse
	}
	r.noteError(resp.ErrorCode)
	return resp, nil
}

func failListGroups(req kmsg.Request, code int16) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.ListGroupsResponse)
	resp.ErrorCode = code
	return resp
}
