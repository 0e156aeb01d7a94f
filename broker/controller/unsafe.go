package controller

// Unsafe holds the controller's planted bugs, broker/config's unsafe.*
// switches: deliberately unsafe decisions the harness's planted suite must
// catch. The zero value is the controller users run; each field changes
// one decision and nothing else.
type Unsafe struct {
	// ElectAnyReplica (unsafe.elect.any.replica): a leader election takes
	// the first live replica in replica order, in the ISR or not, whatever
	// unclean.leader.election.enable says (ClusterState.elect).
	ElectAnyReplica bool
	// UncleanRestartKeepsISR (unsafe.unclean.restart.keeps.isr): a broker
	// that registers a new incarnation (a restart, after a crash too) stays
	// in the ISRs and keeps the leaderships of its old incarnation
	// (ClusterState.RegisterBroker).
	UncleanRestartKeepsISR bool
}
