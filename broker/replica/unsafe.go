package replica

// Unsafe holds the replication layer's planted bugs, broker/config's
// unsafe.* switches: deliberately unsafe decisions the harness's planted
// suite must catch. The zero value is the broker users run; each field
// changes one decision and nothing else.
type Unsafe struct {
	// AckBeforeISR (unsafe.ack.before.isr): an acks=all produce is
	// answered right after the leader's append, without waiting for the
	// high watermark to pass it (Manager.Produce).
	AckBeforeISR bool
	// HWFromLeaderLEO (unsafe.hw.from.leader.leo): the high watermark
	// moves to the leader's log end, whatever the ISR members hold
	// (State.maybeAdvanceHW).
	HWFromLeaderLEO bool
	// SkipDivergenceTruncation (unsafe.skip.divergence.truncation): a
	// follower's fetch never names the last epoch in its log, so the
	// leader never tells it where its log diverged and a divergent tail
	// stays (Manager.FollowerPosition).
	SkipDivergenceTruncation bool
	// SkipEpochFencing (unsafe.skip.epoch.fencing): a leader puts the ISR
	// change it proposes in force at once instead of when the controller
	// commits it (State.Propose). The controller is what fences a deposed
	// leader: it refuses the AlterPartition of an old leader epoch, and a
	// leader cut off from it cannot shrink its ISR, so its high watermark
	// stops. With the switch, a leader cut off from the controller with one
	// follower drops the others from its ISR and acknowledges acks=all
	// writes that the leader elected meanwhile never gets (a zombie leader).
	SkipEpochFencing bool
	// OffsetsUnreplicated (unsafe.offsets.unreplicated): the broker's own
	// writes (consumer offsets in __consumer_offsets) are acknowledged
	// after the leader's append, as acks=1 (Manager.AppendInternal).
	OffsetsUnreplicated bool
	// TxnMarkersBeforeDurable (unsafe.txn.markers.before.durable): an
	// acks=all produce of a transactional batch is answered after the
	// leader's append, its durability left to the commit marker
	// (Manager.Produce). The producer then ends its transaction while the
	// data is on the leader alone, and the coordinator writes the markers
	// and answers EndTxn with it so: a leader that is cut off or killed
	// takes committed data with it, and the marker lands on a successor
	// that never had the data.
	TxnMarkersBeforeDurable bool
	// ReadCommittedPastLSO (unsafe.read.committed.past.lso): a
	// read_committed fetch is bounded by the high watermark instead of the
	// last stable offset (Manager.Fetch), so consumers get the records of
	// open transactions, which the aborted-transactions list cannot name
	// yet: aborted and uncommitted reads (G1a).
	ReadCommittedPastLSO bool
}
