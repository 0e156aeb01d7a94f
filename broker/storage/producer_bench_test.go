package storage

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// BenchmarkProducerStateRebuild measures seed 002's rebuild of the
// producer state from the log, as after an unclean shutdown that left no
// usable snapshot: every producer snapshot is deleted before each
// iteration, so the whole log is replayed. The log holds about 64 MiB of
// idempotent batches from 1000 producers (with segment rolls every 8 MiB);
// SetBytes is the log's size, so MB/s is bytes of log per second.
func BenchmarkProducerStateRebuild(b *testing.B) {
	b.Run("16x1KiB", func(b *testing.B) { benchmarkProducerStateRebuild(b, 16, 1024) })
	b.Run("1x100B", func(b *testing.B) { benchmarkProducerStateRebuild(b, 1, 100) })
}

func benchmarkProducerStateRebuild(b *testing.B, perBatch, valueSize int) {
	dir := b.TempDir()
	cfg := DefaultLogConfig()
	cfg.SegmentBytes = 8 << 20
	l := openTestLog(b, OS, dir, cfg, true)
	defer l.Close()
	const producers = 1000
	seqs := make([]int32, producers)
	recs := make([]Record, perBatch)
	for i := range recs {
		recs[i] = Record{TimestampMs: 1_700_000_000_000, Key: []byte(fmt.Sprintf("key-%d", i)), Value: make([]byte, valueSize)}
	}
	for n := 0; l.Size() < 64<<20; n++ {
		p := n % producers
		batch := BuildBatch(recs, BatchOptions{Producer: &BatchProducer{ID: int64(1000 + p), Epoch: 0, BaseSequence: seqs[p]}})
		seqs[p] += int32(perBatch)
		_, err := l.AppendAsLeader(batch, 0, 1_700_000_000_000)
		require.NoError(b, err)
	}
	leo := l.LogEndOffset()
	b.SetBytes(l.Size())
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		snaps, err := listSnapshots(OS, dir)
		require.NoError(b, err)
		for _, o := range snaps {
			require.NoError(b, removeSnapshot(OS, dir, o))
		}
		b.StartTimer()
		l.mu.Lock()
		err = l.rebuildProducerState(leo, false)
		l.mu.Unlock()
		if err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	l.mu.Lock()
	defer l.mu.Unlock()
	require.Len(b, l.producers.producers, producers, "every producer is rebuilt")
}
