package group

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/faultline/faultline/broker/metadata"
)

// DescribeGroups (key 15, v0-v6) describes groups this node coordinates.
// Member metadata and assignments are shown only for Stable groups, as
// Kafka does. An unknown group is reported Dead, from v6 with
// GROUP_ID_NOT_FOUND. Authorized operations are never computed (ACLs are not
// implemented) and read as "not provided".
func (c *Coordinator) DescribeGroups(_ context.Context, req *kmsg.DescribeGroupsRequest) *kmsg.DescribeGroupsResponse {
	resp := kmsg.NewPtrDescribeGroupsResponse()
	resp.Version = req.Version
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, id := range req.Groups {
		rg := kmsg.NewDescribeGroupsResponseGroup()
		rg.Group = id
		rg.AuthorizedOperations = math.MinInt32
		rg.State = stateDead.String()
		if _, code := c.ownerLocked(id); code != codeNone {
			rg.ErrorCode = code
			rg.State = ""
			resp.Groups = append(resp.Groups, rg)
			continue
		}
		g := c.groups[id]
		if g == nil {
			if req.Version >= 6 {
				rg.ErrorCode = codeGroupIDNotFound
				msg := fmt.Sprintf("Group %s not found.", id)
				rg.ErrorMessage = &msg
			}
			resp.Groups = append(resp.Groups, rg)
			continue
		}
		rg.State = g.state.String()
		rg.ProtocolType = g.protocolType
		stable := g.state == stateStable
		if stable {
			rg.Protocol = g.protocol
		}
		for _, m := range g.sortedMembers() {
			rm := kmsg.NewDescribeGroupsResponseGroupMember()
			rm.MemberID = m.id
			rm.InstanceID = m.instanceID
			rm.ClientID = m.clientID
			rm.ClientHost = m.clientHost
			rm.ProtocolMetadata = []byte{}
			rm.MemberAssignment = []byte{}
			if stable {
				if md := m.metadataFor(g.protocol); md != nil {
					rm.ProtocolMetadata = md
				}
				if m.assignment != nil {
					rm.MemberAssignment = m.assignment
				}
			}
			rg.Members = append(rg.Members, rm)
		}
		resp.Groups = append(resp.Groups, rg)
	}
	return resp
}

// ListGroups (key 16, v0-v5) lists the groups of the offsets partitions this
// node has loaded, filtered by state (v4+, case-insensitive) and by type
// (v5+: every group here is "classic"). While a partition is still loading
// the answer carries COORDINATOR_LOAD_IN_PROGRESS along with what is known.
func (c *Coordinator) ListGroups(_ context.Context, req *kmsg.ListGroupsRequest) *kmsg.ListGroupsResponse {
	resp := kmsg.NewPtrListGroupsResponse()
	resp.Version = req.Version
	match := func(filter []string, v string) bool {
		if len(filter) == 0 {
			return true
		}
		for _, f := range filter {
			if strings.EqualFold(f, v) {
				return true
			}
		}
		return false
	}
	var states, types []string
	if req.Version >= 4 {
		states = req.StatesFilter
	}
	if req.Version >= 5 {
		types = req.TypesFilter
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, st := range c.partitions {
		if st.loading {
			resp.ErrorCode = codeCoordinatorLoadInProgress
		}
	}
	for _, g := range c.groups {
		if g.state == stateDead || !match(states, g.state.String()) || !match(types, "classic") {
			continue
		}
		lg := kmsg.NewListGroupsResponseGroup()
		lg.Group = g.id
		lg.ProtocolType = g.protocolType
		lg.GroupState = g.state.String()
		lg.GroupType = "classic"
		resp.Groups = append(resp.Groups, lg)
	}
	sort.Slice(resp.Groups, func(i, j int) bool { return resp.Groups[i].Group < resp.Groups[j].Group })
	return resp
}

// FindCoordinator (key 10, v0-v6) answers which broker coordinates a group:
// the leader of the group's __consumer_offsets partition, creating the topic
// first if it does not exist. COORDINATOR_NOT_AVAILABLE while the partition
// has no live leader. v4+ batches keys. Transaction coordinators (key type
// 1) are not implemented and answer COORDINATOR_NOT_AVAILABLE, so
// transactional clients fail after their retries instead of misbehaving;
// other key types (share groups) answer INVALID_REQUEST.
func (c *Coordinator) FindCoordinator(ctx context.Context, req *kmsg.FindCoordinatorRequest) *kmsg.FindCoordinatorResponse {
	resp := kmsg.NewPtrFindCoordinatorResponse()
	resp.Version = req.Version
	keys := req.CoordinatorKeys
	if req.Version < 4 {
		keys = []string{req.CoordinatorKey}
	}
	var ensured error
	ensure := true
	for _, key := range keys {
		rc := kmsg.NewFindCoordinatorResponseCoordinator()
		rc.Key = key
		rc.NodeID, rc.Port = -1, -1
		switch req.CoordinatorType {
		case 0:
			if ensure {
				ensure = false
				ensured = c.ensureTopic(ctx)
			}
			c.locate(key, ensured, &rc)
		case 1:
			rc.ErrorCode = codeCoordinatorNotAvailable
			rc.ErrorMessage = ptr("transaction coordinator is not implemented by this broker")
		default:
			rc.ErrorCode = codeInvalidRequest
			rc.ErrorMessage = ptr(fmt.Sprintf("unsupported coordinator type %d", req.CoordinatorType))
		}
		resp.Coordinators = append(resp.Coordinators, rc)
	}
	if req.Version < 4 && len(resp.Coordinators) == 1 {
		rc := resp.Coordinators[0]
		resp.ErrorCode, resp.ErrorMessage = rc.ErrorCode, rc.ErrorMessage
		resp.NodeID, resp.Host, resp.Port = rc.NodeID, rc.Host, rc.Port
		resp.Coordinators = nil
	}
	return resp
}

func (c *Coordinator) ensureTopic(ctx context.Context) error {
	if c.md.Image().Topic(OffsetsTopic) != nil {
		return nil
	}
	if err := c.log.EnsureTopic(ctx); err != nil {
		c.logger.Warn(fmt.Sprintf("Could not create %s: %v", OffsetsTopic, err))
		return fmt.Errorf("create %s: %w", OffsetsTopic, err)
	}
	return nil
}

func (c *Coordinator) locate(key string, ensured error, rc *kmsg.FindCoordinatorResponseCoordinator) {
	unavailable := func(msg string) {
		rc.ErrorCode = codeCoordinatorNotAvailable
		rc.ErrorMessage = &msg
	}
	if ensured != nil {
		unavailable(ensured.Error())
		return
	}
	b, msg := CoordinatorFor(c.md.Image(), OffsetsTopic, key)
	if msg != "" {
		unavailable(msg)
		return
	}
	rc.NodeID, rc.Host, rc.Port = b.ID, b.Host, b.Port
}

// CoordinatorFor is the broker that coordinates key: the leader of key's
// partition of the internal topic (placed as Kafka does, HashPartition
// over the topic's partition count), or why there is none to name.
func CoordinatorFor(im *metadata.Image, topic, key string) (metadata.Broker, string) {
	t := im.Topic(topic)
	if t == nil || len(t.Partitions) == 0 {
		return metadata.Broker{}, topic + " does not exist yet"
	}
	n := partitionFor(key, int32(len(t.Partitions)))
	p := im.Partition(topic, n)
	if p == nil || p.Leader < 0 {
		return metadata.Broker{}, fmt.Sprintf("partition %s-%d has no leader", topic, n)
	}
	b, ok := im.Brokers[p.Leader]
	if !ok || b.Fenced {
		return metadata.Broker{}, fmt.Sprintf("the leader %d of %s-%d is not available", p.Leader, topic, n)
	}
	return b, ""
}

func ptr[T any](v T) *T { return &v }
