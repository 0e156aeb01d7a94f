package group

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"
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
