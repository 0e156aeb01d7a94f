package harness

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/faultline/faultline/checker"
)

func TestLeaderChangesRecordsOnlyWhatChanged(t *testing.T) {
	names := map[int32]string{1: "n1", 2: "n2", 4: "n4"}
	name := func(id int32) string { return names[id] }
	owns := func(topic string) bool { return topic != "__consumer_offsets" }
	md := func(parts ...kmsg.MetadataResponseTopicPartition) *kmsg.MetadataResponse {
		t0, other := "t0", "__consumer_offsets"
		return &kmsg.MetadataResponse{Topics: []kmsg.MetadataResponseTopic{
			{Topic: &other, Partitions: []kmsg.MetadataResponseTopicPartition{{Partition: 0, Leader: 1, LeaderEpoch: 1}}},
			{Topic: &t0, Partitions: parts},
		}}
	}
	part := func(p, leader, epoch int32) kmsg.MetadataResponseTopicPartition {
		return kmsg.MetadataResponseTopicPartition{Partition: p, Leader: leader, LeaderEpoch: epoch}
	}
	known := map[topicPartition]checker.Leadership{}
	first := leaderChanges(known, md(part(1, 2, 3), part(0, 1, 5)), owns, name)
	assert.Equal(t, []checker.Leadership{
		{Topic: "t0", Partition: 0, Leader: "n1", Epoch: 5},
		{Topic: "t0", Partition: 1, Leader: "n2", Epoch: 3},
	}, first, "every owned partition at first, sorted")
	assert.Empty(t, leaderChanges(known, md(part(0, 1, 5), part(1, 2, 3)), owns, name), "nothing changed")
	assert.Equal(t, []checker.Leadership{{Topic: "t0", Partition: 1, Leader: "n4", Epoch: 4}},
		leaderChanges(known, md(part(0, 1, 5), part(1, 4, 4)), owns, name))
	leaderless := part(0, -1, 6)
	leaderless.ErrorCode = kerr.LeaderNotAvailable.Code
	assert.Equal(t, []checker.Leadership{{Topic: "t0", Partition: 0, Leader: "", Epoch: 6}},
		leaderChanges(known, md(leaderless, part(1, 4, 4)), owns, name), "a partition without a leader is recorded")
	broken := part(1, 2, 9)
	broken.ErrorCode = kerr.UnknownServerError.Code
	assert.Empty(t, leaderChanges(known, md(leaderless, broken), owns, name), "an answer with an error says nothing")
}
