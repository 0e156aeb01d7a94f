package server

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

// AddPartitionsToTxn: v0-v3
//
// Behaviour:
//   - Handed to Txns.AddPartitionsToTxn: the partitions join the
//     transaction (starting it when none is open) once the coordinator's
//     record of them is committed in __transaction_state.
//   - Partitions missing from the image fail with
//     UNKNOWN_TOPIC_OR_PARTITION and the rest of the request with
//     OPERATION_NOT_ATTEMPTED; CONCURRENT_TRANSACTIONS while the previous
//     transaction's markers are being written.
//
//   - v4 (KIP-890, the brokers' form): several transactions in one
//     request, results per transaction; an entry with VerifyOnly is only
//     checked (the partitions must be in the producer's open transaction,
//     KIP-890 part 1) and changes nothing.
//
// Version notes: v1 nothing new; v2 PRODUCER_FENCED; v3 flexible; v4
// batched, VerifyOnly. v5 (TRANSACTION_ABORTABLE) is not served.

func init() {
	register(api{key: 24, min: 0, max: 4, needs: needTxns, handle: handleAddPartitionsToTxn, fail: failAddPartitionsToTxn})
}

func handleAddPartitionsToTxn(s *Server, r *request) (kmsg.Response, error) {
	resp := s.backend.Txns.AddPartitionsToTxn(r.ctx, r.kreq.(*kmsg.AddPartitionsToTxnRequest))
	if resp == nil {
		return nil, errNoResponse
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			r.noteError(p.ErrorCode)
		}
	}
	for _, tx := range resp.Transactions {
		for _, t := range tx.Topics {
			for _, p := range t.Partitions {
				r.noteError(p.ErrorCode)
			}
		}
	}
	return resp, nil
}

func failAddPartitionsToTxn(req kmsg.Request, code int16) kmsg.Response {
	areq := req.(*kmsg.AddPartitionsToTxnRequest)
	resp := areq.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
	resp.ErrorCode = code
	for _, tx := range areq.Transactions {
		rtx := kmsg.NewAddPartitionsToTxnResponseTransaction()
		rtx.TransactionalID = tx.TransactionalID
		for _, t := range tx.Topics {
			rt := kmsg.NewAddPartitionsToTxnResponseTransactionTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewAddPartitionsToTxnResponseTransactionTopicPartition()
				rp.Partition, rp.ErrorCode = p, code
				rt.Partitions = append(rt.Partitions, rp)
			}
			rtx.Topics = append(rtx.Topics, rt)
		}
		resp.Transactions = append(resp.Transactions, rtx)
	}
	for _, t := range areq.Topics {
		rt := kmsg.NewAddPartitionsToTxnResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p, code
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}
