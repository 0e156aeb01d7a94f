package controller

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

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

func TestHandleAlterPartition(t *testing.T) {
	log := newSharedLog(t, 1)
	c := newClusterController(t, 1, log.view(1), nil)
	clusterMode(c, time.Second)
	ctx := context.Background()
	epochs := map[int32]int64{}
	for id := int32(1); id <= 3; id++ {
		epochs[id] = joinBroker(t, c, id)
	}
	require.Zero(t, c.CreateTopics(ctx, createReq(topic("orders", 1, 3))).Topics[0].ErrorCode)
	p0 := *c.Image().Partition("orders", 0)
	tid := c.Image().Topic("orders").ID
	leader := p0.Leader
	var other int32
	for _, r := range p0.Replicas {
		if r != leader {
			other = r
			break
		}
	}

	// alter builds a request at version v from the partition's current state.
	alter := func(v int16, mutate func(*kmsg.AlterPartitionRequest, *kmsg.AlterPartitionRequestTopicPartition), isr ...int32) *kmsg.AlterPartitionResponse {
		p := c.Image().Partition("orders", 0)
		req := kmsg.NewPtrAlterPartitionRequest()
		req.Version, req.BrokerID, req.BrokerEpoch = v, leader, epochs[leader]
		rp := kmsg.NewAlterPartitionRequestTopicPartition()
		rp.Partition, rp.LeaderEpoch, rp.PartitionEpoch, rp.NewISR = 0, p.LeaderEpoch, p.PartitionEpoch, isr
		if v >= 3 {
			for _, id := range isr {
				rp.NewEpochISR = append(rp.NewEpochISR, kmsg.AlterPartitionRequestTopicPartitionNewEpochISR{BrokerID: id, BrokerEpoch: epochs[id]})
			}
		}
		req.Topics = []kmsg.AlterPartitionRequestTopic{{Topic: "orders", TopicID: tid, Partitions: []kmsg.AlterPartitionRequestTopicPartition{rp}}}
		if mutate != nil {
			mutate(req, &req.Topics[0].Partitions[0])
		}
		return c.HandleAlterPartition(ctx, req)
	}

	cases := []struct {
		name   string
		v      int16
		mutate func(*kmsg.AlterPartitionRequest, *kmsg.AlterPartitionRequestTopicPartition)
		isr    []int32
		want   *kerr.Error
	}{
		{name: "v2 shrink by topic id", v: 2, isr: []int32{leader, other}},
		{name: "stale partition epoch", v: 2, isr: []int32{leader}, want: kerr.InvalidUpdateVersion,
			mutate: func(_ *kmsg.AlterPartitionRequest, p *kmsg.AlterPartitionRequestTopicPartition) { p.PartitionEpoch-- }},
		{name: "older leader epoch", v: 2, isr: []int32{leader}, want: kerr.FencedLeaderEpoch,
			mutate: func(_ *kmsg.AlterPartitionRequest, p *kmsg.AlterPartitionRequestTopicPartition) { p.LeaderEpoch-- }},
		{name: "sender's broker epoch is stale", v: 2, isr: []int32{leader}, want: kerr.StaleBrokerEpoch,
			mutate: func(r *kmsg.AlterPartitionRequest, _ *kmsg.AlterPartitionRequestTopicPartition) { r.BrokerEpoch++ }},
		{name: "v0 expand by topic name", v: 0, isr: p0.Replicas},
		{name: "v0 unknown topic name", v: 0, isr: []int32{leader}, want: kerr.UnknownTopicOrPartition,
			mutate: func(r *kmsg.AlterPartitionRequest, _ *kmsg.AlterPartitionRequestTopicPartition) {
				r.Topics[0].Topic = "nope"
			}},
		{name: "v3 member with a stale broker epoch", v: 3, isr: []int32{leader, other}, want: kerr.IneligibleReplica,
			mutate: func(_ *kmsg.AlterPartitionRequest, p *kmsg.AlterPartitionRequestTopicPartition) {
				p.NewEpochISR[1].BrokerEpoch--
			}},
		{name: "v3 shrink with broker epochs", v: 3, isr: []int32{leader}},
	}
	for _, tc := range cases {
		before := *c.Image().Partition("orders", 0)
		resp := alter(tc.v, tc.mutate, tc.isr...)
		require.Zero(t, resp.ErrorCode, tc.name)
		sp := resp.Topics[0].Partitions[0]
		after := *c.Image().Partition("orders", 0)
		if tc.want != nil {
			assert.Equal(t, tc.want.Code, sp.ErrorCode, "%s: got %v", tc.name, kerr.ErrorForCode(sp.ErrorCode))
			assert.Equal(t, before, after, "%s: a refused change changes nothing", tc.name)
			continue
		}
		require.Zero(t, sp.ErrorCode, "%s: %v", tc.name, kerr.ErrorForCode(sp.ErrorCode))
		assert.ElementsMatch(t, tc.isr, after.ISR, tc.name)
		assert.Equal(t, after.ISR, sp.ISR, tc.name)
		assert.Equal(t, before.PartitionEpoch+1, sp.PartitionEpoch, "%s: an ISR change bumps the partition epoch", tc.name)
		assert.Equal(t, before.LeaderEpoch, sp.LeaderEpoch, "%s: and not the leader epoch", tc.name)
		assert.Equal(t, leader, sp.LeaderID, tc.name)
	}
}
