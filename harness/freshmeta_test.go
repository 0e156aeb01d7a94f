package harness

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// metaAnswer is one node's metadata: controller ctl, and topic "t" with
// partitions given as {partition, leader, leader epoch, isr...}.
func metaAnswer(ctl int32, parts ...[]int32) *kmsg.MetadataResponse {
	resp := kmsg.NewPtrMetadataResponse()
	resp.ControllerID = ctl
	t := kmsg.NewMetadataResponseTopic()
	name := "t"
	t.Topic = &name
	for _, p := range parts {
		mp := kmsg.NewMetadataResponseTopicPartition()
		mp.Partition, mp.Leader, mp.LeaderEpoch, mp.ISR = p[0], p[1], p[2], p[3:]
		t.Partitions = append(t.Partitions, mp)
	}
	resp.Topics = append(resp.Topics, t)
	return resp
}

// TestMergeMetadataTakesTheFreshestPartitionState: a node back from a
// cut still names itself leader at an old epoch with its old ISR; the
// merge keeps the entry of the highest leader epoch, the controller's own
// on a tie, and the controller most nodes name.
func TestMergeMetadataTakesTheFreshestPartitionState(t *testing.T) {
	stale := metaAnswer(1, []int32{0, 3, 0, 3, 4, 5}, []int32{1, 2, 0, 2, 3})
	fresh := metaAnswer(1, []int32{0, 4, 1, 4, 5}, []int32{1, 2, 0, 2})
	ctlOwn := metaAnswer(1, []int32{0, 4, 1, 4, 5}, []int32{1, 2, 0, 2, 3, 4})
	got := mergeMetadata([]nodeMetadata{{3, stale}, {2, fresh}, {1, ctlOwn}})
	require.Len(t, got.Topics, 1)
	ps := got.Topics[0].Partitions
	require.Len(t, ps, 2)
	assert.Equal(t, int32(4), ps[0].Leader, "the higher leader epoch wins over the cut node's own view")
	assert.Equal(t, []int32{4, 5}, ps[0].ISR)
	assert.Equal(t, []int32{2, 3, 4}, ps[1].ISR, "same epoch: the controller's node's entry")
	assert.Equal(t, int32(1), got.ControllerID)

	votes := mergeMetadata([]nodeMetadata{{3, metaAnswer(3)}, {1, metaAnswer(1)}, {2, metaAnswer(1)}})
	assert.Equal(t, int32(1), votes.ControllerID, "the controller most nodes name")
}

// TestMergeMetadataKeepsATopicOneNodeDoesNotKnow: a topic one node errs on
// (its image has not caught up) keeps the entry another node knows.
func TestMergeMetadataKeepsATopicOneNodeDoesNotKnow(t *testing.T) {
	unknown := metaAnswer(1)
	unknown.Topics[0].ErrorCode = kerr.UnknownTopicOrPartition.Code
	known := metaAnswer(1, []int32{0, 2, 0, 2})
	got := mergeMetadata([]nodeMetadata{{1, unknown}, {2, known}})
	require.Len(t, got.Topics, 1)
	assert.Zero(t, got.Topics[0].ErrorCode)
	require.Len(t, got.Topics[0].Partitions, 1)
	assert.Equal(t, int32(2), got.Topics[0].Partitions[0].Leader)
}
