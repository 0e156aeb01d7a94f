package server

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

// AlterConfigs: v0-v2
//
// Behaviour:
//   - Handed whole to Controller.AlterConfigs (forwarded to the active
//     controller). The legacy request: each topic's configs become its
//     whole set of overrides, and the overrides it leaves out return to
//     the broker defaults. A missing topic is UNKNOWN_TOPIC_OR_PARTITION,
//     a bad value or unknown name INVALID_CONFIG, a null value, a name or
//     resource given twice, and broker resources (configs come from
//     server.properties only) INVALID_REQUEST. ValidateOnly changes
//     nothing.
//   - The brokers apply a change when the metadata carrying it reaches
//     them: the logs take the new settings (retention, segment sizes,
//     cleanup.policy, ...), leaders the new min.insync.replicas.
//
// Version notes: v1 nothing new; v2 flexible.

func init() {
	register(api{key: 33, min: 0, max: 2, needs: needController, handle: handleAlterConfigs, fail: failAlterConfigs})
}

func handleAlterConfigs(s *Server, r *request) (kmsg.Response, error) {
	resp := s.backend.Controller.AlterConfigs(r.ctx, r.kreq.(*kmsg.AlterConfigsRequest))
	if resp == nil {
		return nil, errNoResponse
	}
	for _, rr := range resp.Resources {
		r.noteError(rr.ErrorCode)
	}
	return resp, nil
}

func failAlterConfigs(req kmsg.Request, code int16) kmsg.Response {
	areq := req.(*kmsg.AlterConfigsRequest)
	resp := areq.ResponseKind().(*kmsg.AlterConfigsResponse)
	for _, res := range areq.Resources {
		rr := kmsg.NewAlterConfigsResponseResource()
		rr.ResourceType, rr.ResourceName, rr.ErrorCode = res.ResourceType, res.ResourceName, code
		resp.Resources = append(resp.Resources, rr)
	}
	return resp
}
