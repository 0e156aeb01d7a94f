package server

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
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
//   - v5+ under transaction.version 2 (KIP-890 part 2): the group's
//     offsets partition is put in the producer's transaction at its
//     coordinator first (TxnAdder; the client sends no AddOffsetsToTxn),
//     with Produce's mapping of a moving or busy coordinator, here to
//     COORDINATOR_NOT_AVAILABLE, which clients retry.
//
// Version notes: v2 LeaderEpoch; v3 flexible, member and generation;
// v4 nothing new; v5 implicit AddOffsetsToTxn (same wire). v6 (topic
// ids) is not served.

func init() {
	register(api{key: 28, min: 0, max: 5, needs: needGroups | needTxnOffsets, handle: handleTxnOffsetCommit, fail: failTxnOffsetCommit})
}

func handleTxnOffsetCommit(s *Server, r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.TxnOffsetCommitRequest)
	var resp *kmsg.TxnOffsetCommitResponse
	if code := s.addOffsetsToTxn(r.ctx, req); code != 0 {
		resp = failTxnOffsetCommit(req, code).(*kmsg.TxnOffsetCommitResponse)
	} else if resp = txnOffsets(&s.backend).TxnOffsetCommit(s.groupCtx(r), req); resp == nil {
		return nil, errNoResponse
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			r.noteError(p.ErrorCode)
		}
	}
	return resp, nil
}

// addOffsetsToTxn puts the group's offsets partition in the producer's
// transaction first, for a TxnOffsetCommit v5+ under transaction.version 2
// (KIP-890 part 2); 0 when the commit may go ahead. A moving or busy
// coordinator is COORDINATOR_NOT_AVAILABLE, which clients retry.
func (s *Server) addOffsetsToTxn(ctx context.Context, req *kmsg.TxnOffsetCommitRequest) int16 {
	if req.Version < 5 || !s.tv2() {
		return 0
	}
	code := s.backend.TxnAdder.AddTxnOffsets(ctx, req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Group)
	if coordinatorBusy(code) {
		return kerr.CoordinatorNotAvailable.Code
	}
	return code
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
