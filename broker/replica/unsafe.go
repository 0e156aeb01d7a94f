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
	// SkipEpochFencing (unsafe.skip.epoch.fencing): a follower applies the
	// answer to a fetch it made at a leader epoch it no longer follows,
	// records of a deposed leader included (Manager.ApplyFetchResponse).
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
