package storage

import (
	"errors"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestConcurrentReadsDuringAppendsAndRolls runs readers against a log that is
// appended to, rolled and retention-trimmed at the same time; run it with
// -race. Every read must return whole valid batches that hold the offset
// asked for.
func TestConcurrentReadsDuringAppendsAndRolls(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 4000
	cfg.RetentionBytes = 20000
	l := openTestLog(t, OS, t.TempDir(), cfg, true)
	defer l.Close()
	const appends = 400
	var done atomic.Bool
	var wg sync.WaitGroup
	var readErr error
	var errOnce sync.Once
	for r := 0; r < 3; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !done.Load() {
				start, end := l.LogStartOffset(), l.LogEndOffset()
				if end == start {
					continue
				}
				off := start + (end-start)/2
				b, err := l.Read(off, 8192, end, true)
				if errors.Is(err, ErrOffsetOutOfRange) {
					continue // retention moved the start meanwhile
				}
				if err == nil && len(b) == 0 {
					err = errors.New("empty read below the log end")
				}
				if err == nil {
					first := true
					err = ForEachBatch(b, func(h BatchHeader, batch []byte) error {
						if first && (h.BaseOffset > off || h.LastOffset() < off) {
							return errors.New("first batch does not hold the offset")
						}
						first = false
						_, err := ValidateBatch(batch)
						return err
					})
				}
				if err != nil {
					errOnce.Do(func() { readErr = err })
					return
				}
			}
		}()
	}
	for i := 0; i < appends; i++ {
		_, err := l.AppendAsLeader(BuildBatch(records(3, "c", int64(i)), BatchOptions{}), 0, 1)
		require.NoError(t, err)
		l.UpdateHighWatermark(l.LogEndOffset())
		if i%50 == 0 {
			_, err := l.DeleteOldSegments(2)
			require.NoError(t, err)
		}
	}
	done.Store(true)
	wg.Wait()
	require.NoError(t, readErr)
	assert.Equal(t, int64(3*appends), l.LogEndOffset())
	assert.Greater(t, l.LogStartOffset(), int64(0))
}

// TestConcurrentFsyncedAppendsSurvivePowerLoss: producers appending in
// parallel with flush.messages=1 share fsyncs; after a power loss every
// append that returned is still there.
func TestConcurrentFsyncedAppendsSurvivePowerLoss(t *testing.T) {
	efs := NewErrorFS(OS)
	dir := t.TempDir()
	cfg := testConfig()
	cfg.FlushIntervalMessages = 1
	cfg.SegmentBytes = 3000
	l := openTestLog(t, efs, filepath.Join(dir, testTP.DirName()), cfg, true)
	var wg sync.WaitGroup
	var mu sync.Mutex
	acked := map[int64]bool{}
	for p := 0; p < 4; p++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 25; i++ {
				info, err := l.AppendAsLeader(BuildBatch(records(1, "g", 1), BatchOptions{}), 0, 1)
				if !assert.NoError(t, err) {
					return
				}
				mu.Lock()
				acked[info.FirstOffset] = true
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	require.Len(t, acked, 100)
	assert.Equal(t, int64(100), l.RecoveryPoint())
	require.NoError(t, l.Close())
	require.NoError(t, efs.Crash())
	_, l2 := reopenUnclean(t, OS, dir)
	assert.Equal(t, int64(100), l2.LogEndOffset())
}

// TestVisibleEndStopsAtTheFlushedEnd: with flush.messages=1 an append whose
// fsync has not finished (another append's group commit still running) is
// not visible to the high watermark; with the default flush policy the log
// end is.
func TestVisibleEndStopsAtTheFlushedEnd(t *testing.T) {
	cfg := testConfig()
	cfg.FlushIntervalMessages = 1
	l := openTestLog(t, OS, filepath.Join(t.TempDir(), testTP.DirName()), cfg, true)
	_, err := l.AppendAsLeader(BuildBatch(records(1, "a", 1), BatchOptions{}), 0, 1)
	require.NoError(t, err)
	assert.Equal(t, int64(1), l.VisibleEnd())
	_, flush, err := l.appendAsLeader(BuildBatch(records(1, "b", 1), BatchOptions{}), 0, 1, false)
	require.NoError(t, err)
	require.True(t, flush)
	assert.Equal(t, int64(2), l.LogEndOffset())
	assert.Equal(t, int64(1), l.VisibleEnd(), "appended, not yet fsynced")
	require.NoError(t, l.syncTo(2, 1))
	assert.Equal(t, int64(2), l.VisibleEnd())

	plain := openTestLog(t, OS, filepath.Join(t.TempDir(), testTP.DirName()), testConfig(), true)
	_, _, err = plain.appendAsLeader(BuildBatch(records(1, "c", 1), BatchOptions{}), 0, 1, false)
	require.NoError(t, err)
	assert.Equal(t, int64(1), plain.VisibleEnd(), "no flush promised: the log end")
}
