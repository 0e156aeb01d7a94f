package gostack

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
)

// deep recurses n frames of about 512 bytes each, as a request handler's
// call chain does, and returns a value that depends on every frame.
//
//go:noinline
func deep(n int) int {
	var frame [64]int64
	frame[n%64] = int64(n)
	if n == 0 {
		return int(frame[0])
	}
	return deep(n-1) + int(frame[n%64]&1)
}

// TestReserveStaysOnTheStack: the reserve is a stack frame, never a heap
// allocation, and a goroutine that reserved still runs a deep chain.
func TestReserveStaysOnTheStack(t *testing.T) {
	assert.Zero(t, testing.AllocsPerRun(100, Reserve))
	var got int
	var wg sync.WaitGroup
	wg.Go(func() {
		Reserve()
		got = deep(20)
	})
	wg.Wait()
	assert.Equal(t, deep(20), got)
}

// BenchmarkDeepGoroutine: a goroutine per op running a chain of about
// 20 KiB of frames, with and without Reserve first. Compare with
//
//	go test -run '^$' -bench DeepGoroutine -count 6 ./internal/gostack | tee stack.txt
//	go run golang.org/x/perf/cmd/benchstat@latest -col /reserve stack.txt
func BenchmarkDeepGoroutine(b *testing.B) {
	for _, reserve := range []bool{false, true} {
		name := "reserve=false"
		if reserve {
			name = "reserve=true"
		}
		b.Run(name, func(b *testing.B) {
			var wg sync.WaitGroup
			for b.Loop() {
				wg.Go(func() {
					if reserve {
						Reserve()
					}
					deep(20)
				})
				wg.Wait()
			}
		})
	}
}
