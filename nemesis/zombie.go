package nemesis

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
)

// PartitionLeaderAndFollower cuts one partition's leader and one follower
// of its ISR off from every other node (never from clients), neither of
// them the active controller, and holds the cut for the sequence wait
// before Start returns, so that it outlasts the broker session timeout:
// the controller fences both and elects the third replica, while the old
// leader still reaches clients and a follower (a zombie leader). A correct
// leader cannot drop the third replica from its ISR without the
// controller, so its high watermark stops and it acknowledges nothing; one
// that shrinks its ISR on its own acknowledges writes the new leader never
// gets. Chosen only when named.
const PartitionLeaderAndFollower = "leader-and-follower"

// leaderAndFollower is Partition's PartitionLeaderAndFollower. Pinned
// nodes (a replay) are the pair; otherwise the pair comes from the
// cluster's partition view, a partition whose ISR holds every replica
// preferred (its leader must shrink the ISR to go on alone).
func (p *Partition) leaderAndFollower(ctx context.Context, rng *rand.Rand) (any, error) {
	out := PartitionStart{Mode: PartitionLeaderAndFollower}
	pair := aimOf(ctx).nodes
	if len(pair) != 2 {
		view, ok := p.Cluster.(ReplicaView)
		if !ok {
			return out, errNoReplicaView
		}
		ctl, err := p.Cluster.Controller(ctx)
		if err != nil {
			return out, fmt.Errorf("find the active controller: %w", err)
		}
		parts, err := view.Partitions(ctx)
		if err != nil {
			return out, fmt.Errorf("find partition replicas: %w", err)
		}
		if pair = zombiePair(parts, ctl, rng); pair == nil {
			return out, errors.New("leader-and-follower: no partition has a leader and an in-sync follower besides the active controller")
		}
	}
	out.Nodes = pair
	nodes := p.Cluster.Nodes()
	out.Grudge = halvesOf(pinnedFirst(nodes, pair), 2)
	errs, _ := p.cutAndHold(ctx, out.Grudge)
	return out, errors.Join(errs...)
}

// zombiePair chooses a partition's leader and one in-sync follower, both
// other than ctl, from a partition whose ISR is all its replicas if there
// is one (with a smaller ISR there may be no third replica to elect);
// nil when no partition has such a pair.
func zombiePair(parts []PartitionState, ctl string, rng *rand.Rand) []string {
	var full, partial [][]string
	for _, ps := range parts {
		if ps.Leader == "" || ps.Leader == ctl || len(ps.Replicas) < 3 {
			continue
		}
		for _, f := range ps.ISR {
			if f == ps.Leader || f == ctl {
				continue
			}
			if len(ps.ISR) == len(ps.Replicas) {
				full = append(full, []string{ps.Leader, f})
			} else {
				partial = append(partial, []string{ps.Leader, f})
			}
		}
	}
	for _, tier := range [][][]string{full, partial} {
		if len(tier) > 0 {
			return slices.Clone(tier[rng.IntN(len(tier))])
		}
	}
	return nil
}

// cutAndHold installs grudge g and holds it for the sequence wait; held
// is false when ctx ended first.
func (p *Partition) cutAndHold(ctx context.Context, g Grudge) (errs []error, held bool) {
	errs = p.install(ctx, g)
	if !sequenceWait(ctx, p.Sleep, p.Wait) {
		return append(errs, ctx.Err()), false
	}
	return errs, true
}
