package harness

import (
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faultline/faultline/checker"
)

// TestRecorderStreamsHistory: operations reach history.jsonl while the run
// goes on (a crashed harness leaves them behind), numbered in order, and
// the counts see only client completions.
func TestRecorderStreamsHistory(t *testing.T) {
	path := filepath.Join(t.TempDir(), "history.jsonl")
	rec, err := NewRecorder(path)
	require.NoError(t, err)
	var wg sync.WaitGroup
	for p := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				rec.Record(checker.Op{Process: p, Type: checker.Invoke, F: "poll", Mops: []checker.MicroOp{{F: "poll"}}})
				typ := checker.OK
				if i == 49 {
					typ = checker.Info // a process's last op: it is retired
				}
				rec.Record(checker.Op{Process: p, Type: typ, F: "poll", Mops: []checker.MicroOp{{F: "poll", Polls: map[int][]checker.Pair{}}}})
			}
		}()
	}
	wg.Wait()
	rec.Record(checker.Op{Process: checker.NemesisProcess, Type: checker.Invoke, F: "start-kill"})
	rec.Record(checker.Op{Process: checker.NemesisProcess, Type: checker.OK, F: "start-kill"})

	// Before Close: the periodic flush writes every line.
	var h checker.History
	require.Eventually(t, func() bool {
		h, err = checker.ReadHistory(path)
		return err == nil && len(h) == 402
	}, 10*time.Second, 20*time.Millisecond, "history.jsonl is written while the recorder is open")
	for i, op := range h {
		assert.Equal(t, int64(i), op.Index)
	}
	c := rec.Counts()
	assert.Equal(t, 196, c[checker.OK])
	assert.Equal(t, 4, c[checker.Info])
	assert.Equal(t, 0, c[checker.Fail])
	require.NoError(t, rec.Close())
	require.NoError(t, rec.Close(), "Close twice is harmless")
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.NotEmpty(t, b)
}
