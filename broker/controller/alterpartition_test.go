package controller

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/faultline/faultline/broker/metadata"
)

func TestAlterPartition(t *testing.T) {
	id := metadata.Uuid{5}
	base := func(t *testing.T) *ClusterState {
		s := cluster(t, 1, 2, 3, 4)
		s.Image = mustApply(t, s.Image, &metadata.TopicRecord{Name: "t", TopicID: id},
			&metadata.PartitionRecord{TopicID: id, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2}, Leader: 1, LeaderEpoch: 4, PartitionEpoch: 9})
		return s
	}
	ok := AlterPartition{BrokerID: 1, BrokerEpoch: 1, TopicID: id, LeaderEpoch: 4, PartitionEpoch: 9}
	tests := []struct {
		name    string
		mutate  func(r *AlterPartition, s *ClusterState)
		isr     []int32
		code    int16
		records int
	}{
		{"expand", nil, []int32{1, 2, 3}, 0, 1},
		{"shrink", nil, []int32{1}, 0, 1},
		{"unchanged in another order", nil, []int32{2, 1}, 0, 0},
		{"stale broker epoch", func(r *AlterPartition, _ *ClusterState) { r.BrokerEpoch = 0 }, []int32{1}, kerr.StaleBrokerEpoch.Code, 0},
		{"unknown topic", func(r *AlterPartition, _ *ClusterState) { r.TopicID = metadata.Uuid{6} }, []int32{1}, kerr.UnknownTopicID.Code, 0},
		{"unknown partition", func(r *AlterPartition, _ *ClusterState) { r.Partition = 1 }, []int32{1}, kerr.UnknownTopicOrPartition.Code, 0},
		{"old leader epoch", func(r *AlterPartition, _ *ClusterState) { r.LeaderEpoch = 3 }, []int32{1}, kerr.FencedLeaderEpoch.Code, 0},
		{"newer leader epoch", func(r *AlterPartition, _ *ClusterState) { r.LeaderEpoch = 5 }, []int32{1}, kerr.NotController.Code, 0},
		{"old partition epoch", func(r *AlterPartition, _ *ClusterState) { r.PartitionEpoch = 8 }, []int32{1}, kerr.InvalidUpdateVersion.Code, 0},
		{"not the leader", func(r *AlterPartition, _ *ClusterState) { r.BrokerID = 2; r.BrokerEpoch = 2 }, []int32{2}, kerr.InvalidRequest.Code, 0},
		{"isr without leader", nil, []int32{2}, kerr.InvalidRequest.Code, 0},
		{"non-replica", nil, []int32{1, 4}, kerr.InvalidRequest.Code, 0},
		{"duplicate", nil, []int32{1, 1}, kerr.InvalidRequest.Code, 0},
		{"fenced newcomer", func(_ *AlterPartition, s *ClusterState) {
			s.Image = mustApply(t, s.Image, &metadata.FenceBrokerRecord{ID: 3, Epoch: 3})
		}, []int32{1, 2, 3}, kerr.IneligibleReplica.Code, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := base(t)
			req := ok
			req.NewISR = tc.isr
			if tc.mutate != nil {
				tc.mutate(&req, s)
			}
			code, p, res := s.AlterPartition(req)
			assert.Equal(t, tc.code, code)
			assert.Len(t, res.Records, tc.records)
			if tc.records > 0 {
				assert.Equal(t, tc.isr, p.ISR)
				assert.Equal(t, int32(10), p.PartitionEpoch)
				assert.Equal(t, int32(4), p.LeaderEpoch, "an ISR change keeps the leader epoch")
				assert.Equal(t, p, *res.Image.Partition("t", 0))
			}
		})
	}
}

func TestSessions(t *testing.T) {
	var s Sessions
	s.Touch(1, 1000)
	s.Touch(2, 500)
	s.Touch(3, 2000)
	s.Touch(1, 900) // out of order: the later time stays
	assert.Equal(t, []int32{2, 1}, s.Expired(10500, 9000))
	assert.True(t, s.Alive(3, 10500, 9000))
	assert.False(t, s.Alive(4, 0, 9000))
	s.Remove(2)
	require.Equal(t, []int32{1}, s.Expired(10500, 9000))
	assert.Empty(t, s.Expired(1000, 9000))
}
