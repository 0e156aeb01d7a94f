package controller

import (
	"slices"
	"strings"

	"github.com/faultline/faultline/broker/metadata"
)

// sortedTopics returns topics by name so that decisions are deterministic.
func sortedTopics(im *metadata.Image) []*metadata.Topic {
	out := make([]*metadata.Topic, 0, len(im.Topics))
	for _, n := range im.TopicNames() {
		out = append(out, im.Topics[n])
	}
	return out
}

// removeFromPartitions takes broker id out of every ISR it is in (never
// emptying an ISR: the last member stays, as Kafka does without ELR) and
// moves every leadership it holds to the first live ISR member in replica
// order, or to no leader; with unclean election allowed, to the first live
// replica outside the ISR.
func (s *ClusterState) removeFromPartitions(im *metadata.Image, id int32) []metadata.Record {
	var recs []metadata.Record
	for _, t := range sortedTopics(im) {
		for _, p := range t.Partitions {
			if !slices.Contains(p.Replicas, id) {
				continue
			}
			isr := p.ISR
			if slices.Contains(isr, id) && len(isr) > 1 {
				isr = slices.DeleteFunc(slices.Clone(isr), func(r int32) bool { return r == id })
			}
			change := &metadata.PartitionChangeRecord{PartitionID: p.Partition, TopicID: t.ID, Leader: metadata.LeaderNoChange}
			if p.Leader == id {
				leader, newISR := s.elect(im, t, p.Replicas, isr, id)
				change.Leader = leader
				isr = newISR
			}
			if !slices.Equal(isr, p.ISR) {
				change.ISR = isr
			}
			if change.ISR != nil || change.Leader != metadata.LeaderNoChange {
				recs = append(recs, change)
			}
		}
	}
	return recs
}

// electLeaderless gives every partition without a leader the first live ISR
// member in replica order (or, with unclean election, a live replica).
func (s *ClusterState) electLeaderless(im *metadata.Image) []metadata.Record {
	return s.electLeaderlessIn(im, sortedTopics(im))
}

// electLeaderlessIn is electLeaderless for the partitions of topics only.
func (s *ClusterState) electLeaderlessIn(im *metadata.Image, topics []*metadata.Topic) []metadata.Record {
	var recs []metadata.Record
	for _, t := range topics {
		for _, p := range t.Partitions {
			if p.Leader != metadata.NoLeader {
				continue
			}
			leader, isr := s.elect(im, t, p.Replicas, p.ISR, -1)
			if leader == metadata.NoLeader {
				continue
			}
			change := &metadata.PartitionChangeRecord{PartitionID: p.Partition, TopicID: t.ID, Leader: leader}
			if !slices.Equal(isr, p.ISR) {
				change.ISR = isr
			}
			recs = append(recs, change)
		}
	}
	return recs
}

// elect picks a leader other than exclude: the first live replica that is
// in the ISR; failing that, with unclean election, the first live replica,
// whose ISR then is itself alone. It returns NoLeader and the ISR unchanged
// when nobody qualifies.
func (s *ClusterState) elect(im *metadata.Image, t *metadata.Topic, replicas, isr []int32, exclude int32) (int32, []int32) {
	return s.electAllowing(im, replicas, isr, exclude, s.uncleanAllowed(t))
}

// electAllowing is elect with unclean election allowed or not by the
// caller (ElectLeaders' unclean type allows it whatever the topic says).
func (s *ClusterState) electAllowing(im *metadata.Image, replicas, isr []int32, exclude int32, unclean bool) (int32, []int32) {
	for _, r := range replicas {
		if r != exclude && im.Live(r) && (slices.Contains(isr, r) || s.Unsafe.ElectAnyReplica) {
			if !slices.Contains(isr, r) {
				return r, []int32{r}
			}
			return r, isr
		}
	}
	if unclean {
		for _, r := range replicas {
			if r != exclude && im.Live(r) {
				return r, []int32{r}
			}
		}
	}
	return metadata.NoLeader, isr
}

// uncleanAllowed reports whether a topic may elect a leader outside its ISR.
func (s *ClusterState) uncleanAllowed(t *metadata.Topic) bool {
	if v, ok := t.Configs["unclean.leader.election.enable"]; ok {
		// As the config layer reads a boolean (and Kafka's ConfigDef):
		// blanks trimmed, case ignored.
		return strings.EqualFold(strings.TrimSpace(v), "true")
	}
	return s.Defaults.UncleanLeaderElection
}
