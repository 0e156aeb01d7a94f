package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/faultline/faultline/broker/metadata"
	"github.com/faultline/faultline/broker/quorum"
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

// AlterPartition handles a leader's ISR change (AlterPartition) and returns
// the error code and the partition as committed.
func (c *Controller) AlterPartition(ctx context.Context, req AlterPartition) (int16, metadata.Partition, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	code, p, res := c.state().AlterPartition(req)
	if err := c.commit(ctx, res.Records); err != nil {
		return 0, metadata.Partition{}, err
	}
	return code, p, nil
}

// HandleAlterPartition applies partition leaders' ISR changes, one decision
// per partition. v3 ISR members carrying a broker epoch that is not their
// registered one are INELIGIBLE_REPLICA.
func (c *Controller) HandleAlterPartition(ctx context.Context, req *kmsg.AlterPartitionRequest) *kmsg.AlterPartitionResponse {
	resp := kmsg.NewPtrAlterPartitionResponse()
	if !c.EnsureActive(ctx) {
		resp.ErrorCode = kerr.NotController.Code
		return resp
	}
	for _, rt := range req.Topics {
		st := kmsg.NewAlterPartitionResponseTopic()
		st.Topic, st.TopidID = rt.Topic, rt.TopicID
		im := c.Image()
		topicID := metadata.Uuid(rt.TopicID)
		if req.Version < 2 {
			if t := im.Topic(rt.Topic); t != nil {
				topicID = t.ID
			} else {
				topicID = metadata.Uuid{}
			}
		}
		for _, rp := range rt.Partitions {
			sp := kmsg.NewAlterPartitionResponseTopicPartition()
			sp.Partition, sp.LeaderID = rp.Partition, -1
			isr := rp.NewISR
			ineligible := false
			if req.Version >= 3 {
				isr = nil
				for _, m := range rp.NewEpochISR {
					isr = append(isr, m.BrokerID)
					if b, ok := im.Brokers[m.BrokerID]; m.BrokerEpoch != -1 && (!ok || b.Epoch != m.BrokerEpoch) {
						ineligible = true
					}
				}
			}
			switch {
			case topicID == (metadata.Uuid{}) && req.Version < 2:
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			case ineligible:
				sp.ErrorCode = kerr.IneligibleReplica.Code
			default:
				code, p, err := c.AlterPartition(ctx, AlterPartition{
					BrokerID: req.BrokerID, BrokerEpoch: req.BrokerEpoch, TopicID: topicID, Partition: rp.Partition,
					LeaderEpoch: rp.LeaderEpoch, PartitionEpoch: rp.PartitionEpoch, NewISR: slices.Clone(isr),
				})
				if err != nil {
					code, _ = failureCode(err)
					if errors.Is(err, quorum.ErrNotLeader) {
						resp.ErrorCode = code
					}
				}
				sp.ErrorCode = code
				if code == 0 {
					sp.LeaderID, sp.LeaderEpoch, sp.ISR, sp.PartitionEpoch = p.Leader, p.LeaderEpoch, slices.Clone(p.ISR), p.PartitionEpoch
				}
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}
