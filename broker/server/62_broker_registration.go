package server

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

// BrokerRegistration: v0-v4
//
// Behaviour:
//   - A starting broker registers with the active controller (id,
//     incarnation, listeners, rack); handed to
//     ControllerAPIs.HandleBrokerRegistration, which answers the broker
//     epoch, NOT_CONTROLLER on a standby, DUPLICATE_BROKER_REGISTRATION when
//     another incarnation's session is alive.
//
// Version notes: all versions flexible; v1 IsMigratingZkBroker; v2 LogDirs;
// v3 PreviousBrokerEpoch (a quick clean restart keeps its epoch); v4
// unchanged on the wire (feature ranges).

func init() {
	register(api{key: 62, min: 0, max: 4, needs: needControllerAPIs, handle: handleBrokerRegistration, fail: failBrokerRegistration})
}

func handleBrokerRegistration(s *Server, r *request) (kmsg.Response, error) {
	resp := s.backend.ControllerAPIs.HandleBrokerRegistration(r.ctx, r.kreq.(*kmsg.BrokerRegistrationRequest))
	if resp == nil {
		return nil, errNoResponse
	}
	r.noteError(resp.ErrorCode)
	return resp, nil
}

func failBrokerRegistration(req kmsg.Request, code int16) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.BrokerRegistrationResponse)
	resp.ErrorCode = code
	resp.BrokerEpoch = -1
	return resp
}
