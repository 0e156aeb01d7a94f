package nemesis

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
)

// PartitionCoordinator cuts the node coordinating the workload's consumer
// group off from every other node (never from clients) and holds the cut
// for the sequence wait before Start returns, longer than the broker
// session timeout: the controller fences it and moves the group's
// __consumer_offsets partition to a replica of its ISR, while the group's
// consumers can still commit on it. A correct coordinator acknowledges no
// commit it cannot replicate, so the new coordinator has every
// acknowledged one; one that acknowledges commits on its own loses them
// when the cut heals, and the group rewinds. Chosen only when named.
const PartitionCoordinator = "coordinator"

// GroupCoordinatorView is what partition:coordinator needs besides Cluster:
// the nodes that coordinate the workload's consumer groups, as
// FindCoordinator names them. The harness's cluster view has it.
type GroupCoordinatorView interface {
	GroupCoordinators(ctx context.Context) ([]string, error)
}

// coordinator is Partition's PartitionCoordinator; a pinned node (a
// replay) is the victim.
func (p *Partition) coordinator(ctx context.Context, rng *rand.Rand) (any, error) {
	out := PartitionStart{Mode: PartitionCoordinator}
	victim := ""
	if pinned := pinnedNodes(ctx); len(pinned) > 0 {
		victim = pinned[0]
	} else {
		view, ok := p.Cluster.(GroupCoordinatorView)
		if !ok {
			return out, errors.New("the cluster view names no group coordinator (this fault needs the harness's FindCoordinator view)")
		}
		var err error
		victim, err = pickCoordinator(ctx, rng, view.GroupCoordinators, "the group coordinator", "coordinator: the workload's groups have no coordinator")
		if err != nil {
			return out, err
		}
	}
	out.Nodes = []string{victim}
	out.Grudge = Isolate(p.Cluster.Nodes(), victim)
	errs, _ := p.cutAndHold(ctx, out.Grudge)
	return out, errors.Join(errs...)
}

// pickCoordinator asks list for the coordinators (of what names them, for
// the error) and draws one with rng; none is the error empty.
func pickCoordinator(ctx context.Context, rng *rand.Rand, list func(context.Context) ([]string, error), what, empty string) (string, error) {
	coords, err := list(ctx)
	if err != nil {
		return "", fmt.Errorf("find %s: %w", what, err)
	}
	if len(coords) == 0 {
		return "", errors.New(empty)
	}
	return coords[rng.IntN(len(coords))], nil
}

// PartitionClientsCoordinator cuts the clients (every process outside the
// cluster: the workload's producers and consumers, and the harness's own
// admin connections) off from the node coordinating the transactions of
// one of the workload's transactional ids, while that node keeps talking
// to its peers: it stays the coordinator (it still leads its
// __transaction_state partition) and the partition leaders its markers go
// to, but no producer can reach it, so transactions in flight cannot end
// until the cut heals or their timeout aborts them. Jepsen's partition
// between a producer and its coordinator; needs --txn, chosen only when
// named (partition:clients-coordinator). The runtime resolves ClientsNode
// to the address clients come from.
const PartitionClientsCoordinator = "clients-coordinator"

// ClientsNode names the clients in a Grudge: a node whose grudge lists it
// drops every packet from outside the cluster.
const ClientsNode = "clients"

// clientsCoordinator is Partition's PartitionClientsCoordinator; a pinned
// node (a replay) is the victim.
func (p *Partition) clientsCoordinator(ctx context.Context, rng *rand.Rand) (any, error) {
	out := PartitionStart{Mode: PartitionClientsCoordinator}
	nodes, err := chooseTargets(ctx, p.Cluster, TargetCoordinator, rng)
	if err != nil {
		return out, err
	}
	victim := nodes[0]
	out.Nodes = []string{victim}
	out.Grudge = Grudge{victim: {ClientsNode}}
	return out, errors.Join(p.install(ctx, out.Grudge)...)
}

// PartitionCoordinatorCutThenKilled cuts the node coordinating the
// transactions of one of the workload's transactional ids off from every
// node but the active controller and one other (drawn; two when the
// coordinator is the controller), holds the cut for the sequence wait
// (which must outlast replica.lag.time.max.ms, so that the coordinator's
// partitions shrink their ISRs to the nodes it still reaches and its
// __transaction_state writes commit again), and kills it. Transactions
// that end in the meantime are decided (EndTxn is answered once the
// Prepare record is durable) but their markers cannot reach the partition
// leaders the coordinator is cut off from: the kill leaves them prepared,
// and the coordinator that takes over must finish each as it was decided.
// Stop heals the cut and starts the node again. Needs --txn; chosen only
// when named.
const PartitionCoordinatorCutThenKilled = "coordinator-cut-then-killed"

// CoordinatorCut records a coordinator-cut-then-killed fault.
type CoordinatorCut struct {
	Mode        string   `json:"mode"`
	Coordinator string   `json:"coordinator,omitempty"`
	Kept        []string `json:"kept,omitempty"` // the nodes it still reached
	Grudge      Grudge   `json:"grudge,omitempty"`
	Killed      []string `json:"killed,omitempty"`
}

// AimedAt returns the coordinator (Event.Nodes pins it on a replay).
func (c CoordinatorCut) AimedAt() []string {
	if c.Coordinator == "" {
		return nil
	}
	return []string{c.Coordinator}
}

// coordinatorCutThenKilled is Partition's PartitionCoordinatorCutThenKilled.
func (p *Partition) coordinatorCutThenKilled(ctx context.Context, rng *rand.Rand) (CoordinatorCut, error) {
	out := CoordinatorCut{Mode: PartitionCoordinatorCutThenKilled}
	seq := sequenceOf(ctx)
	nodes := p.Cluster.Nodes()
	// The coordinator first, then the nodes it keeps reaching.
	choice, err := func() ([]string, error) {
		coord, err := chooseTargets(ctx, p.Cluster, TargetCoordinator, rng)
		if err != nil {
			return nil, err
		}
		ctl, err := p.Cluster.Controller(ctx)
		if err != nil {
			return nil, fmt.Errorf("find the active controller: %w", err)
		}
		return keptByCoordinator(nodes, coord[0], ctl, rng)
	}()
	st, err := seq.step(Step{Name: "choose-coordinator", Rule: "a transaction coordinator, then the active controller and another node it keeps reaching (drawn)", Nodes: choice}, err)
	if err != nil {
		return out, err
	}
	if len(st.Nodes) < 2 {
		return out, fmt.Errorf("coordinator-cut-then-killed: recorded step %s names %v, not the coordinator and the nodes it keeps", st.Name, st.Nodes)
	}
	out.Coordinator, out.Kept = st.Nodes[0], st.Nodes[1:]
	out.Grudge = isolateExcept(nodes, out.Coordinator, out.Kept...)
	seq.step(Step{Name: "isolate", Rule: "the coordinator, cut off from all but the nodes it keeps", Nodes: []string{out.Coordinator}}, nil)
	errs := p.install(ctx, out.Grudge)
	if !seq.wait(ctx, p.Sleep, p.Wait) {
		return out, errors.Join(append(errs, ctx.Err())...)
	}
	kill, err := seq.step(Step{Name: "kill", Rule: "the cut coordinator, its last transactions' markers still undelivered", Nodes: []string{out.Coordinator}}, nil)
	if err != nil {
		return out, errors.Join(append(errs, err)...)
	}
	out.Killed = kill.Nodes
	return out, errors.Join(append(errs, p.killAll(ctx, out.Killed)...)...)
}

// keptByCoordinator returns coord followed by the nodes it keeps reaching:
// the controller ctl and one other node drawn with rng, or two others when
// coord is ctl; an error when the cluster has too few nodes for anyone to
// be cut off.
func keptByCoordinator(nodes []string, coord, ctl string, rng *rand.Rand) ([]string, error) {
	var others []string
	for _, n := range nodes {
		if n != coord && n != ctl {
			others = append(others, n)
		}
	}
	want := 1
	if coord == ctl {
		want = 2
	}
	if len(others) < want+1 {
		return nil, fmt.Errorf("coordinator-cut-then-killed needs %d nodes besides the coordinator and the controller, has %d", want+1, len(others))
	}
	rng.Shuffle(len(others), func(i, j int) { others[i], others[j] = others[j], others[i] })
	out := []string{coord}
	if coord != ctl {
		out = append(out, ctl)
	}
	return append(out, others[:want]...), nil
}
