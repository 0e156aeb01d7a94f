package nemesis

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"
)

// The modes below are fixed sequences of two faults, each the one way a
// class of planted bug is exposed (harness's planted suite). They are
// chosen only when named, never in a random mix.
const (
	// PowerAfterFsyncError makes every node's fsyncs fail with EIO for a
	// while (writes still succeed), then cuts every node's power while the
	// fsyncs still fail: a broker that acknowledged what it could not
	// fsync loses it (fsyncgate).
	PowerAfterFsyncError = "after-fsync-error"
	// PowerAfterSlowFsync slows every node's fsyncs down (300 ms each) for
	// a while, then cuts every node's power while they are slow: a broker
	// that acknowledged before its fsync ended loses what was in flight.
	PowerAfterSlowFsync = "after-slow-fsync"
	// CorruptBitFlip kills one node and flips one bit in one record batch
	// of one of its segments (no other corruption), and starts it again
	// when it stops: recovery must find the batch by its CRC.
	CorruptBitFlip = "bit-flip"
	// PartitionLaggingThenLeader cuts one node off from every node but the
	// active controller, so that it stays live but leaves the ISRs it
	// follows in; once it has lagged for the lag wait, it kills the rest of
	// the ISR of one partition it replicates (failoverTargets), so that
	// the failover can land only on the lagging replica. It heals and
	// restarts them when it stops.
	PartitionLaggingThenLeader = "lagging-then-leader"
	// PowerRestartLaggingThenLeader cuts one node's power and starts it
	// again at once, having lost its unflushed tail, and then does
	// lagging-then-leader to it: it cannot fetch that tail back, and the
	// rest of the ISR of a partition it replicates is killed. A correct
	// controller took it out of its ISRs when it registered again and
	// elects nobody; one that kept it there elects a replica that lost
	// acknowledged writes.
	PowerRestartLaggingThenLeader = "restart-lagging-then-leader"
	// CorruptBitFlipThenLeader is bit-flip, then, once the node is back
	// and has had the wait to rejoin its ISRs, the rest of the ISR of the
	// partition whose segment was flipped is killed (at most a minority),
	// so that the node leads it: a correct broker cut the flipped batch
	// off at recovery and fetched it again, one that kept it serves it.
	CorruptBitFlipThenLeader = "bit-flip-then-leader"
	// CorruptDiskReplaced kills one node and empties its data dir as a
	// replaced disk would be (every partition's data and checkpoint gone;
	// its identity and the controller quorum's log kept), and starts it
	// again when it stops: it must fetch everything again before it may
	// lead, and what it fetches is what the leaders hold now (cleaned
	// logs with their transaction markers, log starts moved up).
	CorruptDiskReplaced = "disk-replaced"
)

// sequenceWaitDefault is the wait between the two steps of a sequence
// when the fault sets none: longer than the planted suite's
// replica.lag.time.max.ms (3 s), so a cut follower has left its ISRs
// and the rest of the ISR has acknowledged writes it does not have for
// several seconds.
const sequenceWaitDefault = 10 * time.Second

// sequenceWait waits d (sequenceWaitDefault when zero) with sleep, or a
// timer when sleep is nil; false when ctx ended first.
func sequenceWait(ctx context.Context, sleep func(context.Context, time.Duration) bool, d time.Duration) bool {
	if d <= 0 {
		d = sequenceWaitDefault
	}
	if sleep == nil {
		sleep = timerSleep
	}
	return sleep(ctx, d)
}

// afterDiskFault is Power's PowerAfterFsyncError and
// PowerAfterSlowFsync: the disk fault on every node's fsyncs, the wait,
// then every node's power cut at once.
func (p *Power) afterDiskFault(ctx context.Context, rng *rand.Rand, mode string) (any, error) {
	seq := sequenceOf(ctx)
	eio := "eio fsync"
	if mode == PowerAfterSlowFsync {
		eio = "slow fsync 300ms"
	}
	st, _ := seq.step(Step{Name: "disk-fault", Rule: "every node", Nodes: slices.Clone(p.Cluster.Nodes()), Did: eio}, nil)
	nodes := st.Nodes
	out := DiskTargets{Mode: mode, Nodes: nodes, Did: map[string]string{}}
	var errs []error
	for _, n := range nodes {
		// A node whose fsync failed may stop (its only log dir is
		// offline): Stop starts every node, so each is noted down now.
		p.down = append(p.down, n)
		if err := p.Disk.DiskFault(ctx, n, eio); err != nil {
			errs = append(errs, err)
		}
	}
	if !seq.wait(ctx, p.Sleep, p.Wait) {
		return out, errors.Join(append(errs, ctx.Err())...)
	}
	seq.step(Step{Name: "power-cut", Rule: "every node", Nodes: nodes}, nil)
	lines := make(map[string]string, len(nodes))
	for _, n := range nodes {
		lines[n] = PowerCommand(rng)
		out.Did[n] = fmt.Sprintf("%s, then %s", eio, lines[n])
	}
	errs = append(errs, p.cutAll(ctx, nodes, lines))
	return out, errors.Join(errs...)
}

// laggingThenLeader is Partition's PartitionLaggingThenLeader.
func (p *Partition) laggingThenLeader(ctx context.Context, rng *rand.Rand) (any, error) {
	return p.lagThenFailover(ctx, rng, PartitionLaggingThenLeader, nil)
}

// lagThenFailover chooses the lagging node (never the controller), does
// before to it (nil: nothing), cuts it off from all but the controller,
// waits, and kills the failover targets.
func (p *Partition) lagThenFailover(ctx context.Context, rng *rand.Rand, mode string, before func(lagging string) (string, error)) (LaggingThenLeader, error) {
	out := LaggingThenLeader{Mode: mode}
	seq := sequenceOf(ctx)
	nodes := p.Cluster.Nodes()
	// The lagging node and the controller it keeps reaching, as the live
	// cluster has them (the draw is made either way, so that a replay's
	// later draws stay as they were).
	choice, err := func() ([]string, error) {
		ctl, err := p.Cluster.Controller(ctx)
		if err != nil {
			return nil, fmt.Errorf("find the active controller: %w", err)
		}
		var candidates []string
		for _, n := range nodes {
			if n != ctl {
				candidates = append(candidates, n)
			}
		}
		if len(candidates) < 2 {
			return nil, errors.New("lagging-then-leader needs two nodes besides the controller")
		}
		return []string{candidates[rng.IntN(len(candidates))], ctl}, nil
	}()
	st, err := seq.step(Step{Name: "choose-lagging", Rule: "a node other than the active controller (drawn), then the active controller", Nodes: choice}, err)
	if err != nil {
		return out, err
	}
	if len(st.Nodes) != 2 {
		return out, fmt.Errorf("lagging-then-leader: recorded step %s names %v, not the lagging node and the controller", st.Name, st.Nodes)
	}
	out.Lagging = st.Nodes[0]
	ctl := st.Nodes[1]
	if before != nil {
		did, err := before(out.Lagging)
		out.Did = did
		if err != nil {
			return out, err
		}
	}
	out.Grudge = isolateExcept(nodes, out.Lagging, ctl)
	seq.step(Step{Name: "isolate", Rule: "the lagging node, cut off from all but the controller " + ctl, Nodes: []string{out.Lagging}}, nil)
	errs := p.install(ctx, out.Grudge)
	if !seq.wait(ctx, p.Sleep, p.Wait) {
		return out, errors.Join(append(errs, ctx.Err())...)
	}
	victims, err := p.failoverTargets(ctx, rng, out.Lagging, ctl, len(nodes))
	kill, err := seq.step(Step{Name: "kill", Rule: "the rest of the ISR of a partition the lagging node replicates (failoverTargets)", Nodes: victims}, err)
	if err != nil {
		return out, errors.Join(append(errs, err)...)
	}
	out.Killed = kill.Nodes
	return out, errors.Join(append(errs, p.killAll(ctx, out.Killed)...)...)
}

// killAll kills nodes, noting each for Stop to start again.
func (p *Partition) killAll(ctx context.Context, nodes []string) []error {
	var errs []error
	for _, n := range nodes {
		p.killed = append(p.killed, n)
		if err := p.Runtime.Kill(ctx, n); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// failoverTargets chooses whom lagging-then-leader kills. With a cluster
// that names each partition's replicas and ISR (ReplicaView), it is the
// ISR but the lagging node of one partition the lagging node replicates
// (at most a minority), preferring one whose ISR it left and that does not
// hold the controller: the only live replica left is then the lagging
// one, so a correct controller elects it only if it is still in the ISR
// (and so has every acknowledged write), and an unsafe one elects it
// anyway. Without such a partition, or without the view, it is partition
// leaders other than the lagging node and the controller, at most a
// minority.
func (p *Partition) failoverTargets(ctx context.Context, rng *rand.Rand, lagging, ctl string, nodes int) ([]string, error) {
	minority := max(1, (nodes-1)/2)
	if view, ok := p.Cluster.(ReplicaView); ok {
		parts, err := view.Partitions(ctx)
		if err != nil {
			return nil, fmt.Errorf("find partition replicas: %w", err)
		}
		// Tiers: a partition being written now before one that is not
		// (only there can the lagging node miss acknowledged writes), the
		// lagging node out of the ISR before in it, an ISR without the
		// controller before one with it.
		active := activePartitions(ctx, p.Cluster)
		var tiers [8][][]string
		for _, ps := range parts {
			rest := slices.DeleteFunc(slices.Clone(ps.ISR), func(n string) bool { return n == lagging })
			if !slices.Contains(ps.Replicas, lagging) || len(rest) == 0 || len(rest) > minority {
				continue
			}
			tier := 0
			if active != nil && !active[ps.label()] {
				tier += 4
			}
			if len(rest) < len(ps.ISR) {
				tier += 2
			}
			if slices.Contains(rest, ctl) {
				tier++
			}
			tiers[tier] = append(tiers[tier], rest)
		}
		for _, tier := range tiers {
			if len(tier) > 0 {
				victims := tier[rng.IntN(len(tier))]
				slices.Sort(victims)
				return victims, nil
			}
		}
	}
	leaders, err := p.Cluster.Leaders(ctx)
	if err != nil {
		return nil, fmt.Errorf("find partition leaders: %w", err)
	}
	leaders = slices.DeleteFunc(leaders, func(n string) bool { return n == ctl || n == lagging })
	if len(leaders) == 0 {
		return nil, errors.New("no partition leader besides the lagging node and the controller")
	}
	rng.Shuffle(len(leaders), func(i, j int) { leaders[i], leaders[j] = leaders[j], leaders[i] })
	victims := leaders[:min(len(leaders), minority)]
	slices.Sort(victims)
	return victims, nil
}

// restartLaggingThenLeader is Power's PowerRestartLaggingThenLeader.
func (p *Power) restartLaggingThenLeader(ctx context.Context, rng *rand.Rand) (any, error) {
	if p.lag == nil {
		p.lag = &Partition{Runtime: p.Runtime, Cluster: p.Cluster}
	}
	p.lag.Wait, p.lag.Sleep = p.Wait, p.Sleep
	return p.lag.lagThenFailover(ctx, rng, PowerRestartLaggingThenLeader, func(n string) (string, error) {
		sequenceOf(ctx).step(Step{Name: "power-restart", Rule: "the lagging node", Nodes: []string{n}}, nil)
		line := PowerCommand(rng)
		if err := p.Disk.PowerLoss(ctx, n, line); err != nil {
			p.down = append(p.down, n)
			return line, err
		}
		if err := p.Runtime.Start(ctx, n); err != nil {
			p.down = append(p.down, n)
			return line, err
		}
		return line + ", started again at once", nil
	})
}

// bitFlipThenLeader is Corrupt's CorruptBitFlipThenLeader, after Start
// has flipped the bit on node: it starts the node, waits and kills the
// rest of the flipped partition's ISR. did is the agent's account of the
// corruption (JSON naming the file). On a replay it kills the recorded
// nodes, noting where the live ISR (or the file flipped) disagreed.
func (c *Corrupt) bitFlipThenLeader(ctx context.Context, node, did string) ([]string, error) {
	seq := sequenceOf(ctx)
	c.down = slices.DeleteFunc(c.down, func(n string) bool { return n == node })
	seq.step(Step{Name: "start", Rule: "the flipped node", Nodes: []string{node}}, nil)
	if err := c.Runtime.Start(ctx, node); err != nil {
		c.down = append(c.down, node)
		return nil, err
	}
	if !seq.wait(ctx, c.Sleep, c.Wait) {
		return nil, ctx.Err()
	}
	dir, rest, err := c.restOfFlippedISR(ctx, node, did)
	kill, err := seq.step(Step{Name: "kill", Rule: "the rest of the flipped partition's ISR", Nodes: rest, Partition: dir}, err)
	if err != nil {
		return nil, err
	}
	var errs []error
	for _, n := range kill.Nodes {
		c.down = append(c.down, n)
		if err := c.Runtime.Kill(ctx, n); err != nil {
			errs = append(errs, err)
		}
	}
	return kill.Nodes, errors.Join(errs...)
}

// restOfFlippedISR finds the partition whose segment the flip damaged
// (did names the file) and its ISR but node, sorted: at most a minority.
func (c *Corrupt) restOfFlippedISR(ctx context.Context, node, did string) (string, []string, error) {
	dir, _, _ := strings.Cut(flippedFile(did), "/")
	topic, part, err := parseLabel(dir)
	if err != nil {
		return dir, nil, fmt.Errorf("bit-flip-then-leader: the flipped file's directory: %w", err)
	}
	view, ok := c.Cluster.(ReplicaView)
	if !ok {
		return dir, nil, errors.New("bit-flip-then-leader: the cluster names no partition's ISR")
	}
	parts, err := view.Partitions(ctx)
	if err != nil {
		return dir, nil, fmt.Errorf("find partition replicas: %w", err)
	}
	minority := max(1, (len(c.Cluster.Nodes())-1)/2)
	for _, ps := range parts {
		if ps.Topic != topic || ps.Partition != part {
			continue
		}
		rest := slices.DeleteFunc(slices.Clone(ps.ISR), func(n string) bool { return n == node })
		if len(rest) == 0 || len(rest) > minority {
			return dir, nil, fmt.Errorf("bit-flip-then-leader: %s's ISR %v leaves no minority to kill", dir, ps.ISR)
		}
		slices.Sort(rest)
		return dir, rest, nil
	}
	return dir, nil, fmt.Errorf("bit-flip-then-leader: %s is no partition of the workload's", dir)
}

// LaggingThenLeader records a lagging-then-leader fault: the node cut off
// from all but the controller, the grudge, and the leaders killed.
type LaggingThenLeader struct {
	Mode    string   `json:"mode"`
	Lagging string   `json:"lagging,omitempty"`
	Did     string   `json:"did,omitempty"` // what was done to the lagging node first
	Grudge  Grudge   `json:"grudge,omitempty"`
	Killed  []string `json:"killed,omitempty"`
}

// isolateExcept cuts victim off from every node but those kept, both
// ways.
func isolateExcept(nodes []string, victim string, keep ...string) Grudge {
	g := Isolate(nodes, victim)
	for _, k := range keep {
		delete(g, k)
	}
	g[victim] = slices.DeleteFunc(g[victim], func(n string) bool { return slices.Contains(keep, n) })
	return g
}
