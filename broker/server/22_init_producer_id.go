package server

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

// InitProducerId: v0-v4
//
// Behaviour:
//   - An idempotent producer (null TransactionalID) is handed to
//     Controller.InitProducerID: a fresh producer id and epoch 0. A
//     transactional id goes to Txns.InitProducerID (the transaction
//     coordinator bumps its epoch, fencing older incarnations); without
//     Txns it is the Controller's to refuse.
//   - Without this API kgo silently produces without idempotence, so it is
//     only advertised when a Controller is wired.
//
// Version notes: v2 flexible; v3 ProducerID and ProducerEpoch in the
// request (KIP-360 epoch bump); v4 PRODUCER_FENCED. v5 (KIP-890) is not
// served.

func init() {
	register(api{key: 22, min: 0, max: 4, needs: needController, handle: handleInitProducerID, fail: failInitProducerID})
}

func handleInitProducerID(s *Server, r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.InitProducerIDRequest)
	var resp *kmsg.InitProducerIDResponse
	if req.TransactionalID != nil && *req.TransactionalID != "" && s.backend.Txns != nil {
		resp = s.backend.Txns.InitProducerID(r.ctx, req)
	} else {
		resp = s.backend.Controller.InitProducerID(r.ctx, req)
	}
	if resp == nil {
		return nil, errNoResponse
	}
	r.noteError(resp.ErrorCode)
	return resp, nil
}

func failInitProducerID(req kmsg.Request, code int16) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	resp.ErrorCode, resp.ProducerID, resp.ProducerEpoch = code, -1, -1
	return resp
}
