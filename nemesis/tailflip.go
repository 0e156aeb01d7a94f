package nemesis

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"time"
)

// CorruptUnreplicatedTail is the disk of a live partition leader flipping
// a bit in a batch no follower has yet. The leader drops every packet from
// the nodes but the active controller (so it is neither fenced nor
// deposed, and no follower fetch reaches it); after tailSettle, when the
// answers to the fetches it held open have been taken in, each follower's
// agent reads its log end; once the leader has appended a batch past them
// (it asks every tailAheadEvery, up to tailAheadMax: a producer may reach
// the leader only after its retries), the leader's agent flips one bit in the
// records of the last batch at or above the greatest of them, in each
// partition it leads whose replicas leave the controller out (so every
// follower is cut off), and the cut heals. The followers then fetch the
// damaged batch. A follower that checks what it appends refuses it, so the
// batch is never acknowledged (acks=all) and the partition stalls; one
// that appends it unchecked acknowledges it, and every consumer is refused
// the batch by its CRC from then on. Needs the Docker runtime and
// CAP_NET_ADMIN; chosen only when named.
const CorruptUnreplicatedTail = "unreplicated-tail"

// tailSettle is how long corrupt:unreplicated-tail waits after the cut
// before it reads the followers' log ends: longer than a leader holds a
// follower fetch open (replica.fetch.wait.max.ms, 500 ms by default) plus
// the time a follower takes to append the answer.
const tailSettle = time.Second

// tailAheadEvery and tailAheadMax pace how long corrupt:unreplicated-tail
// waits, after reading the followers' log ends, for the leader to append a
// batch none of them has (without one there is nothing to flip): the
// settle and the polls together stay well inside the 10 s the planted case
// keeps a silent follower in the ISR. The wall-clock bound counts the
// agents' answers too; tailAheadPolls, the same bound in polls, holds
// where the sleep is not the wall clock's (tests).
const (
	tailAheadEvery = 500 * time.Millisecond
	tailAheadMax   = 5 * time.Second
	tailAheadPolls = int(tailAheadMax / tailAheadEvery)
)

// TailFlipper is what corrupt:unreplicated-tail needs of the runtime
// besides Runtime: the agents' log-end and flip-tail on live nodes, over
// partition directories ("topic-N"). FlipTail flips, in each partition of
// after, the last batch at or above its offset, with seed choosing the
// bits, and returns the agent's account (JSON).
type TailFlipper interface {
	LogEnds(ctx context.Context, node string, partitions []string) (map[string]int64, error)
	FlipTail(ctx context.Context, node string, after map[string]int64, seed uint64) (string, error)
}

// TailFlipTargets records a corrupt:unreplicated-tail fault: the leader
// whose tails were flipped, the controller it kept reaching, the
// partitions, the grudge and what the agent did.
type TailFlipTargets struct {
	Mode       string   `json:"mode"`
	Leader     string   `json:"leader,omitempty"`
	Controller string   `json:"controller,omitempty"`
	Partitions []string `json:"partitions,omitempty"`
	Grudge     Grudge   `json:"grudge,omitempty"`
	Did        string   `json:"did,omitempty"`
}

// AimedAt returns the leader (Event.Nodes pins it on a replay).
func (t TailFlipTargets) AimedAt() []string {
	if t.Leader == "" {
		return nil
	}
	return []string{t.Leader}
}

// tailFlipCandidates maps each partition leader other than ctl to the
// partitions it leads that it can have a tail no follower has: the
// controller is not among their replicas (it is never cut off) and some
// follower is in the ISR. Labels are "topic-N", sorted.
func tailFlipCandidates(parts []PartitionState, ctl string) map[string][]string {
	out := map[string][]string{}
	for _, p := range parts {
		if p.Leader == "" || p.Leader == ctl || slices.Contains(p.Replicas, ctl) || len(p.ISR) < 2 || !slices.Contains(p.ISR, p.Leader) {
			continue
		}
		out[p.Leader] = append(out[p.Leader], p.label())
	}
	for _, labels := range out {
		slices.Sort(labels)
	}
	return out
}

// soleStallFirst keeps, of leaders, those whose every partition being
// written (of written) is one of their candidates, when there are any.
// Cutting a leader off stalls every partition it leads; the producers
// block on the first they write to, each having appended one batch, so
// the flipped partitions get the most batches no follower has when they
// are the only ones that stall.
func soleStallFirst(leaders []string, candidates map[string][]string, written []PartitionState) []string {
	var sole []string
	for _, l := range leaders {
		ok := true
		for _, p := range written {
			if p.Leader == l && !slices.Contains(candidates[l], p.label()) {
				ok = false
				break
			}
		}
		if ok {
			sole = append(sole, l)
		}
	}
	if len(sole) == 0 {
		return leaders
	}
	return sole
}

// unreplicatedTail is Corrupt's CorruptUnreplicatedTail: the leader is
// drawn among those of the partitions being written now when the cluster
// tells (ActivityView), since a flip in a partition nobody writes to has no
// batch to damage.
func (c *Corrupt) unreplicatedTail(ctx context.Context, rng *rand.Rand) (any, error) {
	out := TailFlipTargets{Mode: CorruptUnreplicatedTail}
	flipper, ok := c.Disk.(TailFlipper)
	if !ok {
		return out, errors.New("corrupt:unreplicated-tail: the runtime cannot flip bits on a live node (use --runtime docker)")
	}
	seq := sequenceOf(ctx)
	nodes := c.Cluster.Nodes()
	// The leader and the controller, then the partitions, as the live
	// cluster has them; the draws are made either way, so that a replay's
	// later draws stay as they were.
	pick := rng.Uint64()
	seed := rng.Uint64()
	choice, labels, err := func() ([]string, []string, error) {
		view, ok := c.Cluster.(ReplicaView)
		if !ok {
			return nil, nil, errNoReplicaView
		}
		ctl, err := c.Cluster.Controller(ctx)
		if err != nil {
			return nil, nil, fmt.Errorf("find the active controller: %w", err)
		}
		parts, err := view.Partitions(ctx)
		if err != nil {
			return nil, nil, fmt.Errorf("find partition leaders: %w", err)
		}
		active := activePartitions(ctx, c.Cluster)
		candidates := tailFlipCandidates(activeFirst(parts, active), ctl)
		if len(candidates) == 0 {
			candidates = tailFlipCandidates(parts, ctl)
		}
		leaders := soleStallFirst(slices.Sorted(maps.Keys(candidates)), candidates, activeFirst(parts, active))
		if pinned := pinnedNodes(ctx); len(pinned) > 0 {
			leaders = slices.DeleteFunc(leaders, func(n string) bool { return n != pinned[0] })
		}
		if len(leaders) == 0 {
			return nil, nil, errors.New("corrupt:unreplicated-tail: no partition leader besides the controller leads a partition with an in-sync follower and no replica on the controller")
		}
		leader := leaders[pick%uint64(len(leaders))]
		return []string{leader, ctl}, candidates[leader], nil
	}()
	st, err := seq.step(Step{Name: "choose-leader", Rule: "a partition leader other than the active controller (drawn), then the active controller; the partitions it leads with no replica on the controller",
		Nodes: choice, Partition: strings.Join(labels, ",")}, err)
	if err != nil {
		return out, err
	}
	if len(st.Nodes) != 2 || st.Partition == "" {
		return out, fmt.Errorf("corrupt:unreplicated-tail: recorded step %s names %v and %q, not the leader, the controller and partitions", st.Name, st.Nodes, st.Partition)
	}
	out.Leader, out.Controller, out.Partitions = st.Nodes[0], st.Nodes[1], strings.Split(st.Partition, ",")
	var others []string
	for _, n := range nodes {
		if n != out.Leader && n != out.Controller {
			others = append(others, n)
		}
	}
	out.Grudge = Grudge{out.Leader: others}
	c.cut = &Partition{Runtime: c.Runtime, Cluster: c.Cluster}
	seq.step(Step{Name: "isolate", Rule: "the leader drops every packet from the nodes but the controller " + out.Controller, Nodes: []string{out.Leader}}, nil)
	errs := c.cut.install(ctx, out.Grudge)
	if !seq.wait(ctx, c.Sleep, tailSettle) {
		return out, c.healTail(ctx, append(errs, ctx.Err()))
	}
	after, followers, err := c.followersEnd(ctx, flipper, out.Leader, out.Partitions)
	ends, _ := json.Marshal(after)
	_, err = seq.step(Step{Name: "log-ends", Rule: "the followers of the partitions, each partition's greatest log end", Nodes: followers, Did: string(ends)}, err)
	if err != nil || len(after) == 0 {
		return out, c.healTail(ctx, append(errs, err))
	}
	ahead, err := c.leaderAhead(ctx, flipper, out.Leader, after)
	aheadJSON, _ := json.Marshal(ahead)
	_, err = seq.step(Step{Name: "leader-ahead", Rule: "the leader's log ends, once one partition's is past its followers'", Nodes: []string{out.Leader}, Did: string(aheadJSON)}, err)
	if err == nil && seq.recordingEnded() {
		// The run replayed found its leader never ahead and flipped
		// nothing: neither does its replay.
		err = errors.New("corrupt:unreplicated-tail: replay: the recorded fault stopped here, with nothing flipped")
	}
	if err != nil {
		return out, c.healTail(ctx, append(errs, err))
	}
	did, err := flipper.FlipTail(ctx, out.Leader, after, seed)
	out.Did = did
	seq.step(Step{Name: "flip-tail", Rule: "the last batch of each partition at or above its followers' log ends", Nodes: []string{out.Leader}, Did: did}, nil)
	errs = append(errs, err)
	seq.step(Step{Name: "heal", Rule: "the cut", Nodes: []string{out.Leader}}, nil)
	return out, c.healTail(ctx, errs)
}

// healTail heals unreplicated-tail's cut, joining what failed; a cut that
// fails to heal is healed again by Stop.
func (c *Corrupt) healTail(ctx context.Context, errs []error) error {
	failed, healErrs := c.cut.heal(ctx)
	if len(failed) == 0 {
		c.cut = nil
	} else {
		c.cut.cut = failed
	}
	return errors.Join(append(errs, healErrs...)...)
}

// leaderAhead polls leader's log ends of the partitions of after until one
// is past its followers' (after), at most tailAheadPolls times: the cut
// leader's producers may only send it their next batch after a retry.
func (c *Corrupt) leaderAhead(ctx context.Context, flipper TailFlipper, leader string, after map[string]int64) (map[string]int64, error) {
	partitions := slices.Sorted(maps.Keys(after))
	var ends map[string]int64
	var err error
	deadline := time.Now().Add(tailAheadMax)
	for i := range tailAheadPolls {
		ends, err = flipper.LogEnds(ctx, leader, partitions)
		if err == nil {
			for p, end := range ends {
				if end > after[p] {
					return ends, nil
				}
			}
		}
		if i == tailAheadPolls-1 || time.Now().Add(tailAheadEvery).After(deadline) || !sequenceWait(ctx, c.Sleep, tailAheadEvery) {
			break
		}
	}
	if err != nil {
		return ends, fmt.Errorf("log ends of the leader %s: %w", leader, err)
	}
	if ctx.Err() != nil {
		return ends, ctx.Err()
	}
	return ends, fmt.Errorf("corrupt:unreplicated-tail: the leader %s appended nothing past its followers' log ends %v (its own: %v), asked every %s for up to %s", leader, after, ends, tailAheadEvery, tailAheadMax)
}

// followersEnd reads, through the agents of the followers of each of
// partitions (led by leader), the greatest log end each partition has on
// them. A partition some follower of which could not be read is left out:
// a batch is flipped only when no follower can have it.
func (c *Corrupt) followersEnd(ctx context.Context, flipper TailFlipper, leader string, partitions []string) (map[string]int64, []string, error) {
	view, ok := c.Cluster.(ReplicaView)
	if !ok {
		return nil, nil, errNoReplicaView
	}
	parts, err := view.Partitions(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("find partition replicas: %w", err)
	}
	on := map[string][]string{} // follower -> partitions
	for _, p := range parts {
		label := fmt.Sprintf("%s-%d", p.Topic, p.Partition)
		if !slices.Contains(partitions, label) {
			continue
		}
		for _, r := range p.Replicas {
			if r != leader {
				on[r] = append(on[r], label)
			}
		}
	}
	followers := slices.Sorted(maps.Keys(on))
	after := map[string]int64{}
	unread := map[string]bool{}
	var errs []error
	for _, f := range followers {
		ends, err := flipper.LogEnds(ctx, f, on[f])
		for _, p := range on[f] {
			end, ok := ends[p]
			if err != nil || !ok {
				unread[p] = true
				continue
			}
			after[p] = max(after[p], end)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("log ends of %s: %w", f, err))
		}
	}
	for p := range unread {
		delete(after, p)
	}
	if len(after) == 0 && len(errs) == 0 {
		errs = append(errs, fmt.Errorf("corrupt:unreplicated-tail: none of %v has a follower", partitions))
	}
	return after, followers, errors.Join(errs...)
}
