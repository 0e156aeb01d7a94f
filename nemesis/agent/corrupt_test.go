package agent

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var brokerListing = []File{
	{"meta.properties", 120},
	{"recovery-point-offset-checkpoint", 40},
	{"replication-offset-checkpoint", 40},
	{"t0-0/00000000000000000000.log", 9000},
	{"t0-0/00000000000000000000.index", 1024},
	{"t0-0/00000000000000000000.timeindex", 1536},
	{"t0-0/00000000000000000120.log", 3000},
	{"t0-0/00000000000000000120.index", 0},
	{"t0-0/leader-epoch-checkpoint", 20},
	{"t0-1/00000000000000000000.log", 0},
	{"__cluster_metadata-0/00000000000000000000.log", 5000},
	{"__cluster_metadata-0/00000000000000000000.index", 512},
	{"t9-0.abc-delete/00000000000000000000.log", 700},
}

func TestPlanCorruptionChoosesAmongTheKindsTheListingOffers(t *testing.T) {
	seen := map[string]bool{}
	for seed := uint64(0); seed < 200; seed++ {
		c, err := PlanCorruption(seed, brokerListing)
		require.NoError(t, err)
		again, _ := PlanCorruption(seed, brokerListing)
		assert.Equal(t, c, again, "seeded")
		seen[c.Kind] = true
		assert.NotContains(t, c.File, "__cluster_metadata-0/0", "the metadata log is not a partition replica")
		assert.NotContains(t, c.File, "-delete/")
		assert.NotEqual(t, "meta.properties", c.File)
		switch c.Kind {
		case CorruptTornTail:
			assert.Equal(t, "t0-0/00000000000000000120.log", c.File, "only the active segment has a torn tail")
			assert.True(t, c.Size >= 3000-4096 && c.Size < 3000, "cut inside the last 4 KiB: %d", c.Size)
		case CorruptBitFlip:
			assert.Contains(t, []string{"t0-0/00000000000000000000.log", "t0-0/00000000000000000120.log"}, c.File,
				"any non-empty segment, not only the active one")
		case CorruptIndexTruncate, CorruptIndexGarbage:
			assert.Regexp(t, `^t0-0/.*\.(time)?index$`, c.File)
		case CorruptCheckpoint:
			assert.Contains(t, c.File, "checkpoint")
		}
	}
	assert.Len(t, seen, 5, "every kind is drawn: %v", seen)
}

func TestPlanCorruptionTable(t *testing.T) {
	for name, tc := range map[string]struct {
		files []File
		kinds []string
		err   string
	}{
		"empty dir":            {files: nil, err: "no segment, index or checkpoint"},
		"only meta.properties": {files: []File{{"meta.properties", 90}}, err: "no segment"},
		"only checkpoints":     {files: []File{{"replication-offset-checkpoint", 9}}, kinds: []string{CorruptCheckpoint}},
		"only an empty segment and its index": {
			files: []File{{"t-0/00000000000000000000.log", 0}, {"t-0/00000000000000000000.index", 0}},
			kinds: []string{CorruptIndexTruncate, CorruptIndexGarbage},
		},
		"one segment": {
			files: []File{{"t-0/00000000000000000000.log", 100}},
			kinds: []string{CorruptTornTail, CorruptBitFlip},
		},
	} {
		t.Run(name, func(t *testing.T) {
			for seed := uint64(0); seed < 50; seed++ {
				c, err := PlanCorruption(seed, tc.files)
				if tc.err != "" {
					assert.ErrorContains(t, err, tc.err)
					return
				}
				require.NoError(t, err)
				assert.Contains(t, tc.kinds, c.Kind)
				if c.Kind == CorruptTornTail {
					assert.True(t, c.Size >= 0 && c.Size < 100)
				}
			}
		})
	}
}

// batches frames record batches of the given total sizes as Kafka does.
func batches(sizes ...int) []byte {
	var out []byte
	for _, n := range sizes {
		b := make([]byte, n)
		binary.BigEndian.PutUint32(b[batchLengthAt:], uint32(n-batchHeaderSize))
		out = append(out, b...)
	}
	return out
}

func TestFlipPositionStaysInsideTheChosenBatchesCRC(t *testing.T) {
	data := batches(100, 200, 61)
	for _, tc := range []struct {
		batch, bit uint64
		offset     int64
		mask       byte
	}{
		{0, 0, 21, 1},
		{0, 9, 22, 2},
		{1, 0, 100 + 21, 1},
		{4, 0, 100 + 21, 1}, // batch 4 mod 3 = 1
		{2, 40*8 - 1, 300 + 60, 0x80},
		{2, 40 * 8, 300 + 21, 1}, // wraps inside the batch
	} {
		off, mask, ok := FlipPosition(data, tc.batch, tc.bit)
		require.True(t, ok)
		assert.Equal(t, tc.offset, off, "%+v", tc)
		assert.Equal(t, tc.mask, mask, "%+v", tc)
	}
	torn := append(batches(100), batches(200)[:150]...)
	for b := uint64(0); b < 4; b++ {
		off, _, ok := FlipPosition(torn, b, 5)
		require.True(t, ok)
		assert.Less(t, off, int64(100), "a torn batch is not flipped in")
	}
	_, _, ok := FlipPosition(make([]byte, 10), 0, 0)
	assert.False(t, ok)
	_, _, ok = FlipPosition(batches(15), 0, 0)
	assert.False(t, ok, "a batch too short to have a CRC-covered byte")
}

func TestApplyCorruptionChangesOnlyWhatItSays(t *testing.T) {
	dir := t.TempDir()
	seg := batches(100, 200)
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "t-0"), 0o755))
	write := func(name string, b []byte) { require.NoError(t, os.WriteFile(filepath.Join(dir, name), b, 0o644)) }
	read := func(name string) []byte { b, _ := os.ReadFile(filepath.Join(dir, name)); return b }
	write("t-0/0.log", seg)
	write("t-0/0.index", make([]byte, 64))
	write("replication-offset-checkpoint", []byte("0\n1\n"))

	require.NoError(t, ApplyCorruption(dir, Corruption{Kind: CorruptBitFlip, File: "t-0/0.log", Batch: 1, Bit: 3}))
	got := read("t-0/0.log")
	diff := 0
	for i := range got {
		if got[i] != seg[i] {
			diff++
			assert.Equal(t, 100+21, i)
			assert.Equal(t, byte(8), got[i]^seg[i])
		}
	}
	assert.Equal(t, 1, diff, "one bit")

	require.NoError(t, ApplyCorruption(dir, Corruption{Kind: CorruptTornTail, File: "t-0/0.log", Size: 250}))
	assert.Len(t, read("t-0/0.log"), 250)
	require.NoError(t, ApplyCorruption(dir, Corruption{Kind: CorruptIndexGarbage, File: "t-0/0.index", Offset: 8, Length: 16, Seed: 3}))
	idx := read("t-0/0.index")
	assert.Len(t, idx, 64)
	assert.Equal(t, make([]byte, 8), idx[:8])
	assert.NotEqual(t, make([]byte, 16), idx[8:24])
	require.NoError(t, ApplyCorruption(dir, Corruption{Kind: CorruptCheckpoint, File: "replication-offset-checkpoint"}))
	assert.NoFileExists(t, filepath.Join(dir, "replication-offset-checkpoint"))

	files, err := ListFiles(dir)
	require.NoError(t, err)
	assert.ElementsMatch(t, []File{{"t-0/0.log", 250}, {"t-0/0.index", 64}}, files)
}

func TestPlanCorruptionOfKeepsToTheNamedKind(t *testing.T) {
	for seed := uint64(0); seed < 50; seed++ {
		c, err := PlanCorruptionOf(seed, brokerListing, CorruptBitFlip)
		require.NoError(t, err)
		assert.Equal(t, CorruptBitFlip, c.Kind)
	}
	_, err := PlanCorruptionOf(1, []File{{Path: "t0-0/00000000000000000000.index", Size: 10}}, CorruptBitFlip)
	assert.ErrorContains(t, err, "offers no bit-flip corruption (it offers index-truncate, index-garbage)")
}

// TestApplyDiskReplaced: a replaced disk keeps the node's identity and the
// controller quorum's log and nothing else; it is never drawn at random.
func TestApplyDiskReplaced(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"meta.properties", "bootstrap.checkpoint", "__cluster_metadata-0/00000000000000000000.log", "__cluster_metadata-0/quorum-state",
		"t0-0/00000000000000000000.log", "t0-0/00000000000000000000.index", "t0-0/leader-epoch-checkpoint",
		"recovery-point-offset-checkpoint", "replication-offset-checkpoint", "cleaner-offset-checkpoint", ".kafka_cleanshutdown"} {
		require.NoError(t, os.MkdirAll(filepath.Join(dir, filepath.Dir(f)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, f), []byte("x"), 0o644))
	}
	files, err := ListFiles(dir)
	require.NoError(t, err)
	for seed := range uint64(200) {
		c, err := PlanCorruption(seed, files)
		require.NoError(t, err)
		require.NotEqual(t, CorruptDiskReplaced, c.Kind, "drawn at random (seed %d)", seed)
	}
	c, err := PlanCorruptionOf(1, files, CorruptDiskReplaced)
	require.NoError(t, err)
	require.NoError(t, ApplyCorruption(dir, c))
	left, err := ListFiles(dir)
	require.NoError(t, err)
	var paths []string
	for _, f := range left {
		paths = append(paths, f.Path)
	}
	assert.ElementsMatch(t, []string{"meta.properties", "bootstrap.checkpoint", "__cluster_metadata-0/00000000000000000000.log", "__cluster_metadata-0/quorum-state"}, paths)
	assert.Contains(t, c.String(), "replaced the disk")
}
