package controller

import (
	"fmt"
	"slices"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/faultline/faultline/broker/metadata"
)

// AlterPartition is a partition leader's request to change its ISR (Kafka's
// AlterPartition, one partition).
type AlterPartition struct {
	BrokerID       int32 // the sender, who must lead the partition
	BrokerEpoch    int64
	TopicID        metadata.Uuid
	Partition      int32
	LeaderEpoch    int32
	PartitionEpoch int32
	NewISR         []int32
}

// AlterPartition decides an ISR change with Kafka's checks, in Kafka's
// order: a stale broker epoch (STALE_BROKER_EPOCH), an unknown partition
// (UNKNOWN_TOPIC_ID, UNKNOWN_TOPIC_OR_PARTITION), epochs newer than the
// controller's (NOT_CONTROLLER: this controller is behind), an older leader
// epoch (FENCED_LEADER_EPOCH), an older partition epoch
// (INVALID_UPDATE_VERSION), a sender that is not the leader or an ISR that
// lacks the leader, repeats a broker or names a non-replica
// (INVALID_REQUEST), and a new member that is fenced or shutting down
// (INELIGIBLE_REPLICA). On success it returns the partition as it will be;
// an unchanged ISR needs no record.
func (s *ClusterState) AlterPartition(req AlterPartition) (int16, metadata.Partition, Result) {
	im := s.Image
	fail := func(err *kerr.Error) (int16, metadata.Partition, Result) {
		return err.Code, metadata.Partition{}, Result{Image: im}
	}
	b, ok := im.Brokers[req.BrokerID]
	if !ok || b.Epoch != req.BrokerEpoch {
		return fail(kerr.StaleBrokerEpoch)
	}
	t := im.TopicsByID[req.TopicID]
	if t == nil {
		return fail(kerr.UnknownTopicID)
	}
	if req.Partition < 0 || int(req.Partition) >= len(t.Partitions) {
		return fail(kerr.UnknownTopicOrPartition)
	}
	p := t.Partitions[req.Partition]
	switch {
	case req.LeaderEpoch > p.LeaderEpoch || req.PartitionEpoch > p.PartitionEpoch:
		return fail(kerr.NotController)
	case req.LeaderEpoch < p.LeaderEpoch:
		return fail(kerr.FencedLeaderEpoch)
	case req.PartitionEpoch < p.PartitionEpoch:
		return fail(kerr.InvalidUpdateVersion)
	case p.Leader != req.BrokerID:
		return fail(kerr.InvalidRequest)
	}
	if err := validISR(p, req.NewISR); err != nil {
		return fail(kerr.InvalidRequest)
	}
	for _, r := range req.NewISR {
		if !slices.Contains(p.ISR, r) && !im.Live(r) {
			return fail(kerr.IneligibleReplica)
		}
	}
	if sameMembers(p.ISR, req.NewISR) {
		return 0, p, Result{Image: im}
	}
	rec := &metadata.PartitionChangeRecord{PartitionID: p.Partition, TopicID: t.ID, ISR: slices.Clone(req.NewISR), Leader: metadata.LeaderNoChange}
	next, err := im.Apply(rec)
	if err != nil {
		return fail(kerr.UnknownServerError)
	}
	return 0, *next.Partition(t.Name, p.Partition), Result{Records: []metadata.Record{rec}, Image: next}
}

func validISR(p metadata.Partition, isr []int32) error {
	if !slices.Contains(isr, p.Leader) {
		return fmt.Errorf("the ISR %v lacks the leader %d", isr, p.Leader)
	}
	seen := map[int32]bool{}
	for _, r := range isr {
		if seen[r] {
			return fmt.Errorf("broker %d appears twice in the ISR", r)
		}
		seen[r] = true
		if !slices.Contains(p.Replicas, r) {
			return fmt.Errorf("broker %d is not a replica", r)
		}
	}
	return nil
}

func sameMembers(a, b []int32) bool {
	if len(a) != len(b) {
		return false
	}
	x, y := slices.Clone(a), slices.Clone(b)
	slices.Sort(x)
	slices.Sort(y)
	return slices.Equal(x, y)
}

// Sessions tracks when each broker was last heard from. It is pure: the
// caller passes the time. The active controller touches a session on every
// heartbeat and fences the brokers Expired returns (one at a time, as
// Kafka does), with ClusterState.FenceBroker.
type Sessions struct {
	lastMs map[int32]int64
}

// Touch records a heartbeat of broker id at nowMs.
func (s *Sessions) Touch(id int32, nowMs int64) {
	if s.lastMs == nil {
		s.lastMs = map[int32]int64{}
	}
	s.lastMs[id] = max(s.lastMs[id], nowMs)
}

// Remove forgets a broker (fenced, or shut down).
func (s *Sessions) Remove(id int32) { delete(s.lastMs, id) }

// Alive reports whether broker id was heard from within timeoutMs.
func (s *Sessions) Alive(id int32, nowMs, timeoutMs int64) bool {
	last, ok := s.lastMs[id]
	return ok && nowMs-last <= timeoutMs
}

// Expired returns the brokers unheard for longer than timeoutMs
// (broker.session.timeout.ms), oldest first.
func (s *Sessions) Expired(nowMs, timeoutMs int64) []int32 {
	var out []int32
	for id, last := range s.lastMs {
		if nowMs-last > timeoutMs {
			out = append(out, id)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if s.lastMs[out[i]] != s.lastMs[out[j]] {
			return s.lastMs[out[i]] < s.lastMs[out[j]]
		}
		return out[i] < out[j]
	})
	return out
}
