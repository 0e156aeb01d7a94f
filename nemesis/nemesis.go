package nemesis

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"time"
)

// Runtime is what faults need from the node runtime (harness.Runtime
// satisfies it).
type Runtime interface {
	Kill(ctx context.Context, node string) error
	// Stop is a controlled shutdown: SIGTERM, and wait for the exit.
	Stop(ctx context.Context, node string) error
	Start(ctx context.Context, node string) error
	Pause(ctx context.Context, node string) error
	Resume(ctx context.Context, node string) error
	Isolate(ctx context.Context, node string, from []string) error
}

// Cluster answers who does what right now, so faults can aim at the nodes
// that matter: the partition leaders and the active controller.
type Cluster interface {
	// Nodes returns every node name (n1..nK).
	Nodes() []string
	// Leaders returns the nodes leading at least one of the workload's
	// partitions.
	Leaders(ctx context.Context) ([]string, error)
	// Controller returns the active controller's node.
	Controller(ctx context.Context) (string, error)
}

// Fault is one kind of fault with its own targeting: Start chooses targets
// (with rng, so a seed reproduces the choices) and applies the fault; Stop
// undoes whatever Start did. Both return a JSON-encodable description of
// what they touched, recorded in the history.
type Fault interface {
	Name() string
	Start(ctx context.Context, rng *rand.Rand) (any, error)
	Stop(ctx context.Context) (any, error)
}

// Noop is the fault that does nothing (the "none" nemesis).
type Noop struct{}

// Name is "none".
func (Noop) Name() string { return "none" }

// Start does nothing.
func (Noop) Start(context.Context, *rand.Rand) (any, error) { return nil, nil }

// Stop does nothing.
func (Noop) Stop(context.Context) (any, error) { return nil, nil }

// Target modes for process faults (kill, pause).
const (
	TargetOne      = "one"
	TargetMinority = "minority"
	TargetMajority = "majority"
	// TargetAll hits every node at once (Jepsen's :all). It is chosen
	// only when asked for (kill:all): with Kafka's default flush policy a
	// simultaneous crash of every replica may lose acknowledged writes by
	// design, so it is no part of the random mix.
	TargetAll        = "all"
	TargetLeaders    = "leaders"
	TargetController = "controller"
	// TargetCoordinator hits the node coordinating the transactions of one
	// of the workload's transactional ids (chosen with the fault's rng):
	// the leader of that id's __transaction_state partition. It is chosen
	// only when named (kill:coordinator), and needs a Cluster that is a
	// CoordinatorView.
	TargetCoordinator = "coordinator"
)

// CoordinatorView is a Cluster that can name the nodes coordinating the
// workload's transactions.
type CoordinatorView interface {
	// Coordinators returns the nodes that are the transaction coordinator
	// of at least one of the workload's transactional ids.
	Coordinators(ctx context.Context) ([]string, error)
}

// ProcessTargetModes lists the modes kill and pause choose from at random.
var ProcessTargetModes = []string{TargetOne, TargetMinority, TargetMajority, TargetLeaders, TargetController}

// explicitProcessTargetModes are the modes kill:MODE and pause:MODE accept.
var explicitProcessTargetModes = append(append([]string(nil), ProcessTargetModes...), TargetAll, TargetCoordinator)

// chooseTargets picks nodes for a process fault: the nodes the event
// pinned, if any, else the mode's.
func chooseTargets(ctx context.Context, c Cluster, mode string, rng *rand.Rand) ([]string, error) {
	if pinned := pinnedNodes(ctx); pinned != nil {
		return pinned, nil
	}
	nodes := append([]string(nil), c.Nodes()...)
	rng.Shuffle(len(nodes), func(i, j int) { nodes[i], nodes[j] = nodes[j], nodes[i] })
	var out []string
	switch mode {
	case TargetOne:
		out = nodes[:1]
	case TargetMinority:
		out = nodes[:max(1, (len(nodes)-1)/2)]
	case TargetMajority:
		out = leadersFirst(ctx, c, nodes)[:len(nodes)/2+1]
	case TargetAll:
		out = nodes
	case TargetLeaders:
		leaders, err := c.Leaders(ctx)
		if err != nil {
			return nil, fmt.Errorf("find partition leaders: %w", err)
		}
		if len(leaders) == 0 {
			return nil, errors.New("no partition has a leader")
		}
		// At most a minority, so the fault can be survived.
		rng.Shuffle(len(leaders), func(i, j int) { leaders[i], leaders[j] = leaders[j], leaders[i] })
		out = leaders[:min(len(leaders), max(1, (len(nodes)-1)/2))]
	case TargetController:
		ctl, err := c.Controller(ctx)
		if err != nil {
			return nil, fmt.Errorf("find the active controller: %w", err)
		}
		out = []string{ctl}
	case TargetCoordinator:
		cv, ok := c.(CoordinatorView)
		if !ok {
			return nil, errors.New("this cluster cannot name the transaction coordinators")
		}
		co, err := pickCoordinator(ctx, rng, cv.Coordinators, "the transaction coordinators", "no transactional id has a coordinator (a --txn workload names them)")
		if err != nil {
			return nil, err
		}
		out = []string{co}
	default:
		return nil, fmt.Errorf("unknown target mode %q", mode)
	}
	sorted := append([]string(nil), out...)
	sort.Strings(sorted)
	return sorted, nil
}

// leadersFirst reorders nodes (already shuffled) so that those leading
// the workload's partitions now come first, each group in its drawn
// order; nodes as they are when the leaders are unknown. A majority drawn
// from it forces a failover of every partition it can: one round kills
// the leaders, and the next, finding them moved to the nodes it spared,
// kills those and sends the partitions back to the nodes the first round
// restarted, where what a crash did to a log (recovery, the cleaner on a
// recovered log) is what the clients read. A majority drawn at random may
// hit the same nodes round after round and leave the partitions where no
// fault reached.
func leadersFirst(ctx context.Context, c Cluster, nodes []string) []string {
	leaders, err := c.Leaders(ctx)
	if err != nil || len(leaders) == 0 {
		return nodes
	}
	out := make([]string, 0, len(nodes))
	for _, n := range nodes {
		if slices.Contains(leaders, n) {
			out = append(out, n)
		}
	}
	for _, n := range nodes {
		if !slices.Contains(leaders, n) {
			out = append(out, n)
		}
	}
	return out
}

// Targets records a process fault's mode and the nodes it hit.
type Targets struct {
	Mode  string   `json:"mode,omitempty"`
	Nodes []string `json:"nodes"`
}

// Kill SIGKILLs its targets and restarts them (on their own data) when it
// stops.
type Kill struct {
	Runtime Runtime
	Cluster Cluster
	Modes   []string // default ProcessTargetModes
	killed  []string
}

// Name is "kill".
func (k *Kill) Name() string { return "kill" }

// Start kills the chosen nodes.
func (k *Kill) Start(ctx context.Context, rng *rand.Rand) (any, error) {
	return hitTargets(ctx, rng, k.Cluster, k.Modes, &k.killed, k.Runtime.Kill)
}

// hitTargets chooses a mode (from modes, default ProcessTargetModes) and
// its targets, and applies fn to each, noting every node in hit before
// fn runs: a fault that errored may still have happened (the signal went
// out, the answer was lost), so Stop undoes it either way.
func hitTargets(ctx context.Context, rng *rand.Rand, c Cluster, modes []string, hit *[]string, fn func(context.Context, string) error) (any, error) {
	mode := pickMode(ctx, rng, modes, ProcessTargetModes)
	targets, err := chooseTargets(ctx, c, mode, rng)
	if err != nil {
		return Targets{Mode: mode}, err
	}
	var errs []error
	for _, n := range targets {
		*hit = append(*hit, n)
		if err := fn(ctx, n); err != nil {
			errs = append(errs, err)
		}
	}
	return Targets{Mode: mode, Nodes: targets}, errors.Join(errs...)
}

// Stop restarts every node it killed.
func (k *Kill) Stop(ctx context.Context) (any, error) {
	started := k.killed
	k.killed = nil
	return Targets{Nodes: started}, startAll(ctx, k.Runtime, started)
}

// Pause SIGSTOPs its targets (a zombie that wakes up after it was
// replaced) and SIGCONTs them when it stops.
type Pause struct {
	Runtime Runtime
	Cluster Cluster
	Modes   []string
	paused  []string
}

// Name is "pause".
func (p *Pause) Name() string { return "pause" }

// Start pauses the chosen nodes.
func (p *Pause) Start(ctx context.Context, rng *rand.Rand) (any, error) {
	return hitTargets(ctx, rng, p.Cluster, p.Modes, &p.paused, p.Runtime.Pause)
}

// Stop resumes every paused node.
func (p *Pause) Stop(ctx context.Context) (any, error) {
	var errs []error
	resumed := p.paused
	p.paused = nil
	for _, n := range resumed {
		if err := p.Runtime.Resume(ctx, n); err != nil {
			errs = append(errs, err)
		}
	}
	return Targets{Nodes: resumed}, errors.Join(errs...)
}

// Partition modes.
const (
	PartitionOne        = "one"    // one node cut off from all others
	PartitionHalves     = "halves" // two random halves
	PartitionRing       = "majorities-ring"
	PartitionController = "controller" // the active controller isolated
)

// PartitionModes lists the modes the partition fault chooses from.
var PartitionModes = []string{PartitionOne, PartitionHalves, PartitionRing, PartitionController}

// Grudge maps each node to the nodes whose packets it drops.
type Grudge map[string][]string

// Partition cuts the network between nodes (between clients and nodes only
// in mode clients-coordinator) and heals it when it stops.
type Partition struct {
	Runtime Runtime
	Cluster Cluster
	Modes   []string
	// Wait and Sleep pace lagging-then-leader (default: 10 s on a timer).
	Wait   time.Duration
	Sleep  func(ctx context.Context, d time.Duration) bool
	cut    []string
	killed []string // by lagging-then-leader
	// deposed is the node the last deposed-leader-returns left leading
	// with its tail: a later one neither deposes nor kills it, so that
	// the final reads still meet that tail.
	deposed string
}

// Name is "partition".
func (p *Partition) Name() string { return "partition" }

// PartitionStart records a partition's mode and grudge, and the nodes
// that pin the same grudge in a replay (Event.Nodes): the isolated node,
// the smaller side of halves, the ring in its order.
type PartitionStart struct {
	Mode   string   `json:"mode"`
	Grudge Grudge   `json:"grudge"`
	Nodes  []string `json:"nodes,omitempty"`
}

// Start installs the grudge of a chosen mode.
func (p *Partition) Start(ctx context.Context, rng *rand.Rand) (any, error) {
	mode := pickMode(ctx, rng, p.Modes, PartitionModes)
	nodes := p.Cluster.Nodes()
	pinned := aimOf(ctx).nodes
	var g Grudge
	var aim []string
	switch mode {
	case PartitionOne, PartitionController:
		victim := ""
		switch {
		case len(pinned) > 0:
			victim = pinned[0]
		case mode == PartitionOne:
			victim = nodes[rng.IntN(len(nodes))]
		default:
			ctl, err := p.Cluster.Controller(ctx)
			if err != nil {
				return PartitionStart{Mode: mode}, fmt.Errorf("find the active controller: %w", err)
			}
			victim = ctl
		}
		g, aim = Isolate(nodes, victim), []string{victim}
	case PartitionHalves:
		order := shuffled(nodes, rng)
		if len(pinned) > 0 {
			order = pinnedFirst(nodes, pinned)
		}
		g, aim = halvesOf(order, len(order)/2), order[:len(order)/2]
		if len(pinned) > 0 {
			g, aim = halvesOf(order, len(pinned)), pinned
		}
	case PartitionRing:
		ring := shuffled(nodes, rng)
		if len(pinned) == len(nodes) {
			ring = append([]string(nil), pinned...)
		}
		g, aim = ringOf(ring), ring
	case PartitionLaggingThenLeader:
		return p.laggingThenLeader(ctx, rng)
	case PartitionLeaderAndFollower:
		return p.leaderAndFollower(ctx, rng)
	case PartitionDeposedLeaderReturns:
		return p.deposedLeaderReturns(ctx, rng)
	case PartitionLeaderCutThenKilled:
		return p.leaderCutThenKilled(ctx, rng)
	case PartitionCoordinator:
		return p.coordinator(ctx, rng)
	case PartitionClientsCoordinator:
		return p.clientsCoordinator(ctx, rng)
	case PartitionCoordinatorCutThenKilled:
		return p.coordinatorCutThenKilled(ctx, rng)
	default:
		return nil, fmt.Errorf("unknown partition mode %q", mode)
	}
	return PartitionStart{Mode: mode, Grudge: g, Nodes: aim}, errors.Join(p.install(ctx, g)...)
}

// install cuts every node of grudge g off from the nodes it names, noting
// each for Stop to heal.
func (p *Partition) install(ctx context.Context, g Grudge) []error {
	var errs []error
	for _, n := range sortedNodes(g) {
		p.cut = append(p.cut, n)
		if err := p.Runtime.Isolate(ctx, n, g[n]); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// Stop starts every node it killed and heals every node it cut (a node
// is started first, so that it is up to be healed).
func (p *Partition) Stop(ctx context.Context) (any, error) {
	killed := p.killed
	p.killed = nil
	errs := []error{startAll(ctx, p.Runtime, killed)}
	healed := p.cut
	_, healErrs := p.heal(ctx)
	return Targets{Nodes: healed}, errors.Join(append(errs, healErrs...)...)
}

// heal removes every cut node's drop rules and forgets the cut, returning
// the nodes it could not heal and why.
func (p *Partition) heal(ctx context.Context) (failed []string, errs []error) {
	cut := p.cut
	p.cut = nil
	for _, n := range cut {
		if err := p.Runtime.Isolate(ctx, n, nil); err != nil {
			failed = append(failed, n)
			errs = append(errs, err)
		}
	}
	return failed, errs
}

// Isolate is the grudge that cuts victim off from every other node, in both
// directions.
func Isolate(nodes []string, victim string) Grudge {
	g := Grudge{}
	for _, n := range nodes {
		if n == victim {
			continue
		}
		g[n] = []string{victim}
		g[victim] = append(g[victim], n)
	}
	return g
}

// Halves splits the nodes into two random halves (the first one smaller
// when the count is odd) that cannot reach each other.
func Halves(nodes []string, rng *rand.Rand) Grudge {
	order := shuffled(nodes, rng)
	return halvesOf(order, len(order)/2)
}

func shuffled(nodes []string, rng *rand.Rand) []string {
	out := append([]string(nil), nodes...)
	rng.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

// pinnedFirst orders nodes with the pinned ones first.
func pinnedFirst(nodes, pinned []string) []string {
	out := append([]string(nil), pinned...)
	for _, n := range nodes {
		if !slices.Contains(pinned, n) {
			out = append(out, n)
		}
	}
	return out
}

// halvesOf cuts order[:k] off from order[k:].
func halvesOf(order []string, k int) Grudge {
	a, b := order[:k], order[k:]
	g := Grudge{}
	for _, x := range a {
		g[x] = append([]string(nil), b...)
		for _, y := range b {
			g[y] = append(g[y], x)
		}
	}
	for n := range g {
		sort.Strings(g[n])
	}
	return g
}

// MajoritiesRing arranges the nodes in a random ring where each node sees
// itself and its nearest neighbours, enough for a majority, and drops the
// rest: every node is in a majority, but no two nodes see the same one.
func MajoritiesRing(nodes []string, rng *rand.Rand) Grudge {
	return ringOf(shuffled(nodes, rng))
}

// ringOf is the majorities ring of the nodes in ring's order.
func ringOf(ring []string) Grudge {
	n := len(ring)
	majority := n/2 + 1
	reach := majority / 2 // neighbours seen on each side
	g := Grudge{}
	for i, x := range ring {
		for j, y := range ring {
			d := (j - i + n) % n
			if d > n/2 {
				d = n - d
			}
			if d > reach {
				g[x] = append(g[x], y)
			}
		}
		sort.Strings(g[x])
	}
	for k, v := range g {
		if len(v) == 0 {
			delete(g, k)
		}
	}
	return g
}

func sortedNodes(g Grudge) []string {
	out := make([]string, 0, len(g))
	for n := range g {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

func pick(rng *rand.Rand, modes, all []string) string {
	if len(modes) == 0 {
		modes = all
	}
	return modes[rng.IntN(len(modes))]
}
