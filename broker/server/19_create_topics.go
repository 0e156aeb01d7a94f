package server

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// CreateTopics: v0-v7
//
// Behaviour:
//   - Handed whole to Controller.CreateTopics, which validates (names,
//     counts, assignments, configs), honours ValidateOnly (v1+) and fills
//     every topic's error; the server only sets the response version.
//   - NumPartitions and ReplicationFactor of -1 (v4+) mean the broker
//     defaults; kadm's CreateTopics with -1/-1 needs v4+.
//
// Version notes: v1 ValidateOnly, ErrorMessage; v4 -1 defaults; v5
// flexible, the created topic's partitions, replication factor and
// configs in the response; v7 topic id in the response.

func init() {
	register(api{key: 19, min: 0, max: 7, needs: needController, handle: handleCreateTopics, fail: failCreateTopics})
}

var errNoResponse = errors.New("backend returned no response")

func handleCreateTopics(s *Server, r *request) (kmsg.Response, error) {
	resp := s.backend.Controller.CreateTopics(r.ctx, r.kreq.(*kmsg.CreateTopicsRequest))
	if resp == nil {
		return nil, errNoResponse
	}
	for _, t := range resp.Topics {
		r.noteError(t.ErrorCode)
	}
	return resp, nil
}

func failCreateTopics(req kmsg.Request, code int16) kmsg.Response {
	creq := req.(*kmsg.CreateTopicsRequest)
	resp := creq.ResponseKind().(*kmsg.CreateTopicsResponse)
	for _, t := range creq.Topics {
		rt := kmsg.NewCreateTopicsResponseTopic()
		rt.Topic, rt.ErrorCode = t.Topic, code
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}
