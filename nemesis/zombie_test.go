package nemesis

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestLeaderAndFollowerCutsAZombiePair: the pair is the leader and an
// in-sync follower of a partition whose ISR is full, neither the
// controller; both are cut off from the other three nodes (not from each
// other), the cut holds for the wait, and Stop heals it.
func TestLeaderAndFollowerCutsAZombiePair(t *testing.T) {
	w := newWorld(5)
	w.ctl = "n2"
	v := viewWorld{fakeWorld: w, parts: []PartitionState{
		{Topic: "t0", Partition: 0, Leader: "n2", Replicas: []string{"n2", "n3", "n4"}, ISR: []string{"n2", "n3", "n4"}}, // the controller leads
		{Topic: "t0", Partition: 1, Leader: "n4", Replicas: []string{"n4", "n5", "n1"}, ISR: []string{"n4", "n5"}},       // ISR not full
		{Topic: "t0", Partition: 2, Leader: "n3", Replicas: []string{"n3", "n2", "n5"}, ISR: []string{"n3", "n2", "n5"}}, // full
	}}
	p := Spec{{Kind: KindPartition, Mode: PartitionLeaderAndFollower}}.Faults(v, v)[0].(*Partition)
	var waited time.Duration
	p.Sleep = func(ctx context.Context, d time.Duration) bool { waited = d; return true }
	got, err := p.Start(context.Background(), rand.New(rand.NewPCG(3, 1)))
	require.NoError(t, err)
	start := got.(PartitionStart)
	assert.Equal(t, []string{"n3", "n5"}, start.Nodes, "partition 2's leader and its in-sync follower other than the controller")
	assert.Equal(t, []string{"n1", "n2", "n4"}, start.Grudge["n3"])
	assert.Equal(t, []string{"n1", "n2", "n4"}, start.Grudge["n5"])
	assert.Equal(t, []string{"n3", "n5"}, start.Grudge["n2"])
	assert.Equal(t, sequenceWaitDefault, waited, "the cut outlasts a session timeout before Start returns")
	_, err = p.Stop(context.Background())
	require.NoError(t, err)
	assert.Contains(t, w.calls, "isolate n3 []")
	assert.Contains(t, w.calls, "isolate n5 []")

	// Without a full ISR, a partial one; without any pair, an error.
	assert.Equal(t, []string{"n4", "n5"}, zombiePair(v.parts[:2], "n2", rand.New(rand.NewPCG(1, 1))))
	assert.Nil(t, zombiePair(v.parts[:1], "n2", rand.New(rand.NewPCG(1, 1))))
	p.Cluster = viewWorld{fakeWorld: w, parts: v.parts[:1]}
	_, err = p.Start(context.Background(), rand.New(rand.NewPCG(3, 1)))
	assert.ErrorContains(t, err, "no partition has a leader")
}

// TestParseSpecReadsLeaderAndFollower: the mode is accepted when named.
func TestParseSpecReadsLeaderAndFollower(t *testing.T) {
	s, err := ParseSpec("partition:leader-and-follower")
	require.NoError(t, err)
	assert.Equal(t, Spec{{Kind: KindPartition, Mode: PartitionLeaderAndFollower}}, s)
}

// groupCoordWorld is a fakeWorld whose group coordinator is coord.
type groupCoordWorld struct {
	*fakeWorld
	coord []string
}

func (c groupCoordWorld) GroupCoordinators(context.Context) ([]string, error) { return c.coord, nil }

// TestCoordinatorCutsTheGroupCoordinator: the coordinator's node (not the
// controller's nor a partition leader's) is cut off from every other node
// for the wait, and healed by Stop; without a coordinator view the fault
// says what it lacks.
func TestCoordinatorCutsTheGroupCoordinator(t *testing.T) {
	w := newWorld(5)
	c := groupCoordWorld{fakeWorld: w, coord: []string{"n4"}}
	p := Spec{{Kind: KindPartition, Mode: PartitionCoordinator}}.Faults(c, c)[0].(*Partition)
	var waited time.Duration
	p.Sleep = func(ctx context.Context, d time.Duration) bool { waited = d; return true }
	got, err := p.Start(context.Background(), rand.New(rand.NewPCG(1, 1)))
	require.NoError(t, err)
	start := got.(PartitionStart)
	assert.Equal(t, []string{"n4"}, start.Nodes)
	assert.Equal(t, []string{"n1", "n2", "n3", "n5"}, start.Grudge["n4"])
	assert.Equal(t, []string{"n4"}, start.Grudge["n1"])
	assert.Equal(t, sequenceWaitDefault, waited)
	_, err = p.Stop(context.Background())
	require.NoError(t, err)
	assert.Contains(t, w.calls, "isolate n4 []")

	p.Cluster = w
	_, err = p.Start(context.Background(), rand.New(rand.NewPCG(1, 1)))
	assert.ErrorContains(t, err, "names no group coordinator")
}

// TestClientsCoordinatorCutsOnlyTheClients: partition:clients-coordinator
// makes a transaction coordinator drop the clients and nothing else (its
// peers still reach it), pins that node for a replay, heals on Stop, and
// says what it lacks without a coordinator view.
func TestClientsCoordinatorCutsOnlyTheClients(t *testing.T) {
	w := newWorld(5)
	c := coordWorld{w}
	spec, err := ParseSpec("partition:clients-coordinator")
	require.NoError(t, err)
	p := spec.Faults(c, c)[0].(*Partition)
	got, err := p.Start(context.Background(), rand.New(rand.NewPCG(1, 1)))
	require.NoError(t, err)
	start := got.(PartitionStart)
	require.Len(t, start.Nodes, 1)
	victim := start.Nodes[0]
	assert.Contains(t, []string{"n2", "n4"}, victim)
	assert.Equal(t, Grudge{victim: {ClientsNode}}, start.Grudge, "only the clients are cut")
	assert.Equal(t, []string{"isolate " + victim + " [clients]"}, w.calls)
	_, err = p.Stop(context.Background())
	require.NoError(t, err)
	assert.Equal(t, "isolate "+victim+" []", w.calls[len(w.calls)-1])

	pinned := WithAim(context.Background(), PartitionClientsCoordinator, []string{"n3"})
	got, err = p.Start(pinned, rand.New(rand.NewPCG(1, 1)))
	require.NoError(t, err)
	assert.Equal(t, []string{"n3"}, got.(PartitionStart).Nodes, "a replay cuts the node it recorded")

	p.Cluster = w
	_, err = p.Start(context.Background(), rand.New(rand.NewPCG(1, 1)))
	assert.ErrorContains(t, err, "cannot name the transaction coordinators")
}
