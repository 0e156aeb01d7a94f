package storage

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// benchBatch is a 16-record batch of 1 KiB values, about 16.6 KiB.
func benchBatch() []byte {
	recs := make([]Record, 16)
	for i := range recs {
		recs[i] = Record{TimestampMs: 1_700_000_000_000, Key: []byte(fmt.Sprintf("key-%d", i)), Value: make([]byte, 1024)}
	}
	return BuildBatch(recs, BatchOptions{})
}

func benchmarkAppend(b *testing.B, cfg LogConfig) {
	l := openTestLog(b, OS, b.TempDir(), cfg, true)
	defer l.Close()
	batch := benchBatch()
	b.SetBytes(int64(len(batch)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := l.AppendAsLeader(batch, 0, 1); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAppend: leader appends left to the page cache (Kafka's default
// flush policy).
func BenchmarkAppend(b *testing.B) { benchmarkAppend(b, DefaultLogConfig()) }

// BenchmarkAppendFsyncEachAppend: flush.messages=1, an fsync per append.
func BenchmarkAppendFsyncEachAppend(b *testing.B) {
	cfg := DefaultLogConfig()
	cfg.FlushIntervalMessages = 1
	benchmarkAppend(b, cfg)
}

// BenchmarkRecoveryScan: one thread recovering a page-cached 64 MiB segment
// (CRC-32C of every batch, index rebuild).
func BenchmarkRecoveryScan(b *testing.B) {
	dir := b.TempDir()
	cfg := DefaultLogConfig()
	l := openTestLog(b, OS, dir, cfg, true)
	batch := benchBatch()
	for l.Size() < 64<<20 {
		_, err := l.AppendAsLeader(batch, 0, 1)
		require.NoError(b, err)
	}
	s := l.active()
	b.SetBytes(s.size)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		cut, err := s.recover(true, nil)
		if err != nil || cut != 0 {
			b.Fatal(cut, err)
		}
	}
	b.StopTimer()
	require.NoError(b, l.Close())
}

// BenchmarkOpen1000PartitionsClean: LogManager.Load of 1000 partitions after
// a clean shutdown (num.recovery.threads.per.data.dir=1).
func BenchmarkOpen1000PartitionsClean(b *testing.B) {
	dir := b.TempDir()
	m, err := NewLogManager(OS, []string{dir}, ManagerOptions{})
	require.NoError(b, err)
	_, err = m.Load()
	require.NoError(b, err)
	batch := BuildBatch(records(10, "v", 1), BatchOptions{})
	for p := int32(0); p < 1000; p++ {
		l, err := m.GetOrCreateLog(TopicPartition{Topic: "bench", Partition: p}, DefaultLogConfig())
		require.NoError(b, err)
		_, err = l.AppendAsLeader(append([]byte(nil), batch...), 0, 1)
		require.NoError(b, err)
	}
	require.NoError(b, m.Shutdown(1))
	marker, err := os.ReadFile(filepath.Join(dir, CleanShutdownFile))
	require.NoError(b, err)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		m, err := NewLogManager(OS, []string{dir}, ManagerOptions{})
		require.NoError(b, err)
		stats, err := m.Load()
		if err != nil || stats.Logs != 1000 || stats.RecoveredLogs != 0 {
			b.Fatal(stats, err)
		}
		b.StopTimer()
		for _, l := range m.Logs() {
			require.NoError(b, l.Close())
		}
		require.NoError(b, os.WriteFile(filepath.Join(dir, CleanShutdownFile), marker, 0o644))
		b.StartTimer()
	}
}

// BenchmarkUncleanLoad: LogManager.Load after a crash of 8 partitions of
// 16 MiB each, with num.recovery.threads.per.data.dir=2 (every byte
// validated, every index rebuilt).
func BenchmarkUncleanLoad(b *testing.B) {
	dir := b.TempDir()
	m, err := NewLogManager(OS, []string{dir}, ManagerOptions{})
	require.NoError(b, err)
	_, err = m.Load()
	require.NoError(b, err)
	batch := benchBatch()
	var total int64
	for p := int32(0); p < 8; p++ {
		l, err := m.GetOrCreateLog(TopicPartition{Topic: "crash", Partition: p}, DefaultLogConfig())
		require.NoError(b, err)
		for l.Size() < 16<<20 {
			_, err := l.AppendAsLeader(batch, 0, 1)
			require.NoError(b, err)
		}
		total += l.Size()
		require.NoError(b, l.Close())
	}
	b.SetBytes(total)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		m, err := NewLogManager(OS, []string{dir}, ManagerOptions{RecoveryThreadsPerDataDir: 2})
		require.NoError(b, err)
		stats, err := m.Load()
		if err != nil || stats.RecoveredLogs != 8 {
			b.Fatal(stats, err)
		}
		b.StopTimer()
		for _, l := range m.Logs() {
			require.NoError(b, l.Close())
		}
		b.StartTimer()
	}
}

// BenchmarkAppendFsyncParallel: 16 producers with flush.messages=1 share
// fsyncs (group commit).
func BenchmarkAppendFsyncParallel(b *testing.B) {
	cfg := DefaultLogConfig()
	cfg.FlushIntervalMessages = 1
	l := openTestLog(b, OS, b.TempDir(), cfg, true)
	defer l.Close()
	template := benchBatch()
	b.SetBytes(int64(len(template)))
	b.SetParallelism(8)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		batch := append([]byte(nil), template...)
		for pb.Next() {
			if _, err := l.AppendAsLeader(batch, 0, 1); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
