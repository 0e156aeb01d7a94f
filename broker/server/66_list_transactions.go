package server

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ListTransactions: v0-v1
//
// Behaviour:
//   - Handed to Txns.ListTransactions: the transactional ids this broker
//     coordinates, filtered by state and producer id (and, v1, by how
//     long an open transaction has run); unknown state names come back in
//     UnknownStateFilters.
//
// Version notes: v1 DurationFilterMillis. v2 (id pattern) is not served.

func init() {
	register(api{key: 66, min: 0, max: 1, needs: needTxns, handle: handleListTransactions, fail: failListTransactions})
}

func handleListTransactions(s *Server, r *request) (kmsg.Response, error) {
	resp := s.backend.Txns.ListTransactions(r.ctx, r.kreq.(*kmsg.ListTransactionsRequest))
	if resp == nil {
		return nil, errNoResponse
	}
	r.noteError(resp.ErrorCode)
	return resp, nil
}

func failListTransactions(req kmsg.Request, code int16) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.ListTransactionsResponse)
	resp.ErrorCode = code
	return resp
}
