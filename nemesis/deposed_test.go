package nemesis

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDeposeCandidatesWantAWholeISRAndPreferNoControllerReplica(t *testing.T) {
	parts := []PartitionState{
		{Topic: "t0", Partition: 0, Leader: "n2", Replicas: []string{"n2", "n1", "n3"}, ISR: []string{"n2", "n1", "n3"}}, // a replica on the controller
		{Topic: "t0", Partition: 1, Leader: "n1", Replicas: []string{"n1", "n3", "n4"}, ISR: []string{"n1", "n3", "n4"}}, // led by the controller
		{Topic: "t0", Partition: 2, Leader: "n3", Replicas: []string{"n3", "n4", "n5"}, ISR: []string{"n3", "n4"}},       // ISR not whole
		{Topic: "t1", Partition: 0, Leader: "n4", Replicas: []string{"n4", "n5", "n2"}, ISR: []string{"n4", "n5", "n2"}},
	}
	got := deposeCandidates(parts, "n1", 5, "")
	assert.Equal(t, []deposeCandidate{{leader: "n4", label: "t1-0", rest: []string{"n2", "n5"}}}, got)
	got = deposeCandidates(parts[:3], "n1", 5, "")
	assert.Equal(t, []deposeCandidate{{leader: "n2", label: "t0-0", rest: []string{"n1", "n3"}}}, got, "one with the controller when there is no other")
	assert.Empty(t, deposeCandidates(parts, "n1", 3, ""), "two of three nodes is no minority")
	assert.Equal(t, []deposeCandidate{{leader: "n2", label: "t0-0", rest: []string{"n1", "n3"}}}, deposeCandidates(parts, "n1", 5, "n5"),
		"sparing n5 leaves only the one with the controller")
}

// TestDeposedLeaderReturns: the leader is cut off from every node, the cut
// heals, and once it is back in the partition's ISR the rest of that ISR
// is killed; Stop starts them again.
func TestDeposedLeaderReturns(t *testing.T) {
	w := newWorld(5)
	w.ctl = "n1"
	v := viewWorld{fakeWorld: w, parts: []PartitionState{
		{Topic: "t1", Partition: 0, Leader: "n4", Replicas: []string{"n4", "n5", "n2"}, ISR: []string{"n4", "n5", "n2"}},
	}}
	p := Spec{{Kind: KindPartition, Mode: PartitionDeposedLeaderReturns}}.Faults(v, v)[0].(*Partition)
	p.Sleep = noWait
	got, err := p.Start(context.Background(), rand.New(rand.NewPCG(1, 1)))
	require.NoError(t, err)
	d := got.(DeposedLeader)
	assert.Equal(t, "n4", d.Leader)
	assert.Equal(t, "t1-0", d.Partition)
	assert.Equal(t, []string{"n2", "n5"}, d.Killed)
	assert.Equal(t, []string{"n4"}, d.AimedAt())
	assert.Equal(t, []string{
		"isolate n1 [n4]", "isolate n2 [n4]", "isolate n3 [n4]", "isolate n4 [n1 n2 n3 n5]", "isolate n5 [n4]",
		"isolate n1 []", "isolate n2 []", "isolate n3 []", "isolate n4 []", "isolate n5 []",
		"kill n2", "kill n5",
	}, w.calls)
	_, err = p.Stop(context.Background())
	require.NoError(t, err)
	assert.Equal(t, []string{"start n2", "start n5"}, w.calls[12:])
}

func TestDeposedLeaderReturnsNeedsACandidate(t *testing.T) {
	w := newWorld(5)
	w.ctl = "n1"
	v := viewWorld{fakeWorld: w, parts: []PartitionState{
		{Topic: "t1", Partition: 0, Leader: "n1", Replicas: []string{"n1", "n5", "n2"}, ISR: []string{"n1", "n5", "n2"}},
	}}
	p := Spec{{Kind: KindPartition, Mode: PartitionDeposedLeaderReturns}}.Faults(v, v)[0].(*Partition)
	p.Sleep = noWait
	_, err := p.Start(context.Background(), rand.New(rand.NewPCG(1, 1)))
	assert.ErrorContains(t, err, "no partition has a leader other than the active controller")
	assert.Empty(t, w.calls)
}

// activeWorld also tells which partitions are being written.
type activeWorld struct {
	viewWorld
	active map[string]bool
}

func (a activeWorld) ActivePartitions(context.Context) (map[string]bool, error) { return a.active, nil }

// TestDeposedLeaderReturnsAimsAtAPartitionBeingWritten: of two
// candidates, the one being written now is chosen whatever the draw; with
// none being written, any is.
func TestDeposedLeaderReturnsAimsAtAPartitionBeingWritten(t *testing.T) {
	parts := []PartitionState{
		{Topic: "t1", Partition: 0, Leader: "n4", Replicas: []string{"n4", "n5", "n2"}, ISR: []string{"n4", "n5", "n2"}},
		{Topic: "t2", Partition: 1, Leader: "n3", Replicas: []string{"n3", "n5", "n2"}, ISR: []string{"n3", "n5", "n2"}},
	}
	for seed := uint64(0); seed < 8; seed++ {
		w := newWorld(5)
		w.ctl = "n1"
		v := activeWorld{viewWorld: viewWorld{fakeWorld: w, parts: parts}, active: map[string]bool{"t2-1": true}}
		p := Spec{{Kind: KindPartition, Mode: PartitionDeposedLeaderReturns}}.Faults(v, v)[0].(*Partition)
		p.Sleep = noWait
		got, err := p.Start(context.Background(), rand.New(rand.NewPCG(seed, 1)))
		require.NoError(t, err)
		assert.Equal(t, "t2-1", got.(DeposedLeader).Partition)
	}
	assert.Equal(t, parts, activeFirst(parts, nil), "no activity known: every partition")
	assert.Empty(t, activeFirst(parts, map[string]bool{"t9-9": true}))
}

// TestDeposedLeaderReturnsLeavesTheLastDeposedLeaderAlone: a second round
// neither deposes the node the first left leading nor kills it as part of
// another partition's ISR (in one run that undid the first round, and the
// final reads met a correct log).
func TestDeposedLeaderReturnsLeavesTheLastDeposedLeaderAlone(t *testing.T) {
	parts := []PartitionState{
		{Topic: "t1", Partition: 0, Leader: "n4", Replicas: []string{"n4", "n5", "n2"}, ISR: []string{"n4", "n5", "n2"}},
		{Topic: "t2", Partition: 1, Leader: "n3", Replicas: []string{"n3", "n4", "n2"}, ISR: []string{"n3", "n4", "n2"}}, // kills n4
		{Topic: "t3", Partition: 2, Leader: "n5", Replicas: []string{"n5", "n3", "n2"}, ISR: []string{"n5", "n3", "n2"}},
	}
	for seed := uint64(0); seed < 8; seed++ {
		w := newWorld(5)
		w.ctl = "n1"
		v := activeWorld{viewWorld: viewWorld{fakeWorld: w, parts: parts}, active: map[string]bool{"t1-0": true}}
		p := Spec{{Kind: KindPartition, Mode: PartitionDeposedLeaderReturns}}.Faults(v, v)[0].(*Partition)
		p.Sleep = noWait
		got, err := p.Start(context.Background(), rand.New(rand.NewPCG(seed, 1)))
		require.NoError(t, err)
		first := got.(DeposedLeader)
		require.Equal(t, "n4", first.Leader, "the partition being written")
		assert.NotEmpty(t, first.Leads, "it waited to see n4 lead again")
		_, err = p.Stop(context.Background())
		require.NoError(t, err)

		got, err = p.Start(context.Background(), rand.New(rand.NewPCG(seed, 2)))
		require.NoError(t, err)
		d := got.(DeposedLeader)
		assert.Equal(t, "t3-2", d.Partition, "seed %d: neither t1-0 (led by n4) nor t2-1 (n4 in the rest)", seed)
		assert.NotContains(t, d.Killed, "n4")
	}
}
