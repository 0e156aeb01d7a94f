package controller

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/faultline/faultline/broker/config"
	"github.com/faultline/faultline/broker/metadata"
)

// Defaults of the broker session (Kafka's broker.heartbeat.interval.ms and
// broker.session.timeout.ms).
const (
	DefaultHeartbeatInterval = config.DefaultBrokerHeartbeatIntervalMs * time.Millisecond
	DefaultSessionTimeout    = config.DefaultBrokerSessionTimeoutMs * time.Millisecond
)

// Heartbeat is a broker's heartbeat (Kafka's BrokerHeartbeatRequest).
type Heartbeat struct {
	BrokerID       int32
	BrokerEpoch    int64
	MetadataOffset int64 // the offset of the last metadata record the broker applied
	WantFence      bool  // the broker is not ready to serve yet
	WantShutDown   bool  // the broker is in controlled shutdown
}

// HeartbeatReply is the controller's answer (Kafka's BrokerHeartbeatResponse).
type HeartbeatReply struct {
	ErrorCode      int16
	IsCaughtUp     bool
	IsFenced       bool
	ShouldShutDown bool
}

// Heartbeat decides a broker's fencing state from its heartbeat, following
// Kafka's broker lifecycle: a fenced broker that is caught up and does not
// want to stay fenced is unfenced (and leaderless partitions it can lead get
// it as leader); an unfenced broker that wants to be fenced is fenced; a
// broker that wants to shut down loses its leaderships first and is told to
// shut down once it leads nothing.
func (s *ClusterState) Heartbeat(hb Heartbeat) (HeartbeatReply, Result, error) {
	im := s.Image
	b, ok := im.Brokers[hb.BrokerID]
	if !ok {
		return HeartbeatReply{ErrorCode: kerr.BrokerIDNotRegistered.Code, IsFenced: true}, Result{Image: im}, nil
	}
	if b.Epoch != hb.BrokerEpoch {
		return HeartbeatReply{ErrorCode: kerr.StaleBrokerEpoch.Code, IsFenced: true}, Result{Image: im}, nil
	}
	reply := HeartbeatReply{IsCaughtUp: hb.MetadataOffset >= b.Epoch, IsFenced: b.Fenced}
	var recs []metadata.Record
	switch {
	case hb.WantShutDown:
		recs = append(recs, beginControlledShutdown(b)...)
	case b.Fenced && !hb.WantFence && reply.IsCaughtUp:
		recs = append(recs, &metadata.UnfenceBrokerRecord{ID: b.ID, Epoch: b.Epoch})
	case !b.Fenced && hb.WantFence:
		recs = append(recs, &metadata.FenceBrokerRecord{ID: b.ID, Epoch: b.Epoch})
	}
	next := im
	if len(recs) > 0 {
		var err error
		if next, err = im.ApplyBatch(im.Offset, recs); err != nil {
			return HeartbeatReply{}, Result{}, fmt.Errorf("heartbeat of broker %d: %w", b.ID, err)
		}
		if next.Live(b.ID) {
			recs = append(recs, s.electLeaderless(next)...)
		} else {
			recs = append(recs, s.removeFromPartitions(next, b.ID)...)
		}
		if next, err = im.ApplyBatch(im.Offset, recs); err != nil {
			return HeartbeatReply{}, Result{}, fmt.Errorf("heartbeat of broker %d: %w", b.ID, err)
		}
	}
	nb := next.Brokers[b.ID]
	reply.IsFenced = nb.Fenced
	reply.ShouldShutDown = hb.WantShutDown && mayShutDown(next, b.ID)
	return reply, Result{Records: recs, Image: next}, nil
}

// FenceBroker fences a broker whose session expired: one FenceBroker record
// and a PartitionChange for every partition it led or was in the ISR of.
func (s *ClusterState) FenceBroker(id int32) (Result, error) {
	im := s.Image
	b, ok := im.Brokers[id]
	if !ok || b.Fenced {
		return Result{Image: im}, nil
	}
	recs := []metadata.Record{&metadata.FenceBrokerRecord{ID: id, Epoch: b.Epoch}}
	next, err := im.Apply(recs[0])
	if err != nil {
		return Result{}, fmt.Errorf("fence broker %d: %w", id, err)
	}
	recs = append(recs, s.removeFromPartitions(next, id)...)
	if next, err = im.ApplyBatch(im.Offset, recs); err != nil {
		return Result{}, fmt.Errorf("fence broker %d: %w", id, err)
	}
	return Result{Records: recs, Image: next}, nil
}

// Sessions tracks when each broker was last heard from. It is pure: the
// caller passes the time. The active controller touches a session on every
// heartbeat and fences the brokers Expired returns (one at a time, as
// Kafka does), with ClusterState.FenceBroker.
type Sessions struct {
	lastMs map[int32]int64
}

// Touch records a heartbeat of broker id at nowMs.
func (s *Sessions) Touch(id int32, nowMs int64) {
	if s.lastMs == nil {
		s.lastMs = map[int32]int64{}
	}
	s.lastMs[id] = max(s.lastMs[id], nowMs)
}

// Remove forgets a broker (fenced, or shut down).
func (s *Sessions) Remove(id int32) { delete(s.lastMs, id) }

// Alive reports whether broker id was heard from within timeoutMs.
func (s *Sessions) Alive(id int32, nowMs, timeoutMs int64) bool {
	last, ok := s.lastMs[id]
	return ok && nowMs-last <= timeoutMs
}

// Expired returns the brokers unheard for longer than timeoutMs
// (broker.session.timeout.ms), oldest first.
func (s *Sessions) Expired(nowMs, timeoutMs int64) []int32 {
	var out []int32
	for id, last := range s.lastMs {
		if nowMs-last > timeoutMs {
			out = append(out, id)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if s.lastMs[out[i]] != s.lastMs[out[j]] {
			return s.lastMs[out[i]] < s.lastMs[out[j]]
		}
		return out[i] < out[j]
	})
	return out
}

// Heartbeat handles a broker heartbeat (BrokerHeartbeat) and renews the
// broker's session.
func (c *Controller) Heartbeat(ctx context.Context, hb Heartbeat) (HeartbeatReply, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	reply, res, err := c.state().Heartbeat(hb)
	if err != nil {
		return HeartbeatReply{}, err
	}
	if err := c.commit(ctx, res.Records); err != nil {
		return HeartbeatReply{}, err
	}
	if reply.ErrorCode == 0 {
		c.sessions.Touch(hb.BrokerID, c.cfg.Now().UnixMilli())
	}
	return reply, nil
}

// HandleBrokerHeartbeat renews a broker's session and answers its fencing
// state: STALE_BROKER_EPOCH for an epoch that is not the registered one,
// BROKER_ID_NOT_REGISTERED for an unknown broker.
func (c *Controller) HandleBrokerHeartbeat(ctx context.Context, req *kmsg.BrokerHeartbeatRequest) *kmsg.BrokerHeartbeatResponse {
	resp := kmsg.NewPtrBrokerHeartbeatResponse()
	resp.IsFenced = true
	if !c.EnsureActive(ctx) {
		resp.ErrorCode = kerr.NotController.Code
		return resp
	}
	reply, err := c.Heartbeat(ctx, Heartbeat{
		BrokerID:       req.BrokerID,
		BrokerEpoch:    req.BrokerEpoch,
		MetadataOffset: req.CurrentMetadataOffset,
		WantFence:      req.WantFence,
		WantShutDown:   req.WantShutdown,
	})
	if err != nil {
		resp.ErrorCode, _ = failureCode(err)
		return resp
	}
	resp.ErrorCode = reply.ErrorCode
	resp.IsCaughtUp, resp.IsFenced, resp.ShouldShutdown = reply.IsCaughtUp, reply.IsFenced, reply.ShouldShutDown
	return resp
}

// FenceExpiredBrokers fences the unfenced brokers whose last heartbeat is
// older than sessionTimeoutMs (broker.session.timeout.ms), one per call, as
// Kafka does, and returns its id (-1 for none). RunExpiry calls it.
func (c *Controller) FenceExpiredBrokers(ctx context.Context, sessionTimeoutMs int64) (int32, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	im := c.Image()
	for _, id := range c.sessions.Expired(c.cfg.Now().UnixMilli(), sessionTimeoutMs) {
		lastMs := c.sessions.lastMs[id]
		c.sessions.Remove(id)
		if b, ok := im.Brokers[id]; !ok || b.Fenced {
			continue
		}
		res, err := c.state().FenceBroker(id)
		if err != nil {
			return -1, err
		}
		if err := c.commit(ctx, res.Records); err != nil {
			c.sessions.Touch(id, lastMs) // still expired: the next call tries again
			return -1, err
		}
		c.logger.Info(fmt.Sprintf("Fenced broker %d: no heartbeat for more than %d ms", id, sessionTimeoutMs))
		return id, nil
	}
	return -1, nil
}

// RunExpiry runs the controller's session-expiry loop until ctx ends: every
// interval (broker.heartbeat.interval.ms) it activates this controller if
// it has just become the quorum leader (see Active), and, while active,
// fences at most one broker unheard for longer than sessionTimeout
// (broker.session.timeout.ms), as Kafka does. From its start the
// controller decides only once activated, and refuses registrations of a
// new incarnation while the old one's session is alive. Every controller
// of a node runs it. It returns ctx's error.
func (c *Controller) RunExpiry(ctx context.Context, interval, sessionTimeout time.Duration) error {
	if interval <= 0 {
		interval = DefaultHeartbeatInterval
	}
	if sessionTimeout <= 0 {
		sessionTimeout = DefaultSessionTimeout
	}
	c.sessionTimeoutMs.Store(sessionTimeout.Milliseconds())
	c.cluster.Store(true)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		c.noteLeader()
		// One tick's work is bounded, so that a quorum that cannot commit
		// does not hold the controller forever.
		tctx, cancel := context.WithTimeout(ctx, sessionTimeout)
		if c.EnsureActive(tctx) {
			if _, err := c.FenceExpiredBrokers(tctx, sessionTimeout.Milliseconds()); err != nil && ctx.Err() == nil {
				c.logger.Warn("Session expiry failed to fence a broker", "err", err)
			}
		}
		cancel()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}
