package agent

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faultline/faultline/broker/storage"
)

// segmentOf builds a segment of real record batches (the broker's own
// framing and CRC), one batch of n records per entry, at consecutive
// offsets.
func segmentOf(t *testing.T, counts ...int) []byte {
	t.Helper()
	var seg []byte
	offset := int64(0)
	for _, n := range counts {
		seg = append(seg, batchAt(offset, n)...)
		offset += int64(n)
	}
	return seg
}

// batchAt is one real batch of n records at offset.
func batchAt(offset int64, n int) []byte {
	recs := make([]storage.Record, n)
	for i := range recs {
		recs[i] = storage.Record{Offset: offset + int64(i), TimestampMs: 1, Value: fmt.Appendf(nil, "v%d", offset+int64(i))}
	}
	return storage.BuildBatch(recs, storage.BatchOptions{BaseOffset: offset})
}

func TestPlanTailFlipDamagesOnlyTheLastBatchNoFollowerHas(t *testing.T) {
	seg := segmentOf(t, 3, 2, 1, 2) // batches at 0, 3, 5, 6; log end 8
	assert.Equal(t, int64(8), SegmentEnd(seg, 0))
	lastFrom := int64(len(seg) - len(batchAt(6, 2)))

	for seed := uint64(0); seed < 50; seed++ {
		plan, pos, mask := PlanTailFlip(seg, "t0-1", "t0-1/00000000000000000000.log", 5, seed)
		again, _, _ := PlanTailFlip(seg, "t0-1", "t0-1/00000000000000000000.log", 5, seed)
		assert.Equal(t, plan, again, "seeded")
		require.Empty(t, plan.Skipped)
		assert.Equal(t, 2, plan.Above, "the batches at 5 and 6 start at or above the followers' end")
		assert.Equal(t, int64(6), plan.BaseOffset, "the last batch")
		assert.GreaterOrEqual(t, pos, lastFrom+recordsFrom, "in the records, past every header field a follower reads")
		assert.Less(t, pos, int64(len(seg)))
		assert.NotZero(t, mask)

		flipped := bytes.Clone(seg)
		flipped[pos] ^= mask
		h, err := storage.ParseBatchHeader(flipped[lastFrom:])
		require.NoError(t, err, "the header still frames the batch")
		assert.Equal(t, int64(6), h.BaseOffset)
		assert.Equal(t, int32(2), h.RecordCount)
		_, err = storage.ValidateBatch(flipped[lastFrom:])
		assert.ErrorIs(t, err, storage.ErrCorruptBatch, "the CRC no longer matches")
		spans := frameBatches(flipped)
		require.Len(t, spans, 4)
		for _, s := range spans[:3] {
			_, err := storage.ValidateBatch(flipped[s.from:s.to])
			assert.NoError(t, err, "every other batch is intact")
		}
	}
}

func TestPlanTailFlipSkipsWhatAFollowerHas(t *testing.T) {
	seg := segmentOf(t, 3, 2)
	plan, _, _ := PlanTailFlip(seg, "t0-0", "f", 5, 1)
	assert.Equal(t, 0, plan.Above)
	assert.Contains(t, plan.Skipped, "no batch at or above offset 5")

	// A batch being written when the agent read (cut short) is not one.
	torn := append(bytes.Clone(seg), batchAt(5, 2)[:30]...)
	assert.Equal(t, int64(5), SegmentEnd(torn, 0))
	plan, _, _ = PlanTailFlip(torn, "t0-0", "f", 5, 1)
	assert.Equal(t, 0, plan.Above)
	assert.NotEmpty(t, plan.Skipped)
	assert.Equal(t, int64(120), SegmentEnd(nil, 120), "an empty active segment ends at its base offset")
}

func TestLogEndsAndFlipTailsOnDisk(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, b []byte) {
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), b, 0o644))
	}
	old := segmentOf(t, 5)
	write("t0-0/00000000000000000000.log", old)
	active := append(batchAt(5, 2), batchAt(7, 1)...)
	write("t0-0/00000000000000000005.log", active)
	write("t0-0/00000000000000000005.index", make([]byte, 16))
	write("t1-2/00000000000000000000.log", segmentOf(t, 1))
	write("t1-3/00000000000000000009.log", nil)

	ends, err := LogEnds(dir, []string{"t0-0", "t1-2", "t1-3"})
	require.NoError(t, err)
	assert.Equal(t, map[string]int64{"t0-0": 8, "t1-2": 1, "t1-3": 9}, ends, "from the active segment, the one of the highest base offset")

	// The followers have t0-0 up to 7 and all of t1-2.
	flips, err := FlipTails(dir, map[string]int64{"t0-0": 7, "t1-2": 1}, 9)
	require.NoError(t, err)
	require.Len(t, flips, 2)
	assert.Equal(t, "t0-0", flips[0].Partition)
	assert.Equal(t, int64(7), flips[0].BaseOffset)
	assert.Empty(t, flips[0].Skipped)
	assert.NotEmpty(t, flips[1].Skipped, "every batch of t1-2 is on a follower")

	got, err := os.ReadFile(filepath.Join(dir, "t0-0/00000000000000000005.log"))
	require.NoError(t, err)
	first := len(batchAt(5, 2))
	assert.Equal(t, active[:first], got[:first], "what a follower has is untouched")
	_, err = storage.ValidateBatch(got[first:])
	assert.ErrorIs(t, err, storage.ErrCorruptBatch)
	unchanged, _ := os.ReadFile(filepath.Join(dir, "t0-0/00000000000000000000.log"))
	assert.Equal(t, old, unchanged)

	_, err = LogEnds(dir, []string{"../etc"})
	assert.ErrorContains(t, err, "no partition directory name")
	_, err = LogEnds(dir, []string{"t9-9"})
	assert.Error(t, err)
	flips, err = FlipTails(dir, map[string]int64{"t9-9": 0}, 1)
	assert.Error(t, err)
	assert.NotEmpty(t, flips[0].Skipped)
}
