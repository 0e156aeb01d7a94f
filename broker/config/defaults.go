package config

import "math"

// Kafka's defaults of the keys whose settings other broker packages also
// fill in when their caller leaves them at zero. The key table parses these
// same constants, so each of these defaults is written here only: a package
// that needs one imports it rather than repeating the number. Durations are
// milliseconds; a key given in hours has its effective value in ms too.
const (
	// Logs.

	DefaultNumRecoveryThreadsPerDataDir = 2
	DefaultLogSegmentBytes              = 1 << 30
	DefaultLogRollHours                 = 168
	DefaultLogRollMs                    = DefaultLogRollHours * msPerHour
	DefaultLogIndexIntervalBytes        = 4096
	DefaultLogIndexSizeMaxBytes         = 10 << 20
	DefaultLogFlushIntervalMessages     = math.MaxInt64
	DefaultLogFlushSchedulerIntervalMs  = math.MaxInt64
	// DefaultLogFlushOffsetCheckpointIntervalMs is also the default of
	// log.flush.start.offset.checkpoint.interval.ms.
	DefaultLogFlushOffsetCheckpointIntervalMs = 60000
	DefaultLogRetentionHours                  = 168
	DefaultLogRetentionMs                     = DefaultLogRetentionHours * msPerHour
	DefaultLogRetentionBytes                  = -1
	DefaultLogRetentionCheckIntervalMs        = 300000
	DefaultLogCleanupPolicy                   = "delete"
	DefaultLogMessageTimestampType            = "CreateTime"
	DefaultLogMessageTimestampBeforeMaxMs     = math.MaxInt64
	DefaultLogMessageTimestampAfterMaxMs      = 3600000
	DefaultMessageMaxBytes                    = 1048588
	DefaultCompressionType                    = "producer"

	// Log cleaner (compaction).

	DefaultLogCleanerThreads            = 1
	DefaultLogCleanerBackoffMs          = 15000
	DefaultLogCleanerDedupeBufferSize   = 128 << 20
	DefaultLogCleanerDeleteRetentionMs  = 86400000
	DefaultLogCleanerMinCompactionLagMs = 0
	DefaultLogCleanerMinCleanableRatio  = 0.5

	// Replication.

	DefaultReplicaLagTimeMaxMs                      = 30000
	DefaultReplicaFetchMaxBytes                     = 1 << 20
	DefaultReplicaFetchWaitMaxMs                    = 500
	DefaultReplicaFetchBackoffMs                    = 1000
	DefaultReplicaFetchResponseMaxBytes             = 10 << 20
	DefaultReplicaHighWatermarkCheckpointIntervalMs = 5000

	// Controller quorum and broker sessions.

	DefaultControllerQuorumElectionTimeoutMs = 1000
	DefaultBrokerHeartbeatIntervalMs         = 2000
	DefaultBrokerSessionTimeoutMs            = 9000

	// Network.

	DefaultSocketRequestMaxBytes = 100 << 20

	// Consumer groups and offsets.

	DefaultOffsetsTopicNumPartitions    = 50
	DefaultOffsetsCommitTimeoutMs       = 5000
	DefaultOffsetMetadataMaxBytes       = 4096
	DefaultGroupInitialRebalanceDelayMs = 3000
	DefaultGroupMinSessionTimeoutMs     = 6000
	DefaultGroupMaxSessionTimeoutMs     = 1800000
	DefaultGroupMaxSize                 = math.MaxInt32

	// Producer ids.

	DefaultProducerIDExpirationMs = 86400000
)

// Units of the keys given in seconds, minutes or hours.
const (
	msPerSecond = 1000
	msPerMinute = 60 * msPerSecond
	msPerHour   = 60 * msPerMinute
)
