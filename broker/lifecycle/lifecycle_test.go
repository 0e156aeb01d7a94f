package lifecycle

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/faultline/faultline/broker/metadata"
)

// scriptedController answers registrations and heartbeats as an active
// controller would: NOT_CONTROLLER first (an election in progress), then
// the broker is registered at epoch 7, caught up once it reports offset 7,
// unfenced when it does not want to be fenced, let go once it wants to
// shut down.
type scriptedController struct {
	mu            sync.Mutex
	notController int
	fenced        bool
	requests      []kmsg.Request
}

func (s *scriptedController) Send(_ context.Context, req kmsg.Request) (kmsg.Response, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = append(s.requests, req)
	switch r := req.(type) {
	case *kmsg.BrokerRegistrationRequest:
		resp := kmsg.NewPtrBrokerRegistrationResponse()
		if s.notController > 0 {
			s.notController--
			resp.ErrorCode = kerr.NotController.Code
			return resp, nil
		}
		resp.BrokerEpoch = 7
		return resp, nil
	case *kmsg.BrokerHeartbeatRequest:
		resp := kmsg.NewPtrBrokerHeartbeatResponse()
		resp.IsCaughtUp = r.CurrentMetadataOffset >= 7
		if resp.IsCaughtUp && !r.WantFence {
			s.fenced = false
		}
		resp.IsFenced = s.fenced
		resp.ShouldShutdown = r.WantShutdown
		return resp, nil
	}
	return nil, nil
}

func (s *scriptedController) sent() []kmsg.Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]kmsg.Request(nil), s.requests...)
}

// TestManagerRegistersHeartbeatsAndShutsDown: STARTING → RECOVERY →
// RUNNING as the controller answers, without waiting a heartbeat interval
// while the broker catches up, then PENDING_CONTROLLED_SHUTDOWN →
// SHUTTING_DOWN, after which nothing more is sent.
func TestManagerRegistersHeartbeatsAndShutsDown(t *testing.T) {
	ctrl := &scriptedController{notController: 2, fenced: true}
	var offsetMu sync.Mutex
	offset := int64(3)
	m, err := New(Config{
		BrokerID: 1, ClusterID: "c", IncarnationID: metadata.Uuid{1}, PreviousBrokerEpoch: -1,
		Listeners: []metadata.Endpoint{{Name: "PLAINTEXT", Host: "localhost", Port: 9092}},
		// An interval no test waits for: every step must come sooner.
		HeartbeatInterval: time.Hour,
		MetadataOffset: func() int64 {
			offsetMu.Lock()
			defer offsetMu.Unlock()
			return offset
		},
		Transport: ctrl,
	})
	require.NoError(t, err)
	defer m.Close()
	assert.Equal(t, StateStarting, m.State())
	m.Start()
	m.SetReadyToUnfence()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.Eventually(t, func() bool { return m.BrokerEpoch() == 7 }, 10*time.Second, time.Millisecond, "registered after NOT_CONTROLLER twice")
	time.Sleep(50 * time.Millisecond)
	assert.Equal(t, StateStarting, m.State(), "not caught up: the image is behind the registration")
	offsetMu.Lock()
	offset = 7
	offsetMu.Unlock()
	require.NoError(t, m.WaitForState(ctx, StateRunning))
	assert.False(t, m.Fenced())

	require.NoError(t, m.ControlledShutdown(ctx))
	assert.Equal(t, StateShuttingDown, m.State())
	sent := len(ctrl.sent())
	last := ctrl.sent()[sent-1].(*kmsg.BrokerHeartbeatRequest)
	assert.True(t, last.WantShutdown)
	time.Sleep(50 * time.Millisecond)
	assert.Len(t, ctrl.sent(), sent, "nothing is sent once SHUTTING_DOWN")
}

// TestManagerRegistersAgainWhenTheControllerForgetsIt: a heartbeat
// answered STALE_BROKER_EPOCH makes the broker register again, naming the
// epoch it had as its previous one.
func TestManagerRegistersAgainWhenTheControllerForgetsIt(t *testing.T) {
	stale := &staleOnce{}
	m, err := New(Config{BrokerID: 2, IncarnationID: metadata.Uuid{2}, PreviousBrokerEpoch: -1, HeartbeatInterval: time.Hour,
		MetadataOffset: func() int64 { return 100 }, Transport: stale})
	require.NoError(t, err)
	defer m.Close()
	m.Start()
	m.SetReadyToUnfence()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, m.WaitForState(ctx, StateRunning))
	assert.Equal(t, int64(8), m.BrokerEpoch())
	assert.Equal(t, []int64{-1, 7}, stale.previous())
}

type staleOnce struct {
	mu    sync.Mutex
	epoch int64
	prevs []int64
}

func (s *staleOnce) previous() []int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]int64(nil), s.prevs...)
}

func (s *staleOnce) Send(_ context.Context, req kmsg.Request) (kmsg.Response, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch r := req.(type) {
	case *kmsg.BrokerRegistrationRequest:
		s.prevs = append(s.prevs, r.PreviousBrokerEpoch)
		s.epoch = int64(6 + len(s.prevs))
		resp := kmsg.NewPtrBrokerRegistrationResponse()
		resp.BrokerEpoch = s.epoch
		return resp, nil
	case *kmsg.BrokerHeartbeatRequest:
		resp := kmsg.NewPtrBrokerHeartbeatResponse()
		if s.epoch == 7 {
			resp.ErrorCode, resp.IsFenced = kerr.StaleBrokerEpoch.Code, true
			return resp, nil
		}
		resp.IsCaughtUp, resp.IsFenced = true, false
		return resp, nil
	}
	return nil, nil
}
