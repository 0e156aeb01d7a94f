package controller

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/faultline/faultline/broker/quorum"
)

// HandleDescribeQuorum answers DescribeQuorum for __cluster_metadata-0 from
// the quorum's Describe: the leader, its epoch, the high watermark and each
// voter's and observer's log end offset. Only the quorum leader knows the
// others' progress: elsewhere the partition answers NOT_LEADER_OR_FOLLOWER
// with the leader this node knows. Other partitions are
// UNKNOWN_TOPIC_OR_PARTITION.
func (c *Controller) HandleDescribeQuorum(_ context.Context, req *kmsg.DescribeQuorumRequest) *kmsg.DescribeQuorumResponse {
	resp := DescribeQuorumResponse(c.cfg.NodeID, c.q, req)
	for _, v := range c.cfg.VoterEndpoints {
		n := kmsg.NewDescribeQuorumResponseNode()
		n.NodeID = v.NodeID
		l := kmsg.NewDescribeQuorumResponseNodeListener()
		l.Name, l.Host, l.Port = v.Listener, v.Host, uint16(v.Port)
		n.Listeners = append(n.Listeners, l)
		resp.Nodes = append(resp.Nodes, n)
	}
	return resp
}

// DescribeQuorumResponse builds the DescribeQuorum answer of node self from
// q (see HandleDescribeQuorum); a node without a Controller (a broker that
// observes the quorum) can use it too.
func DescribeQuorumResponse(self int32, q quorum.Quorum, req *kmsg.DescribeQuorumRequest) *kmsg.DescribeQuorumResponse {
	resp := kmsg.NewPtrDescribeQuorumResponse()
	for _, rt := range req.Topics {
		st := kmsg.NewDescribeQuorumResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewDescribeQuorumResponseTopicPartition()
			sp.Partition, sp.LeaderID, sp.LeaderEpoch, sp.HighWatermark = rp.Partition, -1, -1, -1
			l := q.Leader()
			switch {
			case rt.Topic != quorum.MetadataTopic || rp.Partition != quorum.MetadataPartition.Partition:
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			case l.LeaderID != self:
				sp.ErrorCode = kerr.NotLeaderForPartition.Code
				sp.LeaderID, sp.LeaderEpoch = l.LeaderID, l.Epoch
			default:
				d := q.Describe()
				sp.LeaderID, sp.LeaderEpoch, sp.HighWatermark = d.LeaderID, d.LeaderEpoch, d.HighWatermark
				sp.CurrentVoters = replicaStates(d.Voters)
				sp.Observers = replicaStates(d.Observers)
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}

func replicaStates(in []quorum.ReplicaState) []kmsg.DescribeQuorumResponseTopicPartitionReplicaState {
	out := make([]kmsg.DescribeQuorumResponseTopicPartitionReplicaState, 0, len(in))
	for _, r := range in {
		s := kmsg.NewDescribeQuorumResponseTopicPartitionReplicaState()
		s.ReplicaID, s.LogEndOffset, s.LastFetchTimestamp, s.LastCaughtUpTimestamp = r.ReplicaID, r.LogEndOffset, r.LastFetchTimestamp, r.LastCaughtUpTimestamp
		out = append(out, s)
	}
	return out
}
