package nemesis

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/faultline/faultline/checker"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// diskWorld is a fakeWorld whose nodes have fault filesystems.
type diskWorld struct{ *fakeWorld }

func (w diskWorld) PowerLoss(_ context.Context, n, line string) error {
	w.log("power " + n + " " + line)
	w.mu.Lock()
	w.down[n] = true
	w.mu.Unlock()
	return nil
}
func (w diskWorld) DiskFault(_ context.Context, n, line string) error {
	w.log("disk " + n + " " + line)
	return nil
}
func (w diskWorld) HealDisk(_ context.Context, n string) error { w.log("heal-disk " + n); return nil }
func (w diskWorld) Corrupt(_ context.Context, n string, seed uint64, kind string) (string, error) {
	w.log(strings.TrimSpace(fmt.Sprintf("corrupt %s %d %s", n, seed, kind)))
	return "deleted " + n + "/x-checkpoint", nil
}

func TestParseSpecReadsDiskFaults(t *testing.T) {
	s, err := ParseSpec("power:all,disk-error:one,disk-full:leaders,disk-slow,corrupt:minority")
	require.NoError(t, err)
	assert.Equal(t, Spec{
		{Kind: KindPower, Mode: TargetAll}, {Kind: KindDiskError, Mode: TargetOne}, {Kind: KindDiskFull, Mode: TargetLeaders},
		{Kind: KindDiskSlow}, {Kind: KindCorrupt, Mode: TargetMinority},
	}, s)
	assert.True(t, s.OnFaultFS())
	assert.False(t, Spec{{Kind: KindCorrupt}, {Kind: KindKill}}.OnFaultFS(), "corruption is done to a stopped node's volume, without the mount")
	for spec, want := range map[string]string{
		"power:halves":    `power: unknown mode "halves" (known: one, minority, majority, leaders, controller, all, coordinator, follower-then-leader, after-fsync-error, after-slow-fsync, restart-lagging-then-leader)`,
		"disk-error:disk": `disk-error: unknown mode "disk"`,
		"corrupt:":        `corrupt: empty mode in "corrupt:"`,
		"disk-fast":       `unknown nemesis "disk-fast"`,
	} {
		_, err := ParseSpec(spec)
		assert.ErrorContains(t, err, want, spec)
	}
}

// TestDiskFaultsStartAndHeal: each disk fault applies a seeded command to
// its targets and undoes it when it stops; the same seed gives the same
// calls.
func TestDiskFaultsStartAndHeal(t *testing.T) {
	run := func(seed uint64, spec string) []string {
		w := diskWorld{newWorld(5)}
		parsed, err := ParseSpec(spec)
		require.NoError(t, err)
		rng := rand.New(rand.NewPCG(seed, 1))
		for _, f := range parsed.Faults(w, w) {
			_, err := f.Start(context.Background(), rng)
			require.NoError(t, err)
			_, err = f.Stop(context.Background())
			require.NoError(t, err)
		}
		// Power goes off (and comes back) on every target at once: the
		// order of those calls is the scheduler's.
		return canonicalCalls(w.calls)
	}
	calls := run(7, "power:all,disk-error:one,disk-full:one,disk-slow:one,corrupt:one")
	assert.Equal(t, calls, run(7, "power:all,disk-error:one,disk-full:one,disk-slow:one,corrupt:one"), "seeded")
	require.Len(t, calls, 5+5+2+2+2+3)
	for i, n := range []string{"n1", "n2", "n3", "n4", "n5"} {
		assert.Regexp(t, `^power `+n+` power( torn)?( reorder)? seed=\d+$`, calls[i])
		assert.Equal(t, "start "+n, calls[5+i], "a node whose power was cut starts again")
	}
	assert.Regexp(t, `^disk n\d eio (fsync|write|all)$`, calls[10])
	assert.Regexp(t, `^heal-disk n\d$`, calls[11])
	assert.Regexp(t, `^disk n\d enospc bytes=0$`, calls[12])
	assert.Regexp(t, `^disk n\d slow (fsync|write|all) \d+ms jitter=[\d.]+ms seed=\d+$`, calls[14])
	assert.Regexp(t, `^kill n\d$`, calls[16])
	assert.Regexp(t, `^corrupt n\d \d+$`, calls[17])
	assert.Equal(t, "start"+strings.TrimPrefix(calls[16], "kill"), calls[18], "the corrupted node starts again")
}

// barrierWorld's Start returns only once every node of the cluster has
// called it, or fails after a second: nodes started one after another
// fail.
type barrierWorld struct {
	diskWorld
	all     sync.WaitGroup
	waiting chan struct{}
}

func (w *barrierWorld) Start(ctx context.Context, n string) error {
	w.all.Done()
	select {
	case <-w.waiting:
		return nil
	case <-time.After(time.Second):
		return fmt.Errorf("start %s: the other nodes did not start meanwhile", n)
	}
}

func TestPowerComesBackOnEveryTargetAtOnce(t *testing.T) {
	w := &barrierWorld{diskWorld: diskWorld{newWorld(5)}, waiting: make(chan struct{})}
	w.all.Add(5)
	go func() { w.all.Wait(); close(w.waiting) }()
	f := Spec{{Kind: KindPower, Mode: TargetAll}}.Faults(w, w)[0]
	_, err := f.Start(context.Background(), rand.New(rand.NewPCG(1, 1)))
	require.NoError(t, err)
	v, err := f.Stop(context.Background())
	require.NoError(t, err)
	assert.Len(t, v.(Targets).Nodes, 5)
}

// TestPowerFollowerThenLeader: KIP-966's case, a node restarted at once
// after its power loss and then a leader other than it killed.
func TestPowerFollowerThenLeader(t *testing.T) {
	w := diskWorld{newWorld(3)}
	w.leader = []string{"n1"}
	f := Spec{{Kind: KindPower, Mode: PowerThenLeader}}.Faults(w, w)[0]
	v, err := f.Start(context.Background(), rand.New(rand.NewPCG(4, 1)))
	require.NoError(t, err)
	got := v.(DiskTargets)
	require.Len(t, got.Nodes, 2)
	follower := got.Nodes[0]
	assert.NotEqual(t, "n1", follower)
	assert.Equal(t, "n1", got.Nodes[1])
	require.Len(t, w.calls, 3)
	assert.Regexp(t, `^power `+follower+` power`, w.calls[0])
	assert.Equal(t, []string{"start " + follower, "kill n1"}, w.calls[1:])
	_, err = f.Stop(context.Background())
	require.NoError(t, err)
	assert.Equal(t, "start n1", w.calls[3], "only the killed leader is still down")
	_, err = ParseSpec("kill:follower-then-leader")
	assert.ErrorContains(t, err, `kill: unknown mode "follower-then-leader"`)
}

// TestDiskFaultsNeedADiskRuntime: without a runtime that has disks the
// faults fail when they start, and touch nothing.
func TestDiskFaultsNeedADiskRuntime(t *testing.T) {
	w := newWorld(3)
	for _, f := range (Spec{{Kind: KindPower}, {Kind: KindDiskFull}, {Kind: KindCorrupt}}).Faults(w, w) {
		_, err := f.Start(context.Background(), rand.New(rand.NewPCG(1, 1)))
		assert.ErrorIs(t, err, errNoDisk, f.Name())
	}
	assert.Empty(t, w.calls)
}

// TestScheduleRecordsDiskFaults: the schedule records disk faults as
// nemesis ops with what each did to each node.
func TestScheduleRecordsDiskFaults(t *testing.T) {
	w := diskWorld{newWorld(3)}
	faults := Spec{{Kind: KindPower, Mode: TargetOne}}.Faults(w, w)
	var recorded []checker.Op
	do(func(op checker.Op) { recorded = append(recorded, op) }, "start-"+faults[0].Name(), func() (any, error) {
		return faults[0].Start(context.Background(), rand.New(rand.NewPCG(1, 1)))
	})
	require.Len(t, recorded, 2)
	assert.Equal(t, "start-power", recorded[1].F)
	assert.Contains(t, string(recorded[1].Raw), `"did":{"n`)
	assert.Contains(t, string(recorded[1].Raw), `power`)
}
