package group

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// DeleteGroups (key 42) deletes each named group that has no members: its
// committed offsets and its metadata are tombstoned in __consumer_offsets
// and the coordinator forgets it, as Kafka's does. Per group:
// INVALID_GROUP_ID for "", NOT_COORDINATOR or COORDINATOR_LOAD_IN_PROGRESS
// as for any group request, GROUP_ID_NOT_FOUND for a group this
// coordinator does not have, NON_EMPTY_GROUP for one with members or with
// offsets committed by a transaction still open (Kafka deletes those with
// the group; here the transaction must end first, so that its commit
// cannot bring them back on a replay), and the append's error when the
// tombstones could not be written (the group is then kept).
func (c *Coordinator) DeleteGroups(_ context.Context, req *kmsg.DeleteGroupsRequest) *kmsg.DeleteGroupsResponse {
	resp := kmsg.NewPtrDeleteGroupsResponse()
	for _, id := range req.Groups {
		rg := kmsg.NewDeleteGroupsResponseGroup()
		rg.Group, rg.ErrorCode = id, c.deleteGroup(id)
		resp.Groups = append(resp.Groups, rg)
	}
	return resp
}

// deleteGroup deletes one group and returns its error code. The group is
// dead (and gone from the coordinator's map) before its tombstones are
// written, so that a member joining meanwhile starts a new group, whose
// records follow the tombstones under the partition's append lock; a
// failed append puts it back, or its offsets into the group that took its
// name meanwhile. An append that timed out may still commit: the log then
// holds the tombstones although the group answered an error and is kept.
func (c *Coordinator) deleteGroup(id string) int16 {
	if id == "" {
		return codeInvalidGroupID
	}
	p, unlock, code := c.lockOwner(id)
	if code != codeNone {
		return code
	}
	defer unlock()
	g := c.groups[id]
	switch {
	case c.pendingTxnOffsetsLocked(p, id) || g != nil && c.liveLocked(g) && g.state != stateEmpty:
		c.mu.Unlock()
		return codeNonEmptyGroup
	case g == nil || !c.liveLocked(g):
		c.mu.Unlock()
		return codeGroupIDNotFound
	}
	tps := make([]topicPartition, 0, len(g.offsets))
	for tp := range g.offsets {
		tps = append(tps, tp)
	}
	slices.SortFunc(tps, func(a, b topicPartition) int {
		return cmp.Or(cmp.Compare(a.topic, b.topic), cmp.Compare(a.partition, b.partition))
	})
	recs := make([]Record, 0, len(tps)+1)
	for _, tp := range tps {
		recs = append(recs, offsetTombstone(id, tp))
	}
	recs = append(recs, groupTombstone(id))
	token := c.partitions[p].token
	c.dropGroupLocked(g, codeCoordinatorNotAvailable)
	delete(c.groups, id)
	c.mu.Unlock()

	err := c.appendRecords(p, recs)
	if err == nil {
		c.logger.Info(fmt.Sprintf("Deleted group %s and its %d committed offsets", id, len(tps)))
		return codeNone
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if st := c.partitions[p]; st != nil && st.token == token {
		if cur := c.groups[id]; cur == nil {
			g.transition(stateEmpty, c.clock.Now())
			c.groups[id] = g
		} else {
			// A group that took the name meanwhile also gets the old
			// offsets it has not committed over, as a replay of the log
			// would give it.
			for tp, o := range g.offsets {
				if _, ok := cur.offsets[tp]; !ok {
					cur.offsets[tp] = o
				}
			}
		}
	}
	c.logger.Warn(fmt.Sprintf("Failed to delete group %s: %v", id, err))
	return appendErrorCode(err)
}

// pendingTxnOffsetsLocked reports whether an open transaction has
// committed offsets for group on offsets partition p.
func (c *Coordinator) pendingTxnOffsetsLocked(p int32, group string) bool {
	for k, byGroup := range c.txnPending {
		if k.partition == p && len(byGroup[group]) > 0 {
			return true
		}
	}
	return false
}

// OffsetDelete (key 47) deletes a group's committed offsets of the named
// partitions, as Kafka's classic coordinator does: every partition of an
// empty group; of a consumer group with members, the partitions of topics
// no member subscribes to (GROUP_SUBSCRIBED_TO_TOPIC for the others, and
// for all while the members' subscriptions cannot be read); of another
// kind of group with members, none (NON_EMPTY_GROUP). Deleted offsets are
// tombstoned in __consumer_offsets first. Group-level errors
// (INVALID_GROUP_ID, NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS,
// GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP, a failed append's) go in the
// top-level error code.
func (c *Coordinator) OffsetDelete(_ context.Context, req *kmsg.OffsetDeleteRequest) *kmsg.OffsetDeleteResponse {
	resp := kmsg.NewPtrOffsetDeleteResponse()
	for _, t := range req.Topics {
		rt := kmsg.NewOffsetDeleteResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetDeleteResponseTopicPartition()
			rp.Partition = p.Partition
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	resp.ErrorCode = c.deleteOffsets(req.Group, resp)
	return resp
}

// deleteOffsets is OffsetDelete's work on resp's partitions; it returns
// the group-level error code.
func (c *Coordinator) deleteOffsets(id string, resp *kmsg.OffsetDeleteResponse) int16 {
	if id == "" {
		return codeInvalidGroupID
	}
	p, unlock, code := c.lockOwner(id)
	if code != codeNone {
		return code
	}
	defer unlock()
	g := c.groups[id]
	if g == nil || !c.liveLocked(g) {
		c.mu.Unlock()
		return codeGroupIDNotFound
	}
	subscribed := func(string) bool { return false }
	if g.state != stateEmpty {
		if g.protocolType != consumerProtocolType {
			c.mu.Unlock()
			return codeNonEmptyGroup
		}
		topics, known := g.subscribedTopics()
		subscribed = func(topic string) bool { return !known || topics[topic] }
	}
	var tps []topicPartition
	var recs []Record
	for i := range resp.Topics {
		rt := &resp.Topics[i]
		for j := range rt.Partitions {
			rp := &rt.Partitions[j]
			if subscribed(rt.Topic) {
				rp.ErrorCode = codeGroupSubscribedToTopic
				continue
			}
			tp := topicPartition{topic: rt.Topic, partition: rp.Partition}
			if _, ok := g.offsets[tp]; ok && !slices.Contains(tps, tp) {
				tps = append(tps, tp)
				recs = append(recs, offsetTombstone(id, tp))
			}
		}
	}
	c.mu.Unlock()
	if len(recs) == 0 {
		return codeNone
	}
	if err := c.appendRecords(p, recs); err != nil {
		c.logger.Warn(fmt.Sprintf("Failed to delete %d offsets of group %s: %v", len(recs), id, err))
		return appendErrorCode(err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.groups[id] == g {
		for _, tp := range tps {
			delete(g.offsets, tp)
		}
	}
	return codeNone
}

// consumerProtocolType is the protocol type of Kafka consumers' groups,
// whose member metadata lists their subscribed topics.
const consumerProtocolType = "consumer"

// subscribedTopics returns the topics g's members subscribe to, from the
// consumer protocol metadata of the group's selected protocol; false when
// no protocol is selected yet or a member's metadata does not decode.
func (g *group) subscribedTopics() (map[string]bool, bool) {
	if g.protocol == "" {
		return nil, false
	}
	topics := map[string]bool{}
	for _, m := range g.members {
		var md kmsg.ConsumerMemberMetadata
		if err := md.ReadFrom(m.metadataFor(g.protocol)); err != nil {
			return nil, false
		}
		for _, t := range md.Topics {
			topics[t] = true
		}
	}
	return topics, true
}
