package workloads

import (
	"context"

	"github.com/faultline/faultline/checker"
)

// Client turns operations into calls on the system under test. One Client
// serves one process; a process whose operation ended info is retired and
// its Client closed, and a fresh process gets a new Client (Jepsen's rule).
type Client interface {
	// Invoke performs op (type invoke) and returns its completion: the same
	// operation with type ok, fail or info and the observed values filled in.
	// Invoke must return by ctx's deadline; a timed-out write is info.
	Invoke(ctx context.Context, op checker.Op) checker.Op
	// Close releases the client's connections.
	Close()
}

// Generator produces the operations of a test, Jepsen-style: Next hands
// out the next operation for a process (or false when it has none now), and
// Update tells the generator how each operation completed. Generators are
// deterministic functions of their seed and of the completions they see.
type Generator interface {
	Next(process int) (checker.Op, bool)
	Update(completion checker.Op)
}

// NoopClient completes every operation as ok without doing anything; it is
// the client of harness self-tests.
type NoopClient struct{}

// Invoke completes op as ok.
func (NoopClient) Invoke(_ context.Context, op checker.Op) checker.Op {
	op.Type = checker.OK
	return op
}

// Close does nothing.
func (NoopClient) Close() {}
