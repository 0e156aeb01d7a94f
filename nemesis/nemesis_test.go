package nemesis

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faultline/faultline/checker"
)

type fakeWorld struct {
	mu     sync.Mutex
	nodes  []string
	calls  []string
	down   map[string]bool
	leader []string
	ctl    string
}

func newWorld(n int) *fakeWorld {
	w := &fakeWorld{down: map[string]bool{}, ctl: "n2", leader: []string{"n1", "n3"}}
	for i := 1; i <= n; i++ {
		w.nodes = append(w.nodes, fmt.Sprintf("n%d", i))
	}
	return w
}

func (w *fakeWorld) log(s string) { w.mu.Lock(); w.calls = append(w.calls, s); w.mu.Unlock() }
func (w *fakeWorld) Kill(_ context.Context, n string) error {
	w.log("kill " + n)
	w.mu.Lock()
	w.down[n] = true
	w.mu.Unlock()
	return nil
}
func (w *fakeWorld) Stop(_ context.Context, n string) error {
	w.log("stop " + n)
	w.down[n] = true
	return nil
}
func (w *fakeWorld) Start(_ context.Context, n string) error {
	w.log("start " + n)
	w.mu.Lock()
	delete(w.down, n)
	w.mu.Unlock()
	return nil
}
func (w *fakeWorld) Pause(_ context.Context, n string) error  { w.log("pause " + n); return nil }
func (w *fakeWorld) Resume(_ context.Context, n string) error { w.log("resume " + n); return nil }
func (w *fakeWorld) Isolate(_ context.Context, n string, from []string) error {
	w.log(fmt.Sprintf("isolate %s %v", n, from))
	return nil
}
func (w *fakeWorld) Nodes() []string { return w.nodes }
func (w *fakeWorld) Leaders(context.Context) ([]string, error) {
	return append([]string(nil), w.leader...), nil
}
func (w *fakeWorld) Controller(context.Context) (string, error) { return w.ctl, nil }

// runSchedule plans and runs a schedule of cycles intervals without
// waiting, returning the runtime calls and the recorded ops.
func runSchedule(t *testing.T, seed int64, spec string, cycles int) ([]string, []checker.Op) {
	t.Helper()
	w := newWorld(5)
	parsed, err := ParseSpec(spec)
	require.NoError(t, err)
	events := Plan(parsed, PlanOptions{Interval: time.Second, Limit: time.Duration(cycles) * time.Second}, seed)
	require.NotEmpty(t, events)
	s := &Schedule{Faults: parsed.Faults(w, w), Events: events, Sleep: func(ctx context.Context, _ time.Duration) bool { return ctx.Err() == nil }}
	var ops []checker.Op
	s.Run(context.Background(), func(op checker.Op) { ops = append(ops, op) })
	return w.calls, ops
}

func TestScheduleSameSeedSameFaults(t *testing.T) {
	a, opsA := runSchedule(t, 11, "kill,pause,partition", 12)
	b, opsB := runSchedule(t, 11, "kill,pause,partition", 12)
	c, _ := runSchedule(t, 12, "kill,pause,partition", 12)
	assert.Equal(t, a, b)
	assert.Equal(t, opsA, opsB)
	assert.NotEqual(t, a, c)
}

func TestScheduleHealsEverythingItStarts(t *testing.T) {
	calls, ops := runSchedule(t, 3, "kill,pause,partition", 20)
	killed, paused, cut := map[string]int{}, map[string]int{}, map[string]bool{}
	for _, c := range calls {
		var verb, node string
		fmt.Sscanf(c, "%s %s", &verb, &node)
		switch verb {
		case "kill":
			killed[node]++
		case "start":
			killed[node]--
		case "pause":
			paused[node]++
		case "resume":
			paused[node]--
		case "isolate":
			cut[node] = c != fmt.Sprintf("isolate %s []", node)
		}
	}
	for n, k := range killed {
		assert.Zero(t, k, "node %s left killed", n)
	}
	for n, p := range paused {
		assert.Zero(t, p, "node %s left paused", n)
	}
	for n, c := range cut {
		assert.False(t, c, "node %s left partitioned", n)
	}
	// Ops come in invoke/completion pairs named start-X / stop-X.
	require.Zero(t, len(ops)%2)
	for i := 0; i < len(ops); i += 2 {
		assert.Equal(t, checker.Invoke, ops[i].Type)
		assert.Equal(t, checker.OK, ops[i+1].Type, ops[i+1].Error)
		assert.Equal(t, ops[i].F, ops[i+1].F)
		assert.Equal(t, checker.NemesisProcess, ops[i].Process)
	}
	assert.Contains(t, []string{"start-kill", "start-pause", "start-partition"}, ops[0].F)
}

func TestNoneRecordsNothing(t *testing.T) {
	w := newWorld(3)
	parsed, err := ParseSpec("none")
	require.NoError(t, err)
	faults := parsed.Faults(w, w)
	assert.Empty(t, Plan(parsed, PlanOptions{Interval: time.Millisecond, Limit: time.Second}, 1))
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	var ops []checker.Op
	(&Schedule{Faults: faults, Events: []Event{{Action: ActionStart, Slot: 0, Kind: KindNone}}}).Run(ctx, func(op checker.Op) { ops = append(ops, op) })
	assert.Empty(t, w.calls)
	assert.Empty(t, ops)
}

func TestParseSpecRejectsUnknown(t *testing.T) {
	w := newWorld(3)
	_, err := ParseSpec("kill,explode")
	assert.ErrorContains(t, err, `unknown nemesis "explode"`)
	_, err = ParseSpec("kill:everyone")
	assert.ErrorContains(t, err, `unknown mode "everyone"`)
	parsed, err := ParseSpec("kill:leaders")
	require.NoError(t, err)
	f := parsed.Faults(w, w)
	v, err := f[0].Start(context.Background(), rand.New(rand.NewPCG(1, 1)))
	require.NoError(t, err)
	tg := v.(Targets)
	assert.Equal(t, TargetLeaders, tg.Mode)
	assert.Subset(t, []string{"n1", "n3"}, tg.Nodes)
	assert.Len(t, tg.Nodes, 1, "at most a minority of leaders (2 of 3 nodes would be a majority)")
}

// A majority takes the nodes leading the workload's partitions first, so
// a second round, finding the leaders moved, kills the nodes the first
// spared; the rest of it is drawn.
func TestMajorityTakesTheLeadersFirst(t *testing.T) {
	w := newWorld(5)
	w.leader = []string{"n2", "n5"}
	draws := map[string]bool{}
	for seed := range uint64(20) {
		got, err := chooseTargets(context.Background(), w, TargetMajority, rand.New(rand.NewPCG(seed, seed)))
		require.NoError(t, err)
		require.Len(t, got, 3)
		assert.Subset(t, got, []string{"n2", "n5"}, "seed %d", seed)
		draws[fmt.Sprint(got)] = true
	}
	assert.Greater(t, len(draws), 1, "the third node is drawn")
	w.leader = []string{"n1", "n2", "n3", "n4", "n5"}
	got, err := chooseTargets(context.Background(), w, TargetMajority, rand.New(rand.NewPCG(1, 1)))
	require.NoError(t, err)
	assert.Len(t, got, 3, "still a majority when every node leads")
}

func TestTargetSizes(t *testing.T) {
	w := newWorld(5)
	rng := rand.New(rand.NewPCG(5, 5))
	for mode, want := range map[string]int{TargetOne: 1, TargetMinority: 2, TargetMajority: 3, TargetController: 1, TargetAll: 5} {
		got, err := chooseTargets(context.Background(), w, mode, rng)
		require.NoError(t, err)
		assert.Len(t, got, want, mode)
	}
	got, _ := chooseTargets(context.Background(), w, TargetController, rng)
	assert.Equal(t, []string{"n2"}, got)
}

func connected(g Grudge, a, b string) bool {
	for _, x := range g[a] {
		if x == b {
			return false
		}
	}
	for _, x := range g[b] {
		if x == a {
			return false
		}
	}
	return true
}

func TestGrudges(t *testing.T) {
	nodes := []string{"n1", "n2", "n3", "n4", "n5"}
	g := Isolate(nodes, "n3")
	for _, n := range nodes {
		if n != "n3" {
			assert.False(t, connected(g, n, "n3"))
		}
	}
	assert.True(t, connected(g, "n1", "n2"))

	rng := rand.New(rand.NewPCG(9, 9))
	h := Halves(nodes, rng)
	sides := 0
	for _, n := range nodes {
		reach := 0
		for _, m := range nodes {
			if connected(h, n, m) {
				reach++
			}
		}
		if reach == 2 || reach == 3 {
			sides++
		}
	}
	assert.Equal(t, 5, sides, "every node sees exactly its own half")

	r := MajoritiesRing(nodes, rng)
	seen := map[string]bool{}
	for _, n := range nodes {
		var view []string
		for _, m := range nodes {
			if connected(r, n, m) {
				view = append(view, m)
			}
		}
		assert.Len(t, view, 3, "%s sees a majority", n)
		sort.Strings(view)
		key := fmt.Sprint(view)
		assert.False(t, seen[key], "no two nodes see the same majority")
		seen[key] = true
	}
}

// TestAllIsExplicitOnly: kill:all is accepted, but a fault without a mode
// never picks all (a crash of every replica is not in the random mix).
func TestAllIsExplicitOnly(t *testing.T) {
	parsed, err := ParseSpec("kill:all,pause:all")
	require.NoError(t, err)
	assert.Len(t, parsed.Faults(newWorld(5), newWorld(5)), 2)
	assert.NotContains(t, ProcessTargetModes, TargetAll)
	_, err = ParseSpec("partition:all")
	assert.ErrorContains(t, err, `unknown mode "all"`)
}

// startedFaults plans spec for cycles faults (PlanOptions.Cycle or drawn
// at random) and lists the faults it starts, in order.
func startedFaults(t *testing.T, spec string, cycle bool, cycles int) []string {
	t.Helper()
	parsed, err := ParseSpec(spec)
	require.NoError(t, err)
	var started []string
	for _, e := range Plan(parsed, PlanOptions{Interval: time.Second, Limit: time.Hour, Cycle: cycle}, 5) {
		if e.Action == ActionStart && len(started) < cycles {
			started = append(started, string(e.Kind))
		}
	}
	return started
}

func TestScheduleCycleStartsEveryFaultInOrder(t *testing.T) {
	// Cycled, each fault comes once per round, in the order named; drawn
	// at random, seed 5 repeats one in the first three slots and misses one.
	assert.Equal(t, []string{"kill", "pause", "partition", "kill", "pause", "partition", "kill"},
		startedFaults(t, "kill,pause,partition", true, 7))
	drawn := startedFaults(t, "kill,pause,partition", false, 3)
	assert.Len(t, drawn, 3)
	assert.NotEqual(t, []string{"kill", "pause", "partition"}, drawn, "seed 5 draws a repeat in three slots (the case Cycle exists for)")
}

// coordWorld is a world whose transactional ids are coordinated by n2 and
// n4.
type coordWorld struct{ *fakeWorld }

func (coordWorld) Coordinators(context.Context) ([]string, error) { return []string{"n2", "n4"}, nil }

// TestCoordinatorTarget: kill:coordinator hits one node that coordinates
// a transactional id, is refused by a cluster that cannot name them, and
// is never drawn by an unpinned kill.
func TestCoordinatorTarget(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	for range 10 {
		got, err := chooseTargets(context.Background(), coordWorld{newWorld(5)}, TargetCoordinator, rng)
		require.NoError(t, err)
		require.Len(t, got, 1)
		assert.Contains(t, []string{"n2", "n4"}, got[0])
	}
	_, err := chooseTargets(context.Background(), newWorld(5), TargetCoordinator, rng)
	assert.ErrorContains(t, err, "cannot name the transaction coordinators")
	spec, err := ParseSpec("kill:coordinator,pause:coordinator,power:coordinator")
	require.NoError(t, err)
	assert.Equal(t, "kill:coordinator,pause:coordinator,power:coordinator", spec.String())
	assert.NotContains(t, ProcessTargetModes, TargetCoordinator, "only when named: the random mix of earlier seeds is unchanged")
}
