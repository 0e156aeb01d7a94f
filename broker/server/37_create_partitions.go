package server

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

// CreatePartitions: v0-v3
//
// Behaviour:
//   - Handed whole to Controller.CreatePartitions, which validates the new
//     count (only growth) and assignments, honours ValidateOnly and fills
//     every topic's error.
//
// Version notes: v2 flexible; v3 is v2 (Kafka bumped it for a fix).

func init() {
	register(api{key: 37, min: 0, max: 3, needs: needController, handle: handleCreatePartitions, fail: failCreatePartitions})
}

func handleCreatePartitions(s *Server, r *request) (kmsg.Response, error) {
	resp := s.backend.Controller.CreatePartitions(r.ctx, r.kreq.(*kmsg.CreatePartitionsRequest))
	if resp == nil {
		return nil, errNoResponse
	}
	for _, t := range resp.Topics {
		r.noteError(t.ErrorCode)
	}
	return resp, nil
}

func failCreatePartitions(req kmsg.Request, code int16) kmsg.Response {
	creq := req.(*kmsg.CreatePartitionsRequest)
	resp := creq.ResponseKind().(*kmsg.CreatePartitionsResponse)
	for _, t := range creq.Topics {
		rt := kmsg.NewCreatePartitionsResponseTopic()
		rt.Topic, rt.ErrorCode = t.Topic, code
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}
