package server

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

// BrokerHeartbeat: v0-v2
//
// Behaviour:
//   - A registered broker's periodic heartbeat with its metadata offset and
//     its wish to be fenced or to shut down; handed to
//     ControllerAPIs.HandleBrokerHeartbeat, which answers IsCaughtUp,
//     IsFenced and ShouldShutDown, or STALE_BROKER_EPOCH.
//
// Version notes: all versions flexible; v1 OfflineLogDirs; v2 unchanged on
// the wire.

func init() {
	register(api{key: 63, min: 0, max: 2, needs: needControllerAPIs, handle: handleBrokerHeartbeat, fail: failBrokerHeartbeat})
}

func handleBrokerHeartbeat(s *Server, r *request) (kmsg.Response, error) {
	resp := s.backend.ControllerAPIs.HandleBrokerHeartbeat(r.ctx, r.kreq.(*kmsg.BrokerHeartbeatRequest))
	if resp == nil {
		return nil, errNoResponse
	}
	r.noteError(resp.ErrorCode)
	return resp, nil
}

func failBrokerHeartbeat(req kmsg.Request, code int16) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.BrokerHeartbeatResponse)
	resp.ErrorCode = code
	resp.IsFenced = true
	return resp
}
