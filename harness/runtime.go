package harness

import (
	"context"
	"errors"
)

// ErrUnsupported is returned (wrapped) by a runtime asked for a fault it
// cannot honestly make, e.g. a network partition between local processes
// without root.
var ErrUnsupported = errors.New("not supported by this runtime")

// Node is one broker node as the harness addresses it.
type Node struct {
	Name string // n1..nK
	ID   int32  // node.id
	// Addr is host:port of the client listener, reachable from the harness.
	Addr string
	// Controller is true when the node votes in the controller quorum.
	Controller bool
	// Broker is true when the node serves clients.
	Broker bool
}

// Runtime starts and stops nodes and makes faults real. It is Jepsen's DB
// plus the OS-level half of the nemesis: a Docker runtime (containers on a
// private network) and a process runtime (local child processes on
// 127.0.0.x) implement it.
type Runtime interface {
	// Setup creates, formats and starts every node of the cluster.
	Setup(ctx context.Context, c Cluster) ([]Node, error)
	// Kill sends SIGKILL to a node's broker process (kill -9).
	Kill(ctx context.Context, node string) error
	// Stop sends SIGTERM (a controlled shutdown) and waits for the exit.
	Stop(ctx context.Context, node string) error
	// Start restarts a stopped or killed node on its own data.
	Start(ctx context.Context, node string) error
	// Pause and Resume send SIGSTOP and SIGCONT.
	Pause(ctx context.Context, node string) error
	Resume(ctx context.Context, node string) error
	// Isolate makes node drop every packet from the nodes in from; an
	// empty from heals node.
	Isolate(ctx context.Context, node string, from []string) error
	// Running reports whether a node's process is up.
	Running(ctx context.Context, node string) (bool, error)
	// Teardown stops every node and removes what Setup created. Each
	// node's output is in <run dir>/nodes/<node>/broker.log, written while
	// the node runs.
	Teardown(ctx context.Context) error
}
