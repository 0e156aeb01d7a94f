package nemesis

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Network is what the packet faults need from the runtime besides Runtime
// (harness.DockerRuntime has it): a netem packet fault on a node's
// interface, made by its in-node agent.
type Network interface {
	// Netem makes line (the agent's netem fields, "delay=100ms loss=5")
	// the node's packet fault, replacing the one in force; an empty line
	// heals.
	Netem(ctx context.Context, node, line string) error
}

var errNoNetwork = errors.New("the runtime has no packet faults (use --runtime docker)")

// Packet fault modes.
const (
	PacketDelay     = "delay"
	PacketLoss      = "loss"
	PacketDuplicate = "duplicate"
	PacketReorder   = "reorder"
	// PacketLatency is a steady delay with no jitter, so nothing is
	// reordered: a slow link rather than a chaotic one, short enough
	// that clients keep making progress through it.
	PacketLatency = "latency"
)

// PacketModes lists the packet faults.
var PacketModes = []string{PacketDelay, PacketLoss, PacketDuplicate, PacketReorder, PacketLatency}

// packetTargetModes are the targets a packet fault draws from: every node
// may be slowed at once (it stays available).
var packetTargetModes = []string{TargetOne, TargetMinority, TargetLeaders, TargetAll}

// PacketCommand draws the agent's netem fields of a packet fault mode.
func PacketCommand(mode string, rng *rand.Rand) string {
	switch mode {
	case PacketDelay:
		d := time.Duration(50+rng.IntN(200)) * time.Millisecond
		return fmt.Sprintf("delay=%s jitter=%s", d, d/4)
	case PacketLoss:
		return fmt.Sprintf("loss=%d", 10+rng.IntN(30))
	case PacketDuplicate:
		return fmt.Sprintf("duplicate=%d", 10+rng.IntN(40))
	case PacketReorder:
		d := time.Duration(20+rng.IntN(60)) * time.Millisecond
		return fmt.Sprintf("delay=%s reorder=%d", d, 25+rng.IntN(25))
	case PacketLatency:
		return fmt.Sprintf("delay=%s", time.Duration(20+rng.IntN(60))*time.Millisecond)
	}
	return ""
}

// Packet delays, drops, duplicates or reorders every packet its targets
// send (a netem qdisc in each target's namespace, by its agent; on a
// kernel without netem, the agent's netfilter fallbacks act on the packets
// the targets receive instead), client traffic included, until it stops.
type Packet struct {
	Network Network
	Cluster Cluster
	Modes   []string
	faulty  []string
}

// Name is "packet".
func (p *Packet) Name() string { return string(KindPacket) }

// Start applies the fault to the chosen nodes.
func (p *Packet) Start(ctx context.Context, rng *rand.Rand) (any, error) {
	mode := pickMode(ctx, rng, p.Modes, PacketModes)
	if p.Network == nil {
		return DiskTargets{Mode: mode}, errNoNetwork
	}
	target := packetTargetModes[rng.IntN(len(packetTargetModes))]
	targets, err := chooseTargets(ctx, p.Cluster, target, rng)
	if err != nil {
		return DiskTargets{Mode: mode}, err
	}
	line := PacketCommand(mode, rng)
	did := map[string]string{}
	for _, n := range targets {
		did[n] = line
	}
	p.faulty = append(p.faulty, targets...)
	return DiskTargets{Mode: mode, Nodes: targets, Did: did}, onEach(targets, func(n string) error { return p.Network.Netem(ctx, n, line) })
}

// Stop heals every node it touched.
func (p *Packet) Stop(ctx context.Context) (any, error) {
	healed := p.faulty
	p.faulty = nil
	return Targets{Nodes: healed}, onEach(healed, func(n string) error { return p.Network.Netem(ctx, n, "") })
}

// Lagging-failover modes: how the follower is made to lag.
const (
	LaggingCut  = "cut"  // cut off from every other node (not from clients)
	LaggingSlow = "slow" // most of its packets lost
)

// LaggingModes lists the ways lagging-failover makes a follower lag.
var LaggingModes = []string{LaggingCut, LaggingSlow}

// LagTimeout bounds how long lagging-failover waits for the follower to be
// seen out of the ISR (replica.lag.time.max.ms plus the time the leader
// takes to shrink the ISR and the metadata to say so).
const LagTimeout = 45 * time.Second

// laggingSlowNetem is the slow mode's packet fault: most of what the
// follower sends is lost, so its fetches crawl through retransmissions
// with backoff and it falls behind; loss alone, so that it works on a
// kernel without netem too (the agent's netfilter fallback). Whether it
// fell behind far enough is what the wait observes.
const laggingSlowNetem = "loss=85"

// LaggingFailover makes a failover land next to a lagging replica, as it
// is seen from outside: it picks a partition whose ISR has the leader and
// at least one follower, cuts or slows one of those followers until the
// metadata shows it out of that partition's ISR, then heals the follower
// (up and reachable, but behind) and at once kills the partition's current
// leader. A correct controller elects only from the ISR, so the lagging
// follower must not lead (unless unclean election is on). The leader is
// restarted when the fault stops. When the follower never leaves the ISR
// within LagTimeout, no leader is killed and the start is info.
type LaggingFailover struct {
	Runtime Runtime
	Network Network
	Cluster Cluster
	Modes   []string
	cut     []string // nodes with a grudge or netem in force
	slowed  string
	killed  []string
}

// Name is "lagging-failover".
func (l *LaggingFailover) Name() string { return string(KindLaggingFailover) }

// LaggingStart records what lagging-failover did.
type LaggingStart struct {
	Mode      string `json:"mode"`
	Topic     string `json:"topic,omitempty"`
	Partition int32  `json:"partition"`
	Follower  string `json:"follower,omitempty"`
	Leader    string `json:"leader,omitempty"`
	// OutOfISR is how long the follower took to be seen out of the ISR.
	OutOfISR string `json:"out_of_isr,omitempty"`
	// Nodes are the follower and the killed leader, in that order.
	Nodes []string `json:"nodes,omitempty"`
}

// AimedAt returns the follower and the leader, in that order.
func (s LaggingStart) AimedAt() []string { return s.Nodes }

// Start makes the follower lag and kills the leader. Its steps (lag,
// heal-and-kill) are recorded; a replay drives the recorded follower,
// partition and leader at the recorded times, and notes where the live
// metadata disagreed (the follower still in the ISR when the leader is
// killed, another leader by then).
func (l *LaggingFailover) Start(ctx context.Context, rng *rand.Rand) (any, error) {
	out := LaggingStart{Mode: pickMode(ctx, rng, l.Modes, LaggingModes)}
	rv, ok := l.Cluster.(ReplicaView)
	if !ok {
		return out, errNoReplicaView
	}
	if out.Mode == LaggingSlow && l.Network == nil {
		return out, errNoNetwork
	}
	seq := sequenceOf(ctx)
	parts, err := rv.Partitions(ctx)
	if err != nil {
		err = fmt.Errorf("find the partitions' ISRs: %w", err)
	}
	// A schedule recorded before the steps were pins the follower and the
	// leader (Event.Nodes).
	pinned := aimOf(ctx).nodes
	var candidates []PartitionState
	for _, p := range parts {
		if p.Leader == "" || !slices.Contains(p.ISR, p.Leader) || len(p.ISR) < 2 {
			continue
		}
		if len(pinned) == 2 && (p.Leader != pinned[1] || !slices.Contains(p.ISR, pinned[0])) {
			continue
		}
		candidates = append(candidates, p)
	}
	live := Step{Name: "lag", Rule: "an in-sync follower of a partition whose ISR has its leader (drawn)"}
	if err == nil && len(candidates) == 0 {
		err = errors.New("no partition has a leader and an in-sync follower")
	}
	if err == nil {
		p := candidates[rng.IntN(len(candidates))]
		var followers []string
		for _, n := range p.ISR {
			if n != p.Leader {
				followers = append(followers, n)
			}
		}
		follower := followers[rng.IntN(len(followers))]
		if len(pinned) == 2 {
			follower = pinned[0]
		}
		live.Nodes, live.Partition = []string{follower}, partitionLabel(p.Topic, p.Partition)
	}
	lag, err := seq.step(live, err)
	if err != nil {
		return out, err
	}
	topic, partition, perr := parseLabel(lag.Partition)
	if perr != nil || len(lag.Nodes) != 1 {
		return out, fmt.Errorf("lagging-failover: recorded step %s names %v on %q, not one follower on one partition", lag.Name, lag.Nodes, lag.Partition)
	}
	follower := lag.Nodes[0]
	out.Topic, out.Partition, out.Follower = topic, partition, follower
	if err := l.lag(ctx, out.Mode, follower); err != nil {
		return out, err
	}
	lagged := func(ps []PartitionState) bool {
		for _, q := range ps {
			if q.Topic == topic && q.Partition == partition {
				return !slices.Contains(q.ISR, follower) && q.Leader != "" && q.Leader != follower
			}
		}
		return false
	}
	var disagreed string
	if _, replay := seq.recordedNext(); replay {
		// The recorded time, then one look at whether it lagged as it did.
		t0 := time.Now()
		if !seq.wait(ctx, nil, 0) {
			return out, errors.Join(ctx.Err(), l.heal(ctx))
		}
		out.OutOfISR = time.Since(t0).Round(time.Millisecond).String()
		if ps, err := rv.Partitions(ctx); err != nil || !lagged(ps) {
			disagreed = fmt.Sprintf("replay: %s was not seen out of the ISR of %s at the recorded time; the leader was killed anyway", follower, lag.Partition)
		}
	} else {
		took, err := waitFor(ctx, rv, LagTimeout, follower+" out of the ISR of "+lag.Partition, lagged)
		if err != nil {
			return out, errors.Join(err, l.heal(ctx))
		}
		out.OutOfISR = took.String()
	}
	// The leader now, which may have moved while the follower lagged.
	leader := ""
	for _, q := range parts {
		if q.Topic == topic && q.Partition == partition {
			leader = q.Leader
		}
	}
	if now, err := rv.Partitions(ctx); err == nil {
		for _, q := range now {
			if q.Topic == topic && q.Partition == partition && q.Leader != "" && q.Leader != follower {
				leader = q.Leader
			}
		}
	}
	var lerr error
	if leader == "" {
		lerr = fmt.Errorf("lagging-failover: %s has no leader but %s", lag.Partition, follower)
	}
	kill, err := seq.step(Step{Name: "heal-and-kill", Rule: "the partition's leader now", Nodes: []string{leader}, Partition: lag.Partition}, lerr)
	if disagreed != "" {
		if kill.Note != "" {
			disagreed += "; " + strings.TrimPrefix(kill.Note, "replay: ")
		}
		seq.annotate(disagreed)
	}
	if err != nil {
		return out, errors.Join(err, l.heal(ctx))
	}
	leader = kill.Nodes[0]
	out.Leader, out.Nodes = leader, []string{follower, leader}
	// Heal the follower first: up, reachable and behind when its leader
	// dies, so that only the ISR rule keeps it from leading.
	if err := l.heal(ctx); err != nil {
		return out, err
	}
	l.killed = append(l.killed, leader)
	return out, l.Runtime.Kill(ctx, leader)
}

// partitionLabel names a partition as Step.Partition does: "t0-2".
func partitionLabel(topic string, partition int32) string {
	return topic + "-" + strconv.Itoa(int(partition))
}

// parseLabel reads partitionLabel's form.
func parseLabel(label string) (string, int32, error) {
	cut := strings.LastIndexByte(label, '-')
	if cut <= 0 {
		return "", 0, fmt.Errorf("%q names no partition", label)
	}
	p, err := strconv.ParseInt(label[cut+1:], 10, 32)
	if err != nil {
		return "", 0, fmt.Errorf("%q names no partition: %w", label, err)
	}
	return label[:cut], int32(p), nil
}

// lag cuts or slows the follower.
func (l *LaggingFailover) lag(ctx context.Context, mode, follower string) error {
	if mode == LaggingSlow {
		l.slowed = follower
		return l.Network.Netem(ctx, follower, laggingSlowNetem)
	}
	g := Isolate(l.Cluster.Nodes(), follower)
	l.cut = sortedNodes(g)
	return onEach(l.cut, func(n string) error { return l.Runtime.Isolate(ctx, n, g[n]) })
}

// onEach runs fn for every node at once (one docker exec each, which
// can take seconds on a busy host) and joins the errors in node order.
func onEach(nodes []string, fn func(string) error) error {
	errs := make([]error, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = fn(n) }()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// heal undoes lag.
func (l *LaggingFailover) heal(ctx context.Context) error {
	// All at once, so that the follower is reachable from every node at
	// about the same moment, just before its leader dies.
	errs := []error{onEach(l.cut, func(n string) error { return l.Runtime.Isolate(ctx, n, nil) })}
	l.cut = nil
	if l.slowed != "" {
		if err := l.Network.Netem(ctx, l.slowed, ""); err != nil {
			errs = append(errs, err)
		}
		l.slowed = ""
	}
	return errors.Join(errs...)
}

// Stop heals the follower if it is still cut and restarts the leader.
func (l *LaggingFailover) Stop(ctx context.Context) (any, error) {
	herr := l.heal(ctx)
	started := l.killed
	l.killed = nil
	return Targets{Nodes: started}, errors.Join(herr, startAll(ctx, l.Runtime, started))
}
