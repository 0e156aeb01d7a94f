package server

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

// OffsetCommit: v0-v8
//
// Behaviour:
//   - Handed to Groups.OffsetCommit, which checks generation and member,
//     writes the offsets durably to __consumer_offsets and fills every
//     partition's error.
//   - The commits of one connection are handled one after another in
//     arrival order, so a later commit never lands before an earlier one.
//
// Version notes: v1 generation and member; v2-v4 retention time; v3
// ThrottleMillis; v5 drops retention; v6 leader epoch; v7 instance id
// (static membership); v8 flexible. v9+ (KIP-848 member epochs, topic ids)
// are not served.

func init() {
	register(api{key: 8, min: 0, max: 8, serial: true, needs: needGroups, handle: handleOffsetCommit, fail: failOffsetCommit})
}

func handleOffsetCommit(s *Server, r *request) (kmsg.Response, error) {
	resp := s.backend.Groups.OffsetCommit(s.groupCtx(r), r.kreq.(*kmsg.OffsetCommitRequest))
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

func failOffsetCommit(req kmsg.Request, code int16) kmsg.Response {
	oreq := req.(*kmsg.OffsetCommitRequest)
	resp := oreq.ResponseKind().(*kmsg.OffsetCommitResponse)
	for _, t := range oreq.Topics {
		rt := kmsg.NewOffsetCommitResponseTopic()
		rt.Topic, rt.TopicID = t.Topic, t.TopicID
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetCommitResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, code
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}
