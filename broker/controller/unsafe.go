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
	// UncleanRestartKeepsISR (unsafe.unclean.restart.keeps.isr): a new
	// incarnation of a broker (a restart, after a crash or a power loss
	// too) is taken for the old one: it registers at once, without waiting
	// for the old incarnation's session to expire when its previous broker
	// epoch says nothing of a clean shutdown (Controller.registerChecked),
	// and stays in the ISRs and keeps the leaderships of the old
	// incarnation (ClusterState.RegisterBroker).
	UncleanRestartKeepsISR bool
}
