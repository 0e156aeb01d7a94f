package server

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DeleteTopics: v0-v6
//
// Behaviour:
//   - Handed whole to Controller.DeleteTopics, which reads TopicNames
//     (v0-v5) and Topics (v6: each by name or by id) and fills every
//     topic's error (UNKNOWN_TOPIC_OR_PARTITION, UNKNOWN_TOPIC_ID, ...).
//
// Version notes: v1 ThrottleMillis; v4 flexible; v5 ErrorMessage; v6
// topics by name or id.

func init() {
	register(api{key: 20, min: 0, max: 6, needs: needController, handle: handleDeleteTopics, fail: failDeleteTopics})
}

func handleDeleteTopics(s *Server, r *request) (kmsg.Response, error) {
	resp := s.backend.Controller.DeleteTopics(r.ctx, r.kreq.(*kmsg.DeleteTopicsRequest))
	if resp == nil {
		return nil, errNoResponse
	}
	for _, t := range resp.Topics {
		r.noteError(t.ErrorCode)
	}
	return resp, nil
}
func failDeleteTopics(req kmsg.Request, code int16) kmsg.Response {
	dreq := req.(*kmsg.DeleteTopicsRequest)
	resp := dreq.ResponseKind().(*kmsg.DeleteTopicsResponse)
	for _, n := range dreq.TopicNames {
		rt := kmsg.NewDeleteTopicsResponseTopic()
		name := n
		rt.Topic, rt.ErrorCode = &name, code
		resp.Topics = append(resp.Topics, rt)
	}
	for _, t := range dreq.Topics {
		rt := kmsg.NewDeleteTopicsResponseTopic()
		rt.Topic, rt.TopicID, rt.ErrorCode = t.Topic, t.TopicID, code
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}
