package controller

import (
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/faultline/faultline/broker/metadata"
)

// BrokerRegistration is what a broker sends to register (Kafka's
// BrokerRegistrationRequest, the parts we use).
type BrokerRegistration struct {
	BrokerID      int32
	IncarnationID metadata.Uuid
	Endpoints     []metadata.Endpoint
	Rack          string
}

// Heartbeat is a broker's heartbeat (Kafka's BrokerHeartbeatRequest).
type Heartbeat struct {
	BrokerID       int32
	BrokerEpoch    int64
	MetadataOffset int64 // the offset of the last metadata record the broker applied
	WantFence      bool  // the broker is not ready to serve yet
	WantShutDown   bool  // the broker is in controlled shutdown
}

// HeartbeatReply is the controller's answer (Kafka's BrokerHeartbeatResponse).
type HeartbeatReply struct {
	ErrorCode      int16
	IsCaughtUp     bool
	IsFenced       bool
	ShouldShutDown bool
}

// RegisterBroker registers a broker incarnation. The broker starts fenced;
// its epoch is the offset its RegisterBroker record will get when the
// records are appended right after the image's last offset (epochs grow
// with every registration either way). A new incarnation of a known broker
// first loses its leaderships and ISR places as if fenced, so that a broker
// that restarted with a possibly shorter log never leads on stale
// authority. A repeated registration of the same incarnation returns its
// epoch and changes nothing.
func (s *ClusterState) RegisterBroker(reg BrokerRegistration) (int64, Result, error) {
	im := s.Image
	if reg.BrokerID < 0 {
		return 0, Result{}, fmt.Errorf("register broker %d: broker ids are not negative", reg.BrokerID)
	}
	old, known := im.Brokers[reg.BrokerID]
	if known && old.IncarnationID == reg.IncarnationID {
		return old.Epoch, Result{Image: im}, nil
	}
	epoch := im.Offset + 1
	if known && epoch <= old.Epoch {
		epoch = old.Epoch + 1
	}
	rec := &metadata.RegisterBrokerRecord{
		BrokerID:      reg.BrokerID,
		IncarnationID: reg.IncarnationID,
		BrokerEpoch:   epoch,
		Endpoints:     slices.Clone(reg.Endpoints),
		Fenced:        true,
	}
	if reg.Rack != "" {
		rack := reg.Rack
		rec.Rack = &rack
	}
	recs := []metadata.Record{rec}
	next, err := im.Apply(rec)
	if err != nil {
		return 0, Result{}, fmt.Errorf("register broker %d: %w", reg.BrokerID, err)
	}
	if known {
		recs = append(recs, s.removeFromPartitions(next, reg.BrokerID)...)
	}
	next, err = im.ApplyBatch(im.Offset, recs)
	if err != nil {
		return 0, Result{}, fmt.Errorf("register broker %d: %w", reg.BrokerID, err)
	}
	return epoch, Result{Records: recs, Image: next}, nil
}

// Heartbeat decides a broker's fencing state from its heartbeat, following
// Kafka's broker lifecycle: a fenced broker that is caught up and does not
// want to stay fenced is unfenced (and leaderless partitions it can lead get
// it as leader); an unfenced broker that wants to be fenced is fenced; a
// broker that wants to shut down loses its leaderships first and is told to
// shut down once it leads nothing.
func (s *ClusterState) Heartbeat(hb Heartbeat) (HeartbeatReply, Result, error) {
	im := s.Image
	b, ok := im.Brokers[hb.BrokerID]
	if !ok {
		return HeartbeatReply{ErrorCode: kerr.BrokerIDNotRegistered.Code, IsFenced: true}, Result{Image: im}, nil
	}
	if b.Epoch != hb.BrokerEpoch {
		return HeartbeatReply{ErrorCode: kerr.StaleBrokerEpoch.Code, IsFenced: true}, Result{Image: im}, nil
	}
	reply := HeartbeatReply{IsCaughtUp: hb.MetadataOffset >= b.Epoch, IsFenced: b.Fenced}
	var recs []metadata.Record
	switch {
	case hb.WantShutDown:
		if !b.InControlledShutdown && !b.Fenced {
			recs = append(recs, &metadata.BrokerRegistrationChangeRecord{BrokerID: b.ID, BrokerEpoch: b.Epoch, InControlledShutdown: 1})
		}
	case b.Fenced && !hb.WantFence && reply.IsCaughtUp:
		recs = append(recs, &metadata.UnfenceBrokerRecord{ID: b.ID, Epoch: b.Epoch})
	case !b.Fenced && hb.WantFence:
		recs = append(recs, &metadata.FenceBrokerRecord{ID: b.ID, Epoch: b.Epoch})
	}
	next := im
	if len(recs) > 0 {
		var err error
		if next, err = im.ApplyBatch(im.Offset, recs); err != nil {
			return HeartbeatReply{}, Result{}, fmt.Errorf("heartbeat of broker %d: %w", b.ID, err)
		}
		if next.Live(b.ID) {
			recs = append(recs, s.electLeaderless(next)...)
		} else {
			recs = append(recs, s.removeFromPartitions(next, b.ID)...)
		}
		if next, err = im.ApplyBatch(im.Offset, recs); err != nil {
			return HeartbeatReply{}, Result{}, fmt.Errorf("heartbeat of broker %d: %w", b.ID, err)
		}
	}
	nb := next.Brokers[b.ID]
	reply.IsFenced = nb.Fenced
	if hb.WantShutDown && leaderCount(next, b.ID) == 0 {
		reply.ShouldShutDown = true
	}
	return reply, Result{Records: recs, Image: next}, nil
}

// FenceBroker fences a broker whose session expired: one FenceBroker record
// and a PartitionChange for every partition it led or was in the ISR of.
func (s *ClusterState) FenceBroker(id int32) (Result, error) {
	im := s.Image
	b, ok := im.Brokers[id]
	if !ok || b.Fenced {
		return Result{Image: im}, nil
	}
	recs := []metadata.Record{&metadata.FenceBrokerRecord{ID: id, Epoch: b.Epoch}}
	next, err := im.Apply(recs[0])
	if err != nil {
		return Result{}, fmt.Errorf("fence broker %d: %w", id, err)
	}
	recs = append(recs, s.removeFromPartitions(next, id)...)
	if next, err = im.ApplyBatch(im.Offset, recs); err != nil {
		return Result{}, fmt.Errorf("fence broker %d: %w", id, err)
	}
	return Result{Records: recs, Image: next}, nil
}

func leaderCount(im *metadata.Image, id int32) int {
	n := 0
	for _, t := range im.Topics {
		for _, p := range t.Partitions {
			if p.Leader == id {
				n++
			}
		}
	}
	return n
}

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
	var recs []metadata.Record
	for _, t := range sortedTopics(im) {
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
	for _, r := range replicas {
		if r != exclude && im.Live(r) && slices.Contains(isr, r) {
			return r, isr
		}
	}
	if s.uncleanAllowed(t) {
		for _, r := range replicas {
			if r != exclude && im.Live(r) {
				return r, []int32{r}
			}
		}
	}
	return metadata.NoLeader, isr
}
