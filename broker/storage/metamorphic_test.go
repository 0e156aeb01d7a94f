package storage

import (
	"fmt"
	"math/rand"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestRandomOperationsAgainstModel runs seeded random sequences of appends,
// follower appends, truncations, rolls, log start advances, retention and
// clean or crash reopens against a model (the list of batches that must be
// readable) and checks after every step that the log reads back exactly the
// model. Power losses (ErrorFS.Crash) may only cut the model to a prefix no
// shorter than the recovery point. A failure prints the seed and step.
func TestRandomOperationsAgainstModel(t *testing.T) {
	seeds := 12
	if testing.Short() {
		seeds = 3
	}
	for seed := int64(1); seed <= int64(seeds); seed++ {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) { runModel(t, seed, 150) })
	}
}

type modelLog struct {
	batches  [][]byte // batches with lastOffset >= logStart, in order
	logStart int64
	leo      int64
	epoch    int32
}

func (m *modelLog) truncate(offset int64) {
	for i, b := range m.batches {
		h, _ := ParseBatchHeader(b)
		if h.LastOffset() >= offset {
			m.batches = m.batches[:i]
			m.leo = min(offset, h.BaseOffset)
			if m.leo < m.logStart {
				m.batches = nil
				m.leo = m.logStart
			}
			return
		}
	}
}

func (m *modelLog) advanceStart(offset int64) {
	m.logStart = offset
	for len(m.batches) > 0 {
		h, _ := ParseBatchHeader(m.batches[0])
		if h.LastOffset() >= offset {
			return
		}
		m.batches = m.batches[1:]
	}
}

func runModel(t *testing.T, seed int64, steps int) {
	rng := rand.New(rand.NewSource(seed))
	cfg := testConfig()
	cfg.SegmentBytes = 600
	cfg.IndexIntervalBytes = 100
	dir := t.TempDir()
	efs := NewErrorFS(OS)
	l := openTestLog(t, efs, dir, cfg, true)
	defer func() { _ = l.Close() }()
	m := &modelLog{}
	for step := 0; step < steps; step++ {
		op := rng.Intn(100)
		var what string
		switch {
		case op < 45:
			n := 1 + rng.Intn(4)
			b := BuildBatch(records(n, fmt.Sprintf("s%d", step), int64(step)), BatchOptions{})
			if rng.Intn(4) == 0 {
				m.epoch++
			}
			_, err := l.AppendAsLeader(b, m.epoch, int64(step))
			require.NoError(t, err, "seed %d step %d append", seed, step)
			m.batches = append(m.batches, b)
			m.leo += int64(n)
			what = "append"
		case op < 55:
			n := 1 + rng.Intn(3)
			b := BuildBatch(records(n, fmt.Sprintf("f%d", step), int64(step)), BatchOptions{BaseOffset: m.leo, PartitionLeaderEpoch: m.epoch})
			require.NoError(t, l.AppendAsFollower(b), "seed %d step %d follower append", seed, step)
			m.batches = append(m.batches, b)
			m.leo += int64(n)
			what = "follower-append"
		case op < 65:
			if m.leo == m.logStart {
				continue
			}
			off := m.logStart + rng.Int63n(m.leo-m.logStart+1)
			require.NoError(t, l.TruncateTo(off), "seed %d step %d truncate %d", seed, step, off)
			m.truncate(off)
			what = fmt.Sprintf("truncate(%d)", off)
		case op < 70:
			require.NoError(t, l.Roll())
			what = "roll"
		case op < 78:
			l.UpdateHighWatermark(m.leo)
			if m.leo == m.logStart {
				continue
			}
			off := m.logStart + rng.Int63n(m.leo-m.logStart+1)
			require.NoError(t, l.IncrementLogStartOffset(off), "seed %d step %d advance start %d", seed, step, off)
			m.advanceStart(off)
			what = fmt.Sprintf("advance-start(%d)", off)
		case op < 82:
			_, err := l.DeleteOldSegments(int64(step))
			require.NoError(t, err)
			m.advanceStart(l.LogStartOffset())
			what = "retention"
		case op < 88:
			if rng.Intn(2) == 0 {
				require.NoError(t, l.Flush())
			}
			rp := l.RecoveryPoint()
			hw := l.HighWatermark()
			require.NoError(t, l.Close())
			require.NoError(t, efs.Crash())
			var err error
			l, _, err = openLog(efs, dir, testTP, cfg, loadParams{recoveryPoint: rp, logStartOffset: m.logStart, highWatermark: hw})
			require.NoError(t, err, "seed %d step %d power loss", seed, step)
			require.GreaterOrEqual(t, l.LogEndOffset(), min(rp, m.leo), "seed %d step %d: flushed data lost", seed, step)
			m.truncate(l.LogEndOffset())
			what = fmt.Sprintf("power-loss(recovery point %d)", rp)
		default:
			clean := rng.Intn(2) == 0
			hw := l.HighWatermark()
			rp := l.RecoveryPoint()
			if clean {
				require.NoError(t, l.closeForShutdown())
			} else {
				require.NoError(t, l.Close())
			}
			var err error
			l, _, err = openLog(efs, dir, testTP, cfg, loadParams{cleanShutdown: clean, recoveryPoint: rp, logStartOffset: m.logStart, highWatermark: hw})
			require.NoError(t, err, "seed %d step %d reopen", seed, step)
			what = fmt.Sprintf("reopen(clean=%v)", clean)
		}
		checkAgainstModel(t, l, m, fmt.Sprintf("seed %d step %d after %s", seed, step, what))
	}
}

func checkAgainstModel(t *testing.T, l *Log, m *modelLog, where string) {
	t.Helper()
	require.Equal(t, m.leo, l.LogEndOffset(), "%s: LEO", where)
	require.Equal(t, m.logStart, l.LogStartOffset(), "%s: log start", where)
	var got []byte
	for off := m.logStart; off < m.leo; {
		b, err := l.Read(off, 1<<20, m.leo, true)
		require.NoError(t, err, "%s: read %d", where, off)
		require.NotEmpty(t, b, "%s: read %d", where, off)
		require.NoError(t, ForEachBatch(b, func(h BatchHeader, _ []byte) error { off = h.NextOffset(); return nil }))
		got = append(got, b...)
	}
	require.Equal(t, concat(m.batches), got, "%s: content", where)
}
