package storage

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDamagedIndexesAndCheckpointsServeTheSameLog: what the corruption
// nemesis does to a stopped node's indexes and checkpoints (a truncated or
// garbage .index or .timeindex, a deleted checkpoint file) never changes
// what the log serves after an unclean start: every batch, valid, at its
// offset.
func TestDamagedIndexesAndCheckpointsServeTheSameLog(t *testing.T) {
	damage := map[string]func(t *testing.T, pdir, root string){
		"truncated index": func(t *testing.T, pdir, _ string) {
			for _, p := range glob(t, pdir, "*.index") {
				require.NoError(t, os.Truncate(p, 5))
			}
		},
		"garbage index": func(t *testing.T, pdir, _ string) {
			r := rand.New(rand.NewPCG(1, 2))
			for _, p := range glob(t, pdir, "*.index") {
				garbage := make([]byte, 8*16)
				for i := range garbage {
					garbage[i] = byte(r.IntN(256))
				}
				require.NoError(t, os.WriteFile(p, garbage, 0o644))
			}
		},
		"garbage time index": func(t *testing.T, pdir, _ string) {
			for _, p := range glob(t, pdir, "*.timeindex") {
				require.NoError(t, os.WriteFile(p, []byte(strings.Repeat("\xff", 12*4)), 0o644))
			}
		},
		"deleted checkpoints": func(t *testing.T, _, root string) {
			for _, name := range []string{RecoveryPointCheckpointFile, HighWatermarkCheckpointFile, LogStartOffsetCheckpointFile} {
				_ = os.Remove(filepath.Join(root, name))
			}
			_ = os.Remove(filepath.Join(root, testTP.DirName(), LeaderEpochCheckpointFile))
		},
	}
	for name, apply := range damage {
		t.Run(name, func(t *testing.T) {
			cfg := testConfig()
			cfg.SegmentBytes = 1500
			cfg.IndexIntervalBytes = 100
			dir := t.TempDir()
			m, l := managedLog(t, dir, cfg)
			appendN(t, l, 60, 2, 1)
			want, err := l.Read(0, 1<<30, l.LogEndOffset(), true)
			require.NoError(t, err)
			var wantAll []byte
			for off := int64(0); off < l.LogEndOffset(); {
				b, err := l.Read(off, 1<<30, l.LogEndOffset(), true)
				require.NoError(t, err)
				require.NoError(t, ForEachBatch(b, func(h BatchHeader, _ []byte) error { off = h.NextOffset(); return nil }))
				wantAll = append(wantAll, b...)
			}
			require.NotEmpty(t, want)
			leo := l.LogEndOffset()
			require.NoError(t, m.Shutdown(1))
			require.NoError(t, os.Remove(filepath.Join(dir, CleanShutdownFile)))
			apply(t, filepath.Join(dir, testTP.DirName()), dir)

			m2, l2 := reopenUnclean(t, OS, dir)
			defer func() { _ = m2.Shutdown(2) }()
			require.Equal(t, leo, l2.LogEndOffset())
			var got []byte
			for off := int64(0); off < l2.LogEndOffset(); {
				b, err := l2.Read(off, 1<<30, l2.LogEndOffset(), true)
				require.NoError(t, err)
				require.NotEmpty(t, b, "at %d", off)
				first := true
				require.NoError(t, ForEachBatch(b, func(h BatchHeader, batch []byte) error {
					if first {
						assert.LessOrEqual(t, h.BaseOffset, off, "the read starts at the batch holding %d", off)
						first = false
					}
					_, err := ValidateBatch(batch)
					off = h.NextOffset()
					return err
				}))
				got = append(got, b...)
			}
			assert.Equal(t, wantAll, got)
			for off := int64(0); off < leo; off += 7 {
				b, err := l2.Read(off, 1, leo, true)
				require.NoError(t, err)
				h, err := ParseBatchHeader(b)
				require.NoError(t, err)
				assert.True(t, h.BaseOffset <= off && off <= h.LastOffset(), "a read at %d gets the batch holding it, not [%d, %d]", off, h.BaseOffset, h.LastOffset())
			}
		})
	}
}

func glob(t *testing.T, dir, pattern string) []string {
	t.Helper()
	out, err := filepath.Glob(filepath.Join(dir, pattern))
	require.NoError(t, err)
	require.NotEmpty(t, out)
	return out
}
