package server

import (
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/faultline/faultline/internal/gostack"
)

// DeleteRecords: v0-v2
//
// Behaviour:
//   - Each partition is Replicas.DeleteRecords' decision: its log start
//     offset advances to the requested offset (-1: the high watermark),
//     and the answer's LowWatermark comes once the ISR's followers have
//     followed; OFFSET_OUT_OF_RANGE above the high watermark,
//     POLICY_VIOLATION on a compact-only topic, NOT_LEADER_OR_FOLLOWER
//     off the leader, REQUEST_TIMED_OUT after TimeoutMillis (at once for
//     0: the log start still advances). A partition missing from the
//     metadata image is UNKNOWN_TOPIC_OR_PARTITION, one of an internal
//     topic INVALID_TOPIC_EXCEPTION.
//   - Partitions are handled concurrently under the request's timeout.
//
// Version notes: v1 is v0 (throttling); v2 flexible.

func init() {
	register(api{key: 21, min: 0, max: 2, needs: needMetadata | needReplicas, handle: handleDeleteRecords, fail: failDeleteRecords})
}

func handleDeleteRecords(s *Server, r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.DeleteRecordsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteRecordsResponse)
	ctx, cancel := withTimeoutMs(r.ctx, req.TimeoutMillis)
	defer cancel()
	if req.TimeoutMillis <= 0 {
		cancel() // no wait: the low watermark as it is when asked, as Kafka answers
	}
	img := s.backend.Metadata.Image()
	var wg sync.WaitGroup
	resp.Topics = make([]kmsg.DeleteRecordsResponseTopic, len(req.Topics))
	for i, t := range req.Topics {
		rt := &resp.Topics[i]
		*rt = kmsg.NewDeleteRecordsResponseTopic()
		rt.Topic = t.Topic
		rt.Partitions = make([]kmsg.DeleteRecordsResponseTopicPartition, len(t.Partitions))
		for j, p := range t.Partitions {
			rp := &rt.Partitions[j]
			*rp = kmsg.NewDeleteRecordsResponseTopicPartition()
			rp.Partition, rp.LowWatermark = p.Partition, -1
			switch {
			case img.Partition(t.Topic, p.Partition) == nil:
				rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
				continue
			case internalTopic(t.Topic):
				rp.ErrorCode = kerr.InvalidTopicException.Code
				continue
			}
			wg.Go(func() {
				gostack.Reserve()
				defer func() {
					if v := recover(); v != nil {
						rp.ErrorCode = kerr.UnknownServerError.Code
						_ = s.bug(v, "deleting records of "+t.Topic)
					}
				}()
				rp.LowWatermark, rp.ErrorCode, _ = s.backend.Replicas.DeleteRecords(ctx, t.Topic, p.Partition, p.Offset)
			})
		}
	}
	wg.Wait()
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			r.noteError(rp.ErrorCode)
		}
	}
	return resp, nil
}

func failDeleteRecords(req kmsg.Request, code int16) kmsg.Response {
	dreq := req.(*kmsg.DeleteRecordsRequest)
	resp := dreq.ResponseKind().(*kmsg.DeleteRecordsResponse)
	for _, t := range dreq.Topics {
		rt := kmsg.NewDeleteRecordsResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewDeleteRecordsResponseTopicPartition()
			rp.Partition, rp.LowWatermark, rp.ErrorCode = p.Partition, -1, code
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}
