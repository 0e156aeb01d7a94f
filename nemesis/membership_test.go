package nemesis

import (
	"context"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// isrWorld is a fakeWorld with one partition t/0 replicated on n1..n3 whose
// ISR follows the faults at once: a node down or cut off leaves it, a node
// back rejoins it, a dead leader is replaced from the ISR.
type isrWorld struct {
	*fakeWorld
	part   PartitionState
	cutOff map[string]bool
	netem  map[string]string
}

func newISRWorld() *isrWorld {
	return &isrWorld{fakeWorld: newWorld(3), cutOff: map[string]bool{}, netem: map[string]string{},
		part: PartitionState{Topic: "t", Partition: 0, Leader: "n1", Replicas: []string{"n1", "n2", "n3"}, ISR: []string{"n1", "n2", "n3"}}}
}

func (w *isrWorld) settle() {
	var isr []string
	for _, n := range w.part.Replicas {
		if !w.down[n] && !w.cutOff[n] && w.netem[n] == "" && (slices.Contains(w.part.ISR, n) || !w.down[n]) {
			isr = append(isr, n)
		}
	}
	if w.down[w.part.Leader] || w.part.Leader == "" {
		w.part.Leader = ""
		for _, n := range w.part.ISR {
			if !w.down[n] && slices.Contains(isr, n) {
				w.part.Leader = n
				break
			}
		}
	}
	w.part.ISR = isr
}

func (w *isrWorld) Partitions(context.Context) ([]PartitionState, error) {
	w.settle()
	p := w.part
	p.ISR = slices.Clone(p.ISR)
	return []PartitionState{p}, nil
}
func (w *isrWorld) Isolate(ctx context.Context, n string, from []string) error {
	w.mu.Lock()
	w.cutOff[n] = len(from) == len(w.nodes)-1
	w.mu.Unlock()
	return w.fakeWorld.Isolate(ctx, n, from)
}
func (w *isrWorld) Netem(_ context.Context, n, line string) error {
	w.log("netem " + n + " " + line)
	w.mu.Lock()
	w.netem[n] = line
	w.mu.Unlock()
	return nil
}

func TestLaggingFailoverKillsTheLeaderOnceTheFollowerLeftTheISR(t *testing.T) {
	for _, mode := range LaggingModes {
		w := newISRWorld()
		f := &LaggingFailover{Runtime: w, Network: w, Cluster: w, Modes: []string{mode}}
		v, err := f.Start(context.Background(), rand.New(rand.NewPCG(1, 2)))
		require.NoError(t, err, mode)
		s := v.(LaggingStart)
		assert.Equal(t, "n1", s.Leader, mode)
		assert.Contains(t, []string{"n2", "n3"}, s.Follower, mode)
		assert.Equal(t, []string{s.Follower, "n1"}, s.AimedAt())
		require.NotEmpty(t, w.calls)
		assert.Equal(t, "kill n1", w.calls[len(w.calls)-1], "the leader dies last, after the follower was healed")
		assert.False(t, w.cutOff[s.Follower], "healed before the kill")
		assert.Empty(t, w.netem[s.Follower], "healed before the kill")
		_, err = f.Stop(context.Background())
		require.NoError(t, err)
		assert.Equal(t, "start n1", w.calls[len(w.calls)-1])
	}
}

func TestLaggingFailoverNeedsAnISR(t *testing.T) {
	w := newISRWorld()
	w.netem["n2"], w.netem["n3"] = "delay=1s", "delay=1s" // both followers out of the ISR
	f := &LaggingFailover{Runtime: w, Network: w, Cluster: w}
	_, err := f.Start(context.Background(), rand.New(rand.NewPCG(1, 2)))
	assert.ErrorContains(t, err, "no partition has a leader and an in-sync follower")
	assert.Empty(t, w.calls, "nothing is cut or killed")
}

func TestRollingRestartTakesEveryNodeInTurn(t *testing.T) {
	w := newISRWorld()
	r := &RollingRestart{Runtime: w, Cluster: w}
	v, err := r.Start(context.Background(), rand.New(rand.NewPCG(3, 4)))
	require.NoError(t, err)
	res := v.(MembershipResult)
	assert.ElementsMatch(t, []string{"n1", "n2", "n3"}, res.Nodes)
	var want []string
	for _, n := range res.Nodes {
		want = append(want, "stop "+n, "start "+n)
		assert.Contains(t, res.Did[n], "back in every ISR")
	}
	assert.Equal(t, want, w.calls, "one node at a time: stopped and started before the next")
}

func TestMembershipWaitsForTheNodeToLeaveAndRejoin(t *testing.T) {
	w := newISRWorld()
	m := &Membership{Runtime: w, Cluster: w}
	v, err := m.Start(context.Background(), rand.New(rand.NewPCG(5, 6)))
	require.NoError(t, err)
	n := v.(MembershipResult).Nodes[0]
	assert.NotContains(t, w.part.ISR, n)
	assert.Contains(t, v.(MembershipResult).Did[n], "out of every ISR")
	v, err = m.Stop(context.Background())
	require.NoError(t, err)
	assert.Contains(t, w.part.ISR, n)
	assert.Contains(t, v.(MembershipResult).Did[n], "back in every ISR")
	assert.Equal(t, []string{"stop " + n, "start " + n}, w.calls)
}

func TestPacketFaultAppliesAndHeals(t *testing.T) {
	for _, mode := range PacketModes {
		w := newISRWorld()
		p := &Packet{Network: w, Cluster: w, Modes: []string{mode}}
		v, err := p.Start(context.Background(), rand.New(rand.NewPCG(7, 8)))
		require.NoError(t, err)
		d := v.(DiskTargets)
		require.NotEmpty(t, d.Nodes)
		for _, n := range d.Nodes {
			assert.NotEmpty(t, w.netem[n])
		}
		assert.True(t, strings.Contains(d.Did[d.Nodes[0]], mode) || ((mode == PacketDelay || mode == PacketLatency) && strings.Contains(d.Did[d.Nodes[0]], "delay=")), d.Did)
		if mode == PacketLatency {
			assert.NotContains(t, d.Did[d.Nodes[0]], "jitter", "a steady latency reorders nothing")
		}
		_, err = p.Stop(context.Background())
		require.NoError(t, err)
		for _, n := range d.Nodes {
			assert.Empty(t, w.netem[n], "healed")
		}
	}
}
