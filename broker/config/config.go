package config

import (
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
)

// Config is a validated broker configuration. Every field names its Kafka key
// and default; durations are in milliseconds. Build one with Load or FromMap,
// never by hand: the zero value has none of Kafka's defaults.
type Config struct {
	// Identity and roles.

	// NodeID is node.id (alias broker.id). Required; >= 0.
	NodeID int32
	// ProcessRoles is process.roles: "broker", "controller" or both, in the
	// order given. Required.
	ProcessRoles []string
	// BrokerRack is broker.rack. Default: empty (no rack).
	BrokerRack string

	// Listeners and quorum.

	// Listeners is listeners, the sockets to bind. Required for a broker;
	// a controller needs its controller listener here.
	Listeners []Listener
	// AdvertisedListeners is the effective advertised.listeners for clients
	// and other brokers: the listeners given there, or else listeners,
	// without the controller listeners. An empty Host means this machine's
	// host name.
	AdvertisedListeners []Listener
	// AdvertisedControllerListeners is the controller listeners a controller
	// advertises to the quorum: those in advertised.listeners, or else those
	// in listeners. Empty for a broker-only node.
	AdvertisedControllerListeners []Listener
	// ControllerListenerNames is controller.listener.names, upper-cased.
	// Required for the controller role.
	ControllerListenerNames []string
	// ListenerSecurityProtocolMap is the effective
	// listener.security.protocol.map (listener name -> protocol). Default:
	// PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL,
	// plus NAME:PLAINTEXT for each controller listener name when the map is
	// not set (as Kafka does). faultline serves PLAINTEXT only.
	ListenerSecurityProtocolMap map[string]string
	// InterBrokerListenerName is inter.broker.listener.name. Default: the
	// listener named by security.inter.broker.protocol (PLAINTEXT).
	InterBrokerListenerName string
	// ControllerQuorumVoters is controller.quorum.voters (id@host:port,...).
	// Default: empty. Either it or ControllerQuorumBootstrapServers is required.
	ControllerQuorumVoters []Voter
	// ControllerQuorumBootstrapServers is controller.quorum.bootstrap.servers
	// (host:port,...). Default: empty. Ignored when voters are set.
	ControllerQuorumBootstrapServers []HostPort
	// ControllerQuorumElectionTimeoutMs is controller.quorum.election.timeout.ms. Default 1000.
	ControllerQuorumElectionTimeoutMs int64
	// ControllerQuorumFetchTimeoutMs is controller.quorum.fetch.timeout.ms. Default 2000.
	ControllerQuorumFetchTimeoutMs int64
	// ControllerQuorumElectionBackoffMaxMs is controller.quorum.election.backoff.max.ms. Default 1000.
	ControllerQuorumElectionBackoffMaxMs int64
	// ControllerQuorumRequestTimeoutMs is controller.quorum.request.timeout.ms. Default 2000.
	ControllerQuorumRequestTimeoutMs int64
	// ControllerQuorumRetryBackoffMs is controller.quorum.retry.backoff.ms. Default 20.
	ControllerQuorumRetryBackoffMs int64
	// ControllerQuorumAppendLingerMs is controller.quorum.append.linger.ms. Default 25.
	ControllerQuorumAppendLingerMs int64
	// BrokerHeartbeatIntervalMs is broker.heartbeat.interval.ms. Default 2000.
	BrokerHeartbeatIntervalMs int64
	// BrokerSessionTimeoutMs is broker.session.timeout.ms. Default 9000.
	BrokerSessionTimeoutMs int64
	// InitialBrokerRegistrationTimeoutMs is initial.broker.registration.timeout.ms. Default 60000.
	InitialBrokerRegistrationTimeoutMs int64

	// Metadata log.

	// MetadataLogDir is the effective metadata.log.dir: as set, or else the
	// first of LogDirs.
	MetadataLogDir string
	// MetadataMaxIdleIntervalMs is metadata.max.idle.interval.ms. Default 500.
	MetadataMaxIdleIntervalMs int64
	// MetadataLogSegmentBytes is metadata.log.segment.bytes. Default 1073741824.
	MetadataLogSegmentBytes int32
	// MetadataLogSegmentMs is metadata.log.segment.ms. Default 604800000.
	MetadataLogSegmentMs int64
	// MetadataMaxRetentionBytes is metadata.max.retention.bytes. Default 104857600.
	MetadataMaxRetentionBytes int64
	// MetadataMaxRetentionMs is metadata.max.retention.ms. Default 604800000.
	MetadataMaxRetentionMs int64
	// MetadataLogMaxRecordBytesBetweenSnapshots is
	// metadata.log.max.record.bytes.between.snapshots. Default 20971520.
	MetadataLogMaxRecordBytesBetweenSnapshots int64
	// MetadataLogMaxSnapshotIntervalMs is metadata.log.max.snapshot.interval.ms. Default 3600000.
	MetadataLogMaxSnapshotIntervalMs int64

	// Logs (storage).

	// LogDirs is the effective log.dirs: as set, or else log.dir
	// (default /tmp/kafka-logs).
	LogDirs []string
	// NumRecoveryThreadsPerDataDir is num.recovery.threads.per.data.dir.
	// Default 2 (Kafka 4.x; 1 before).
	NumRecoveryThreadsPerDataDir int32
	// LogSegmentBytes is log.segment.bytes. Default 1073741824; >= 14
	// (Kafka 4.x demands >= 1048576; faultline keeps the older bound so tests
	// can roll tiny segments).
	LogSegmentBytes int32
	// LogRollMs is the effective log.roll.ms: as set, or else
	// log.roll.hours (default 168) in ms.
	LogRollMs int64
	// LogRollJitterMs is the effective log.roll.jitter.ms, or else
	// log.roll.jitter.hours (default 0) in ms.
	LogRollJitterMs int64
	// LogIndexIntervalBytes is log.index.interval.bytes. Default 4096.
	LogIndexIntervalBytes int32
	// LogIndexSizeMaxBytes is log.index.size.max.bytes. Default 10485760.
	LogIndexSizeMaxBytes int32
	// LogFlushIntervalMessages is log.flush.interval.messages.
	// Default 9223372036854775807 (never: the OS decides).
	LogFlushIntervalMessages int64
	// LogFlushIntervalMs is the effective log.flush.interval.ms: as set, or
	// else log.flush.scheduler.interval.ms.
	LogFlushIntervalMs int64
	// LogFlushSchedulerIntervalMs is log.flush.scheduler.interval.ms.
	// Default 9223372036854775807.
	LogFlushSchedulerIntervalMs int64
	// LogFlushOffsetCheckpointIntervalMs is log.flush.offset.checkpoint.interval.ms. Default 60000.
	LogFlushOffsetCheckpointIntervalMs int64
	// LogFlushStartOffsetCheckpointIntervalMs is
	// log.flush.start.offset.checkpoint.interval.ms. Default 60000.
	LogFlushStartOffsetCheckpointIntervalMs int64
	// LogRetentionMs is the effective retention time: log.retention.ms, else
	// log.retention.minutes, else log.retention.hours (default 168), in ms;
	// -1 (any negative value) means unlimited.
	LogRetentionMs int64
	// LogRetentionBytes is log.retention.bytes. Default -1 (unlimited).
	LogRetentionBytes int64
	// LogRetentionCheckIntervalMs is log.retention.check.interval.ms. Default 300000.
	LogRetentionCheckIntervalMs int64
	// LogCleanupPolicy is log.cleanup.policy. Default [delete]; "compact"
	// and "compact,delete" run the log cleaner (see TopicConfig).
	LogCleanupPolicy []string
	// LogCleanerEnable is log.cleaner.enable. Default true.
	LogCleanerEnable bool
	// LogCleanerThreads is log.cleaner.threads. Default 1.
	LogCleanerThreads int32
	// LogCleanerBackoffMs is log.cleaner.backoff.ms: how long a cleaner
	// thread sleeps when no log needs cleaning. Default 15000.
	LogCleanerBackoffMs int64
	// LogCleanerDedupeBufferSize is log.cleaner.dedupe.buffer.size: the
	// memory of the key -> offset maps of all cleaner threads together.
	// Default 134217728.
	LogCleanerDedupeBufferSize int64
	// LogMessageTimestampType is log.message.timestamp.type: CreateTime
	// (default) or LogAppendTime.
	LogMessageTimestampType string
	// LogMessageTimestampBeforeMaxMs is log.message.timestamp.before.max.ms.
	// Default 9223372036854775807.
	LogMessageTimestampBeforeMaxMs int64
	// LogMessageTimestampAfterMaxMs is log.message.timestamp.after.max.ms. Default 3600000.
	LogMessageTimestampAfterMaxMs int64
	// LogPreallocate is log.preallocate. Default false.
	LogPreallocate bool
	// LogSegmentDeleteDelayMs is log.segment.delete.delay.ms. Default 60000.
	LogSegmentDeleteDelayMs int64
	// MessageMaxBytes is message.max.bytes, the largest record batch.
	// Default 1048588.
	MessageMaxBytes int32
	// CompressionType is compression.type. Default "producer".
	CompressionType string

	// Topics and replication.

	// NumPartitions is num.partitions for auto-created topics. Default 1.
	NumPartitions int32
	// DefaultReplicationFactor is default.replication.factor. Default 1.
	DefaultReplicationFactor int32
	// MinInsyncReplicas is min.insync.replicas. Default 1.
	MinInsyncReplicas int32
	// UncleanLeaderElectionEnable is unclean.leader.election.enable. Default false.
	UncleanLeaderElectionEnable bool
	// AutoCreateTopicsEnable is auto.create.topics.enable. Default true.
	AutoCreateTopicsEnable bool
	// DeleteTopicEnable is delete.topic.enable. Default true.
	DeleteTopicEnable bool
	// AutoLeaderRebalanceEnable is auto.leader.rebalance.enable. Default true.
	AutoLeaderRebalanceEnable bool
	// LeaderImbalanceCheckIntervalMs is leader.imbalance.check.interval.seconds
	// (default 300) in ms.
	LeaderImbalanceCheckIntervalMs int64
	// ReplicaLagTimeMaxMs is replica.lag.time.max.ms. Default 30000.
	ReplicaLagTimeMaxMs int64
	// ReplicaFetchMaxBytes is replica.fetch.max.bytes. Default 1048576.
	ReplicaFetchMaxBytes int32
	// ReplicaFetchMinBytes is replica.fetch.min.bytes. Default 1.
	ReplicaFetchMinBytes int32
	// ReplicaFetchWaitMaxMs is replica.fetch.wait.max.ms. Default 500.
	ReplicaFetchWaitMaxMs int64
	// ReplicaFetchBackoffMs is replica.fetch.backoff.ms. Default 1000.
	ReplicaFetchBackoffMs int64
	// ReplicaFetchResponseMaxBytes is replica.fetch.response.max.bytes. Default 10485760.
	ReplicaFetchResponseMaxBytes int32
	// ReplicaSocketTimeoutMs is replica.socket.timeout.ms. Default 30000.
	ReplicaSocketTimeoutMs int64
	// ReplicaHighWatermarkCheckpointIntervalMs is
	// replica.high.watermark.checkpoint.interval.ms. Default 5000.
	ReplicaHighWatermarkCheckpointIntervalMs int64
	// NumReplicaFetchers is num.replica.fetchers. Default 1.
	NumReplicaFetchers int32
	// FetchMaxBytes is fetch.max.bytes, the cap on one fetch response. Default 57671680.
	FetchMaxBytes int32

	// Shutdown.

	// ControlledShutdownEnable is controlled.shutdown.enable. Default true.
	ControlledShutdownEnable bool
	// ControlledShutdownMaxRetries is controlled.shutdown.max.retries. Default 3.
	ControlledShutdownMaxRetries int32
	// ControlledShutdownRetryBackoffMs is controlled.shutdown.retry.backoff.ms. Default 5000.
	ControlledShutdownRetryBackoffMs int64

	// Network.

	// SocketRequestMaxBytes is socket.request.max.bytes: larger frames are
	// refused and the connection closed. Default 104857600.
	SocketRequestMaxBytes int32
	// SocketSendBufferBytes is socket.send.buffer.bytes (-1: OS default). Default 102400.
	SocketSendBufferBytes int32
	// SocketReceiveBufferBytes is socket.receive.buffer.bytes (-1: OS default). Default 102400.
	SocketReceiveBufferBytes int32
	// SocketListenBacklogSize is socket.listen.backlog.size. Default 50.
	SocketListenBacklogSize int32
	// ConnectionsMaxIdleMs is connections.max.idle.ms. Default 600000.
	ConnectionsMaxIdleMs int64
	// NumNetworkThreads is num.network.threads. Default 3. Accepted; Go
	// serves each connection on its own goroutine.
	NumNetworkThreads int32
	// NumIoThreads is num.io.threads. Default 8. Accepted, as above.
	NumIoThreads int32
	// QueuedMaxRequests is queued.max.requests. Default 500.
	QueuedMaxRequests int32

	// Consumer groups and offsets.

	// OffsetsTopicReplicationFactor is offsets.topic.replication.factor. Default 3.
	OffsetsTopicReplicationFactor int16
	// OffsetsTopicNumPartitions is offsets.topic.num.partitions. Default 50.
	OffsetsTopicNumPartitions int32
	// OffsetsTopicSegmentBytes is offsets.topic.segment.bytes. Default 104857600.
	OffsetsTopicSegmentBytes int32
	// OffsetsRetentionMs is offsets.retention.minutes (default 10080) in ms.
	OffsetsRetentionMs int64
	// OffsetsRetentionCheckIntervalMs is offsets.retention.check.interval.ms. Default 600000.
	OffsetsRetentionCheckIntervalMs int64
	// OffsetsCommitTimeoutMs is offsets.commit.timeout.ms. Default 5000.
	OffsetsCommitTimeoutMs int64
	// OffsetMetadataMaxBytes is offset.metadata.max.bytes. Default 4096.
	OffsetMetadataMaxBytes int32
	// GroupInitialRebalanceDelayMs is group.initial.rebalance.delay.ms. Default 3000.
	GroupInitialRebalanceDelayMs int64
	// GroupMinSessionTimeoutMs is group.min.session.timeout.ms. Default 6000.
	GroupMinSessionTimeoutMs int64
	// GroupMaxSessionTimeoutMs is group.max.session.timeout.ms. Default 1800000.
	GroupMaxSessionTimeoutMs int64
	// GroupMaxSize is group.max.size. Default 2147483647.
	GroupMaxSize int32

	// Transactions and producer ids.

	// TransactionStateLogReplicationFactor is transaction.state.log.replication.factor. Default 3.
	TransactionStateLogReplicationFactor int16
	// TransactionStateLogNumPartitions is transaction.state.log.num.partitions. Default 50.
	TransactionStateLogNumPartitions int32
	// TransactionStateLogMinIsr is transaction.state.log.min.isr. Default 2.
	TransactionStateLogMinIsr int32
	// TransactionStateLogSegmentBytes is transaction.state.log.segment.bytes. Default 104857600.
	TransactionStateLogSegmentBytes int32
	// TransactionalIDExpirationMs is transactional.id.expiration.ms. Default 604800000.
	TransactionalIDExpirationMs int64
	// TransactionMaxTimeoutMs is transaction.max.timeout.ms. Default 900000.
	TransactionMaxTimeoutMs int64
	// TransactionAbortTimedOutTransactionCleanupIntervalMs is
	// transaction.abort.timed.out.transaction.cleanup.interval.ms. Default 10000.
	TransactionAbortTimedOutTransactionCleanupIntervalMs int64
	// TransactionRemoveExpiredTransactionCleanupIntervalMs is
	// transaction.remove.expired.transaction.cleanup.interval.ms. Default 3600000.
	TransactionRemoveExpiredTransactionCleanupIntervalMs int64
	// TransactionPartitionVerificationEnable is
	// transaction.partition.verification.enable. Default true.
	TransactionPartitionVerificationEnable bool
	// ProducerIDExpirationMs is producer.id.expiration.ms. Default 86400000.
	ProducerIDExpirationMs int64
	// ProducerIDExpirationCheckIntervalMs is producer.id.expiration.check.interval.ms. Default 600000.
	ProducerIDExpirationCheckIntervalMs int64

	// faultline's own keys.

	// MetricsAddress is faultline.metrics.address, host:port of the
	// Prometheus /metrics endpoint. Default: empty (disabled).
	MetricsAddress string
	// TransactionVersion is faultline.transaction.version, the
	// transaction.version feature level (KIP-890) the broker finalizes in
	// ApiVersions: 2 (default, as Kafka 4 formats new clusters) lets
	// clients add partitions through Produce v12 and end each transaction
	// with an epoch bump (EndTxn v5); 0 advertises no feature, and clients
	// keep AddPartitionsToTxn and one epoch across transactions. Kafka
	// finalizes features cluster-wide; here every broker of a cluster must
	// be given the same level.
	TransactionVersion int16
	// Unsafe holds every unsafe.* switch the input set (see
	// UnsafeSwitches): deliberately unsafe switches for planted bugs. A
	// switch is true only with UnsafeEnable; the caller logs each at
	// startup (UnsafeWarnings). Never nil.
	Unsafe map[string]bool
	// UnsafeEnable is unsafe.enable: without it no unsafe switch loads.
	UnsafeEnable bool

	// values holds each known key's effective value as Entries reports it;
	// set marks the keys the input gave.
	values map[string]string
	set    map[string]bool
	// logDirsKey is the key LogDirs came from (log.dirs or log.dir), for
	// messages.
	logDirsKey string
}

// IsBroker reports whether process.roles includes broker.
func (c *Config) IsBroker() bool { return contains(c.ProcessRoles, roleBroker) }

// IsController reports whether process.roles includes controller.
func (c *Config) IsController() bool { return contains(c.ProcessRoles, roleController) }

// EnabledUnsafe lists the unsafe.* switches set to true, sorted, for the
// caller's startup log line.
func (c *Config) EnabledUnsafe() []string {
	var out []string
	for k, on := range c.Unsafe {
		if on {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// BrokerListeners are the listeners that serve clients and other brokers
// (every listener not named in controller.listener.names).
func (c *Config) BrokerListeners() []Listener {
	var out []Listener
	for _, l := range c.Listeners {
		if !contains(c.ControllerListenerNames, l.Name) {
			out = append(out, l)
		}
	}
	return out
}

// ControllerListeners are the listeners that serve the controller quorum.
func (c *Config) ControllerListeners() []Listener {
	var out []Listener
	for _, l := range c.Listeners {
		if contains(c.ControllerListenerNames, l.Name) {
			out = append(out, l)
		}
	}
	return out
}

// Error is every problem found in a configuration, one line each
// ("key: what is wrong; what to do").
type Error struct {
	Problems []string
}

func (e *Error) Error() string { return strings.Join(e.Problems, "\n") }

// Load reads a server.properties file and validates it. Warnings (unknown
// keys, a key given twice, risky combinations) never stop a start; the error,
// an *Error unless the file could not be read, lists every problem.
// Load does not touch the data dirs: call CheckDirs for that.
func Load(path string) (*Config, []string, error) {
	return LoadWithOverrides(path, nil)
}

// LoadWithOverrides is Load with some keys replaced after the file is read,
// as kafka-server-start.sh --override key=value does.
func LoadWithOverrides(path string, overrides map[string]string) (*Config, []string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, fmt.Errorf("read config: %w", err)
	}
	defer f.Close()
	props, err := ParsePropertiesOrdered(f)
	if err != nil {
		return nil, nil, fmt.Errorf("read config %s: %w", path, err)
	}
	m := make(map[string]string, len(props)+len(overrides))
	firstLine := make(map[string]int, len(props))
	var warnings []string
	for _, p := range props {
		if first, dup := firstLine[p.Key]; dup {
			warnings = append(warnings, fmt.Sprintf("%s: set on line %d and again on line %d; the last value wins", p.Key, first, p.Line))
		} else {
			firstLine[p.Key] = p.Line
		}
		m[p.Key] = p.Value
	}
	for k, v := range overrides {
		m[k] = v
	}
	c, more, err := FromMap(m)
	warnings = append(warnings, more...)
	return c, warnings, err
}

// FromMap validates a key/value map (as ParseProperties returns) into a
// Config. It reports every problem at once in an *Error; the Config is nil
// when there is any. Values are trimmed, as Kafka trims them.
func FromMap(m map[string]string) (*Config, []string, error) {
	l := newLoader(m)
	l.run()
	if len(l.problems) > 0 {
		return nil, l.warnings, &Error{Problems: l.problems}
	}
	return l.c, l.warnings, nil
}

// asError returns problems as an *Error, or nil when there are none.
func asError(problems []string) error {
	if len(problems) == 0 {
		return nil
	}
	return &Error{Problems: problems}
}

// Problems returns the problem lines of err when it is an *Error, else
// err's text as one line.
func Problems(err error) []string {
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Problems
	}
	return []string{err.Error()}
}
