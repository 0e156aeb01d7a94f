package server

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ListGroups: v0-v5
//
// Behaviour:
//   - Handed to Groups.ListGroups: the groups this coordinator owns, with
//     their state (v4+) and type (v5+, always "classic"), filtered by
//     StatesFilter and TypesFilter when given.
//
// Version notes: v1 ThrottleMillis; v3 flexible; v4 states and the states
// filter; v5 group types and the types filter (KIP-848).

func init() {
	register(api{key: 16, min: 0, max: 5, needs: needGroups, handle: handleListGroups, fail: failListGroups})
}

func handleListGroups(s *Server, r *request) (kmsg.Response, error) {
	resp := s.backend.Groups.ListGroups(s.groupCtx(r), r.kreq.(*kmsg.ListGroupsRequest))
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
