package server

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ListOffsets: v1-v6
//
// Behaviour:
//   - Per partition Replicas.ListOffset: timestamp -2 is the log start
//     offset, -1 the high watermark (the LSO for read_committed),
//     otherwise the first offset whose timestamp is at or after it.
//   - A topic or partition missing from the image is
//     UNKNOWN_TOPIC_OR_PARTITION; leadership and epoch checks are
//     Replicas' (NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH, ...).
//   - v0 (several old-style offsets) is not served, nor v7+ (max
//     timestamp -3, tiered storage -4/-5, timeouts), which need answers
//     Replicas does not give.
//
// Version notes: v1 single offset and timestamp; v2 isolation level; v4
// current leader epoch in the request, leader epoch in the response; v6
// flexible.

func init() {
	register(api{key: 2, min: 1, max: 6, needs: needMetadata | needReplicas, handle: handleListOffsets, fail: failListOffsets})
}

func handleListOffsets(s *Server, r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.ListOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
	img := s.backend.Metadata.Image()
	isolation := req.IsolationLevel
	if req.Version < 2 {
		isolation = 0
	}
	for _, t := range req.Topics {
		rt := kmsg.NewListOffsetsResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewListOffsetsResponseTopicPartition()
			rp.Partition = p.Partition
			rp.Offset, rp.Timestamp, rp.LeaderEpoch = -1, -1, -1
			if img.Partition(t.Topic, p.Partition) == nil {
				rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			} else {
				epoch := p.CurrentLeaderEpoch
				if req.Version < 4 {
					epoch = -1
				}
				rp.Offset, rp.Timestamp, rp.LeaderEpoch, rp.ErrorCode = s.backend.Replicas.ListOffset(r.ctx, t.Topic, p.Partition, epoch, p.Timestamp, isolation)
			}
			r.noteError(rp.ErrorCode)
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}

func failListOffsets(req kmsg.Request, code int16) kmsg.Response {
	lreq := req.(*kmsg.ListOffsetsRequest)
	resp := lreq.ResponseKind().(*kmsg.ListOffsetsResponse)
	for _, t := range lreq.Topics {
		rt := kmsg.NewListOffsetsResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewListOffsetsResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, code
			rp.Offset, rp.Timestamp, rp.LeaderEpoch = -1, -1, -1
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}
