package server

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

// IncrementalAlterConfigs: v0-v1
//
// Behaviour:
//   - Handed whole to Controller.IncrementalAlterConfigs (forwarded to the
//     active controller). Topic configs only: SET, DELETE (back to the
//     broker default), and APPEND and SUBTRACT on list configs
//     (cleanup.policy), which start from the broker default when the
//     topic has no override. Each resource succeeds or fails whole and on
//     its own: UNKNOWN_TOPIC_OR_PARTITION, INVALID_CONFIG (bad value,
//     unknown name, APPEND to a non-list), INVALID_REQUEST (null value,
//     a name or resource given twice, broker resources: configs come from
//     server.properties only). ValidateOnly changes nothing.
//   - Setting unclean.leader.election.enable to true elects the topic's
//     leaderless partitions at once (Kafka's KRaft controller does it at
//     its next periodic unclean-election check, its ZooKeeper controller
//     did it at once). DELETE of a config the topic does not set succeeds
//     and changes nothing, as in Kafka. The whole set of overrides a topic
//     ends with must be one its brokers can apply (INVALID_CONFIG).
//
// Version notes: v1 flexible.

func init() {
	register(api{key: 44, min: 0, max: 1, needs: needController, handle: handleIncrementalAlterConfigs, fail: failIncrementalAlterConfigs})
}

func handleIncrementalAlterConfigs(s *Server, r *request) (kmsg.Response, error) {
	resp := s.backend.Controller.IncrementalAlterConfigs(r.ctx, r.kreq.(*kmsg.IncrementalAlterConfigsRequest))
	if resp == nil {
		return nil, errNoResponse
	}
	for _, rr := range resp.Resources {
		r.noteError(rr.ErrorCode)
	}
	return resp, nil
}

func failIncrementalAlterConfigs(req kmsg.Request, code int16) kmsg.Response {
	ireq := req.(*kmsg.IncrementalAlterConfigsRequest)
	resp := ireq.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
	for _, res := range ireq.Resources {
		rr := kmsg.NewIncrementalAlterConfigsResponseResource()
		rr.ResourceType, rr.ResourceName, rr.ErrorCode = res.ResourceType, res.ResourceName, code
		resp.Resources = append(resp.Resources, rr)
	}
	return resp
}
