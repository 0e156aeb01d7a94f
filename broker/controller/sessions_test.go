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

func TestBrokerLifecycle(t *testing.T) {
	s := cluster(t)
	s.Defaults.NumPartitions = 1
	reg := BrokerRegistration{BrokerID: 1, IncarnationID: metadata.Uuid{1}, Endpoints: []metadata.Endpoint{{Name: "PLAINTEXT", Host: "h", Port: 9092}}}
	epoch, res, err := s.RegisterBroker(reg)
	require.NoError(t, err)
	assert.Equal(t, s.Image.Offset+1, epoch)
	s.Image = res.Image.WithControllerID(1)
	s.Image.Offset += int64(len(res.Records))
	assert.True(t, s.Image.Brokers[1].Fenced)

	again, res, err := s.RegisterBroker(reg)
	require.NoError(t, err)
	assert.Equal(t, epoch, again, "same incarnation: same epoch")
	assert.Empty(t, res.Records)

	// Not caught up: stays fenced.
	reply, res, err := s.Heartbeat(Heartbeat{BrokerID: 1, BrokerEpoch: epoch, MetadataOffset: epoch - 1})
	require.NoError(t, err)
	assert.Equal(t, HeartbeatReply{IsFenced: true}, reply)
	assert.Empty(t, res.Records)
	// Stale epoch.
	reply, _, err = s.Heartbeat(Heartbeat{BrokerID: 1, BrokerEpoch: epoch - 1, MetadataOffset: epoch})
	require.NoError(t, err)
	assert.Equal(t, kerr.StaleBrokerEpoch.Code, reply.ErrorCode)
	// Caught up: unfenced.
	reply, res, err = s.Heartbeat(Heartbeat{BrokerID: 1, BrokerEpoch: epoch, MetadataOffset: epoch})
	require.NoError(t, err)
	assert.Equal(t, HeartbeatReply{IsCaughtUp: true}, reply)
	s.Image = res.Image
	assert.True(t, s.Image.Live(1))

	_, res, _ = s.CreateTopics(createReq(topic("t", 1, 1)))
	s.Image = res.Image
	p := s.Image.Partition("t", 0)
	assert.Equal(t, int32(1), p.Leader)

	// A restart: new incarnation loses leadership, keeps its ISR place.
	reg.IncarnationID = metadata.Uuid{2}
	s.Image.Offset += 10
	epoch2, res, err := s.RegisterBroker(reg)
	require.NoError(t, err)
	assert.Greater(t, epoch2, epoch)
	s.Image = res.Image
	p = s.Image.Partition("t", 0)
	assert.Equal(t, metadata.NoLeader, p.Leader)
	assert.Equal(t, []int32{1}, p.ISR)
	assert.Equal(t, int32(1), p.LeaderEpoch)

	// Unfenced again: it leads again with a new epoch.
	reply, res, err = s.Heartbeat(Heartbeat{BrokerID: 1, BrokerEpoch: epoch2, MetadataOffset: epoch2})
	require.NoError(t, err)
	assert.False(t, reply.IsFenced)
	s.Image = res.Image
	p = s.Image.Partition("t", 0)
	assert.Equal(t, int32(1), p.Leader)
	assert.Equal(t, int32(2), p.LeaderEpoch)

	// Controlled shutdown: leadership goes, then the broker may stop.
	reply, res, err = s.Heartbeat(Heartbeat{BrokerID: 1, BrokerEpoch: epoch2, MetadataOffset: epoch2, WantShutDown: true})
	require.NoError(t, err)
	assert.True(t, reply.ShouldShutDown)
	assert.Equal(t, metadata.NoLeader, res.Image.Partition("t", 0).Leader)
	assert.True(t, res.Image.Brokers[1].InControlledShutdown)
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

func TestHandleBrokerHeartbeat(t *testing.T) {
	log := newSharedLog(t, 1)
	c := newClusterController(t, 1, log.view(1), newClock().now)
	clusterMode(c, 9*time.Second)
	ctx := context.Background()
	reg := c.HandleBrokerRegistration(ctx, regReq(2, 1, -1))
	require.Zero(t, reg.ErrorCode)
	e := reg.BrokerEpoch

	steps := []struct {
		name                       string
		req                        *kmsg.BrokerHeartbeatRequest
		code                       *kerr.Error
		caughtUp, fenced, shutdown bool
	}{
		{"unknown broker", hbReq(9, 0, 100, false, false), kerr.BrokerIDNotRegistered, false, true, false},
		{"stale broker epoch", hbReq(2, e+100, 100, false, false), kerr.StaleBrokerEpoch, false, true, false},
		{"behind its registration", hbReq(2, e, e-1, false, false), nil, false, true, false},
		{"caught up but wants to stay fenced", hbReq(2, e, e, true, false), nil, true, true, false},
		{"caught up and ready: unfenced", hbReq(2, e, e, false, false), nil, true, false, false},
		{"wants to be fenced again", hbReq(2, e, e, true, false), nil, true, true, false},
		{"unfenced again", hbReq(2, e, e, false, false), nil, true, false, false},
		{"controlled shutdown of a broker leading nothing", hbReq(2, e, e, false, true), nil, true, false, true},
	}
	for _, s := range steps {
		resp := c.HandleBrokerHeartbeat(ctx, s.req)
		want := int16(0)
		if s.code != nil {
			want = s.code.Code
		}
		assert.Equal(t, want, resp.ErrorCode, "%s: got %v", s.name, kerr.ErrorForCode(resp.ErrorCode))
		assert.Equal(t, []bool{s.caughtUp, s.fenced, s.shutdown}, []bool{resp.IsCaughtUp, resp.IsFenced, resp.ShouldShutdown}, s.name)
	}
}

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
