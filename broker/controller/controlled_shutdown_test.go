package controller

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faultline/faultline/broker/metadata"
)

// TestControlledShutdownMovesLeadershipAway: a heartbeat wanting to shut
// down puts the broker in controlled shutdown, moves each leadership to
// another live ISR member (or to none, for a partition it alone
// replicates) and lets it stop once it leads nothing.
func TestControlledShutdownMovesLeadershipAway(t *testing.T) {
	s := cluster(t, 1, 2)
	_, res, _ := s.CreateTopics(createReq(topic("shared", 1, 2), topic("alone", 1, 1)))
	s.Image = res.Image
	shared := s.Image.Partition("shared", 0)
	leader := shared.Leader
	other := int32(3) - leader
	var alone int32 = -1
	if p := s.Image.Partition("alone", 0); p.Leader == leader {
		alone = leader
	}

	b := s.Image.Brokers[leader]
	reply, res, err := s.Heartbeat(Heartbeat{BrokerID: leader, BrokerEpoch: b.Epoch, MetadataOffset: s.Image.Offset, WantShutDown: true})
	require.NoError(t, err)
	assert.True(t, reply.ShouldShutDown, "it leads nothing once the decision is applied")
	assert.True(t, res.Image.Brokers[leader].InControlledShutdown)
	assert.Equal(t, other, res.Image.Partition("shared", 0).Leader, "the other ISR member leads")
	assert.Greater(t, res.Image.Partition("shared", 0).LeaderEpoch, shared.LeaderEpoch)
	if alone >= 0 {
		assert.Equal(t, metadata.NoLeader, res.Image.Partition("alone", 0).Leader, "no other replica: leaderless until it is back")
	}

	// Asked again, nothing more is written.
	s.Image = res.Image
	reply, res, err = s.Heartbeat(Heartbeat{BrokerID: leader, BrokerEpoch: b.Epoch, MetadataOffset: s.Image.Offset, WantShutDown: true})
	require.NoError(t, err)
	assert.True(t, reply.ShouldShutDown)
	assert.Empty(t, res.Records)
}

func TestBeginControlledShutdownOnlyForALiveBroker(t *testing.T) {
	assert.Len(t, beginControlledShutdown(metadata.Broker{ID: 1, Epoch: 3}), 1)
	assert.Empty(t, beginControlledShutdown(metadata.Broker{ID: 1, Epoch: 3, Fenced: true}), "a fenced broker leads nothing already")
	assert.Empty(t, beginControlledShutdown(metadata.Broker{ID: 1, Epoch: 3, InControlledShutdown: true}), "already in controlled shutdown")
}
