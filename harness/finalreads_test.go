package harness

import (
	"context"
	"io"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faultline/faultline/checker"
	"github.com/faultline/faultline/workloads"
)

// stallingFinal is a final phase that never finishes and explains it with
// one stall.
type stallingFinal struct{ workloads.Final }

func (stallingFinal) Stalls(context.Context) []checker.Stall {
	return []checker.Stall{{Key: 3, Topic: "t0", Partition: 3, HighWatermark: 2, LastStable: 2}}
}

// TestRecordStallsMarksAnUnrecoveredCluster: the stalls go into the history
// as a harness event, marked unrecovered when the cluster did not serve
// again after the heal (the checker then judges no loss by them).
func TestRecordStallsMarksAnUnrecoveredCluster(t *testing.T) {
	for _, recovered := range []bool{true, false} {
		path := filepath.Join(t.TempDir(), "history.jsonl")
		rec, err := NewRecorder(path)
		require.NoError(t, err)
		r := &run{out: io.Discard, rec: rec}
		r.recordStalls(context.Background(), stallingFinal{}, recovered)
		require.NoError(t, rec.Close())
		h, err := checker.ReadHistory(path)
		require.NoError(t, err)
		require.Len(t, h, 1)
		stalls := h[0].Stalls()
		require.Len(t, stalls, 1)
		assert.Equal(t, int64(2), stalls[0].HighWatermark)
		assert.Equal(t, !recovered, stalls[0].Unrecovered)
	}
}
