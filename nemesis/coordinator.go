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
