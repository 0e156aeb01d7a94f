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
// failed append puts it back when no new group took its name.
func (c *Coordinator) deleteGroup(id string) int16 {
	if id == "" {
		return codeInvalidGroupID
	}
	c.mu.Lock()
	p, code := c.ownerLocked(id)
	c.mu.Unlock()
	if code != codeNone {
		return code
	}
	lock := c.appendLocks.Of(p)
	lock.Lock()
	defer lock.Unlock()

	c.mu.Lock()
	if _, code := c.ownerLocked(id); code != codeNone {
		c.mu.Unlock()
		return code
	}
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
	if st := c.partitions[p]; st != nil && st.token == token && c.groups[id] == nil {
		g.transition(stateEmpty, c.clock.Now())
		c.groups[id] = g
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
