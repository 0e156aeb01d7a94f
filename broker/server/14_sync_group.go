package server

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

// SyncGroup: v0-v5
//
// Behaviour:
//   - Handed to Groups.SyncGroup: the leader's assignments are stored and
//     each member gets its own; followers may be held until the leader
//     syncs.
//
// Version notes: v1 ThrottleMillis; v3 group instance id; v4 flexible; v5
// protocol type and name.

func init() {
	register(api{key: 14, min: 0, max: 5, needs: needGroups, handle: handleSyncGroup, fail: failSyncGroup})
}

func handleSyncGroup(s *Server, r *request) (kmsg.Response, error) {
	resp := s.backend.Groups.SyncGroup(s.groupCtx(r), r.kreq.(*kmsg.SyncGroupRequest))
	if resp == nil {
		return nil, errNoResponse
	}
	r.noteError(resp.ErrorCode)
	return resp, nil
}

func failSyncGroup(req kmsg.Request, code int16) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.SyncGroupResponse)
	resp.ErrorCode = code
	return resp
}
