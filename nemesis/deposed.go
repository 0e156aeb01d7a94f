package nemesis

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"
)

// PartitionDeposedLeaderReturns deposes a partition's leader and then
// makes it lead again. The leader (never the active controller) is cut off
// from every other node, not from clients, for the sequence wait, longer
// than the broker session timeout: the controller fences it and elects
// another replica of the ISR, while producers that have not yet learnt of
// the new leader still append to the old one, which leaves it a tail the
// new leader never had. The cut heals; once the node is back in the
// partition's ISR, the rest of that ISR is killed, so it leads the
// partition again (Start returns once it does, or after rejoinLimit). A
// later round neither deposes nor kills the node an earlier one left
// leading, so the run's last reads of that partition still come from it.
// A correct replica cut its divergent tail off (by leader epoch) when it
// rejoined and serves what the ISR acknowledged; one that kept the tail
// serves its own values at offsets that held others. Chosen only when
// named.
const PartitionDeposedLeaderReturns = "deposed-leader-returns"

// rejoinLimit is how long deposed-leader-returns waits for the deposed
// leader to be back in the partition's ISR.
const rejoinLimit = 30 * time.Second

// DeposedLeader records a deposed-leader-returns fault.
type DeposedLeader struct {
	Mode      string   `json:"mode"`
	Leader    string   `json:"leader,omitempty"`
	Partition string   `json:"partition,omitempty"`
	Grudge    Grudge   `json:"grudge,omitempty"`
	Rejoined  string   `json:"rejoined,omitempty"` // how long it took, or why not
	Killed    []string `json:"killed,omitempty"`
	Leads     string   `json:"leads,omitempty"` // how long until it led again after the kill, or why not
}

// AimedAt returns the deposed leader (Event.Nodes pins it on a replay).
func (d DeposedLeader) AimedAt() []string {
	if d.Leader == "" {
		return nil
	}
	return []string{d.Leader}
}

// deposeCandidate is a partition whose leader deposed-leader-returns can
// depose, and the rest of its ISR.
type deposeCandidate struct {
	leader, label string
	rest          []string
}

// deposeCandidates lists the partitions whose leader is not ctl and whose
// ISR holds every replica (so there is a replica to elect, and killing the
// rest of the ISR, at most a minority of nodes, leaves the leader alone),
// those without a replica on the controller first (killing it moves the
// controller too). None involves spare (the node an earlier round left
// leading), as leader or as one of the rest.
func deposeCandidates(parts []PartitionState, ctl string, nodes int, spare string) []deposeCandidate {
	minority := max(1, (nodes-1)/2)
	var clear, withCtl []deposeCandidate
	for _, p := range parts {
		if p.Leader == "" || p.Leader == ctl || len(p.Replicas) < 2 || len(p.ISR) != len(p.Replicas) {
			continue
		}
		rest := slices.DeleteFunc(slices.Clone(p.ISR), func(n string) bool { return n == p.Leader })
		if len(rest) == 0 || len(rest) > minority || spare != "" && (p.Leader == spare || slices.Contains(rest, spare)) {
			continue
		}
		slices.Sort(rest)
		c := deposeCandidate{leader: p.Leader, label: p.label(), rest: rest}
		if slices.Contains(p.Replicas, ctl) {
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

// deposedLeaderReturns is Partition's PartitionDeposedLeaderReturns; the
// partition is drawn among those being written now when the cluster tells
// (ActivityView): a deposed leader has a divergent tail only where
// producers were writing.
func (p *Partition) deposedLeaderReturns(ctx context.Context, rng *rand.Rand) (any, error) {
	out := DeposedLeader{Mode: PartitionDeposedLeaderReturns}
	seq := sequenceOf(ctx)
	nodes := p.Cluster.Nodes()
	view, hasView := p.Cluster.(ReplicaView)
	choice, err := pickAimed(ctx, p.Cluster, rng.Uint64(), func(parts []PartitionState, ctl string) []deposeCandidate {
		return deposeCandidates(parts, ctl, len(nodes), p.deposed)
	}, func(c deposeCandidate) string { return c.leader },
		"deposed-leader-returns: no partition has a leader other than the active controller and every replica in its ISR")
	out.Leader, out.Partition, err = chooseLeaderStep(seq, "deposed-leader-returns", "the leader of a partition whose ISR is whole, other than the active controller (drawn)", choice.leader, choice.label, err)
	if err != nil {
		return out, err
	}
	out.Grudge = Isolate(nodes, out.Leader)
	seq.step(Step{Name: "isolate", Rule: "the leader, cut off from every other node", Nodes: []string{out.Leader}}, nil)
	errs := p.install(ctx, out.Grudge)
	if !seq.wait(ctx, p.Sleep, p.Wait) {
		return out, errors.Join(append(errs, ctx.Err())...)
	}
	seq.step(Step{Name: "heal", Rule: "the cut", Nodes: []string{out.Leader}}, nil)
	failed, healErrs := p.heal(ctx)
	p.cut = failed // Stop heals them again
	errs = append(errs, healErrs...)
	// Back in the partition's ISR, and the rest of it as it is then.
	var rest []string
	took, err := func() (time.Duration, error) {
		if !hasView {
			return 0, errNoReplicaView
		}
		return waitFor(ctx, view, rejoinLimit, out.Leader+" back in the ISR of "+out.Partition, func(parts []PartitionState) bool {
			for _, ps := range parts {
				if ps.label() == out.Partition && slices.Contains(ps.ISR, out.Leader) {
					rest = slices.DeleteFunc(slices.Clone(ps.ISR), func(n string) bool { return n == out.Leader })
					slices.Sort(rest)
					return true
				}
			}
			return false
		})
	}()
	if err != nil {
		out.Rejoined = err.Error()
	} else {
		out.Rejoined = took.Round(time.Millisecond).String()
	}
	minority := max(1, (len(nodes)-1)/2)
	if err == nil && (len(rest) == 0 || len(rest) > minority) {
		err = fmt.Errorf("deposed-leader-returns: the rest of %s's ISR, %v, is no minority to kill", out.Partition, rest)
	}
	kill, err := seq.step(Step{Name: "kill", Rule: "the rest of the partition's ISR once the deposed leader is back in it", Nodes: rest, Partition: out.Partition}, err)
	if err != nil {
		return out, errors.Join(append(errs, err)...)
	}
	out.Killed = kill.Nodes
	killErrs := p.killAll(ctx, out.Killed)
	errs = append(errs, killErrs...)
	if len(killErrs) == 0 {
		p.deposed = out.Leader
	}
	// The fault has done its work once the deposed leader leads again:
	// from then on every read of the partition (the final reads too)
	// meets whatever tail it kept.
	if hasView {
		took, err := waitFor(ctx, view, rejoinLimit, out.Leader+" leading "+out.Partition, func(parts []PartitionState) bool {
			return slices.ContainsFunc(parts, func(ps PartitionState) bool { return ps.label() == out.Partition && ps.Leader == out.Leader })
		})
		if err != nil {
			out.Leads = err.Error()
		} else {
			out.Leads = took.String()
		}
	}
	return out, errors.Join(errs...)
}
