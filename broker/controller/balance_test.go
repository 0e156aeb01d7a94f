package controller

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faultline/faultline/broker/metadata"
)

func TestBalanceLeaders(t *testing.T) {
	s := cluster(t, 1, 2, 3)
	id := metadata.Uuid{9}
	s.Image = mustApply(t, s.Image, &metadata.TopicRecord{Name: "t", TopicID: id},
		// 0: led by 2, preferred 1 live and in the ISR: moves to 1.
		&metadata.PartitionRecord{TopicID: id, PartitionID: 0, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}, Leader: 2},
		// 1: led by its preferred replica.
		&metadata.PartitionRecord{TopicID: id, PartitionID: 1, Replicas: []int32{2, 3, 1}, ISR: []int32{2, 3, 1}, Leader: 2},
		// 2: preferred 3 out of the ISR: stays.
		&metadata.PartitionRecord{TopicID: id, PartitionID: 2, Replicas: []int32{3, 1, 2}, ISR: []int32{1, 2}, Leader: 1},
		// 3: led by 3, preferred 2 in the ISR: moves to 2.
		&metadata.PartitionRecord{TopicID: id, PartitionID: 3, Replicas: []int32{2, 1, 3}, ISR: []int32{3, 2}, Leader: 3},
		// 4: led by 2, preferred 3 in the ISR: moves to 3.
		&metadata.PartitionRecord{TopicID: id, PartitionID: 4, Replicas: []int32{3, 2, 1}, ISR: []int32{2, 3}, Leader: 2})
	before := s.Image

	res, more := s.BalanceLeaders(0)
	assert.False(t, more)
	require.Len(t, res.Records, 3)
	assert.Equal(t, int32(1), res.Image.Partition("t", 0).Leader)
	assert.Equal(t, int32(2), res.Image.Partition("t", 1).Leader)
	assert.Equal(t, int32(1), res.Image.Partition("t", 2).Leader, "an out-of-sync preferred replica never leads")
	assert.Equal(t, int32(2), res.Image.Partition("t", 3).Leader)
	assert.Equal(t, int32(3), res.Image.Partition("t", 4).Leader)
	assert.Equal(t, []int32{2, 3}, res.Image.Partition("t", 4).ISR)
	assert.Equal(t, []int32{3, 2}, res.Image.Partition("t", 3).ISR, "a clean move keeps the ISR")
	assert.Same(t, before, s.Image, "decisions do not change the state's image")

	res, more = s.BalanceLeaders(2)
	assert.True(t, more, "the bound leaves partitions for another pass")
	assert.Len(t, res.Records, 2)
	s.Image = res.Image
	res, more = s.BalanceLeaders(2)
	assert.False(t, more)
	assert.Len(t, res.Records, 1)
	s.Image = res.Image

	fenced, err := s.FenceBroker(3)
	require.NoError(t, err)
	s.Image = fenced.Image
	res, _ = s.BalanceLeaders(0)
	require.NotEqual(t, int32(3), s.Image.Partition("t", 4).Leader, "fencing moved 4 away from 3")
	res, _ = s.BalanceLeaders(0)
	assert.Empty(t, res.Records, "a fenced preferred replica is not live: 4 stays where fencing put it")

	// A preferred replica still in the ISR but in controlled shutdown is
	// not live either.
	uid := metadata.Uuid{10}
	s.Image = mustApply(t, s.Image, &metadata.TopicRecord{Name: "u", TopicID: uid},
		&metadata.PartitionRecord{TopicID: uid, PartitionID: 0, Replicas: []int32{1, 2}, ISR: []int32{1, 2}, Leader: 2},
		&metadata.BrokerRegistrationChangeRecord{BrokerID: 1, BrokerEpoch: s.Image.Brokers[1].Epoch, InControlledShutdown: 1})
	require.Equal(t, []int32{1, 2}, s.Image.Partition("u", 0).ISR)
	res, _ = s.BalanceLeaders(0)
	assert.Empty(t, res.Records, "a preferred replica shutting down is not given leadership")
}
