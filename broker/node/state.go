package node

import (
	"sync/atomic"

	"github.com/faultline/faultline/broker/controller"
)

// BrokerState is the broker's lifecycle state with Kafka's KRaft codes
// (org.apache.kafka.metadata.BrokerState), exported as the BrokerState
// metric. It is the broker lifecycle's own type (broker/controller), so the
// state a cluster node's heartbeats drive and the one a single node sets
// are the same values.
type BrokerState = controller.BrokerState

// The states a node passes through. A single node goes NOT_RUNNING →
// STARTING → RECOVERY → RUNNING, and on SIGTERM RUNNING →
// PENDING_CONTROLLED_SHUTDOWN → SHUTTING_DOWN → NOT_RUNNING.
const (
	StateNotRunning                = controller.StateNotRunning
	StateStarting                  = controller.StateStarting
	StateRecovery                  = controller.StateRecovery
	StateRunning                   = controller.StateRunning
	StatePendingControlledShutdown = controller.StatePendingControlledShutdown
	StateShuttingDown              = controller.StateShuttingDown
	StateUnknown                   = controller.StateUnknown
)

// stateBox holds the current BrokerState for concurrent readers (the metrics
// endpoint reads it while the lifecycle goroutine writes it).
type stateBox struct{ v atomic.Int32 }

func (b *stateBox) get() BrokerState  { return BrokerState(b.v.Load()) }
func (b *stateBox) set(s BrokerState) { b.v.Store(int32(s)) }
