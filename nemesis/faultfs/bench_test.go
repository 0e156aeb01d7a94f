package faultfs

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// BenchmarkAppendFsync appends 4 KiB and fsyncs, the way a broker flushing
// every message writes its segment: on the fault filesystem and on its
// backing dir directly, and both in turn ("interleaved", which reports the
// cost ratio faultfs/backing as measured side by side, so that the noise of
// a shared disk falls on both alike). The target is a ratio of at most 2.
func BenchmarkAppendFsync(b *testing.B) {
	block := make([]byte, 4096)
	open := func(b *testing.B, dir string) *os.File {
		w, err := os.OpenFile(filepath.Join(dir, "00000000000000000000.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		require.NoError(b, err)
		b.Cleanup(func() { w.Close() })
		return w
	}
	appendFsync := func(b *testing.B, w *os.File) time.Duration {
		start := time.Now()
		if _, err := w.Write(block); err != nil {
			b.Fatal(err)
		}
		if err := w.Sync(); err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	}
	alone := func(dir func(*testing.B) string) func(*testing.B) {
		return func(b *testing.B) {
			w := open(b, dir(b))
			b.SetBytes(int64(len(block)))
			b.ResetTimer()
			for range b.N {
				appendFsync(b, w)
			}
		}
	}
	mountDir := func(b *testing.B) string {
		_, mnt, _ := mounted(b)
		return mnt
	}
	b.Run("backing", alone(func(b *testing.B) string { return b.TempDir() }))
	b.Run("faultfs", alone(mountDir))
	b.Run("interleaved", func(b *testing.B) {
		onMount, onBacking := open(b, mountDir(b)), open(b, b.TempDir())
		sideBySide(b, int64(len(block)), func() time.Duration { return appendFsync(b, onMount) },
			func() time.Duration { return appendFsync(b, onBacking) })
	})
}

// sideBySide runs onMount and onBacking in turn b.N times (each moving
// bytes) and reports the ratio of their total times as faultfs/backing.
func sideBySide(b *testing.B, bytes int64, onMount, onBacking func() time.Duration) {
	var mountTotal, backingTotal time.Duration
	b.SetBytes(2 * bytes)
	b.ResetTimer()
	for range b.N {
		mountTotal += onMount()
		backingTotal += onBacking()
	}
	b.ReportMetric(float64(mountTotal)/float64(backingTotal), "faultfs/backing")
}

// BenchmarkPowerLoss times a power loss (unmount, roll back, mount again)
// of a data dir with 16 segments holding 64 KiB of unsynced appends each.
func BenchmarkPowerLoss(b *testing.B) {
	f, mnt, _ := mounted(b)
	chunk := make([]byte, 64<<10)
	for range b.N {
		b.StopTimer()
		for i := range 16 {
			writeFile(b, filepath.Join(mnt, fmt.Sprintf("%020d.log", i)), chunk, false)
		}
		syncDir(b, mnt)
		b.StartTimer()
		if err := f.PowerLoss(PowerSpec{}); err != nil {
			b.Fatal(err)
		}
	}
}
