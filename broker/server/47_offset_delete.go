package server

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

// OffsetDelete: v0
//
// Behaviour:
//   - Handed to Groups.OffsetDelete: the group's committed offsets of the
//     named partitions are deleted (tombstoned in __consumer_offsets)
//     unless a member of the group subscribes to the topic
//     (GROUP_SUBSCRIBED_TO_TOPIC); group-level errors (NOT_COORDINATOR,
//     COORDINATOR_LOAD_IN_PROGRESS, GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP,
//     INVALID_GROUP_ID) in the top-level error code.

func init() {
	register(api{key: 47, min: 0, max: 0, needs: needGroups, handle: handleOffsetDelete, fail: failOffsetDelete})
}

func handleOffsetDelete(s *Server, r *request) (kmsg.Response, error) {
	resp := s.backend.Groups.OffsetDelete(s.groupCtx(r), r.kreq.(*kmsg.OffsetDeleteRequest))
	if resp == nil {
		return nil, errNoResponse
	}
	r.noteError(resp.ErrorCode)
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			r.noteError(p.ErrorCode)
		}
	}
	return resp, nil
}

func failOffsetDelete(req kmsg.Request, code int16) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.OffsetDeleteResponse)
	resp.ErrorCode = code
	return resp
}
