package group

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/faultline/faultline/broker/metadata"
)

// TestDeleteGroups: an empty group is deleted with its offsets (the
// tombstones replay after a restart); a group with members, or with
// offsets of a transaction still open, is NON_EMPTY_GROUP; an unknown one
// GROUP_ID_NOT_FOUND; a failed append keeps the group.
func TestDeleteGroups(t *testing.T) {
	h := newHarness(t, 0)
	h.c.log = txnMemLog{h.log}
	ctx := context.Background()
	del := func(groups ...string) map[string]int16 {
		req := kmsg.NewPtrDeleteGroupsRequest()
		req.Version, req.Groups = 2, groups
		out := map[string]int16{}
		for _, g := range h.c.DeleteGroups(ctx, req).Groups {
			out[g.Group] = g.ErrorCode
		}
		return out
	}
	require.Equal(t, map[int32]int16{0: codeNone, 2: codeNone}, h.commit("idle", "", -1, "t", map[int32]int64{0: 5, 2: 9}))
	require.Equal(t, map[int32]int16{1: codeNone}, h.commit("kept", "", -1, "t", map[int32]int64{1: 4}))
	resp := recv(t, h.joinAsync(joinReq("busy", "")))
	require.Equal(t, codeMemberIDRequired, resp.ErrorCode)
	resp = recv(t, h.joinAsync(joinReq("busy", resp.MemberID)))
	require.Zero(t, resp.ErrorCode)
	txn := kmsg.NewPtrTxnOffsetCommitRequest()
	txn.Version, txn.TransactionalID, txn.Group, txn.ProducerID, txn.Generation = 3, "tx", "pending", 7, -1
	txn.Topics = []kmsg.TxnOffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.TxnOffsetCommitRequestTopicPartition{{Partition: 1, Offset: 3, LeaderEpoch: -1}}}}
	require.Zero(t, h.c.TxnOffsetCommit(ctx, txn).Topics[0].Partitions[0].ErrorCode)

	assert.Equal(t, map[string]int16{"idle": codeNone, "busy": codeNonEmptyGroup, "pending": codeNonEmptyGroup,
		"nobody": codeGroupIDNotFound, "": codeInvalidGroupID}, del("idle", "busy", "pending", "nobody", ""))
	offs, _ := h.fetch("idle", "t")
	assert.Equal(t, map[int32]int64{0: -1, 1: -1, 2: -1}, offs)
	assert.Equal(t, "Dead", h.describe("idle").State)
	assert.Equal(t, codeGroupIDNotFound, del("idle")["idle"], "deleted once")

	h.c.CompleteTxn(h.c.PartitionFor("pending"), 7, true)
	h.log.fail(errBoom)
	assert.Equal(t, codeCoordinatorNotAvailable, del("pending")["pending"])
	offs, _ = h.fetch("pending", "t")
	assert.Equal(t, int64(3), offs[1], "a failed delete keeps the group")
	assert.Equal(t, codeNone, del("pending")["pending"], "once its transaction ended")

	h.c.Close()
	h.start()
	for _, g := range []string{"idle", "pending"} {
		offs, _ = h.fetch(g, "t")
		assert.Equal(t, map[int32]int64{0: -1, 1: -1, 2: -1}, offs, "%s stays deleted after a reload", g)
		assert.Equal(t, "Dead", h.describe(g).State)
	}
	offs, _ = h.fetch("kept", "t")
	assert.Equal(t, int64(4), offs[1])
}

// TestOffsetDelete: an empty group loses the named offsets (tombstoned,
// so a reload agrees); a consumer group with members keeps the offsets of
// topics its members subscribe to (GROUP_SUBSCRIBED_TO_TOPIC) and loses
// the others; an unreadable subscription protects every topic; a group
// of another protocol type with members is NON_EMPTY_GROUP.
func TestOffsetDelete(t *testing.T) {
	h := newHarness(t, 0)
	addTopic(h.src.Image(), "u", metadata.Uuid{3}, 3, 1)
	ctx := context.Background()
	offDel := func(group string, topics map[string][]int32) (int16, map[string]int16) {
		req := kmsg.NewPtrOffsetDeleteRequest()
		req.Group = group
		for topic, parts := range topics {
			rt := kmsg.NewOffsetDeleteRequestTopic()
			rt.Topic = topic
			for _, p := range parts {
				rt.Partitions = append(rt.Partitions, kmsg.OffsetDeleteRequestTopicPartition{Partition: p})
			}
			req.Topics = append(req.Topics, rt)
		}
		resp := h.c.OffsetDelete(ctx, req)
		out := map[string]int16{}
		for _, rt := range resp.Topics {
			for _, rp := range rt.Partitions {
				out[fmt.Sprintf("%s-%d", rt.Topic, rp.Partition)] = rp.ErrorCode
			}
		}
		return resp.ErrorCode, out
	}
	require.Equal(t, map[int32]int16{0: codeNone, 2: codeNone}, h.commit("idle", "", -1, "t", map[int32]int64{0: 5, 2: 9}))
	code, parts := offDel("idle", map[string][]int32{"t": {0, 1}})
	assert.Equal(t, codeNone, code)
	assert.Equal(t, map[string]int16{"t-0": codeNone, "t-1": codeNone}, parts)
	offs, _ := h.fetch("idle", "t")
	assert.Equal(t, map[int32]int64{0: -1, 1: -1, 2: 9}, offs)

	// A consumer group whose one member subscribes to "t" only.
	md := kmsg.NewConsumerMemberMetadata()
	md.Topics = []string{"t"}
	require.Equal(t, map[int32]int16{0: codeNone}, h.commit("busy", "", -1, "u", map[int32]int64{0: 3}))
	require.Equal(t, map[int32]int16{0: codeNone}, h.commit("busy", "", -1, "t", map[int32]int64{0: 4}))
	join := joinReq("busy", "")
	join.Protocols[0].Metadata = md.AppendTo(nil)
	resp := recv(t, h.joinAsync(join))
	join.MemberID = resp.MemberID
	resp = recv(t, h.joinAsync(join))
	require.Zero(t, resp.ErrorCode)
	code, parts = offDel("busy", map[string][]int32{"t": {0}, "u": {0}})
	assert.Equal(t, codeNone, code)
	assert.Equal(t, map[string]int16{"t-0": codeGroupSubscribedToTopic, "u-0": codeNone}, parts)
	offs, _ = h.fetch("busy", "u")
	assert.Equal(t, int64(-1), offs[0])
	offs, _ = h.fetch("busy", "t")
	assert.Equal(t, int64(4), offs[0])

	// Metadata that is no consumer subscription protects every topic.
	opaque := recv(t, h.joinAsync(joinReq("opaque", "")))
	opaque = recv(t, h.joinAsync(joinReq("opaque", opaque.MemberID)))
	require.Zero(t, opaque.ErrorCode)
	_, parts = offDel("opaque", map[string][]int32{"u": {0}})
	assert.Equal(t, map[string]int16{"u-0": codeGroupSubscribedToTopic}, parts)

	other := joinReq("connect", "")
	other.ProtocolType = "connect"
	r := recv(t, h.joinAsync(other))
	other.MemberID = r.MemberID
	require.Zero(t, recv(t, h.joinAsync(other)).ErrorCode)
	code, _ = offDel("connect", map[string][]int32{"u": {0}})
	assert.Equal(t, codeNonEmptyGroup, code)
	code, _ = offDel("nobody", map[string][]int32{"u": {0}})
	assert.Equal(t, codeGroupIDNotFound, code)

	h.c.Close()
	h.start()
	offs, _ = h.fetch("idle", "t")
	assert.Equal(t, map[int32]int64{0: -1, 1: -1, 2: 9}, offs, "the tombstones replay")
}
