package server

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DeleteTopics: v0-v6
//
// Behaviour:
//   - Handed to Controller.DeleteTopics, which fills every topic's error
//     (UNKNOWN_TOPIC_OR_PARTITION, UNKNOWN_TOPIC_ID, ...).
//   - Before that the server makes the two request shapes uniform: v0-v5
//     names are also listed in Topics, and v6 topics named only by id get
//     their name from the image when it knows the id, so the Controller
//     may read Topics alone at every version.
//
// Version notes: v1 ThrottleMillis; v4 flexible; v5 ErrorMessage; v6
// topics by name or id.

func init() {
	register(api{key: 20, min: 0, max: 6, needs: needController | needMetadata, handle: handleDeleteTopics, fail: failDeleteTopics})
}

func handleDeleteTopics(s *Server, r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.DeleteTopicsRequest)
	if req.Version < 6 {
		req.Topics = req.Topics[:0]
		for _, n := range req.TopicNames {
			t := kmsg.NewDeleteTopicsRequestTopic()
			name := n
			t.Topic = &name
			req.Topics = append(req.Topics, t)
		}
	} else if img := s.backend.Metadata.Image(); img != nil {
		for i := range req.Topics {
			if req.Topics[i].Topic == nil {
				if t := img.TopicsByID[req.Topics[i].TopicID]; t != nil {
					name := t.Name
					req.Topics[i].Topic = &name
				}
			}
		}
	}
	resp := s.backend.Controller.DeleteTopics(r.ctx, req)
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
