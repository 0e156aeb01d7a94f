package server

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeTransactions: v0
//
// Behaviour:
//   - Handed to Txns.DescribeTransactions: state, timeout, start time,
//     producer id and epoch and partitions of each transactional id this
//     broker coordinates; NOT_COORDINATOR for the others,
//     TRANSACTIONAL_ID_NOT_FOUND for unknown ids.

func init() {
	register(api{key: 65, min: 0, max: 0, needs: needTxns, handle: handleDescribeTransactions, fail: failDescribeTransactions})
}

func handleDescribeTransactions(s *Server, r *request) (kmsg.Response, error) {
	resp := s.backend.Txns.DescribeTransactions(r.ctx, r.kreq.(*kmsg.DescribeTransactionsRequest))
	if resp == nil {
		return nil, errNoResponse
	}
	for _, t := range resp.TransactionStates {
		r.noteError(t.ErrorCode)
	}
	return resp, nil
}

func failDescribeTransactions(req kmsg.Request, code int16) kmsg.Response {
	dreq := req.(*kmsg.DescribeTransactionsRequest)
	resp := dreq.ResponseKind().(*kmsg.DescribeTransactionsResponse)
	for _, id := range dreq.TransactionalIDs {
		ts := kmsg.NewDescribeTransactionsResponseTransactionState()
		ts.TransactionalID, ts.ErrorCode, ts.ProducerID, ts.ProducerEpoch = id, code, -1, -1
		resp.TransactionStates = append(resp.TransactionStates, ts)
	}
	return resp
}
