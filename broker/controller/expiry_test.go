package controller

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestFenceExpiredBrokers: one broker per call, oldest session first; a
// fence that fails to commit is tried again by the next call.
func TestFenceExpiredBrokers(t *testing.T) {
	clk := newClock()
	log := newSharedLog(t, 1)
	c := newClusterController(t, 1, log.view(1), clk.now)
	clusterMode(c, time.Second)
	ctx := context.Background()
	joinBroker(t, c, 1)
	clk.advance(100 * time.Millisecond)
	joinBroker(t, c, 2)
	clk.advance(100 * time.Millisecond)
	joinBroker(t, c, 3)
	clk.advance(500 * time.Millisecond)
	h := c.HandleBrokerHeartbeat(ctx, hbReq(3, c.Image().Brokers[3].Epoch, 1<<40, false, false))
	require.Zero(t, h.ErrorCode)
	clk.advance(time.Second)

	log.failAppends.Store(1)
	id, err := c.FenceExpiredBrokers(ctx, time.Second.Milliseconds())
	require.Error(t, err)
	assert.Equal(t, int32(-1), id)
	assert.False(t, c.Image().Brokers[1].Fenced)

	var fenced []int32
	for {
		id, err := c.FenceExpiredBrokers(ctx, time.Second.Milliseconds())
		require.NoError(t, err)
		if id < 0 {
			break
		}
		fenced = append(fenced, id)
	}
	assert.Equal(t, []int32{1, 2}, fenced, "one per call, oldest first; broker 3 heartbeated")
	assert.Equal(t, 1, fenceRecords(log, 1))
	assert.True(t, c.Image().Live(3))
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
	require.True(t, c2.ensureActive(ctx))
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
	require.True(t, c1.ensureActive(ctx))
	h := c1.HandleBrokerHeartbeat(ctx, hbReq(2, c1.Image().Brokers[2].Epoch, 1<<40, false, false))
	require.Zero(t, h.ErrorCode)
	clk.advance(time.Second + time.Millisecond)
	id, err = c1.FenceExpiredBrokers(ctx, (3 * time.Second).Milliseconds())
	require.NoError(t, err)
	assert.Equal(t, int32(-1), id, "broker 2 heartbeated to the new controller")
}
