package controller

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/faultline/faultline/broker/metadata"
	"github.com/faultline/faultline/broker/quorum"
)

// activationTimeout bounds the NoOp of a newly elected controller.
const activationTimeout = 10 * time.Second

// Active reports whether this controller is the active controller: the
// quorum leader, and, on a cluster (RunExpiry running), activated in the
// current quorum epoch. It never blocks.
func (c *Controller) Active() bool {
	l := c.q.Leader()
	if l.LeaderID != c.cfg.NodeID {
		return false
	}
	return !c.cluster.Load() || c.activeEpoch.Load() == int64(l.Epoch)
}

// EnsureActive activates this controller if it leads the quorum and has
// not activated in the current epoch yet, and reports whether it is the
// active controller.
func (c *Controller) EnsureActive(ctx context.Context) bool {
	if c.Active() {
		return true
	}
	if c.q.Leader().LeaderID != c.cfg.NodeID {
		return false
	}
	ok, err := c.activate(ctx)
	if err != nil {
		c.logger.Warn(fmt.Sprintf("Controller %d could not activate", c.cfg.NodeID), "err", err)
	}
	return ok
}

// standingBy reports whether a controller of a cluster (RunExpiry
// running) is not the active one, after activating it if it just won
// leadership: it must then answer NOT_CONTROLLER to everything, before any
// validation against an image that may be behind.
func (c *Controller) standingBy(ctx context.Context) bool {
	return c.cluster.Load() && !c.EnsureActive(ctx)
}

// noteLeader remembers the quorum leader when it is another controller.
func (c *Controller) noteLeader() {
	if l := c.q.Leader(); l.LeaderID >= 0 && l.LeaderID != c.cfg.NodeID {
		c.prevLeader.Store(l.LeaderID)
	}
}

// activate makes a quorum leader the active controller of its epoch, as a
// newly elected Kafka controller does: it appends a NoOp and waits until
// its image holds it, so that every record committed by earlier leaders is
// in the image before it decides anything; then it starts a fresh session
// for every registered broker, so that a controller failover fences
// nobody who keeps heartbeating, except the broker on the previous
// leader's node, which gets a third of a session, and the broker on its
// own node, which gets none until it heartbeats. It reports whether this
// controller is active afterwards.
func (c *Controller) activate(ctx context.Context) (bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	l := c.q.Leader()
	if l.LeaderID != c.cfg.NodeID {
		c.activeEpoch.Store(-1)
		return false, nil
	}
	if c.activeEpoch.Load() == int64(l.Epoch) {
		return true, nil
	}
	ctx, cancel := context.WithTimeout(ctx, activationTimeout)
	defer cancel()
	last, err := c.q.Append(ctx, []metadata.Record{&metadata.NoOpRecord{}})
	if err != nil {
		if errors.Is(err, quorum.ErrNotLeader) {
			return false, nil
		}
		return false, fmt.Errorf("controller %d: append NoOp in epoch %d: %w", c.cfg.NodeID, l.Epoch, err)
	}
	if err := c.waitApplied(ctx, last); err != nil {
		return false, err
	}
	if now := c.q.Leader(); now != l {
		return false, nil
	}
	nowMs := c.cfg.Now().UnixMilli()
	c.sessions = Sessions{}
	im := c.Image()
	prev, timeoutMs := c.prevLeader.Load(), c.sessionTimeoutMs.Load()
	for id := range im.Brokers {
		if id == c.cfg.NodeID {
			// The broker on this controller's own node is this
			// process's, which heartbeats within an interval and starts
			// its session then, or a previous incarnation of this
			// process, which is dead: a session for it would make the
			// node, restarted after a crash, wait a session timeout
			// (DUPLICATE_BROKER_REGISTRATION) before it can register.
			continue
		}
		if id == prev {
			// The broker on the node of the quorum leader this one
			// replaced: that leader is gone (dead, or cut off from the
			// quorum), so its broker most likely is too. It keeps a third
			// of a session to heartbeat, enough for a live broker to find
			// this controller, instead of a whole one, so that the
			// partitions it led fail over within a session timeout of its
			// death rather than after an election plus a session.
			c.sessions.Touch(id, nowMs-timeoutMs+timeoutMs/3)
			c.logger.Info(fmt.Sprintf("Controller %d gives broker %d, on the node of the previous quorum leader, %d ms to heartbeat", c.cfg.NodeID, id, timeoutMs/3))
			continue
		}
		c.sessions.Touch(id, nowMs)
	}
	c.activeEpoch.Store(int64(l.Epoch))
	c.logger.Info(fmt.Sprintf("Controller %d is the active controller in epoch %d: image complete up to offset %d, %d broker session(s) renewed",
		c.cfg.NodeID, l.Epoch, im.Offset, len(im.Brokers)))
	return true, nil
}
