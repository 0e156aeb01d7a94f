package storage

// Unsafe holds the storage layer's planted bugs, broker/config's unsafe.*
// switches: deliberately unsafe decisions the harness's planted suite must
// catch. The zero value is the broker users run; each field changes one
// decision and nothing else.
type Unsafe struct {
	// RecoverySkipCRC (unsafe.recovery.skip.crc): recovery after an
	// unclean shutdown scans batches without checking their CRC
	// (Log.recoverSegments), so a bit flip survives it.
	RecoverySkipCRC bool
	// IdempotenceOff (unsafe.idempotence.off): a batch that repeats one of
	// its producer's last five is appended again instead of answered with
	// the original offsets (Log.appendAsLeader).
	IdempotenceOff bool
	// AckBeforeFsync (unsafe.ack.before.fsync): an append that
	// flush.messages asks to fsync returns before the fsync, which runs in
	// the background (Log.AppendAsLeader).
	AckBeforeFsync bool
	// IgnoreFsyncError (unsafe.ignore.fsync.error): a failed fsync is
	// treated as a successful one, and the recovery point moves over what
	// it failed to make durable (Log.syncTo).
	IgnoreFsyncError bool
	// FollowerSkipValidation (unsafe.follower.skip.validation): a follower
	// appends the leader's batches after reading their headers, without
	// checking their CRC (Log.parseForAppend).
	FollowerSkipValidation bool
	// CleanerDropsLatest (unsafe.cleaner.drops.latest): in a log recovered
	// after an unclean shutdown, the cleaner drops each key's latest
	// record of the cleaned range as well as the older ones
	// (cleanPass.unsafeDropsLatest), so a key not written again loses its
	// latest value.
	CleanerDropsLatest bool
	// CleanerPastLSO (unsafe.cleaner.past.lso): the cleaner's range ends
	// at the high watermark instead of the last stable offset, and the
	// pass does not stop at the first transaction it finds undecided
	// (Log.cleanerState, cleanPass.buildOffsetMap): its checkpoint moves
	// past records whose transaction it could not decide, and a later
	// pass, which starts there, never learns that they were aborted
	// (the suite sees aborted values read as committed, and a key's
	// committed latest value lost).
	CleanerPastLSO bool
	// ProduceNoEpochFence (unsafe.produce.no.epoch.fence): a batch from an
	// older epoch of a producer than the partition has seen is appended
	// as a new one (no sequence or duplicate check) instead of refused
	// with INVALID_PRODUCER_EPOCH (producerAppend.check), so a zombie
	// producer's late send, after its successor's InitProducerId fenced
	// it, opens a transaction in the partition that no coordinator will
	// end (the last stable offset stays below it) or that its
	// successor's next marker there ends. Nothing else changes: the
	// producer's epoch and remembered batches stay its successor's
	// (producerAppend.record). A restart rebuilds the state from the
	// log, where the batch is.
	ProduceNoEpochFence bool
}
