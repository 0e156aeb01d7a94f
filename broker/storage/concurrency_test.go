package storage

import (
	"errors"
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
