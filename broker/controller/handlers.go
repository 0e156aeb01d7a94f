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

// The controller-only APIs, served on the controller listener. Each handler
// takes the decoded request and returns a complete response; the server
// sets the response version (as for groups). Versions handled:
//
//   - BrokerRegistration (62): v0-v4. PreviousBrokerEpoch (v3+) lets a
//     broker that shut down cleanly re-register at once.
//   - BrokerHeartbeat (63): v0-v2 (OfflineLogDirs is ignored).
//   - AlterPartition (56): v0-v3 (topic names v0-v1, topic ids v2+, ISR
//     with broker epochs v3+).
//   - DescribeQuorum (55): v0-v2 (v2 Nodes is left empty).
//
// A controller that is not the active one answers NOT_CONTROLLER
// (DescribeQuorum: NOT_LEADER_OR_FOLLOWER with the leader it knows), so
// brokers retry on another controller.

// HandleBrokerRegistration registers a broker incarnation and answers its
// broker epoch. A different incarnation of a broker whose session is alive
// gets DUPLICATE_BROKER_REGISTRATION, unless it names the registered epoch
// as its PreviousBrokerEpoch (it is that broker, restarted cleanly); a
// wrong cluster id gets INCONSISTENT_CLUSTER_ID.
func (c *Controller) HandleBrokerRegistration(ctx context.Context, req *kmsg.BrokerRegistrationRequest) *kmsg.BrokerRegistrationResponse {
	resp := kmsg.NewPtrBrokerRegistrationResponse()
	resp.BrokerEpoch = -1
	if !c.ensureActive(ctx) {
		resp.ErrorCode = kerr.NotController.Code
		return resp
	}
	if c.cfg.ClusterID != "" && req.ClusterID != c.cfg.ClusterID {
		c.logger.Warn(fmt.Sprintf("Refused registration of broker %d: cluster id %q is not this cluster's %q", req.BrokerID, req.ClusterID, c.cfg.ClusterID))
		resp.ErrorCode = kerr.InconsistentClusterID.Code
		return resp
	}
	reg := BrokerRegistration{BrokerID: req.BrokerID, IncarnationID: metadata.Uuid(req.IncarnationID)}
	if req.Rack != nil {
		reg.Rack = *req.Rack
	}
	for _, l := range req.Listeners {
		reg.Endpoints = append(reg.Endpoints, metadata.Endpoint{Name: l.Name, Host: l.Host, Port: l.Port, SecurityProtocol: l.SecurityProtocol})
	}
	prev := int64(-1)
	if req.Version >= 3 {
		prev = req.PreviousBrokerEpoch
	}
	epoch, code, err := c.registerChecked(ctx, reg, prev)
	switch {
	case err != nil:
		resp.ErrorCode, _ = failureCode(err)
		c.logger.Error(fmt.Sprintf("Registration of broker %d failed", req.BrokerID), "err", err)
	case code != 0:
		resp.ErrorCode = code
	default:
		resp.BrokerEpoch = epoch
	}
	return resp
}

// registerChecked is RegisterBroker behind the duplicate check; a new
// registration starts the broker's session.
func (c *Controller) registerChecked(ctx context.Context, reg BrokerRegistration, previousEpoch int64) (int64, int16, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	nowMs := c.cfg.Now().UnixMilli()
	if reg.BrokerID < 0 {
		return 0, kerr.InvalidRegistration.Code, nil
	}
	if old, ok := c.Image().Brokers[reg.BrokerID]; ok && old.IncarnationID != reg.IncarnationID &&
		previousEpoch != old.Epoch && c.sessions.Alive(reg.BrokerID, nowMs, c.sessionTimeoutMs.Load()) {
		c.logger.Warn(fmt.Sprintf("Refused registration of broker %d: incarnation %x is not the registered %x, whose session is still alive",
			reg.BrokerID, reg.IncarnationID[:], old.IncarnationID[:]))
		return 0, kerr.DuplicateBrokerRegistration.Code, nil
	}
	epoch, res, err := c.state().RegisterBroker(reg)
	if err != nil {
		return 0, kerr.InvalidRegistration.Code, nil
	}
	if err := c.commit(ctx, res.Records); err != nil {
		return 0, 0, err
	}
	c.sessions.Touch(reg.BrokerID, nowMs)
	if len(res.Records) > 0 {
		c.logger.Info(fmt.Sprintf("Registered broker %d (incarnation %x) at broker epoch %d", reg.BrokerID, reg.IncarnationID[:], epoch))
	}
	return epoch, 0, nil
}

// HandleBrokerHeartbeat renews a broker's session and answers its fencing
// state: STALE_BROKER_EPOCH for an epoch that is not the registered one,
// BROKER_ID_NOT_REGISTERED for an unknown broker.
func (c *Controller) HandleBrokerHeartbeat(ctx context.Context, req *kmsg.BrokerHeartbeatRequest) *kmsg.BrokerHeartbeatResponse {
	resp := kmsg.NewPtrBrokerHeartbeatResponse()
	resp.IsFenced = true
	if !c.ensureActive(ctx) {
		resp.ErrorCode = kerr.NotController.Code
		return resp
	}
	reply, err := c.Heartbeat(ctx, Heartbeat{
		BrokerID:       req.BrokerID,
		BrokerEpoch:    req.BrokerEpoch,
		MetadataOffset: req.CurrentMetadataOffset,
		WantFence:      req.WantFence,
		WantShutDown:   req.WantShutdown,
	})
	if err != nil {
		resp.ErrorCode, _ = failureCode(err)
		return resp
	}
	resp.ErrorCode = reply.ErrorCode
	resp.IsCaughtUp, resp.IsFenced, resp.ShouldShutdown = reply.IsCaughtUp, reply.IsFenced, reply.ShouldShutDown
	return resp
}

// HandleAlterPartition applies partition leaders' ISR changes, one decision
// per partition. v3 ISR members carrying a broker epoch that is not their
// registered one are INELIGIBLE_REPLICA.
func (c *Controller) HandleAlterPartition(ctx context.Context, req *kmsg.AlterPartitionRequest) *kmsg.AlterPartitionResponse {
	resp := kmsg.NewPtrAlterPartitionResponse()
	if !c.ensureActive(ctx) {
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

// HandleDescribeQuorum answers DescribeQuorum for __cluster_metadata-0 from
// the quorum's Describe: the leader, its epoch, the high watermark and each
// voter's and observer's log end offset. Only the quorum leader knows the
// others' progress: elsewhere the partition answers NOT_LEADER_OR_FOLLOWER
// with the leader this node knows. Other partitions are
// UNKNOWN_TOPIC_OR_PARTITION.
func (c *Controller) HandleDescribeQuorum(_ context.Context, req *kmsg.DescribeQuorumRequest) *kmsg.DescribeQuorumResponse {
	return DescribeQuorumResponse(c.cfg.NodeID, c.q, req)
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
