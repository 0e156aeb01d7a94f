package server

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ListOffsets: v1-v8
//
// Behaviour:
//   - Per partition Replicas.ListOffset: timestamp -2 is the log start
//     offset, -1 the high watermark (the LSO for read_committed), -3 (v7+)
//     the record with the largest timestamp, otherwise the first offset
//     whose timestamp is at or after it.
//   - -4 (v8+, earliest local offset, KIP-405) is asked as -2: without
//     tiered storage the local log starts at the log start offset. -3
//     before v7 is UNSUPPORTED_VERSION, as in Kafka.
//   - A topic or partition missing from the image is
//     UNKNOWN_TOPIC_OR_PARTITION; leadership and epoch checks are
//     Replicas' (NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH, ...).
//   - A new leader whose high watermark is still below the start offset of
//     its epoch answers the latest offset (and a timestamp with no record
//     below the high watermark) with OFFSET_NOT_AVAILABLE, which clients
//     retry (KIP-207), instead of an offset lower than one they saw.
//   - v0 (several old-style offsets) is not served, nor v9+ (-5, earliest
//     offset pending tiered upload; timeouts).
//
// Version notes: v1 single offset and timestamp; v2 isolation level; v4
// current leader epoch in the request, leader epoch in the response; v6
// flexible; v7 max timestamp (-3); v8 earliest local offset (-4).

// Special ListOffsets timestamps.
const (
	listOffsetsEarliest      int64 = -2
	listOffsetsMaxTimestamp  int64 = -3
	listOffsetsEarliestLocal int64 = -4
)

func init() {
	register(api{key: 2, min: 1, max: 8, needs: needMetadata | needReplicas, handle: handleListOffsets, fail: failListOffsets})
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
			ts := p.Timestamp
			if ts == listOffsetsEarliestLocal && req.Version >= 8 {
				ts = listOffsetsEarliest
			}
			switch {
			case img.Partition(t.Topic, p.Partition) == nil:
				rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			case ts == listOffsetsMaxTimestamp && req.Version < 7:
				rp.ErrorCode = kerr.UnsupportedVersion.Code
			default:
				epoch := p.CurrentLeaderEpoch
				if req.Version < 4 {
					epoch = -1
				}
				rp.Offset, rp.Timestamp, rp.LeaderEpoch, rp.ErrorCode = s.backend.Replicas.ListOffset(r.ctx, t.Topic, p.Partition, epoch, ts, isolation)
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
