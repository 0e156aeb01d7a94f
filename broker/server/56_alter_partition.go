package server

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

// AlterPartition: v0-v3
//
// Behaviour:
//   - Sent by a partition leader to the active controller to shrink or
//     expand the ISR; handed to ControllerAPIs.HandleAlterPartition, which
//     answers NOT_CONTROLLER, STALE_BROKER_EPOCH, FENCED_LEADER_EPOCH,
//     INVALID_UPDATE_VERSION, INELIGIBLE_REPLICA per partition.
//
// Version notes: v1 LeaderRecoveryState; v2 topic ids; v3 broker epochs in
// the new ISR.

func init() {
	register(api{key: 56, min: 0, max: 3, needs: needControllerAPIs, handle: handleAlterPartition, fail: failAlterPartition})
}

func handleAlterPartition(s *Server, r *request) (kmsg.Response, error) {
	resp := s.backend.ControllerAPIs.HandleAlterPartition(r.ctx, r.kreq.(*kmsg.AlterPartitionRequest))
	if resp == nil {
		return nil, errNoResponse
	}
	r.noteError(resp.ErrorCode)
	return resp, nil
}

func failAlterPartition(req kmsg.Request, code int16) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.AlterPartitionResponse)
	resp.ErrorCode = code
	return resp
}
