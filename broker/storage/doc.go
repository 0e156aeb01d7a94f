// Package storage is faultline's storage engine: Kafka's on-disk formats and
// the logic around them, byte for byte where Kafka defines them.
//
// What it provides:
//   - record batch v2 (BatchHeader, ParseBatchHeader, ValidateBatch with
//     CRC-32C, ForEachBatch, BuildBatch for internal writers, DecodeRecords
//     including gzip, snappy, lz4 and zstd batches);
//   - segments of a partition dir <topic>-<partition>: <20-digit base>.log,
//     .index (i32 relative offset, i32 position) and .timeindex (i64
//     timestamp, i32 relative offset), an index entry every
//     index.interval.bytes;
//   - Log: leader and follower appends (offset assignment, partition leader
//     epoch stamping, idempotent producer checks), reads, truncation, roll by
//     size and time, retention by time and size, flush policy, the leader
//     epoch cache (leader-epoch-checkpoint) and producer snapshots
//     (<offset>.snapshot, Kafka's v1 format, with each producer's open
//     transaction);
//   - transactions (txn.go): transactional batches open a producer's
//     transaction, AppendMarker writes COMMIT/ABORT control batches,
//     LastStableOffset, and the aborted-transactions index (.txnindex,
//     Kafka's 34-byte entries) that AbortedTxns answers from; the index and
//     the open transactions are rebuilt with the producer state from the
//     newest snapshot and the log after it (unclean start, truncation);
//     AppendAsCoordinator takes a coordinator's transactional batches
//     (no sequence, epoch checked);
//   - LogManager: loads every partition of every log dir, recovering after an
//     unclean shutdown (no .kafka_cleanshutdown marker) with
//     num.recovery.threads.per.data.dir workers per dir; writes the offset
//     checkpoints (recovery-point-offset-checkpoint,
//     replication-offset-checkpoint, log-start-offset-checkpoint) and the
//     marker at shutdown; its TruncateTo and TruncateFullyAndStartAt cut a
//     follower's log and checkpoint the recovery points of its dir at once;
//   - log dir failure (Kafka's LogDirFailureChannel): an I/O error or a
//     failed fsync in a log takes its whole dir offline (ErrLogDirOffline
//     for every later read and write of its logs, no new logs there, no
//     clean-shutdown marker), reported once through
//     ManagerOptions.OnDirOffline; a failed fsync is never retried
//     (fsyncgate). A write refused with ENOSPC is cut back whole and the
//     log serves again once there is space. Recovery after an unclean
//     start also checks the flushed segments below the recovery point and
//     cuts the log at the first corrupt batch. PreviousBrokerEpoch is the
//     epoch a restart offers, -1 unless every dir shut down cleanly;
//   - the log cleaner (cleaner.go: the pure decisions; cleaner_rewrite.go:
//     rewriting segments and the crash-safe .cleaned -> .swap -> rename
//     protocol, completed at load; cleaner_manager.go: the log.cleaner.*
//     threads and cleaner-offset-checkpoint): logs whose cleanup.policy
//     includes compact keep the last value per key below the high
//     watermark (the last stable offset once the log has one, through
//     Log.LastStableOffset) and outside the active segment, tombstones until
//     their delete horizon; LogManager.CleanOnce cleans now;
//   - meta.properties reading, writing and FormatLogDir for `format`;
//   - FS, the file-system interface all I/O goes through, with OS and
//     ErrorFS (fault injection for tests: EIO, torn and short writes, and
//     Crash, which drops every write not yet fsynced).
//
// How to use it: build a LogManager over the log dirs (options left at zero,
// and DefaultLogConfig, take Kafka's defaults from broker/config, the one
// package of the module it imports), call Load once, then GetOrCreateLog per
// partition; call RunBackground for the periodic
// checkpoints, retention, time-based flushes and the cleaner threads, and
// Shutdown on a controlled shutdown. Map errors to Kafka error codes with errors.Is against the
// exported sentinels (ErrOffsetOutOfRange, ErrCorruptBatch,
// ErrOutOfOrderSequence, ...).
//
// What it must never do: know about replication, the network or the
// metadata (the replica layer decides what to append and truncate; this
// package only keeps the log consistent); panic on bytes read from disk or
// received from a client; fsync on the append path unless flush.messages
// asks for it (Kafka leaves durability to replication and the OS).
//
// ManagerOptions.Unsafe plants durability bugs on purpose (broker/config's
// unsafe.* switches, for the harness's planted suite); its zero value, the
// only one a real deployment has, plants none.
package storage
