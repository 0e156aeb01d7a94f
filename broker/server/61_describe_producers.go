package server

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeProducers: v0
//
// Behaviour:
//   - Per partition, the producers its leader remembers (Replicas as a
//     ProducerStates): id, epoch, last sequence and timestamp, the
//     coordinator epoch of its last marker and the first offset of its open
//     transaction (-1: none). This is how `kafka-transactions.sh
//     find-hanging` and kadm's DescribeProducers find a transaction left
//     open on a partition.
//   - A partition this broker does not lead answers NOT_LEADER_OR_FOLLOWER,
//     one the cluster does not have UNKNOWN_TOPIC_OR_PARTITION.

func init() {
	register(api{key: 61, min: 0, max: 0, needs: needReplicas | needProducers, handle: handleDescribeProducers, fail: failDescribeProducers})
}

func handleDescribeProducers(s *Server, r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.DescribeProducersRequest)
	resp := req.ResponseKind().(*kmsg.DescribeProducersResponse)
	states := producerStates(&s.backend)
	for _, t := range req.Topics {
		rt := kmsg.NewDescribeProducersResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewDescribeProducersResponseTopicPartition()
			rp.Partition = p
			producers, code := states.Producers(t.Topic, p)
			rp.ErrorCode = code
			r.noteError(code)
			for _, ps := range producers {
				ap := kmsg.NewDescribeProducersResponseTopicPartitionActiveProducer()
				ap.ProducerID, ap.ProducerEpoch, ap.LastSequence = ps.ProducerID, int32(ps.Epoch), ps.LastSequence
				ap.LastTimestamp, ap.CoordinatorEpoch, ap.CurrentTxnStartOffset = ps.LastTimestamp, ps.CoordinatorEpoch, ps.CurrentTxnStartOffset
				rp.ActiveProducers = append(rp.ActiveProducers, ap)
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}

func failDescribeProducers(req kmsg.Request, code int16) kmsg.Response {
	dreq := req.(*kmsg.DescribeProducersRequest)
	resp := dreq.ResponseKind().(*kmsg.DescribeProducersResponse)
	for _, t := range dreq.Topics {
		rt := kmsg.NewDescribeProducersResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewDescribeProducersResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p, code
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}
