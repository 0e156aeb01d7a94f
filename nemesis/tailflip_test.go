package nemesis

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// tailWorld has disks, names partitions and flips tails.
type tailWorld struct {
	diskViewWorld
	// leaderBehind keeps the leader n2 at its followers' log ends.
	leaderBehind bool
}

// LogEnds says every partition ends at 10 times the node's number, and
// on the leader n2 at 100 (ahead of its followers) unless leaderBehind.
func (w tailWorld) LogEnds(_ context.Context, node string, partitions []string) (map[string]int64, error) {
	w.log(fmt.Sprintf("log-end %s %s", node, strings.Join(partitions, ",")))
	var id int64
	fmt.Sscanf(node, "n%d", &id)
	if node == "n2" && !w.leaderBehind {
		id = 10
	}
	out := map[string]int64{}
	for _, p := range partitions {
		out[p] = 10 * id
	}
	return out, nil
}

func (w tailWorld) FlipTail(_ context.Context, node string, after map[string]int64, seed uint64) (string, error) {
	w.log(fmt.Sprintf("flip-tail %s %v", node, after))
	return fmt.Sprintf(`[{"seed":%d}]`, seed), nil
}

// The partitions of tailWorld: the controller is n1.
var tailParts = []PartitionState{
	{Topic: "t0", Partition: 0, Leader: "n2", Replicas: []string{"n2", "n3", "n4"}, ISR: []string{"n2", "n3", "n4"}},
	{Topic: "t0", Partition: 1, Leader: "n2", Replicas: []string{"n2", "n1", "n3"}, ISR: []string{"n2", "n1", "n3"}}, // a replica on the controller
	{Topic: "t0", Partition: 2, Leader: "n3", Replicas: []string{"n3", "n4", "n5"}, ISR: []string{"n3"}},             // no follower in sync
	{Topic: "t1", Partition: 0, Leader: "n1", Replicas: []string{"n1", "n4", "n5"}, ISR: []string{"n1", "n4", "n5"}}, // led by the controller
	{Topic: "t1", Partition: 3, Leader: "n2", Replicas: []string{"n2", "n5", "n4"}, ISR: []string{"n2", "n5"}},
	{Topic: "t1", Partition: 4, Leader: "", Replicas: []string{"n2", "n5", "n4"}, ISR: []string{"n5"}},
}

func TestTailFlipCandidatesAreLeadersWithEveryFollowerCutOff(t *testing.T) {
	assert.Equal(t, map[string][]string{"n2": {"t0-0", "t1-3"}}, tailFlipCandidates(tailParts, "n1"))
}

// TestUnreplicatedTail: the leader is cut off from all but the
// controller, its agent flips the tails of the partitions it leads without
// a replica on the controller, and the cut heals before Start returns;
// the same seed does the same.
func TestUnreplicatedTail(t *testing.T) {
	run := func() ([]string, TailFlipTargets) {
		w := newWorld(5)
		w.ctl = "n1"
		v := tailWorld{diskViewWorld: diskViewWorld{diskWorld: diskWorld{w}, parts: tailParts}}
		c := Spec{{Kind: KindCorrupt, Mode: CorruptUnreplicatedTail}}.Faults(v, v)[0].(*Corrupt)
		c.Sleep = noWait
		got, err := c.Start(context.Background(), rand.New(rand.NewPCG(3, 3)))
		require.NoError(t, err)
		_, err = c.Stop(context.Background())
		require.NoError(t, err)
		return w.calls, got.(TailFlipTargets)
	}
	calls, got := run()
	assert.Equal(t, "n2", got.Leader)
	assert.Equal(t, "n1", got.Controller)
	assert.Equal(t, []string{"t0-0", "t1-3"}, got.Partitions)
	assert.Equal(t, []string{"n2"}, got.AimedAt())
	assert.Equal(t, Grudge{"n2": {"n3", "n4", "n5"}}, got.Grudge, "the leader drops all but the controller")
	assert.Equal(t, []string{
		"isolate n2 [n3 n4 n5]",
		"log-end n3 t0-0", "log-end n4 t0-0,t1-3", "log-end n5 t1-3", // t0-0 is on n2-n4, t1-3 on n2, n4, n5
		"log-end n2 t0-0,t1-3",              // the leader is ahead
		"flip-tail n2 map[t0-0:40 t1-3:50]", // each partition's greatest follower end
		"isolate n2 []",
	}, calls)

	again, same := run()
	assert.Equal(t, calls, again)
	assert.Equal(t, got, same, "seeded")
}

// TestUnreplicatedTailWaitsForTheLeaderToBeAhead: a leader with no batch
// past its followers' log ends is asked again, a bounded number of times,
// and then the cut heals with nothing flipped and the fault says why.
func TestUnreplicatedTailWaitsForTheLeaderToBeAhead(t *testing.T) {
	w := newWorld(5)
	w.ctl = "n1"
	v := tailWorld{diskViewWorld: diskViewWorld{diskWorld: diskWorld{w}, parts: tailParts}, leaderBehind: true}
	c := Spec{{Kind: KindCorrupt, Mode: CorruptUnreplicatedTail}}.Faults(v, v)[0].(*Corrupt)
	c.Sleep = noWait
	_, err := c.Start(context.Background(), rand.New(rand.NewPCG(3, 3)))
	assert.ErrorContains(t, err, "appended nothing past its followers' log ends")
	polls := 0
	for _, call := range w.calls {
		assert.NotContains(t, call, "flip-tail")
		if call == "log-end n2 t0-0,t1-3" {
			polls++
		}
	}
	assert.Equal(t, tailAheadPolls, polls)
	assert.Equal(t, "isolate n2 []", w.calls[len(w.calls)-1], "the cut is healed")
}

func TestUnreplicatedTailWithoutACandidate(t *testing.T) {
	w := newWorld(5)
	w.ctl = "n1"
	v := tailWorld{diskViewWorld: diskViewWorld{diskWorld: diskWorld{w}, parts: tailParts[1:4]}}
	c := Spec{{Kind: KindCorrupt, Mode: CorruptUnreplicatedTail}}.Faults(v, v)[0].(*Corrupt)
	_, err := c.Start(context.Background(), rand.New(rand.NewPCG(3, 3)))
	assert.ErrorContains(t, err, "no partition leader besides the controller")
	c.Sleep = noWait
	assert.Empty(t, w.calls, "nothing cut")

	plain := Spec{{Kind: KindCorrupt, Mode: CorruptUnreplicatedTail}}.Faults(diskViewWorld{diskWorld: diskWorld{w}, parts: tailParts}, w)[0].(*Corrupt)
	_, err = plain.Start(context.Background(), rand.New(rand.NewPCG(3, 3)))
	assert.ErrorContains(t, err, "use --runtime docker")
}

func TestUnreplicatedTailNeedsNetAdmin(t *testing.T) {
	s, err := ParseSpec("corrupt:unreplicated-tail")
	require.NoError(t, err)
	assert.True(t, s.NeedsNetAdmin())
	assert.False(t, Spec{{Kind: KindCorrupt, Mode: CorruptBitFlip}}.NeedsNetAdmin())
}

func TestSoleStallFirstPrefersALeaderWhoseWrittenPartitionsAllFlip(t *testing.T) {
	written := []PartitionState{
		{Topic: "t0", Partition: 0, Leader: "n2"}, {Topic: "t0", Partition: 1, Leader: "n2"},
		{Topic: "t1", Partition: 0, Leader: "n3"},
	}
	candidates := map[string][]string{"n2": {"t0-0"}, "n3": {"t1-0"}}
	assert.Equal(t, []string{"n3"}, soleStallFirst([]string{"n2", "n3"}, candidates, written), "n2's t0-1 would stall too")
	written = append(written, PartitionState{Topic: "t1", Partition: 1, Leader: "n3"})
	assert.Equal(t, []string{"n2", "n3"}, soleStallFirst([]string{"n2", "n3"}, candidates, written), "none is: all")
}

// A replay of a fault whose leader was never ahead flips nothing either,
// even when the live leader is ahead now.
func TestUnreplicatedTailReplayOfAFaultThatFlippedNothing(t *testing.T) {
	start := func(behind bool, recorded []Step) ([]string, []Step, error) {
		w := newWorld(5)
		w.ctl = "n1"
		v := tailWorld{diskViewWorld: diskViewWorld{diskWorld: diskWorld{w}, parts: tailParts}, leaderBehind: behind}
		c := Spec{{Kind: KindCorrupt, Mode: CorruptUnreplicatedTail}}.Faults(v, v)[0].(*Corrupt)
		c.Sleep = noWait
		ctx, seq := withSequence(context.Background(), recorded)
		_, err := c.Start(ctx, rand.New(rand.NewPCG(3, 3)))
		return w.calls, seq.executed(), err
	}
	_, recorded, err := start(true, nil)
	require.Error(t, err)
	require.Equal(t, "leader-ahead", recorded[len(recorded)-1].Name)
	calls, _, err := start(false, recorded)
	assert.ErrorContains(t, err, "replay: the recorded fault stopped here")
	for _, call := range calls {
		assert.NotContains(t, call, "flip-tail")
	}
	assert.Equal(t, "isolate n2 []", calls[len(calls)-1], "the cut is healed")
}
