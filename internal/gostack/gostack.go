// Package gostack grows a new goroutine's stack in one step, before it
// runs deep.
//
// A goroutine starts with a small stack and the runtime doubles it each
// time a call does not fit, copying every frame in use. A goroutine
// started per request or per partition (the broker's request handlers,
// its per-partition produce, a transaction's markers) that runs into a
// deep call chain (the storage append under the replica manager under
// the server) pays that copy two or three times, deep in the chain. In
// BenchmarkTransactions about a tenth of the broker's CPU went to those
// copies (11% of the samples under runtime.copystack); with Reserve in
// the request, per-partition and marker goroutines it was 6%, most of it
// the reserve's own allocation. Reserve, called first thing in such a
// goroutine, grows the stack while it holds one frame, so the copy is of
// almost nothing (BenchmarkDeepGoroutine: about half the cost of a
// goroutine that runs 12 KiB deep).
package gostack

import "runtime"

// reserveBytes makes the stack 16 KiB, the largest size the runtime
// keeps in its per-processor stack cache (a 32 KiB stack comes from a
// shared pool, under a lock); the produce path (server, replica manager,
// storage append, batch parsing) mostly runs within it.
const reserveBytes = 12 << 10

// Reserve grows the calling goroutine's stack to hold at least
// reserveBytes more. It costs one stack allocation when the stack is
// smaller; once it is large enough, only the zeroing of its frame.
//
//go:noinline
func Reserve() {
	var pad [reserveBytes]byte
	pad[0] = 1
	runtime.KeepAlive(&pad)
}
