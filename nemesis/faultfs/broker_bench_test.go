package faultfs

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/faultline/faultline/broker/storage"
)

// The broker's own log on the fault filesystem, against the same log on a
// plain dir of the same disk (the peer: the cost without faultfs).

// brokerLog opens the log of partition bench-0 in a fresh log manager on
// dir, with flush.messages as given.
func brokerLog(b *testing.B, dir string, flushMessages int64) (*storage.LogManager, *storage.Log) {
	b.Helper()
	cfg := storage.DefaultLogConfig()
	cfg.FlushIntervalMessages = flushMessages
	m, err := storage.NewLogManager(storage.OS, []string{dir}, storage.ManagerOptions{DefaultLogConfig: cfg})
	require.NoError(b, err)
	_, err = m.Load()
	require.NoError(b, err)
	// Registered after the mount's cleanup, so it runs before the unmount.
	b.Cleanup(func() { closeLogs(m) })
	l, err := m.GetOrCreateLog(storage.TopicPartition{Topic: "bench", Partition: 0}, cfg)
	require.NoError(b, err)
	return m, l
}

// closeLogs closes every log of m without flushing (a Shutdown would
// fsync): the files must be closed before the mount that serves them goes
// (a process that exits holding a file open on a mount it serves itself
// hangs in its exit). Closing twice is harmless.
func closeLogs(m *storage.LogManager) {
	for _, l := range m.Logs() {
		_ = l.Close()
	}
}

// benchRecordBatch is one batch of n records of 1 KiB values, as a
// producer batches them.
func benchRecordBatch(n int) []byte {
	recs := make([]storage.Record, n)
	for i := range recs {
		recs[i] = storage.Record{TimestampMs: time.Now().UnixMilli(), Key: []byte(fmt.Sprint("key-", i)), Value: make([]byte, 1024)}
	}
	return storage.BuildBatch(recs, storage.BatchOptions{})
}

// BenchmarkBrokerAppendFsync: the broker's leader appends with
// log.flush.interval.messages=1 (an fsync per append, the durable
// configuration) of a 1-record 1 KiB batch, on the backing dir alone, on
// the fault filesystem alone, and on both in turn ("interleaved", which
// reports the ratio faultfs/backing measured side by side, so that the
// noise of a shared disk falls on both alike). The target is a
// ratio of at most 2.
func BenchmarkBrokerAppendFsync(b *testing.B) {
	batch := benchRecordBatch(1)
	appendOne := func(b *testing.B, l *storage.Log) time.Duration {
		start := time.Now()
		if _, err := l.AppendAsLeader(batch, 0, time.Now().UnixMilli()); err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	}
	onMount := func(b *testing.B) string {
		_, mnt, _ := mounted(b)
		return mnt
	}
	alone := func(dir func(*testing.B) string) func(*testing.B) {
		return func(b *testing.B) {
			_, l := brokerLog(b, dir(b), 1)
			b.SetBytes(int64(len(batch)))
			b.ResetTimer()
			for range b.N {
				appendOne(b, l)
			}
		}
	}
	b.Run("backing", alone(func(b *testing.B) string { return b.TempDir() }))
	b.Run("faultfs", alone(onMount))
	b.Run("interleaved", func(b *testing.B) {
		_, fl := brokerLog(b, onMount(b), 1)
		_, pl := brokerLog(b, b.TempDir(), 1)
		sideBySide(b, int64(len(batch)), func() time.Duration { return appendOne(b, fl) },
			func() time.Duration { return appendOne(b, pl) })
	})
}

// BenchmarkBrokerPowerLossRecovery times what a node goes through after a
// power cut under Kafka's default flush policy: a log of 8 MiB, the first
// half flushed, the second half appended unflushed, loses that half at the
// power loss (faultfs rolls the backing dir back and mounts again, the
// "power-loss-ms" metric), and the broker's log manager then loads the dir
// without a clean-shutdown marker and recovers the log ("recovery-ms":
// every batch after the recovery point validated, the tail cut). ns/op is
// the sum of both.
func BenchmarkBrokerPowerLossRecovery(b *testing.B) {
	f, mnt, _ := mounted(b)
	dir := filepath.Join(mnt, "kafka")
	require.NoError(b, os.Mkdir(dir, 0o755))
	syncDir(b, mnt)
	batch := benchRecordBatch(16)
	const half = 4 << 20
	var powerTotal, recoveryTotal time.Duration
	for range b.N {
		b.StopTimer()
		m, l := brokerLog(b, dir, 1<<62)
		for l.Size() < half {
			_, err := l.AppendAsLeader(batch, 0, time.Now().UnixMilli())
			require.NoError(b, err)
		}
		require.NoError(b, l.Flush())
		flushed := l.LogEndOffset()
		for l.Size() < 2*half {
			_, err := l.AppendAsLeader(batch, 0, time.Now().UnixMilli())
			require.NoError(b, err)
		}
		closeLogs(m)
		b.StartTimer()
		start := time.Now()
		if err := f.PowerLoss(PowerSpec{}); err != nil {
			b.Fatal(err)
		}
		lost := time.Now()
		m, err := storage.NewLogManager(storage.OS, []string{dir}, storage.ManagerOptions{})
		require.NoError(b, err)
		b.Cleanup(func() { closeLogs(m) })
		stats, err := m.Load()
		require.NoError(b, err)
		done := time.Now()
		b.StopTimer()
		powerTotal += lost.Sub(start)
		recoveryTotal += done.Sub(lost)
		l, ok := m.GetLog(storage.TopicPartition{Topic: "bench", Partition: 0})
		require.True(b, ok)
		require.Equal(b, 1, stats.RecoveredLogs)
		require.Equal(b, flushed, l.LogEndOffset(), "the log recovers to what was flushed")
		// The next round starts from an empty dir.
		require.NoError(b, m.DeleteLog(storage.TopicPartition{Topic: "bench", Partition: 0}))
		closeLogs(m)
		b.StartTimer()
	}
	b.ReportMetric(float64(powerTotal.Milliseconds())/float64(b.N), "power-loss-ms")
	b.ReportMetric(float64(recoveryTotal.Microseconds())/1000/float64(b.N), "recovery-ms")
}
