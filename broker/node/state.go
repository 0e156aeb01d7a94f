package node

import "sync/atomic"

// BrokerState is the broker's lifecycle state with Kafka's KRaft codes
// (org.apache.kafka.metadata.BrokerState), exported as the BrokerState
// metric.
type BrokerState int8

// The states a node passes through. A single node goes NOT_RUNNING →
// STARTING → RECOVERY → RUNNING, and on SIGTERM RUNNING →
// PENDING_CONTROLLED_SHUTDOWN → SHUTTING_DOWN → NOT_RUNNING.
const (
	StateNotRunning                BrokerState = 0
	StateStarting                  BrokerState = 1
	StateRecovery                  BrokerState = 2
	StateRunning                   BrokerState = 3
	StatePendingControlledShutdown BrokerState = 6
	StateShuttingDown              BrokerState = 7
	StateUnknown                   BrokerState = 127
)

func (s BrokerState) String() string {
	switch s {
	case StateNotRunning:
		return "NOT_RUNNING"
	case StateStarting:
		return "STARTING"
	case StateRecovery:
		return "RECOVERY"
	case StateRunning:
		return "RUNNING"
	case StatePendingControlledShutdown:
		return "PENDING_CONTROLLED_SHUTDOWN"
	case StateShuttingDown:
		return "SHUTTING_DOWN"
	default:
		return "UNKNOWN"
	}
}

// stateBox holds the current BrokerState for concurrent readers (the metrics
// endpoint reads it while the lifecycle goroutine writes it).
type stateBox struct{ v atomic.Int32 }

func (b *stateBox) get() BrokerState  { return BrokerState(b.v.Load()) }
func (b *stateBox) set(s BrokerState) { b.v.Store(int32(s)) }
