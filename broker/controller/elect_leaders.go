package controller

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/faultline/faultline/broker/metadata"
)

// Election types of ElectLeaders (KIP-460).
const (
	electPreferred int8 = 0
	electUnclean   int8 = 1
)

// ElectLeaders answers an ElectLeaders request (KIP-460) and returns the
// leader changes it makes:
//   - preferred (type 0; v0 has no type and means it): the partition's
//     leadership moves to its preferred replica, the first in replica
//     order, when that replica is live and in the ISR (a clean move, as a
//     controlled shutdown's); ELECTION_NOT_NEEDED when it leads already,
//     PREFERRED_LEADER_NOT_AVAILABLE when it is fenced, shutting down or
//     out of the ISR;
//   - unclean (type 1): a partition without a leader gets the first live
//     ISR member in replica order or, failing that, the first live replica,
//     whose ISR is then itself alone, whatever the topic's
//     unclean.leader.election.enable (the operator asked for it);
//     ELECTION_NOT_NEEDED when it has a leader, ELIGIBLE_LEADERS_NOT_AVAILABLE
//     when no replica is live.
//
// A missing topic or partition is UNKNOWN_TOPIC_OR_PARTITION, another type
// INVALID_REQUEST. Null Topics asks for every partition, and the
// answer then lists every topic but leaves out the partitions that needed
// no election, as Kafka's does.
func (s *ClusterState) ElectLeaders(req *kmsg.ElectLeadersRequest) (*kmsg.ElectLeadersResponse, Result) {
	resp := kmsg.NewPtrElectLeadersResponse()
	im := s.Image
	typ := req.ElectionType
	if req.Version == 0 {
		typ = electPreferred
	}
	var recs []metadata.Record
	type ask struct {
		topic string
		parts []int32
	}
	var asks []ask
	all := req.Topics == nil
	if all {
		for _, t := range sortedTopics(im) {
			a := ask{topic: t.Name}
			for _, p := range t.Partitions {
				a.parts = append(a.parts, p.Partition)
			}
			asks = append(asks, a)
		}
	}
	for _, tp := range req.Topics {
		asks = append(asks, ask{topic: tp.Topic, parts: tp.Partitions})
	}
	for _, a := range asks {
		rt := kmsg.NewElectLeadersResponseTopic()
		rt.Topic = a.topic
		for _, part := range a.parts {
			rp := kmsg.NewElectLeadersResponseTopicPartition()
			rp.Partition = part
			code, msg, change := s.electOne(im, typ, a.topic, part)
			if change != nil {
				next, err := im.Apply(change)
				if err != nil {
					code, msg = errMsg(kerr.UnknownServerError, "%v", err)
				} else {
					im = next
					recs = append(recs, change)
				}
			}
			if all && code == kerr.ElectionNotNeeded.Code {
				continue
			}
			rp.ErrorCode, rp.ErrorMessage = code, msg
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, Result{Records: recs, Image: im}
}

// electOne decides one partition's election: its error code and message,
// and the change to commit (nil for none).
func (s *ClusterState) electOne(im *metadata.Image, typ int8, topic string, part int32) (int16, *string, *metadata.PartitionChangeRecord) {
	t := im.Topic(topic)
	p := im.Partition(topic, part)
	if t == nil || p == nil {
		code, msg := errMsg(kerr.UnknownTopicOrPartition, "%s-%d is not in the cluster's metadata", topic, part)
		return code, msg, nil
	}
	switch typ {
	case electPreferred:
		if len(p.Replicas) == 0 {
			code, msg := errMsg(kerr.PreferredLeaderNotAvailable, "%s-%d has no replicas", topic, part)
			return code, msg, nil
		}
		preferred := p.Replicas[0]
		switch {
		case p.Leader == preferred:
			return kerr.ElectionNotNeeded.Code, nil, nil
		case !im.Live(preferred) || !slices.Contains(p.ISR, preferred):
			code, msg := errMsg(kerr.PreferredLeaderNotAvailable, "the preferred replica %d of %s-%d is not live or not in its ISR %v", preferred, topic, part, p.ISR)
			return code, msg, nil
		}
		return 0, nil, &metadata.PartitionChangeRecord{PartitionID: part, TopicID: t.ID, Leader: preferred}
	case electUnclean:
		if p.Leader != metadata.NoLeader {
			return kerr.ElectionNotNeeded.Code, nil, nil
		}
		leader, isr := s.electAllowing(im, p.Replicas, p.ISR, -1, true)
		if leader == metadata.NoLeader {
			code, msg := errMsg(kerr.EligibleLeadersNotAvailable, "no replica of %s-%d is live", topic, part)
			return code, msg, nil
		}
		change := &metadata.PartitionChangeRecord{PartitionID: part, TopicID: t.ID, Leader: leader}
		if !slices.Equal(isr, p.ISR) {
			change.ISR = isr
		}
		return 0, nil, change
	}
	code, msg := errMsg(kerr.InvalidRequest, "unknown election type %d", typ)
	return code, msg, nil
}
