package faultfs

import (
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseCommand(t *testing.T) {
	for _, tc := range []struct {
		line string
		want Command
	}{
		{"power", Command{Verb: "power"}},
		{"power torn block=512 seed=7", Command{Verb: "power", Power: PowerSpec{Torn: true, BlockBytes: 512, Seed: 7}}},
		{"power reorder seed=-3", Command{Verb: "power", Power: PowerSpec{Reorder: true, Seed: -3}}},
		{"eio", Command{Verb: "eio", EIO: EIOFault{Ops: OpAll}}},
		{"eio fsync path=*.log for=10s", Command{Verb: "eio", EIO: EIOFault{Ops: OpFsync, Path: "*.log", For: 10 * time.Second}}},
		{"  eio   write  path=topic-0/* ", Command{Verb: "eio", EIO: EIOFault{Ops: OpWrite, Path: "topic-0/*"}}},
		{"enospc", Command{Verb: "enospc"}},
		{"enospc bytes=1048576", Command{Verb: "enospc", NoSpace: NoSpaceFault{Bytes: 1 << 20}}},
		{"slow fsync 50ms jitter=10ms seed=2 for=1m", Command{Verb: "slow", Slow: SlowFault{Ops: OpFsync, Delay: 50 * time.Millisecond, Jitter: 10 * time.Millisecond, Seed: 2, For: time.Minute}}},
		{"slow 1s", Command{Verb: "slow", Slow: SlowFault{Ops: OpAll, Delay: time.Second}}},
		{"heal", Command{Verb: "heal"}},
		{"status", Command{Verb: "status"}},
	} {
		t.Run(tc.line, func(t *testing.T) {
			got, err := ParseCommand(tc.line)
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
			again, err := ParseCommand(got.String())
			require.NoError(t, err, "the canonical form %q parses", got.String())
			assert.Equal(t, got, again)
		})
	}
}

func TestParseCommandRejects(t *testing.T) {
	for _, line := range []string{
		"", "explode", "power sideways", "power block=0", "power seed=x", "power torn torn",
		"eio read", "eio fsync write", "eio path=[", "eio for=-1s", "eio for=soon",
		"enospc bytes=-1", "enospc 10", "slow", "slow fsync", "slow fast", "slow 1s 2s",
		"slow 1s jitter=1s jitter=2s", "heal now", "status all",
	} {
		_, err := ParseCommand(line)
		assert.Error(t, err, "%q", line)
	}
}

func FuzzParseCommand(f *testing.F) {
	for _, seed := range []string{
		"power torn reorder block=512 seed=7", "eio fsync path=*.log for=10s", "enospc bytes=10",
		"slow write 5ms jitter=1ms seed=3 path=a/b for=1h", "heal", "status", "power seed=-1",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, line string) {
		c, err := ParseCommand(line)
		if err != nil {
			return
		}
		again, err := ParseCommand(c.String())
		require.NoError(t, err, "canonical form %q of %q", c.String(), line)
		require.Equal(t, c, again)
	})
}

func TestFaultsDecide(t *testing.T) {
	t0 := time.Unix(1000, 0)
	var f Faults
	f.AddEIO(EIOFault{Ops: OpFsync, Path: "*.log", For: time.Second}, t0)
	assert.Equal(t, syscall.EIO, f.Decide(t0, OpFsync, "topic-0/00.log", 0).Errno, "a glob without a slash matches the base name")
	assert.Zero(t, f.Decide(t0, OpWrite, "topic-0/00.log", 0).Errno, "writes are not named")
	assert.Zero(t, f.Decide(t0, OpFsync, "topic-0/00.index", 0).Errno, "other files are not named")
	assert.Zero(t, f.Decide(t0.Add(time.Second), OpFsync, "topic-0/00.log", 0).Errno, "the fault ends after its duration")

	f.AddEIO(EIOFault{Ops: OpAll, Path: "topic-1/*"}, t0)
	assert.Equal(t, syscall.EIO, f.Decide(t0.Add(time.Hour), OpWrite, "topic-1/x", 0).Errno, "no duration: until healed")
	assert.Zero(t, f.Decide(t0, OpWrite, "topic-2/topic-1/x", 0).Errno, "a glob with a slash matches the whole path")
	f.Heal()
	assert.Zero(t, f.Decide(t0, OpWrite, "topic-1/x", 0).Errno)
}

func TestFaultsNoSpaceQuota(t *testing.T) {
	var f Faults
	now := time.Unix(0, 0)
	f.SetNoSpace(NoSpaceFault{Bytes: 10})
	assert.Zero(t, f.Decide(now, OpWrite, "a", 6).Errno)
	assert.Equal(t, syscall.ENOSPC, f.Decide(now, OpWrite, "a", 5).Errno, "6+5 passes the quota")
	assert.Zero(t, f.Decide(now, OpWrite, "a", 4).Errno, "a refused write used up nothing")
	assert.Zero(t, f.Decide(now, OpWrite, "a", 0).Errno, "an overwrite needs no space")
	assert.Equal(t, syscall.ENOSPC, f.Decide(now, OpWrite, "a", 1).Errno)
	assert.Zero(t, f.Decide(now, OpFsync, "a", 0).Errno, "fsync is not refused")
	assert.Contains(t, f.String(now), "enospc: 0 bytes left")
}

func TestFaultsLatencyIsSeeded(t *testing.T) {
	delays := func() []time.Duration {
		var f Faults
		f.AddSlow(SlowFault{Ops: OpFsync, Delay: 10 * time.Millisecond, Jitter: 5 * time.Millisecond, Seed: 9}, time.Unix(0, 0))
		var out []time.Duration
		for range 5 {
			out = append(out, f.Decide(time.Unix(0, 0), OpFsync, "a", 0).Delay)
		}
		assert.Zero(t, f.Decide(time.Unix(0, 0), OpWrite, "a", 0).Delay, "writes are not slowed")
		return out
	}
	first := delays()
	for _, d := range first {
		assert.GreaterOrEqual(t, d, 10*time.Millisecond)
		assert.Less(t, d, 15*time.Millisecond)
	}
	assert.Equal(t, first, delays(), "the same seed gives the same delays")
}
