package controller

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faultline/faultline/broker/metadata"
)

func TestFenceBrokerElection(t *testing.T) {
	tests := []struct {
		name      string
		replicas  []int32
		isr       []int32
		unclean   bool
		down      []int32 // fenced before broker 1
		wantLead  int32
		wantISR   []int32
		wantEpoch int32
	}{
		{"isr intact", []int32{1, 2, 3}, []int32{1, 2, 3}, false, nil, 2, []int32{2, 3}, 1},
		{"degraded", []int32{1, 2, 3}, []int32{1, 2}, false, nil, 2, []int32{2}, 1},
		{"no live isr member", []int32{1, 2, 3}, []int32{1}, false, nil, metadata.NoLeader, []int32{1}, 1},
		{"unclean elects out of sync replica", []int32{1, 2, 3}, []int32{1}, true, nil, 2, []int32{2}, 1},
		{"isr member fenced too", []int32{1, 2, 3}, []int32{1, 2, 3}, false, []int32{2}, 3, []int32{3}, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := cluster(t, 1, 2, 3)
			s.Defaults.UncleanLeaderElection = tc.unclean
			id := metadata.Uuid{5}
			s.Image = mustApply(t, s.Image, &metadata.TopicRecord{Name: "t", TopicID: id},
				&metadata.PartitionRecord{TopicID: id, Replicas: tc.replicas, ISR: tc.isr, Leader: 1})
			for _, d := range tc.down {
				res, err := s.FenceBroker(d)
				require.NoError(t, err)
				s.Image = res.Image
			}
			res, err := s.FenceBroker(1)
			require.NoError(t, err)
			p := res.Image.Partition("t", 0)
			assert.Equal(t, tc.wantLead, p.Leader)
			assert.Equal(t, tc.wantISR, p.ISR)
			assert.Equal(t, tc.wantEpoch, p.LeaderEpoch)
			assert.True(t, res.Image.Brokers[1].Fenced)
		})
	}
}
