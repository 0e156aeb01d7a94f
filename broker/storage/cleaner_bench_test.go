package storage

import (
	"context"
	"fmt"
	"io"
	"math/rand"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// benchmarkCleaner measures one cleaner thread compacting a page-cached
// log of logBytes: keyed upserts of 100-byte values over keys keys, in
// batches of 50 records with codec, 16 MiB segments. The reported MB/s
// is the log's size before cleaning over the wall time of the clean (the
// offset map pass, the rewrite and the swaps); MB/cpu-s is the same size
// over the CPU time (user and system) the process spent in the cleans,
// the figure that means something on a machine shared with other jobs.
// There is no peer: kfake does not compact.
func benchmarkCleaner(b *testing.B, fs FS, keys int, codec Compression) {
	const logBytes = 128 << 20
	cfg := compactConfig()
	cfg.SegmentBytes = 16 << 20
	cfg.IndexIntervalBytes = 4096
	tmpl := b.TempDir()
	l := openTestLog(b, OS, tmpl, cfg, true)
	rng := rand.New(rand.NewSource(1))
	value := make([]byte, 100)
	recs := make([]Record, 50)
	for i := 0; l.Size() < logBytes; i++ {
		for j := range recs {
			rng.Read(value[:16])
			recs[j] = Record{TimestampMs: 1_700_000_000_000, Key: []byte(fmt.Sprintf("key-%08d", rng.Intn(keys))), Value: append([]byte(nil), value...)}
		}
		_, err := l.AppendAsLeader(BuildBatch(recs, BatchOptions{Compression: codec}), 0, 1_700_000_000_000)
		require.NoError(b, err)
	}
	require.NoError(b, l.Roll())
	size := l.Size()
	require.NoError(b, l.Close())
	b.SetBytes(size)
	m := newOffsetMap(128 << 20)
	var cpu time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		dir := filepath.Join(b.TempDir(), "kv-0")
		copyDir(b, tmpl, dir)
		l := openTestLog(b, fs, dir, cfg, true)
		l.UpdateHighWatermark(l.LogEndOffset())
		b.StartTimer()
		cpu0 := cpuTime(b)
		_, cleaned, err := l.clean(context.Background(), m, -1, 1_700_000_000_000, nil)
		cpu += cpuTime(b) - cpu0
		b.StopTimer()
		require.NoError(b, err)
		require.True(b, cleaned)
		require.NoError(b, l.Close())
		b.StartTimer()
	}
	b.ReportMetric(float64(size)*float64(b.N)/1e6/cpu.Seconds(), "MB/cpu-s")
}

// cpuTime is the user plus system CPU time of the process so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	require.NoError(b, syscall.Getrusage(syscall.RUSAGE_SELF, &ru))
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func copyDir(b *testing.B, from, to string) {
	require.NoError(b, os.MkdirAll(to, 0o755))
	ents, err := os.ReadDir(from)
	require.NoError(b, err)
	for _, e := range ents {
		src, err := os.Open(filepath.Join(from, e.Name()))
		require.NoError(b, err)
		dst, err := os.Create(filepath.Join(to, e.Name()))
		require.NoError(b, err)
		_, err = io.Copy(dst, src)
		require.NoError(b, err)
		require.NoError(b, src.Close())
		require.NoError(b, dst.Close())
	}
}

// BenchmarkCleaner: 128 MiB of uncompressed upserts over 100k keys.
func BenchmarkCleaner(b *testing.B) { benchmarkCleaner(b, OS, 100_000, CompressionNone) }

// BenchmarkCleanerNoFsync: BenchmarkCleaner without the fsyncs of the
// cleaned segments and the dir (the cleaner's own work).
func BenchmarkCleanerNoFsync(b *testing.B) {
	benchmarkCleaner(b, noSyncFS{OS}, 100_000, CompressionNone)
}

// BenchmarkCleanerFewKeysNoFsync: 128 MiB over 1k keys (almost everything
// goes), without fsyncs.
func BenchmarkCleanerFewKeysNoFsync(b *testing.B) {
	benchmarkCleaner(b, noSyncFS{OS}, 1000, CompressionNone)
}

// BenchmarkCleanerLZ4NoFsync: 128 MiB of lz4 batches over 100k keys,
// without fsyncs.
func BenchmarkCleanerLZ4NoFsync(b *testing.B) {
	benchmarkCleaner(b, noSyncFS{OS}, 100_000, CompressionLZ4)
}

// noSyncFS is OS without fsyncs: the cleaner's work without the disk's
// flush speed (which on a shared CI disk dominates the figure).
type noSyncFS struct{ FS }

type noSyncFile struct{ File }

func (f noSyncFile) Sync() error { return nil }

func (n noSyncFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	f, err := n.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return noSyncFile{f}, nil
}

func (noSyncFS) SyncDir(string) error { return nil }
