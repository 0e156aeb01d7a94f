package controller

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/faultline/faultline/broker/metadata"
)

// TestElectLeaders: preferred elections move leadership to the first
// replica when it is live and in the ISR; unclean ones give a leaderless
// partition a live replica; null topics answer only what needed one.
func TestElectLeaders(t *testing.T) {
	s := cluster(t, 1, 2, 3)
	id := metadata.Uuid{5}
	s.Image = mustApply(t, s.Image, &metadata.TopicRecord{Name: "t", TopicID: id},
		// 0: led by 2, preferred 1 in the ISR: moves to 1.
		&metadata.PartitionRecord{TopicID: id, PartitionID: 0, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}, Leader: 2},
		// 1: led by its preferred replica already.
		&metadata.PartitionRecord{TopicID: id, PartitionID: 1, Replicas: []int32{2, 3, 1}, ISR: []int32{2, 3, 1}, Leader: 2},
		// 2: preferred 3 out of the ISR.
		&metadata.PartitionRecord{TopicID: id, PartitionID: 2, Replicas: []int32{3, 1, 2}, ISR: []int32{1, 2}, Leader: 1},
		// 3: no leader, its ISR (3) fenced below.
		&metadata.PartitionRecord{TopicID: id, PartitionID: 3, Replicas: []int32{3, 2, 1}, ISR: []int32{3}, Leader: 3})
	res, err := s.FenceBroker(3)
	require.NoError(t, err)
	s.Image = res.Image
	require.Equal(t, metadata.NoLeader, s.Image.Partition("t", 3).Leader)

	codes := func(resp *kmsg.ElectLeadersResponse) map[int32]int16 {
		out := map[int32]int16{}
		for _, rt := range resp.Topics {
			if rt.Topic != "t" {
				continue
			}
			for _, rp := range rt.Partitions {
				out[rp.Partition] = rp.ErrorCode
			}
		}
		return out
	}
	req := kmsg.NewPtrElectLeadersRequest()
	req.Version, req.ElectionType = 2, electPreferred
	rt := kmsg.NewElectLeadersRequestTopic()
	rt.Topic, rt.Partitions = "t", []int32{0, 1, 2, 7}
	req.Topics = append(req.Topics, rt, kmsg.ElectLeadersRequestTopic{Topic: "gone", Partitions: []int32{0}})
	resp, res := s.ElectLeaders(req)
	assert.Equal(t, map[int32]int16{0: 0, 1: kerr.ElectionNotNeeded.Code, 2: kerr.PreferredLeaderNotAvailable.Code, 7: kerr.UnknownTopicOrPartition.Code}, codes(resp))
	require.Len(t, resp.Topics, 2)
	assert.Equal(t, kerr.UnknownTopicOrPartition.Code, resp.Topics[1].Partitions[0].ErrorCode)
	require.Len(t, res.Records, 1)
	p0 := res.Image.Partition("t", 0)
	assert.Equal(t, int32(1), p0.Leader)
	assert.Equal(t, s.Image.Partition("t", 0).LeaderEpoch+1, p0.LeaderEpoch, "a new leader epoch")
	assert.Equal(t, s.Image.Partition("t", 0).ISR, p0.ISR, "the ISR stays")

	// Unclean, every partition: only the leaderless one is answered, and
	// it gets a live replica outside its ISR, alone in the new ISR.
	all := kmsg.NewPtrElectLeadersRequest()
	all.Version, all.ElectionType = 2, electUnclean
	resp, res = s.ElectLeaders(all)
	assert.Equal(t, map[int32]int16{3: 0}, codes(resp))
	p3 := res.Image.Partition("t", 3)
	assert.Equal(t, int32(2), p3.Leader)
	assert.Equal(t, []int32{2}, p3.ISR)

	// Preferred, every partition: 0 moves, 2 cannot, 1 and 3 (leaderless
	// with its preferred replica fenced) are answered as they are.
	all.ElectionType = electPreferred
	resp, _ = s.ElectLeaders(all)
	assert.Equal(t, map[int32]int16{0: 0, 2: kerr.PreferredLeaderNotAvailable.Code, 3: kerr.PreferredLeaderNotAvailable.Code}, codes(resp))

	// v0 has no type and means preferred; another type is refused.
	v0 := kmsg.NewPtrElectLeadersRequest()
	v0.ElectionType = 9
	v0.Topics = []kmsg.ElectLeadersRequestTopic{{Topic: "t", Partitions: []int32{0}}}
	resp, _ = s.ElectLeaders(v0)
	assert.Equal(t, map[int32]int16{0: 0}, codes(resp))
	v0.Version = 1
	resp, res = s.ElectLeaders(v0)
	assert.Equal(t, map[int32]int16{0: kerr.InvalidRequest.Code}, codes(resp))
	assert.Empty(t, res.Records)
}
