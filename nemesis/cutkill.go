package nemesis

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"
)

// PartitionLeaderCutThenKilled cuts a partition's leader off from that
// partition's other replicas only (it still reaches clients, the active
// controller and every other node), holds the cut for cutKillWait, less
// than replica.lag.time.max.ms so that its followers are still in the
// ISR, and kills the leader. A correct leader acknowledged no acks=all
// write in that time (no follower could fetch it); one that acknowledged
// on its own append, or let a transaction commit whose data only it had,
// loses those writes: the failover elects a follower of the ISR that
// never had them. The partition is drawn among those being written, and
// preferably one whose followers do not include the active controller (so
// the leader keeps its session); the leader is never the controller. Stop heals the cut and starts the leader again. Chosen only
// when named.
const PartitionLeaderCutThenKilled = "leader-cut-then-killed"

// cutKillWait is how long leader-cut-then-killed holds the cut before the
// kill: well within the planted suite's replica.lag.time.max.ms (3 s) and
// Kafka's default (30 s), and long enough for producers to send the leader
// many batches its followers never get.
const cutKillWait = time.Second

// LeaderCut records a leader-cut-then-killed fault.
type LeaderCut struct {
	Mode      string   `json:"mode"`
	Leader    string   `json:"leader,omitempty"`
	Partition string   `json:"partition,omitempty"`
	Followers []string `json:"followers,omitempty"`
	Grudge    Grudge   `json:"grudge,omitempty"`
	Killed    []string `json:"killed,omitempty"`
}

// AimedAt returns the leader (Event.Nodes pins it on a replay).
func (c LeaderCut) AimedAt() []string {
	if c.Leader == "" {
		return nil
	}
	return []string{c.Leader}
}

// cutCandidate is a partition whose leader leader-cut-then-killed can cut
// off from its followers.
type cutCandidate struct {
	leader, label string
	followers     []string
}

// cutCandidates lists the partitions whose ISR holds every replica (at
// least two) and whose leader is not ctl, those with no follower on ctl
// first (a leader cut from the controller loses its session, though not
// within cutKillWait).
func cutCandidates(parts []PartitionState, ctl string) []cutCandidate {
	var clear, withCtl []cutCandidate
	for _, p := range parts {
		if p.Leader == "" || p.Leader == ctl || len(p.Replicas) < 2 || len(p.ISR) != len(p.Replicas) {
			continue
		}
		followers := slices.DeleteFunc(slices.Clone(p.ISR), func(n string) bool { return n == p.Leader })
		slices.Sort(followers)
		c := cutCandidate{leader: p.Leader, label: p.label(), followers: followers}
		if slices.Contains(followers, ctl) {
			withCtl = append(withCtl, c)
		} else {
			clear = append(clear, c)
		}
	}
	if len(clear) > 0 {
		return clear
	}
	return withCtl
}

// cutFrom is the grudge that cuts leader off from followers, both ways,
// and from no one else.
func cutFrom(leader string, followers []string) Grudge {
	g := Grudge{leader: slices.Clone(followers)}
	for _, f := range followers {
		g[f] = []string{leader}
	}
	return g
}

// leaderCutThenKilled is Partition's PartitionLeaderCutThenKilled.
func (p *Partition) leaderCutThenKilled(ctx context.Context, rng *rand.Rand) (any, error) {
	out := LeaderCut{Mode: PartitionLeaderCutThenKilled}
	seq := sequenceOf(ctx)
	choice, err := pickAimed(ctx, p.Cluster, rng.Uint64(), cutCandidates, func(c cutCandidate) string { return c.leader },
		"leader-cut-then-killed: no partition has every replica in its ISR and a leader other than the active controller")
	out.Leader, out.Partition, err = chooseLeaderStep(seq, "leader-cut-then-killed", "the leader of a partition being written whose ISR is whole, not the active controller (drawn)", choice.leader, choice.label, err)
	if err != nil {
		return out, err
	}
	cut, err := seq.step(Step{Name: "cut", Rule: "the leader from the partition's other replicas", Nodes: choice.followers}, nil)
	if err != nil {
		return out, err
	}
	out.Followers = cut.Nodes
	if len(out.Followers) == 0 {
		return out, fmt.Errorf("leader-cut-then-killed: %s has no follower to cut %s from", out.Partition, out.Leader)
	}
	out.Grudge = cutFrom(out.Leader, out.Followers)
	errs := p.install(ctx, out.Grudge)
	wait := p.Wait
	if wait <= 0 || wait > cutKillWait {
		wait = cutKillWait
	}
	if !seq.wait(ctx, p.Sleep, wait) {
		return out, errors.Join(append(errs, ctx.Err())...)
	}
	kill, err := seq.step(Step{Name: "kill", Rule: "the cut leader, while its followers are still in the ISR", Nodes: []string{out.Leader}}, nil)
	if err != nil {
		return out, errors.Join(append(errs, err)...)
	}
	out.Killed = kill.Nodes
	return out, errors.Join(append(errs, p.killAll(ctx, out.Killed)...)...)
}
