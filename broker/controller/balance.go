package controller

import (
	"context"
	"fmt"
	"time"

	"github.com/faultline/faultline/broker/metadata"
)

// MaxBalanceElections bounds the leaders one BalanceLeaders pass moves, as
// Kafka's controller bounds its preferred elections per imbalance check;
// RunLeaderBalance runs the next pass at once while some remain.
const MaxBalanceElections = 1000

// BalanceLeaders moves leadership back to the preferred replica (the first
// in replica order) of every partition whose preferred replica is live
// and in the ISR but does not lead, at most max of them (0: no bound), in
// topic and partition order. It is Kafka's automatic leader rebalance
// (auto.leader.rebalance.enable): after a broker restarts and catches up,
// the partitions it led come back to it. Each move is a clean election
// (the new leader is in the ISR), as ElectLeaders' preferred type makes.
// more reports whether partitions were left for another pass.
func (s *ClusterState) BalanceLeaders(max int) (res Result, more bool) {
	im := s.Image
	var recs []metadata.Record
	for _, t := range sortedTopics(im) {
		for _, p := range t.Partitions {
			code, _, change := s.electOne(im, electPreferred, t.Name, p.Partition)
			if code != 0 || change == nil {
				continue
			}
			if max > 0 && len(recs) == max {
				return Result{Records: recs, Image: im}, true
			}
			next, err := im.Apply(change)
			if err != nil {
				continue
			}
			im = next
			recs = append(recs, change)
		}
	}
	return Result{Records: recs, Image: im}, false
}

// BalanceLeaders runs one pass of ClusterState.BalanceLeaders when this
// controller is active, and commits it. It returns how many leaders moved
// and whether some are left for another pass.
func (c *Controller) BalanceLeaders(ctx context.Context) (int, bool, error) {
	if !c.EnsureActive(ctx) {
		return 0, false, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	res, more := c.state().BalanceLeaders(MaxBalanceElections)
	if len(res.Records) == 0 {
		return 0, false, nil
	}
	if err := c.commit(ctx, res.Records); err != nil {
		return 0, false, err
	}
	c.logger.Info(fmt.Sprintf("Moved the leadership of %d partition(s) back to their preferred replica (auto.leader.rebalance.enable)", len(res.Records)))
	return len(res.Records), more, nil
}

// RunLeaderBalance runs BalanceLeaders every interval
// (leader.imbalance.check.interval.seconds) until ctx ends, at once again
// while a pass leaves partitions over. Each pass is bounded by interval.
// It returns ctx's error.
func (c *Controller) RunLeaderBalance(ctx context.Context, interval time.Duration) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
		for {
			pctx, cancel := context.WithTimeout(ctx, interval)
			_, more, err := c.BalanceLeaders(pctx)
			cancel()
			if err != nil && ctx.Err() == nil {
				c.logger.Warn("Leader rebalance failed to commit", "err", err)
			}
			if err != nil || !more {
				break
			}
		}
	}
}
