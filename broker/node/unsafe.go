package node

import (
	"github.com/faultline/faultline/broker/config"
	"github.com/faultline/faultline/broker/controller"
	"github.com/faultline/faultline/broker/group"
	"github.com/faultline/faultline/broker/replica"
	"github.com/faultline/faultline/broker/storage"
	"github.com/faultline/faultline/broker/txn"
)

// The planted bugs of each layer, from the unsafe.* switches of cfg (all
// false unless unsafe.enable=true let them load).

func storageUnsafe(cfg *config.Config) storage.Unsafe {
	return storage.Unsafe{
		RecoverySkipCRC:        cfg.Unsafe[config.UnsafeRecoverySkipCRC],
		IdempotenceOff:         cfg.Unsafe[config.UnsafeIdempotenceOff],
		AckBeforeFsync:         cfg.Unsafe[config.UnsafeAckBeforeFsync],
		IgnoreFsyncError:       cfg.Unsafe[config.UnsafeIgnoreFsyncError],
		FollowerSkipValidation: cfg.Unsafe[config.UnsafeFollowerSkipValidation],
		CleanerDropsLatest:     cfg.Unsafe[config.UnsafeCleanerDropsLatest],
		CleanerPastLSO:         cfg.Unsafe[config.UnsafeCleanerPastLSO],
		ProduceNoEpochFence:    cfg.Unsafe[config.UnsafeProduceNoEpochFence],
	}
}

func replicaUnsafe(cfg *config.Config) replica.Unsafe {
	return replica.Unsafe{
		AckBeforeISR:             cfg.Unsafe[config.UnsafeAckBeforeISR],
		HWFromLeaderLEO:          cfg.Unsafe[config.UnsafeHWFromLeaderLEO],
		SkipDivergenceTruncation: cfg.Unsafe[config.UnsafeSkipDivergenceTruncation],
		SkipEpochFencing:         cfg.Unsafe[config.UnsafeSkipEpochFencing],
		OffsetsUnreplicated:      cfg.Unsafe[config.UnsafeOffsetsUnreplicated],
		TxnMarkersBeforeDurable:  cfg.Unsafe[config.UnsafeTxnMarkersBeforeDurable],
		ReadCommittedPastLSO:     cfg.Unsafe[config.UnsafeReadCommittedPastLSO],
	}
}

func groupUnsafe(cfg *config.Config) group.Unsafe {
	return group.Unsafe{
		KeepAbortedOffsets: cfg.Unsafe[config.UnsafeTxnOffsetsKeptOnAbort],
	}
}

func txnUnsafe(cfg *config.Config) txn.Unsafe {
	return txn.Unsafe{
		InitKeepsOpen:          cfg.Unsafe[config.UnsafeTxnInitKeepsOpen],
		TakeoverCommitsAborts:  cfg.Unsafe[config.UnsafeTxnTakeoverCommitsAborts],
		TakeoverLeavesPrepared: cfg.Unsafe[config.UnsafeTxnTakeoverLeavesPrepared],
	}
}

func controllerUnsafe(cfg *config.Config) controller.Unsafe {
	return controller.Unsafe{
		ElectAnyReplica:        cfg.Unsafe[config.UnsafeElectAnyReplica],
		UncleanRestartKeepsISR: cfg.Unsafe[config.UnsafeUncleanRestartKeepsISR],
	}
}
