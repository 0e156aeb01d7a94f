package nemesis

import (
	"context"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func noWait(ctx context.Context, _ time.Duration) bool { return ctx.Err() == nil }

func TestParseSpecReadsSequenceModes(t *testing.T) {
	s, err := ParseSpec("power:after-fsync-error,corrupt:bit-flip,partition:lagging-then-leader")
	require.NoError(t, err)
	assert.Equal(t, Spec{{Kind: KindPower, Mode: PowerAfterFsyncError}, {Kind: KindCorrupt, Mode: CorruptBitFlip}, {Kind: KindPartition, Mode: PartitionLaggingThenLeader}}, s)
	for _, bad := range []string{"kill:bit-flip", "pause:lagging-then-leader", "disk-error:after-fsync-error"} {
		_, err := ParseSpec(bad)
		assert.Error(t, err, bad)
	}
	assert.NotContains(t, ProcessTargetModes, CorruptBitFlip, "never in the random mix")
	assert.NotContains(t, PartitionModes, PartitionLaggingThenLeader, "never in the random mix")
}

// TestPowerAfterFsyncError: eio on every node's fsyncs first, then every
// node's power, and Stop starts them all.
func TestPowerAfterFsyncError(t *testing.T) {
	w := diskWorld{newWorld(3)}
	p := Spec{{Kind: KindPower, Mode: PowerAfterFsyncError}}.Faults(w, w)[0].(*Power)
	waited := time.Duration(0)
	p.Wait, p.Sleep = 4*time.Second, func(ctx context.Context, d time.Duration) bool { waited = d; return true }
	v, err := p.Start(context.Background(), rand.New(rand.NewPCG(2, 2)))
	require.NoError(t, err)
	assert.Equal(t, 4*time.Second, waited)
	got := v.(DiskTargets)
	assert.Equal(t, []string{"n1", "n2", "n3"}, got.Nodes)
	require.Len(t, w.calls, 6)
	assert.Equal(t, []string{"disk n1 eio fsync", "disk n2 eio fsync", "disk n3 eio fsync"}, w.calls[:3])
	for _, c := range w.calls[3:] {
		assert.True(t, strings.HasPrefix(c, "power n"), c)
	}
	assert.Contains(t, got.Did["n2"], "eio fsync, then power")
	_, err = p.Stop(context.Background())
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"start n1", "start n2", "start n3"}, w.calls[6:])

	w = diskWorld{newWorld(3)}
	p = Spec{{Kind: KindPower, Mode: PowerAfterSlowFsync}}.Faults(w, w)[0].(*Power)
	p.Sleep = noWait
	_, err = p.Start(context.Background(), rand.New(rand.NewPCG(2, 2)))
	require.NoError(t, err)
	assert.Equal(t, []string{"disk n1 slow fsync 300ms", "disk n2 slow fsync 300ms", "disk n3 slow fsync 300ms"}, w.calls[:3])
}

// startCorruptOnOneNode starts corrupt:mode on five nodes and checks
// that it killed one node and asked its agent for kind; it returns the
// fault, its world and the node.
func startCorruptOnOneNode(t *testing.T, mode, kind string) (Fault, diskWorld, string) {
	t.Helper()
	w := diskWorld{newWorld(5)}
	c := Spec{{Kind: KindCorrupt, Mode: mode}}.Faults(w, w)[0]
	v, err := c.Start(context.Background(), rand.New(rand.NewPCG(3, 3)))
	require.NoError(t, err)
	got := v.(DiskTargets)
	require.Len(t, got.Nodes, 1)
	n := got.Nodes[0]
	require.Len(t, w.calls, 2)
	assert.Equal(t, "kill "+n, w.calls[0])
	assert.Regexp(t, `^corrupt `+n+` \d+ `+kind+`$`, w.calls[1])
	return c, w, n
}

// TestCorruptBitFlipAsksForABitFlipOnOneNode.
func TestCorruptBitFlipAsksForABitFlipOnOneNode(t *testing.T) {
	startCorruptOnOneNode(t, CorruptBitFlip, "bit-flip")
}

// TestCorruptDiskReplacedOnOneNode: disk-replaced is named, never drawn,
// and asks the agent to empty one killed node's data dir; Stop starts it.
func TestCorruptDiskReplacedOnOneNode(t *testing.T) {
	s, err := ParseSpec("corrupt:disk-replaced")
	require.NoError(t, err)
	assert.Equal(t, Spec{{Kind: KindCorrupt, Mode: CorruptDiskReplaced}}, s)
	assert.NotContains(t, ProcessTargetModes, CorruptDiskReplaced, "never in the random mix")
	c, w, n := startCorruptOnOneNode(t, CorruptDiskReplaced, "disk-replaced")
	_, err = c.Stop(context.Background())
	require.NoError(t, err)
	assert.Equal(t, "start "+n, w.calls[len(w.calls)-1])
}

// TestLaggingThenLeader: one node other than the controller is cut off
// from all but the controller, then leaders other than it and the
// controller are killed; Stop heals and restarts; a seed replays it.
func TestLaggingThenLeader(t *testing.T) {
	run := func(seed uint64) (LaggingThenLeader, []string) {
		w := newWorld(5)
		w.ctl, w.leader = "n2", []string{"n1", "n2", "n3", "n4"}
		p := Spec{{Kind: KindPartition, Mode: PartitionLaggingThenLeader}}.Faults(w, w)[0].(*Partition)
		p.Sleep = noWait
		v, err := p.Start(context.Background(), rand.New(rand.NewPCG(seed, 1)))
		require.NoError(t, err)
		_, err = p.Stop(context.Background())
		require.NoError(t, err)
		return v.(LaggingThenLeader), w.calls
	}
	got, calls := run(7)
	assert.NotEqual(t, "n2", got.Lagging)
	assert.NotContains(t, got.Grudge[got.Lagging], "n2", "the lagging node still reaches the controller")
	assert.Len(t, got.Grudge[got.Lagging], 3)
	assert.NotContains(t, got.Grudge, "n2")
	require.NotEmpty(t, got.Killed)
	assert.LessOrEqual(t, len(got.Killed), 2)
	for _, k := range got.Killed {
		assert.NotEqual(t, got.Lagging, k)
		assert.NotEqual(t, "n2", k)
		assert.Contains(t, calls, "kill "+k)
		assert.Contains(t, calls, "start "+k)
	}
	assert.Contains(t, calls, "isolate "+got.Lagging+" []", "healed")
	again, callsAgain := run(7)
	assert.Equal(t, got, again)
	assert.Equal(t, calls, callsAgain)
}

// viewWorld is a fakeWorld that names partitions' replicas and ISRs.
type viewWorld struct {
	*fakeWorld
	parts []PartitionState
}

func (v viewWorld) Partitions(context.Context) ([]PartitionState, error) { return v.parts, nil }

// TestLaggingThenLeaderKillsTheRestOfAnISRItLeft: with the partition view,
// the whole ISR of a partition the lagging node replicates but left is
// killed (one without the controller preferred), so only the lagging
// replica is left alive.
func TestLaggingThenLeaderKillsTheRestOfAnISRItLeft(t *testing.T) {
	w := newWorld(5)
	w.ctl = "n2"
	v := viewWorld{fakeWorld: w}
	p := Spec{{Kind: KindPartition, Mode: PartitionLaggingThenLeader}}.Faults(v, v)[0].(*Partition)
	p.Sleep = noWait
	rng := rand.New(rand.NewPCG(1, 1))
	// Learn which node the seed cuts off, then describe the partitions.
	probe := Spec{{Kind: KindPartition, Mode: PartitionLaggingThenLeader}}.Faults(v, v)[0].(*Partition)
	probe.Sleep = noWait
	first, _ := probe.Start(context.Background(), rand.New(rand.NewPCG(1, 1)))
	lag := first.(LaggingThenLeader).Lagging
	others := []string{}
	for _, n := range w.nodes {
		if n != lag && n != "n2" {
			others = append(others, n)
		}
	}
	v.parts = []PartitionState{
		{Topic: "t0", Partition: 0, Replicas: []string{lag, "n2", others[0]}, ISR: []string{"n2", others[0]}}, // holds the controller
		{Topic: "t0", Partition: 1, Replicas: []string{others[1], lag, others[2]}, ISR: []string{others[1], others[2]}},
		{Topic: "t0", Partition: 2, Replicas: []string{lag, others[0], others[1]}, ISR: []string{lag, others[0], others[1]}}, // still in the ISR
	}
	p.Cluster = v
	w.calls = nil
	got, err := p.Start(context.Background(), rng)
	require.NoError(t, err)
	assert.Equal(t, lag, got.(LaggingThenLeader).Lagging)
	want := []string{others[1], others[2]}
	assert.Equal(t, want, got.(LaggingThenLeader).Killed)
	_, err = p.Stop(context.Background())
	require.NoError(t, err)
	assert.Contains(t, w.calls, "start "+others[1])
}

// diskViewWorld has disks and names partitions.
type diskViewWorld struct {
	diskWorld
	parts []PartitionState
}

func (v diskViewWorld) Partitions(context.Context) ([]PartitionState, error) { return v.parts, nil }

// TestPowerRestartLaggingThenLeader: the lagging node's power is cut and
// it is started again before it is cut off; then the rest of an ISR it is
// still in is killed; Stop restarts the killed and heals the cut.
func TestPowerRestartLaggingThenLeader(t *testing.T) {
	w := newWorld(5)
	w.ctl = "n1"
	v := diskViewWorld{diskWorld: diskWorld{w}}
	// Every non-controller node replicates t0-0 and is in its ISR.
	v.parts = []PartitionState{{Topic: "t0", Partition: 0, Replicas: []string{"n2", "n3", "n4"}, ISR: []string{"n2", "n3", "n4"}},
		{Topic: "t0", Partition: 1, Replicas: []string{"n5", "n3", "n4"}, ISR: []string{"n5", "n3", "n4"}},
		{Topic: "t0", Partition: 2, Replicas: []string{"n2", "n5", "n3"}, ISR: []string{"n2", "n5", "n3"}}}
	p := Spec{{Kind: KindPower, Mode: PowerRestartLaggingThenLeader}}.Faults(v, v)[0].(*Power)
	p.Sleep = noWait
	got, err := p.Start(context.Background(), rand.New(rand.NewPCG(5, 5)))
	require.NoError(t, err)
	lf := got.(LaggingThenLeader)
	require.NotEqual(t, "n1", lf.Lagging)
	assert.Contains(t, lf.Did, "started again at once")
	require.GreaterOrEqual(t, len(w.calls), 2)
	assert.Regexp(t, `^power `+lf.Lagging+` power`, w.calls[0])
	assert.Equal(t, "start "+lf.Lagging, w.calls[1], "started again before it is cut off")
	assert.Len(t, lf.Killed, 2)
	assert.NotContains(t, lf.Killed, lf.Lagging)
	_, err = p.Stop(context.Background())
	require.NoError(t, err)
	for _, k := range lf.Killed {
		assert.Contains(t, w.calls, "start "+k)
	}
	assert.Contains(t, w.calls, "isolate "+lf.Lagging+" []")
}

// flipWorld's corruption flips a bit in t0-1, whose ISR is the corrupted
// node and the next two nodes.
type flipWorld struct {
	*fakeWorld
	flipped *string
}

func (f flipWorld) PowerLoss(context.Context, string, string) error { return nil }
func (f flipWorld) DiskFault(context.Context, string, string) error { return nil }
func (f flipWorld) HealDisk(context.Context, string) error          { return nil }
func (f flipWorld) Corrupt(_ context.Context, n string, _ uint64, kind string) (string, error) {
	f.log("corrupt " + n + " " + kind)
	*f.flipped = n
	return `{"kind":"bit-flip","file":"t0-1/00000000000000000000.log"}`, nil
}
func (f flipWorld) Partitions(context.Context) ([]PartitionState, error) {
	isr := []string{*f.flipped}
	for _, n := range f.nodes {
		if n != *f.flipped && len(isr) < 3 {
			isr = append(isr, n)
		}
	}
	return []PartitionState{{Topic: "t0", Partition: 0, Replicas: f.nodes[:3], ISR: f.nodes[:3]}, {Topic: "t0", Partition: 1, Replicas: isr, ISR: isr}}, nil
}

// TestCorruptBitFlipThenLeaderMakesTheFlippedReplicaLead: the node is
// corrupted and started again, then the rest of the flipped partition's
// ISR is killed; Stop starts them.
func TestCorruptBitFlipThenLeaderMakesTheFlippedReplicaLead(t *testing.T) {
	w := newWorld(5)
	var flipped string
	f := flipWorld{fakeWorld: w, flipped: &flipped}
	c := Spec{{Kind: KindCorrupt, Mode: CorruptBitFlipThenLeader}}.Faults(f, f)[0].(*Corrupt)
	c.Sleep = noWait
	v, err := c.Start(context.Background(), rand.New(rand.NewPCG(9, 9)))
	require.NoError(t, err)
	got := v.(DiskTargets)
	isr, _ := f.Partitions(context.Background())
	node, others := flipped, isr[1].ISR[1:]
	assert.Equal(t, append([]string{node}, others...), got.Nodes)
	assert.Equal(t, []string{"kill " + node, "corrupt " + node + " bit-flip", "start " + node, "kill " + others[0], "kill " + others[1]}, w.calls)
	_, err = c.Stop(context.Background())
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"start " + others[0], "start " + others[1]}, w.calls[5:], "the corrupted node is already up")
}
