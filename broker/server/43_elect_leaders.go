package server

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ElectLeaders: v0-v2
//
// Behaviour:
//   - Handed whole to Controller.ElectLeaders (forwarded to the active
//     controller), which runs preferred (type 0) or unclean (type 1)
//     elections, commits the leader changes and fills every partition's
//     error: ELECTION_NOT_NEEDED, PREFERRED_LEADER_NOT_AVAILABLE,
//     ELIGIBLE_LEADERS_NOT_AVAILABLE, UNKNOWN_TOPIC_OR_PARTITION. Null
//     topics elect every partition that needs it and list every topic,
//     with only the partitions that needed an election.
//
// Version notes: v1 ElectionType and a top-level ErrorCode (v0 is a
// preferred election); v2 flexible.

func init() {
	register(api{key: 43, min: 0, max: 2, needs: needController, handle: handleElectLeaders, fail: failElectLeaders})
}

func handleElectLeaders(s *Server, r *request) (kmsg.Response, error) {
	resp := s.backend.Controller.ElectLeaders(r.ctx, r.kreq.(*kmsg.ElectLeadersRequest))
	if resp == nil {
		return nil, errNoResponse
	}
	r.noteError(resp.ErrorCode)
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if p.ErrorCode != kerr.ElectionNotNeeded.Code {
				r.noteError(p.ErrorCode)
			}
		}
	}
	return resp, nil
}

func failElectLeaders(req kmsg.Request, code int16) kmsg.Response {
	ereq := req.(*kmsg.ElectLeadersRequest)
	resp := ereq.ResponseKind().(*kmsg.ElectLeadersResponse)
	resp.ErrorCode = code
	for _, t := range ereq.Topics {
		rt := kmsg.NewElectLeadersResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewElectLeadersResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p, code
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}
