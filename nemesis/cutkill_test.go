package nemesis

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCutCandidatesWantAWholeISRAwayFromTheController(t *testing.T) {
	parts := []PartitionState{
		{Topic: "t0", Partition: 0, Leader: "n2", Replicas: []string{"n2", "n1", "n3"}, ISR: []string{"n2", "n1", "n3"}}, // a follower on the controller
		{Topic: "t0", Partition: 1, Leader: "n3", Replicas: []string{"n3", "n4", "n5"}, ISR: []string{"n3", "n4"}},       // ISR not whole
		{Topic: "t1", Partition: 0, Leader: "n4", Replicas: []string{"n4", "n5", "n2"}, ISR: []string{"n4", "n5", "n2"}},
	}
	assert.Equal(t, []cutCandidate{{leader: "n4", label: "t1-0", followers: []string{"n2", "n5"}}}, cutCandidates(parts, "n1"))
	assert.Equal(t, []cutCandidate{{leader: "n2", label: "t0-0", followers: []string{"n1", "n3"}}}, cutCandidates(parts[:2], "n1"),
		"one with a follower on the controller when there is no other")
	assert.Empty(t, cutCandidates(parts[1:2], "n1"))
}

// TestLeaderCutThenKilled: the leader is cut off from its partition's
// followers and from no one else, then killed while the cut holds; Stop
// heals the cut and starts it again.
func TestLeaderCutThenKilled(t *testing.T) {
	w := newWorld(5)
	w.ctl = "n1"
	parts := []PartitionState{
		{Topic: "t1", Partition: 0, Leader: "n4", Replicas: []string{"n4", "n5", "n2"}, ISR: []string{"n4", "n5", "n2"}},
		{Topic: "t2", Partition: 1, Leader: "n3", Replicas: []string{"n3", "n5", "n2"}, ISR: []string{"n3", "n5", "n2"}},
	}
	v := activeWorld{viewWorld: viewWorld{fakeWorld: w, parts: parts}, active: map[string]bool{"t1-0": true}}
	p := Spec{{Kind: KindPartition, Mode: PartitionLeaderCutThenKilled}}.Faults(v, v)[0].(*Partition)
	p.Sleep = noWait
	got, err := p.Start(context.Background(), rand.New(rand.NewPCG(1, 1)))
	require.NoError(t, err)
	c := got.(LeaderCut)
	assert.Equal(t, "t1-0", c.Partition, "the partition being written")
	assert.Equal(t, "n4", c.Leader)
	assert.Equal(t, []string{"n2", "n5"}, c.Followers)
	assert.Equal(t, []string{"n4"}, c.Killed)
	assert.Equal(t, []string{"n4"}, c.AimedAt())
	assert.Equal(t, []string{"isolate n2 [n4]", "isolate n4 [n2 n5]", "isolate n5 [n4]", "kill n4"}, w.calls)
	_, err = p.Stop(context.Background())
	require.NoError(t, err)
	assert.Contains(t, w.calls[4:], "start n4")
	assert.Contains(t, w.calls[4:], "isolate n4 []", "healed")
}

func TestLeaderCutThenKilledNeedsACandidate(t *testing.T) {
	w := newWorld(5)
	w.ctl = "n1"
	v := viewWorld{fakeWorld: w, parts: []PartitionState{
		{Topic: "t1", Partition: 0, Leader: "n1", Replicas: []string{"n1", "n4", "n2"}, ISR: []string{"n1", "n4", "n2"}},
	}}
	p := Spec{{Kind: KindPartition, Mode: PartitionLeaderCutThenKilled}}.Faults(v, v)[0].(*Partition)
	p.Sleep = noWait
	_, err := p.Start(context.Background(), rand.New(rand.NewPCG(1, 1)))
	assert.ErrorContains(t, err, "no partition has every replica in its ISR and a leader other than the active controller")
	assert.Empty(t, w.calls)
}

// TestCoordinatorCutThenKilled: the transaction coordinator is cut off
// from every node but the controller and one other, then killed; Stop
// heals the cut and starts it again. A coordinator that is the controller
// keeps two others.
func TestCoordinatorCutThenKilled(t *testing.T) {
	w := newWorld(5)
	w.ctl = "n1"
	p := Spec{{Kind: KindPartition, Mode: PartitionCoordinatorCutThenKilled}}.Faults(w, coordWorld{w})[0].(*Partition)
	p.Sleep = noWait
	got, err := p.Start(context.Background(), rand.New(rand.NewPCG(1, 1)))
	require.NoError(t, err)
	c := got.(CoordinatorCut)
	require.Contains(t, []string{"n2", "n4"}, c.Coordinator)
	require.Len(t, c.Kept, 2)
	assert.Equal(t, "n1", c.Kept[0], "the controller is kept")
	assert.NotContains(t, []string{"n1", c.Coordinator}, c.Kept[1])
	assert.Equal(t, []string{c.Coordinator}, c.Killed)
	assert.Equal(t, []string{c.Coordinator}, c.AimedAt())
	for n, cut := range c.Grudge {
		if n == c.Coordinator {
			assert.Len(t, cut, 2, "cut off from the two nodes not kept")
			assert.NotContains(t, cut, "n1")
			assert.NotContains(t, cut, c.Kept[1])
			continue
		}
		assert.Equal(t, []string{c.Coordinator}, cut)
		assert.NotContains(t, c.Kept, n)
	}
	assert.Equal(t, "kill "+c.Coordinator, w.calls[len(w.calls)-1])
	_, err = p.Stop(context.Background())
	require.NoError(t, err)
	assert.Contains(t, w.calls, "start "+c.Coordinator)

	kept, err := keptByCoordinator([]string{"n1", "n2", "n3", "n4", "n5"}, "n1", "n1", rand.New(rand.NewPCG(2, 2)))
	require.NoError(t, err)
	assert.Len(t, kept, 3, "the controller itself keeps two others")
	_, err = keptByCoordinator([]string{"n1", "n2", "n3"}, "n2", "n1", rand.New(rand.NewPCG(2, 2)))
	assert.ErrorContains(t, err, "needs 2 nodes besides the coordinator and the controller, has 1")
}
