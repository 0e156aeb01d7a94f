package server

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeGroups: v0-v6
//
// Behaviour:
//   - Handed to Groups.DescribeGroups: state, protocol and members of each
//     named group; before v6 unknown groups are described as Dead with no
//     error, as Kafka does.
//
// Version notes: v1 ThrottleMillis; v3 authorized operations; v4 group
// instance ids; v5 flexible; v6 per-group ErrorMessage (KIP-1043), and
// unknown groups become GROUP_ID_NOT_FOUND.

func init() {
	register(api{key: 15, min: 0, max: 6, needs: needGroups, handle: handleDescribeGroups, fail: failDescribeGroups})
}

func handleDescribeGroups(s *Server, r *request) (kmsg.Response, error) {
	resp := s.backend.Groups.DescribeGroups(s.groupCtx(r), r.kreq.(*kmsg.DescribeGroupsRequest))
	if resp == nil {
		return nil, errNoResponse
	}
	for _, g := range resp.Groups {
		r.noteError(g.ErrorCode)
	}
	return resp, nil
}

func failDescribeGroups(req kmsg.Request, code int16) kmsg.Response {
	dreq := req.(*kmsg.DescribeGroupsRequest)
	resp := dreq.ResponseKind().(*kmsg.DescribeGroupsResponse)
	for _, g := range dreq.Groups {
		rg := kmsg.NewDescribeGroupsResponseGroup()
		rg.Group, rg.ErrorCode = g, code
		resp.Groups = append(resp.Groups, rg)
	}
	return resp
}
