package server

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DeleteGroups: v0-v2
//
// Behaviour:
//   - Handed to Groups.DeleteGroups: each group without members is deleted
//     (its offsets and metadata tombstoned in __consumer_offsets); per
//     group NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS,
//     GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP or INVALID_GROUP_ID otherwise.
//
// Version notes: v1 is v0 (Kafka bumped it for throttling); v2 flexible.

func init() {
	register(api{key: 42, min: 0, max: 2, needs: needGroups, handle: handleDeleteGroups, fail: failDeleteGroups})
}

func handleDeleteGroups(s *Server, r *request) (kmsg.Response, error) {
	resp := s.backend.Groups.DeleteGroups(s.groupCtx(r), r.kreq.(*kmsg.DeleteGroupsRequest))
	if resp == nil {
		return nil, errNoResponse
	}
	for _, g := range resp.Groups {
		r.noteError(g.ErrorCode)
	}
	return resp, nil
}

func failDeleteGroups(req kmsg.Request, code int16) kmsg.Response {
	dreq := req.(*kmsg.DeleteGroupsRequest)
	resp := dreq.ResponseKind().(*kmsg.DeleteGroupsResponse)
	for _, id := range dreq.Groups {
		rg := kmsg.NewDeleteGroupsResponseGroup()
		rg.Group, rg.ErrorCode = id, code
		resp.Groups = append(resp.Groups, rg)
	}
	return resp
}
