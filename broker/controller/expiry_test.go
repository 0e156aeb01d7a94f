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
