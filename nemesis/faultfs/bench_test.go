package faultfs

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// BenchmarkAppendFsync appends 4 KiB and fsyncs, the way a broker flushing
// every message writes its segment: on the fault filesystem and on its
// backing dir directly. The ratio of the two ns/op is the filesystem's
// cost on fsync-heavy appends.
func BenchmarkAppendFsync(b *testing.B) {
	block := make([]byte, 4096)
	run := func(b *testing.B, dir string) {
		w, err := os.OpenFile(filepath.Join(dir, "00000000000000000000.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		require.NoError(b, err)
		defer w.Close()
		b.SetBytes(int64(len(block)))
		b.ResetTimer()
		for range b.N {
			if _, err := w.Write(block); err != nil {
				b.Fatal(err)
			}
			if err := w.Sync(); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("backing", func(b *testing.B) { run(b, b.TempDir()) })
	b.Run("faultfs", func(b *testing.B) {
		_, mnt, _ := mounted(b)
		run(b, mnt)
	})
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
