package server

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

// EndTxn: v0-v5
//
// Behaviour:
//   - Handed to Txns.EndTxn: the decision (PrepareCommit or PrepareAbort)
//     is committed in __transaction_state before the answer, as in Kafka;
//     the markers follow, and the producer's next request on the
//     transactional id waits (bounded) for them.
//   - A retry of an EndTxn that took effect succeeds; the other outcome
//     is INVALID_TXN_STATE. Under v5 an EndTxn at the bumped epoch while
//     the markers of the last transaction are still being written (the
//     next transaction's, ended at once) is CONCURRENT_TRANSACTIONS,
//     which clients retry.
//   - v5 (KIP-890 part 2) bumps the producer epoch at every end and
//     returns the new one, so a delayed EndTxn of an earlier transaction
//     is fenced. Clients use v5 when the transaction.version feature is
//     finalized at 2 (ApiVersions; faultline.transaction.version, default
//     2), with Produce v12 and TxnOffsetCommit v5 adding the partitions.
//
// Version notes: v1 nothing new; v2 PRODUCER_FENCED; v3 flexible; v4
// TRANSACTION_ABORTABLE; v5 ProducerID and ProducerEpoch in the response.

func init() {
	register(api{key: 26, min: 0, max: 5, needs: needTxns, handle: handleEndTxn, fail: failEndTxn})
}

func handleEndTxn(s *Server, r *request) (kmsg.Response, error) {
	resp := s.backend.Txns.EndTxn(r.ctx, r.kreq.(*kmsg.EndTxnRequest))
	if resp == nil {
		return nil, errNoResponse
	}
	r.noteError(resp.ErrorCode)
	return resp, nil
}

func failEndTxn(req kmsg.Request, code int16) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.EndTxnResponse)
	resp.ErrorCode, resp.ProducerID, resp.ProducerEpoch = code, -1, -1
	return resp
}
