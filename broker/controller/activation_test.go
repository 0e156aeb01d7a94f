package controller

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/faultline/faultline/broker/quorum"
)

func TestHandlersNotController(t *testing.T) {
	log := newSharedLog(t, 1)
	c1 := newClusterController(t, 1, log.view(1), nil)
	c2 := newClusterController(t, 2, log.view(2), nil)
	clusterMode(c1, time.Second)
	clusterMode(c2, time.Second)
	ctx := context.Background()
	joinBroker(t, c1, 1)

	nc := kerr.NotController.Code
	assert.Equal(t, nc, c2.HandleBrokerRegistration(ctx, regReq(2, 2, -1)).ErrorCode)
	hb := c2.HandleBrokerHeartbeat(ctx, hbReq(1, 0, 0, false, false))
	assert.Equal(t, nc, hb.ErrorCode)
	assert.True(t, hb.IsFenced, "an error answer keeps IsFenced's default")
	assert.Equal(t, nc, c2.HandleAlterPartition(ctx, kmsg.NewPtrAlterPartitionRequest()).ErrorCode)
	dq := c2.HandleDescribeQuorum(ctx, describeReq(quorum.MetadataTopic, 0))
	p := dq.Topics[0].Partitions[0]
	assert.Equal(t, kerr.NotLeaderForPartition.Code, p.ErrorCode)
	assert.Equal(t, int32(1), p.LeaderID, "the follower names the leader it knows")
	assert.Equal(t, nc, c2.CreateTopics(ctx, createReq(topic("t", 1, 1))).Topics[0].ErrorCode)

	// Failover: 2 leads epoch 2. 1 stops deciding; 2 decides once its NoOp
	// is committed.
	noops := log.count(isNoOp)
	log.setLeader(2, 2)
	assert.False(t, c2.Active(), "not active before its NoOp")
	assert.Equal(t, nc, c1.HandleBrokerHeartbeat(ctx, hbReq(1, 0, 0, false, false)).ErrorCode)
	r := c2.HandleBrokerRegistration(ctx, regReq(2, 2, -1))
	require.Zero(t, r.ErrorCode)
	assert.True(t, c2.Active())
	assert.Equal(t, noops+1, log.count(isNoOp), "one NoOp on winning leadership")
	c2.HandleBrokerHeartbeat(ctx, hbReq(2, r.BrokerEpoch, 1<<40, false, false))
	assert.Equal(t, noops+1, log.count(isNoOp), "and no more within the epoch")
	assert.Equal(t, nc, c1.CreateTopics(ctx, createReq(topic("t", 1, 1))).Topics[0].ErrorCode)
}

// TestActivationShortensPreviousLeadersSession: a controller taking over
// from another gives every broker a fresh session, except the broker on
// the previous leader's node, which has a third of a session left: a
// combined node whose controller and broker die together fails over
// within a session timeout of its death.
func TestActivationShortensPreviousLeadersSession(t *testing.T) {
	clk := newClock()
	log := newSharedLog(t, 1)
	c1 := newClusterController(t, 1, log.view(1), clk.now)
	c2 := newClusterController(t, 2, log.view(2), clk.now)
	clusterMode(c1, 3*time.Second)
	clusterMode(c2, 3*time.Second)
	ctx := context.Background()
	for _, id := range []int32{1, 2, 3} {
		joinBroker(t, c1, id)
	}
	c2.noteLeader() // c2 follows c1, as its expiry loop notes every tick

	log.setLeader(2, 2)
	require.True(t, c2.EnsureActive(ctx))
	clk.advance(time.Second + time.Millisecond)
	id, err := c2.FenceExpiredBrokers(ctx, (3 * time.Second).Milliseconds())
	require.NoError(t, err)
	assert.Equal(t, int32(1), id, "the previous leader's broker, unheard for a third of a session")
	id, err = c2.FenceExpiredBrokers(ctx, (3 * time.Second).Milliseconds())
	require.NoError(t, err)
	assert.Equal(t, int32(-1), id, "the others have a whole session")
	assert.True(t, c2.Image().Live(3))

	// A broker that heartbeats in time keeps its session.
	log.setLeader(1, 3)
	require.True(t, c1.EnsureActive(ctx))
	h := c1.HandleBrokerHeartbeat(ctx, hbReq(2, c1.Image().Brokers[2].Epoch, 1<<40, false, false))
	require.Zero(t, h.ErrorCode)
	clk.advance(time.Second + time.Millisecond)
	id, err = c1.FenceExpiredBrokers(ctx, (3 * time.Second).Milliseconds())
	require.NoError(t, err)
	assert.Equal(t, int32(-1), id, "broker 2 heartbeated to the new controller")
}
