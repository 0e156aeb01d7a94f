package nemesis

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"
)

// Disk is what the disk faults need from the runtime besides Runtime
// (harness.DockerRuntime has both): the commands of a node's fault
// filesystem, through its agent, and the data of a stopped node.
type Disk interface {
	// PowerLoss cuts the node's power: its broker is killed and its fault
	// filesystem drops what no fsync made durable (line is a faultfs
	// power command); the node stays down until Start.
	PowerLoss(ctx context.Context, node, line string) error
	// DiskFault passes a faultfs command (eio, enospc, slow) to the node.
	DiskFault(ctx context.Context, node, line string) error
	// HealDisk ends the node's disk faults, and starts the node again
	// when it stopped meanwhile (a broker whose only log dir failed stops).
	HealDisk(ctx context.Context, node string) error
	// Corrupt damages the data of a stopped node as seed decides, with
	// the one corruption named by kind (agent's CorruptBitFlip, ...) or
	// any when kind is empty, and says what it did.
	Corrupt(ctx context.Context, node string, seed uint64, kind string) (string, error)
}

var errNoDisk = errors.New("the runtime has no disk faults (use --runtime docker)")

// DiskTargets records a disk fault's mode, nodes and what it did to each.
type DiskTargets struct {
	Mode  string            `json:"mode,omitempty"`
	Nodes []string          `json:"nodes"`
	Did   map[string]string `json:"did,omitempty"`
	// Seeds are the seeds corrupt gave each node (so a replay damages the
	// same bytes).
	Seeds map[string]uint64 `json:"seeds,omitempty"`
}

// PowerCommand draws a power loss from rng: every unsynced write dropped,
// or the last one torn at a block boundary, or a random subset of them
// persisted, or both; seeded so that the run replays.
func PowerCommand(rng *rand.Rand) string {
	variants := []string{"power", "power torn", "power reorder", "power torn reorder"}
	return fmt.Sprintf("%s seed=%d", variants[rng.IntN(len(variants))], rng.Uint64()>>1)
}

// PowerThenLeader is the power mode of KIP-966's case: one node's power
// is cut and it starts again at once, having lost its unflushed tail, and
// then a partition leader other than it is killed, before the restarted
// node can have caught up. It is chosen only when named.
const PowerThenLeader = "follower-then-leader"

// Power cuts the power of its targets (a kill that also loses the page
// cache) and starts them again when it stops.
type Power struct {
	Runtime Runtime
	Disk    Disk
	Cluster Cluster
	Modes   []string
	// Wait and Sleep pace after-fsync-error (default: 10 s on a timer).
	Wait  time.Duration
	Sleep func(ctx context.Context, d time.Duration) bool
	down  []string
	lag   *Partition // restart-lagging-then-leader's cut and kills
}

// Name is "power".
func (p *Power) Name() string { return string(KindPower) }

// Start cuts the chosen nodes' power.
func (p *Power) Start(ctx context.Context, rng *rand.Rand) (any, error) {
	mode := pickMode(ctx, rng, p.Modes, ProcessTargetModes)
	draws := fork(rng)
	if p.Disk == nil {
		return DiskTargets{Mode: mode}, errNoDisk
	}
	switch mode {
	case PowerThenLeader:
		return p.followerThenLeader(ctx, rng, draws)
	case PowerAfterFsyncError, PowerAfterSlowFsync:
		return p.afterDiskFault(ctx, rng, mode)
	case PowerRestartLaggingThenLeader:
		return p.restartLaggingThenLeader(ctx, rng)
	}
	targets, err := chooseTargets(ctx, p.Cluster, mode, rng)
	if err != nil {
		return DiskTargets{Mode: mode}, err
	}
	// The commands are drawn in order (a seed replays them); the power
	// goes off on every target at the same moment, as in a rack's power
	// loss, so no node flushes or hands over leadership while the others
	// are already down.
	did := map[string]string{}
	for _, n := range targets {
		did[n] = PowerCommand(draws)
	}
	return p.cut(ctx, mode, targets, did)
}

// cut cuts the power of targets at once, each with its faultfs command in
// did (Start's draw).
func (p *Power) cut(ctx context.Context, mode string, targets []string, did map[string]string) (any, error) {
	p.down = append(p.down, targets...)
	return DiskTargets{Mode: mode, Nodes: targets, Did: did}, p.cutAll(ctx, targets, did)
}

// cutAll cuts the power of every target at the same moment, each with its
// command from lines.
func (p *Power) cutAll(ctx context.Context, targets []string, lines map[string]string) error {
	errs := make([]error, len(targets))
	var wg sync.WaitGroup
	for i, n := range targets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = p.Disk.PowerLoss(ctx, n, lines[n])
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

func (p *Power) followerThenLeader(ctx context.Context, rng, draws *rand.Rand) (any, error) {
	out := DiskTargets{Mode: PowerThenLeader, Did: map[string]string{}}
	leaders, err := p.Cluster.Leaders(ctx)
	if err != nil && len(aimOf(ctx).nodes) != 2 {
		return out, fmt.Errorf("find partition leaders: %w", err)
	}
	if len(leaders) == 0 {
		leaders = []string{""}
		if len(aimOf(ctx).nodes) != 2 {
			return out, errors.New("no partition has a leader")
		}
	}
	leader := leaders[rng.IntN(len(leaders))]
	var others []string
	for _, n := range p.Cluster.Nodes() {
		if n != leader {
			others = append(others, n)
		}
	}
	if len(others) == 0 {
		return out, errors.New("follower-then-leader needs two nodes")
	}
	follower := others[rng.IntN(len(others))]
	if pinned := aimOf(ctx).nodes; len(pinned) == 2 {
		follower, leader = pinned[0], pinned[1] // a replay: the nodes in the order they were hit
	}
	line := PowerCommand(draws)
	out.Nodes = []string{follower, leader}
	out.Did[follower] = line + ", started again at once"
	if err := p.Disk.PowerLoss(ctx, follower, line); err != nil {
		return out, err
	}
	if err := p.Runtime.Start(ctx, follower); err != nil {
		p.down = append(p.down, follower)
		return out, err
	}
	out.Did[leader] = "killed (leader)"
	p.down = append(p.down, leader)
	return out, p.Runtime.Kill(ctx, leader)
}

// Stop starts every node whose power it cut, all at once, as the power
// of a rack comes back (one after another, five container starts on a
// busy machine took longer than the rest of a 60 s run); for
// restart-lagging-then-leader it also starts every node it killed and
// heals the cut.
func (p *Power) Stop(ctx context.Context) (any, error) {
	started := p.down
	p.down = nil
	errs := make([]error, len(started))
	var wg sync.WaitGroup
	for i, n := range started {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = p.Runtime.Start(ctx, n)
		}()
	}
	wg.Wait()
	err := errors.Join(errs...)
	if p.lag != nil {
		started = append(started, p.lag.killed...)
		_, lerr := p.lag.Stop(ctx)
		err = errors.Join(err, lerr)
	}
	return Targets{Nodes: started}, err
}

func startAll(ctx context.Context, rt Runtime, nodes []string) error {
	var errs []error
	for _, n := range nodes {
		if err := rt.Start(ctx, n); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// DiskFault makes its targets' disks fail writes and fsyncs with EIO
// (disk-error), run out of space at their current size (disk-full) or
// slow writes and fsyncs down (disk-slow), until it stops.
type DiskFault struct {
	Kind    Kind
	Disk    Disk
	Cluster Cluster
	Modes   []string
	faulty  []string
}

// Name is the kind: disk-error, disk-full or disk-slow.
func (d *DiskFault) Name() string { return string(d.Kind) }

// DiskCommand draws the faultfs command of a disk fault kind from rng.
func DiskCommand(k Kind, rng *rand.Rand) string {
	ops := []string{"fsync", "write", "all"}
	switch k {
	case KindDiskError:
		return "eio " + ops[rng.IntN(len(ops))]
	case KindDiskFull:
		return "enospc bytes=0"
	case KindDiskSlow:
		delay := time.Duration(5+rng.IntN(95)) * time.Millisecond
		return fmt.Sprintf("slow %s %s jitter=%s seed=%d", ops[rng.IntN(len(ops))], delay, delay/2, rng.Uint64()>>1)
	}
	return ""
}

// Start applies the fault to the chosen nodes.
func (d *DiskFault) Start(ctx context.Context, rng *rand.Rand) (any, error) {
	mode := pickMode(ctx, rng, d.Modes, ProcessTargetModes)
	draws := fork(rng)
	if d.Disk == nil {
		return DiskTargets{Mode: mode}, errNoDisk
	}
	targets, err := chooseTargets(ctx, d.Cluster, mode, rng)
	if err != nil {
		return DiskTargets{Mode: mode}, err
	}
	return d.apply(ctx, mode, targets, DiskCommand(d.Kind, draws))
}

// apply passes line to every target's fault filesystem (Start's draw, or
// a replayed event's).
func (d *DiskFault) apply(ctx context.Context, mode string, targets []string, line string) (any, error) {
	did := map[string]string{}
	var errs []error
	for _, n := range targets {
		did[n] = line
		d.faulty = append(d.faulty, n)
		if err := d.Disk.DiskFault(ctx, n, line); err != nil {
			errs = append(errs, err)
		}
	}
	return DiskTargets{Mode: mode, Nodes: targets, Did: did}, errors.Join(errs...)
}

// Stop heals every disk it made faulty (and starts a node that stopped).
func (d *DiskFault) Stop(ctx context.Context) (any, error) {
	healed := d.faulty
	d.faulty = nil
	var errs []error
	for _, n := range healed {
		if err := d.Disk.HealDisk(ctx, n); err != nil {
			errs = append(errs, err)
		}
	}
	return Targets{Nodes: healed}, errors.Join(errs...)
}

// Corrupt kills its targets and corrupts their data while they are down
// (a torn segment tail, a flipped bit in a batch, a damaged index, a
// deleted checkpoint), and starts them again when it stops.
type Corrupt struct {
	Runtime Runtime
	Disk    Disk
	Cluster Cluster
	Modes   []string
	// Wait and Sleep pace bit-flip-then-leader (default: 10 s on a timer).
	Wait  time.Duration
	Sleep func(ctx context.Context, d time.Duration) bool
	down  []string
	// cut is unreplicated-tail's cut while it is not yet healed.
	cut *Partition
}

// Name is "corrupt".
func (c *Corrupt) Name() string { return string(KindCorrupt) }

// Start kills the chosen nodes and corrupts their data.
func (c *Corrupt) Start(ctx context.Context, rng *rand.Rand) (any, error) {
	mode := pickMode(ctx, rng, c.Modes, ProcessTargetModes)
	draws := fork(rng)
	if c.Disk == nil {
		return DiskTargets{Mode: mode}, errNoDisk
	}
	if mode == CorruptUnreplicatedTail {
		return c.unreplicatedTail(ctx, draws)
	}
	targetMode := mode
	if corruptKind(mode) != "" {
		targetMode = TargetOne
	}
	if pinned := aimOf(ctx).nodes; mode == CorruptBitFlipThenLeader && len(pinned) > 1 {
		// A schedule recorded before the steps were: its nodes are the
		// flipped node, then the ISR it killed.
		ctx = WithAim(ctx, mode, pinned[:1])
	}
	targets, err := chooseTargets(ctx, c.Cluster, targetMode, rng)
	if err != nil {
		return DiskTargets{Mode: mode}, err
	}
	return c.corrupt(ctx, mode, targets, func(string) uint64 { return draws.Uint64() })
}

// corrupt kills each target and corrupts its data with the seed seedOf
// gives it (drawn in target order by Start).
func (c *Corrupt) corrupt(ctx context.Context, mode string, targets []string, seedOf func(node string) uint64) (any, error) {
	kind := corruptKind(mode)
	did := map[string]string{}
	seeds := map[string]uint64{}
	var errs []error
	for _, n := range targets {
		c.down = append(c.down, n)
		if err := c.Runtime.Kill(ctx, n); err != nil {
			errs = append(errs, err)
			continue
		}
		seeds[n] = seedOf(n)
		what, err := c.Disk.Corrupt(ctx, n, seeds[n], kind)
		did[n] = what
		if kind == CorruptBitFlip {
			c.noteFlip(ctx, n, what)
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if mode == CorruptBitFlipThenLeader {
			killed, err := c.bitFlipThenLeader(ctx, n, what)
			for _, k := range killed {
				did[k] = "killed (the rest of the flipped partition's ISR)"
			}
			errs = append(errs, err)
			targets = append(targets, killed...)
		}
	}
	return DiskTargets{Mode: mode, Nodes: targets, Did: did, Seeds: seeds}, errors.Join(errs...)
}

// noteFlip records a bit flip as a step of its sequence, and on a replay
// notes when the agent, drawing from the same seed over the data this run
// wrote, flipped a bit in another file than the recording's.
func (c *Corrupt) noteFlip(ctx context.Context, node, did string) {
	seq := sequenceOf(ctx)
	rec, replay := seq.recordedNext()
	seq.step(Step{Name: "kill-and-flip", Rule: "one node (drawn); the agent picks the batch from the seed", Nodes: []string{node}, Did: did}, nil)
	if replay && rec.Did != "" && flippedFile(rec.Did) != flippedFile(did) {
		seq.annotate(fmt.Sprintf("replay: the agent flipped a bit in %s, the recording in %s (the data differs)", flippedFile(did), flippedFile(rec.Did)))
	}
}

// flippedFile is the file named by the agent's account of a bit flip.
func flippedFile(did string) string {
	var what struct {
		File string `json:"file"`
	}
	if json.Unmarshal([]byte(did), &what) != nil {
		return did
	}
	return what.File
}

// corruptKind is the agent's --kind for a corrupt mode: bit-flip for the
// bit-flip modes, disk-replaced for its mode, "" (any damage) otherwise.
func corruptKind(mode string) string {
	if mode == CorruptBitFlip || mode == CorruptBitFlipThenLeader {
		return CorruptBitFlip
	}
	if mode == CorruptDiskReplaced {
		return CorruptDiskReplaced
	}
	return ""
}

// Stop starts every node it corrupted.
func (c *Corrupt) Stop(ctx context.Context) (any, error) {
	started := c.down
	c.down = nil
	err := startAll(ctx, c.Runtime, started)
	if cut := c.cut; cut != nil {
		c.cut = nil
		_, healErr := cut.Stop(ctx)
		err = errors.Join(err, healErr)
	}
	return Targets{Nodes: started}, err
}
