package server

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// OffsetForLeaderEpoch: v0-v4
//
// Behaviour:
//   - Per partition Replicas.OffsetForLeaderEpoch: the largest epoch at or
//     below the requested one and the offset where it ended on this
//     leader (consumers use it to detect truncation after a leader change,
//     followers to truncate).
//   - A topic or partition missing from the image is
//     UNKNOWN_TOPIC_OR_PARTITION; epoch fencing is Replicas'.
//   - ReplicaID (v3+) is not passed on: consumers and followers get the
//     same answer from a leader.
//
// Version notes: v1 leader epoch in the response; v2 current leader epoch
// in the request; v3 ReplicaID; v4 flexible.

func init() {
	register(api{key: 23, min: 0, max: 4, needs: needMetadata | needReplicas, handle: handleOffsetForLeaderEpoch, fail: failOffsetForLeaderEpoch})
}

func handleOffsetForLeaderEpoch(s *Server, r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.OffsetForLeaderEpochRequest)
	resp := req.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
	img := s.backend.Metadata.Image()
	for _, t := range req.Topics {
		rt := kmsg.NewOffsetForLeaderEpochResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
			rp.Partition, rp.LeaderEpoch, rp.EndOffset = p.Partition, -1, -1
			if img.Partition(t.Topic, p.Partition) == nil {
				rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			} else {
				current := p.CurrentLeaderEpoch
				if req.Version < 2 {
					current = -1
				}
				rp.LeaderEpoch, rp.EndOffset, rp.ErrorCode = s.backend.Replicas.OffsetForLeaderEpoch(r.ctx, t.Topic, p.Partition, current, p.LeaderEpoch)
			}
			r.noteError(rp.ErrorCode)
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}

func failOffsetForLeaderEpoch(req kmsg.Request, code int16) kmsg.Response {
	oreq := req.(*kmsg.OffsetForLeaderEpochRequest)
	resp := oreq.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
	for _, t := range oreq.Topics {
		rt := kmsg.NewOffsetForLeaderEpochResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
			rp.Partition, rp.ErrorCode, rp.LeaderEpoch, rp.EndOffset = p.Partition, code, -1, -1
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}
