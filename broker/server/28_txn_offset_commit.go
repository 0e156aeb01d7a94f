package server

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TxnOffsetCommit: v0-v4
//
// Behaviour:
//   - Handed to the group coordinator (Groups, when it takes
//     transactional offsets): the offsets are written to
//     __consumer_offsets as a transactional batch of the producer and
//     become the group's committed offsets when the transaction's COMMIT
//     marker reaches that partition (AddOffsetsToTxn put it in the
//     transaction); an abort drops them.
//   - v3+ checks the member and generation as OffsetCommit does.
//
// Version notes: v2 LeaderEpoch; v3 flexible, member and generation;
// v4 nothing new. v5 (KIP-890: implicit AddOffsetsToTxn) and v6 (topic
// ids) are not served.

func init() {
	register(api{key: 28, min: 0, max: 4, needs: needGroups | needTxnOffsets, handle: handleTxnOffsetCommit, fail: failTxnOffsetCommit})
}

func handleTxnOffsetCommit(s *Server, r *request) (kmsg.Response, error) {
	resp := txnOffsets(&s.backend).TxnOffsetCommit(s.groupCtx(r), r.kreq.(*kmsg.TxnOffsetCommitRequest))
	if resp == nil {
		return nil, errNoResponse
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			r.noteError(p.ErrorCode)
		}
	}
	return resp, nil
}

func failTxnOffsetCommit(req kmsg.Request, code int16) kmsg.Response {
	treq := req.(*kmsg.TxnOffsetCommitRequest)
	resp := treq.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
	for _, t := range treq.Topics {
		rt := kmsg.NewTxnOffsetCommitResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, code
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}
