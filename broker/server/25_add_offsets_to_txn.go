package server

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

// AddOffsetsToTxn: v0-v3
//
// Behaviour:
//   - Handed to Txns.AddOffsetsToTxn: the group's __consumer_offsets
//     partition joins the transaction, so the transaction's marker also
//     ends the offsets the producer commits with TxnOffsetCommit.
//
// Version notes: v1 nothing new; v2 PRODUCER_FENCED; v3 flexible. v4
// (KIP-890) is not served.

func init() {
	register(api{key: 25, min: 0, max: 3, needs: needTxns, handle: handleAddOffsetsToTxn, fail: failAddOffsetsToTxn})
}

func handleAddOffsetsToTxn(s *Server, r *request) (kmsg.Response, error) {
	resp := s.backend.Txns.AddOffsetsToTxn(r.ctx, r.kreq.(*kmsg.AddOffsetsToTxnRequest))
	if resp == nil {
		return nil, errNoResponse
	}
	r.noteError(resp.ErrorCode)
	return resp, nil
}

func failAddOffsetsToTxn(req kmsg.Request, code int16) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.AddOffsetsToTxnResponse)
	resp.ErrorCode = code
	return resp
}
