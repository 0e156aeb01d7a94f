package node

import (
	"sync/atomic"

	"github.com/faultline/faultline/broker/lifecycle"
)

// BrokerState is the broker's lifecycle state with Kafka's KRaft codes
// (org.apache.kafka.metadata.BrokerState), exported as the BrokerState
// metric. It is package lifecycle's type: the node sets the states of its
// startup and shutdown, the broker's heartbeats drive the others.
type BrokerState = lifecycle.BrokerState

// The states a node passes through: NOT_RUNNING →
// STARTING → RECOVERY → RUNNING, and on SIGTERM RUNNING →
// PENDING_CONTROLLED_SHUTDOWN → SHUTTING_DOWN → NOT_RUNNING.
const (
	StateNotRunning                = lifecycle.StateNotRunning
	StateStarting                  = lifecycle.StateStarting
	StateRecovery                  = lifecycle.StateRecovery
	StateRunning                   = lifecycle.StateRunning
	StatePendingControlledShutdown = lifecycle.StatePendingControlledShutdown
	StateShuttingDown              = lifecycle.StateShuttingDown
	StateUnknown                   = lifecycle.StateUnknown
)

// stateBox holds the current BrokerState for concurrent readers (the metrics
// endpoint reads it while the lifecycle goroutine writes it).
type stateBox struct{ v atomic.Int32 }

func (b *stateBox) get() BrokerState  { return BrokerState(b.v.Load()) }
func (b *stateBox) set(s BrokerState) { b.v.Store(int32(s)) }
