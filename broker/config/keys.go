package config

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// kind is a Kafka ConfigDef type.
type kind int

const (
	kindInt kind = iota
	kindLong
	kindShort
	kindBool
	kindString
	kindList
	kindDouble
)

const (
	roleBroker     = "broker"
	roleController = "controller"
)

// keyDef describes one known broker key: its Kafka type, default and bounds,
// and the Config field it fills (nil for keys faultline accepts and reports
// but does not act on).
type keyDef struct {
	name   string
	kind   kind
	def    string
	hasDef bool
	min    int64
	max    int64
	hasMin bool
	hasMax bool
	oneOf  []string
	// parse replaces kind-based parsing; its error text follows "key: ".
	parse func(string) (any, error)
	field func(*Config) any
}

func key(name string, k kind, def string, field func(*Config) any) keyDef {
	return keyDef{name: name, kind: k, def: def, hasDef: true, field: field}
}

// nullKey is a key without a default (Kafka's null).
func nullKey(name string, k kind, field func(*Config) any) keyDef {
	return keyDef{name: name, kind: k, field: field}
}

func (d keyDef) atLeast(n int64) keyDef { d.min, d.hasMin = n, true; return d }

func (d keyDef) between(lo, hi int64) keyDef {
	d.min, d.max, d.hasMin, d.hasMax = lo, hi, true, true
	return d
}

func (d keyDef) in(values ...string) keyDef { d.oneOf = values; return d }

func (d keyDef) parsedBy(f func(string) (any, error)) keyDef { d.parse = f; return d }

const (
	maxLong = "9223372036854775807"
	maxInt  = "2147483647"
)

// num is an integer default as the key table holds it, in text.
func num(n int64) string { return strconv.FormatInt(n, 10) }

// brokerKeys lists every broker key faultline knows, in the order problems
// and Entries are reported. A default that another package also applies is
// a constant of defaults.go.
var brokerKeys = []keyDef{
	// Identity and roles.
	nullKey("node.id", kindInt, func(c *Config) any { return &c.NodeID }).atLeast(0),
	nullKey("broker.id", kindInt, nil).atLeast(0),
	nullKey("process.roles", kindList, func(c *Config) any { return &c.ProcessRoles }).in(roleBroker, roleController),
	nullKey("broker.rack", kindString, func(c *Config) any { return &c.BrokerRack }),

	// Listeners and quorum.
	nullKey("listeners", kindList, func(c *Config) any { return &c.Listeners }).parsedBy(parseListeners),
	nullKey("advertised.listeners", kindList, nil).parsedBy(parseListeners),
	nullKey("controller.listener.names", kindList, nil),
	key("listener.security.protocol.map", kindList, "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL", nil).parsedBy(parseProtocolMap),
	nullKey("inter.broker.listener.name", kindString, nil),
	key("security.inter.broker.protocol", kindString, "PLAINTEXT", nil).in(securityProtocols...),
	key("controller.quorum.voters", kindList, "", func(c *Config) any { return &c.ControllerQuorumVoters }).parsedBy(parseVoters),
	key("controller.quorum.bootstrap.servers", kindList, "", func(c *Config) any { return &c.ControllerQuorumBootstrapServers }).parsedBy(parseHostPorts),
	key("controller.quorum.election.timeout.ms", kindInt, num(DefaultControllerQuorumElectionTimeoutMs), func(c *Config) any { return &c.ControllerQuorumElectionTimeoutMs }).atLeast(1),
	key("controller.quorum.fetch.timeout.ms", kindInt, "2000", func(c *Config) any { return &c.ControllerQuorumFetchTimeoutMs }).atLeast(1),
	key("controller.quorum.election.backoff.max.ms", kindInt, "1000", func(c *Config) any { return &c.ControllerQuorumElectionBackoffMaxMs }).atLeast(1),
	key("controller.quorum.request.timeout.ms", kindInt, "2000", func(c *Config) any { return &c.ControllerQuorumRequestTimeoutMs }).atLeast(1),
	key("controller.quorum.retry.backoff.ms", kindInt, "20", func(c *Config) any { return &c.ControllerQuorumRetryBackoffMs }).atLeast(0),
	key("controller.quorum.append.linger.ms", kindInt, "25", func(c *Config) any { return &c.ControllerQuorumAppendLingerMs }).atLeast(0),
	key("broker.heartbeat.interval.ms", kindInt, num(DefaultBrokerHeartbeatIntervalMs), func(c *Config) any { return &c.BrokerHeartbeatIntervalMs }).atLeast(1),
	key("broker.session.timeout.ms", kindInt, num(DefaultBrokerSessionTimeoutMs), func(c *Config) any { return &c.BrokerSessionTimeoutMs }).atLeast(1),
	key("initial.broker.registration.timeout.ms", kindInt, "60000", func(c *Config) any { return &c.InitialBrokerRegistrationTimeoutMs }).atLeast(1),

	// Metadata log.
	nullKey("metadata.log.dir", kindString, nil),
	key("metadata.max.idle.interval.ms", kindInt, "500", func(c *Config) any { return &c.MetadataMaxIdleIntervalMs }).atLeast(0),
	key("metadata.log.segment.bytes", kindInt, "1073741824", func(c *Config) any { return &c.MetadataLogSegmentBytes }).atLeast(12),
	key("metadata.log.segment.ms", kindLong, "604800000", func(c *Config) any { return &c.MetadataLogSegmentMs }).atLeast(1),
	key("metadata.max.retention.bytes", kindLong, "104857600", func(c *Config) any { return &c.MetadataMaxRetentionBytes }),
	key("metadata.max.retention.ms", kindLong, "604800000", func(c *Config) any { return &c.MetadataMaxRetentionMs }),
	key("metadata.log.max.record.bytes.between.snapshots", kindLong, "20971520", func(c *Config) any { return &c.MetadataLogMaxRecordBytesBetweenSnapshots }).atLeast(1),
	key("metadata.log.max.snapshot.interval.ms", kindLong, "3600000", func(c *Config) any { return &c.MetadataLogMaxSnapshotIntervalMs }).atLeast(0),

	// Logs.
	nullKey("log.dirs", kindList, nil),
	key("log.dir", kindString, "/tmp/kafka-logs", nil),
	key("num.recovery.threads.per.data.dir", kindInt, num(DefaultNumRecoveryThreadsPerDataDir), func(c *Config) any { return &c.NumRecoveryThreadsPerDataDir }).atLeast(1),
	key("log.segment.bytes", kindInt, num(DefaultLogSegmentBytes), func(c *Config) any { return &c.LogSegmentBytes }).atLeast(14),
	nullKey("log.roll.ms", kindLong, nil).atLeast(1),
	key("log.roll.hours", kindInt, num(DefaultLogRollHours), nil).atLeast(1),
	nullKey("log.roll.jitter.ms", kindLong, nil).atLeast(0),
	key("log.roll.jitter.hours", kindInt, "0", nil).atLeast(0),
	key("log.index.interval.bytes", kindInt, num(DefaultLogIndexIntervalBytes), func(c *Config) any { return &c.LogIndexIntervalBytes }).atLeast(0),
	key("log.index.size.max.bytes", kindInt, num(DefaultLogIndexSizeMaxBytes), func(c *Config) any { return &c.LogIndexSizeMaxBytes }).atLeast(4),
	key("log.flush.interval.messages", kindLong, num(DefaultLogFlushIntervalMessages), func(c *Config) any { return &c.LogFlushIntervalMessages }).atLeast(1),
	nullKey("log.flush.interval.ms", kindLong, nil).atLeast(0),
	key("log.flush.scheduler.interval.ms", kindLong, num(DefaultLogFlushSchedulerIntervalMs), func(c *Config) any { return &c.LogFlushSchedulerIntervalMs }).atLeast(0),
	key("log.flush.offset.checkpoint.interval.ms", kindInt, num(DefaultLogFlushOffsetCheckpointIntervalMs), func(c *Config) any { return &c.LogFlushOffsetCheckpointIntervalMs }).atLeast(0),
	key("log.flush.start.offset.checkpoint.interval.ms", kindInt, num(DefaultLogFlushOffsetCheckpointIntervalMs), func(c *Config) any { return &c.LogFlushStartOffsetCheckpointIntervalMs }).atLeast(0),
	nullKey("log.retention.ms", kindLong, nil).atLeast(-1),
	nullKey("log.retention.minutes", kindInt, nil).atLeast(-1),
	key("log.retention.hours", kindInt, num(DefaultLogRetentionHours), nil).atLeast(-1),
	key("log.retention.bytes", kindLong, num(DefaultLogRetentionBytes), func(c *Config) any { return &c.LogRetentionBytes }),
	key("log.retention.check.interval.ms", kindLong, num(DefaultLogRetentionCheckIntervalMs), func(c *Config) any { return &c.LogRetentionCheckIntervalMs }).atLeast(1),
	key("log.cleanup.policy", kindList, DefaultLogCleanupPolicy, func(c *Config) any { return &c.LogCleanupPolicy }).in("delete", "compact"),
	key("log.message.timestamp.type", kindString, DefaultLogMessageTimestampType, func(c *Config) any { return &c.LogMessageTimestampType }).in("CreateTime", "LogAppendTime"),
	key("log.message.timestamp.before.max.ms", kindLong, num(DefaultLogMessageTimestampBeforeMaxMs), func(c *Config) any { return &c.LogMessageTimestampBeforeMaxMs }).atLeast(0),
	key("log.message.timestamp.after.max.ms", kindLong, num(DefaultLogMessageTimestampAfterMaxMs), func(c *Config) any { return &c.LogMessageTimestampAfterMaxMs }).atLeast(0),
	key("log.preallocate", kindBool, "false", func(c *Config) any { return &c.LogPreallocate }),
	key("log.segment.delete.delay.ms", kindLong, "60000", func(c *Config) any { return &c.LogSegmentDeleteDelayMs }).atLeast(0),
	key("log.cleaner.enable", kindBool, "true", func(c *Config) any { return &c.LogCleanerEnable }),
	key("log.cleaner.threads", kindInt, num(DefaultLogCleanerThreads), func(c *Config) any { return &c.LogCleanerThreads }).atLeast(0),
	key("log.cleaner.backoff.ms", kindLong, num(DefaultLogCleanerBackoffMs), func(c *Config) any { return &c.LogCleanerBackoffMs }).atLeast(0),
	key("log.cleaner.dedupe.buffer.size", kindLong, num(DefaultLogCleanerDedupeBufferSize), func(c *Config) any { return &c.LogCleanerDedupeBufferSize }).atLeast(0),
	key("log.cleaner.delete.retention.ms", kindLong, num(DefaultLogCleanerDeleteRetentionMs), nil).atLeast(0),
	key("log.cleaner.min.compaction.lag.ms", kindLong, num(DefaultLogCleanerMinCompactionLagMs), nil).atLeast(0),
	key("log.cleaner.max.compaction.lag.ms", kindLong, maxLong, nil).atLeast(1),
	key("log.cleaner.min.cleanable.ratio", kindDouble, strconv.FormatFloat(DefaultLogCleanerMinCleanableRatio, 'g', -1, 64), nil),
	key("message.max.bytes", kindInt, num(DefaultMessageMaxBytes), func(c *Config) any { return &c.MessageMaxBytes }).atLeast(0),
	key("compression.type", kindString, DefaultCompressionType, func(c *Config) any { return &c.CompressionType }).in(compressionTypes...),

	// Topics and replication.
	key("num.partitions", kindInt, "1", func(c *Config) any { return &c.NumPartitions }).atLeast(1),
	key("default.replication.factor", kindInt, "1", func(c *Config) any { return &c.DefaultReplicationFactor }).between(1, math.MaxInt16),
	key("min.insync.replicas", kindInt, "1", func(c *Config) any { return &c.MinInsyncReplicas }).atLeast(1),
	key("unclean.leader.election.enable", kindBool, "false", func(c *Config) any { return &c.UncleanLeaderElectionEnable }),
	key("auto.create.topics.enable", kindBool, "true", func(c *Config) any { return &c.AutoCreateTopicsEnable }),
	key("delete.topic.enable", kindBool, "true", func(c *Config) any { return &c.DeleteTopicEnable }),
	key("auto.leader.rebalance.enable", kindBool, "true", func(c *Config) any { return &c.AutoLeaderRebalanceEnable }),
	key("leader.imbalance.check.interval.seconds", kindLong, "300", nil).atLeast(1),
	key("leader.imbalance.per.broker.percentage", kindInt, "10", nil),
	key("replica.lag.time.max.ms", kindLong, num(DefaultReplicaLagTimeMaxMs), func(c *Config) any { return &c.ReplicaLagTimeMaxMs }).atLeast(1),
	key("replica.fetch.max.bytes", kindInt, num(DefaultReplicaFetchMaxBytes), func(c *Config) any { return &c.ReplicaFetchMaxBytes }).atLeast(0),
	key("replica.fetch.min.bytes", kindInt, "1", func(c *Config) any { return &c.ReplicaFetchMinBytes }).atLeast(0),
	key("replica.fetch.wait.max.ms", kindInt, num(DefaultReplicaFetchWaitMaxMs), func(c *Config) any { return &c.ReplicaFetchWaitMaxMs }).atLeast(0),
	key("replica.fetch.backoff.ms", kindInt, num(DefaultReplicaFetchBackoffMs), func(c *Config) any { return &c.ReplicaFetchBackoffMs }).atLeast(0),
	key("replica.fetch.response.max.bytes", kindInt, num(DefaultReplicaFetchResponseMaxBytes), func(c *Config) any { return &c.ReplicaFetchResponseMaxBytes }).atLeast(0),
	key("replica.socket.timeout.ms", kindInt, "30000", func(c *Config) any { return &c.ReplicaSocketTimeoutMs }),
	key("replica.socket.receive.buffer.bytes", kindInt, "65536", nil),
	key("replica.high.watermark.checkpoint.interval.ms", kindLong, num(DefaultReplicaHighWatermarkCheckpointIntervalMs), func(c *Config) any { return &c.ReplicaHighWatermarkCheckpointIntervalMs }).atLeast(1),
	key("num.replica.fetchers", kindInt, "1", func(c *Config) any { return &c.NumReplicaFetchers }).atLeast(1),
	key("fetch.max.bytes", kindInt, "57671680", func(c *Config) any { return &c.FetchMaxBytes }).atLeast(1024),

	// Shutdown.
	key("controlled.shutdown.enable", kindBool, "true", func(c *Config) any { return &c.ControlledShutdownEnable }),
	key("controlled.shutdown.max.retries", kindInt, "3", func(c *Config) any { return &c.ControlledShutdownMaxRetries }).atLeast(0),
	key("controlled.shutdown.retry.backoff.ms", kindLong, "5000", func(c *Config) any { return &c.ControlledShutdownRetryBackoffMs }).atLeast(0),

	// Network.
	key("socket.request.max.bytes", kindInt, num(DefaultSocketRequestMaxBytes), func(c *Config) any { return &c.SocketRequestMaxBytes }).atLeast(1),
	key("socket.send.buffer.bytes", kindInt, "102400", func(c *Config) any { return &c.SocketSendBufferBytes }).atLeast(-1),
	key("socket.receive.buffer.bytes", kindInt, "102400", func(c *Config) any { return &c.SocketReceiveBufferBytes }).atLeast(-1),
	key("socket.listen.backlog.size", kindInt, "50", func(c *Config) any { return &c.SocketListenBacklogSize }).atLeast(1),
	key("connections.max.idle.ms", kindLong, "600000", func(c *Config) any { return &c.ConnectionsMaxIdleMs }),
	key("max.connections", kindInt, maxInt, nil).atLeast(0),
	key("max.connections.per.ip", kindInt, maxInt, nil).atLeast(0),
	key("num.network.threads", kindInt, "3", func(c *Config) any { return &c.NumNetworkThreads }).atLeast(1),
	key("num.io.threads", kindInt, "8", func(c *Config) any { return &c.NumIoThreads }).atLeast(1),
	key("background.threads", kindInt, "10", nil).atLeast(1),
	key("queued.max.requests", kindInt, "500", func(c *Config) any { return &c.QueuedMaxRequests }).atLeast(1),
	key("request.timeout.ms", kindInt, "30000", nil).atLeast(0),

	// Consumer groups and offsets.
	key("offsets.topic.replication.factor", kindShort, "3", func(c *Config) any { return &c.OffsetsTopicReplicationFactor }).atLeast(1),
	key("offsets.topic.num.partitions", kindInt, num(DefaultOffsetsTopicNumPartitions), func(c *Config) any { return &c.OffsetsTopicNumPartitions }).atLeast(1),
	key("offsets.topic.segment.bytes", kindInt, "104857600", func(c *Config) any { return &c.OffsetsTopicSegmentBytes }).atLeast(1),
	key("offsets.topic.compression.codec", kindInt, "0", nil),
	key("offsets.load.buffer.size", kindInt, "5242880", nil).atLeast(1),
	key("offsets.retention.minutes", kindInt, "10080", nil).atLeast(1),
	key("offsets.retention.check.interval.ms", kindLong, "600000", func(c *Config) any { return &c.OffsetsRetentionCheckIntervalMs }).atLeast(1),
	key("offsets.commit.timeout.ms", kindInt, num(DefaultOffsetsCommitTimeoutMs), func(c *Config) any { return &c.OffsetsCommitTimeoutMs }).atLeast(1),
	key("offset.metadata.max.bytes", kindInt, num(DefaultOffsetMetadataMaxBytes), func(c *Config) any { return &c.OffsetMetadataMaxBytes }),
	key("group.initial.rebalance.delay.ms", kindInt, num(DefaultGroupInitialRebalanceDelayMs), func(c *Config) any { return &c.GroupInitialRebalanceDelayMs }).atLeast(0),
	key("group.min.session.timeout.ms", kindInt, num(DefaultGroupMinSessionTimeoutMs), func(c *Config) any { return &c.GroupMinSessionTimeoutMs }),
	key("group.max.session.timeout.ms", kindInt, num(DefaultGroupMaxSessionTimeoutMs), func(c *Config) any { return &c.GroupMaxSessionTimeoutMs }),
	key("group.max.size", kindInt, num(DefaultGroupMaxSize), func(c *Config) any { return &c.GroupMaxSize }).atLeast(1),
	key("group.coordinator.rebalance.protocols", kindList, "classic,consumer", nil).in("classic", "consumer", "streams", "share"),
	key("share.coordinator.state.topic.replication.factor", kindShort, "3", nil).atLeast(1),
	key("share.coordinator.state.topic.min.isr", kindShort, "2", nil).atLeast(1),

	// Transactions and producer ids.
	key("transaction.state.log.replication.factor", kindShort, "3", func(c *Config) any { return &c.TransactionStateLogReplicationFactor }).atLeast(1),
	key("transaction.state.log.num.partitions", kindInt, "50", func(c *Config) any { return &c.TransactionStateLogNumPartitions }).atLeast(1),
	key("transaction.state.log.min.isr", kindInt, "2", func(c *Config) any { return &c.TransactionStateLogMinIsr }).atLeast(1),
	key("transaction.state.log.segment.bytes", kindInt, "104857600", func(c *Config) any { return &c.TransactionStateLogSegmentBytes }).atLeast(1),
	key("transaction.state.log.load.buffer.size", kindInt, "5242880", nil).atLeast(1),
	key("transactional.id.expiration.ms", kindInt, "604800000", func(c *Config) any { return &c.TransactionalIDExpirationMs }).atLeast(1),
	key("transaction.max.timeout.ms", kindInt, "900000", func(c *Config) any { return &c.TransactionMaxTimeoutMs }).atLeast(1),
	key("transaction.abort.timed.out.transaction.cleanup.interval.ms", kindInt, "10000", func(c *Config) any { return &c.TransactionAbortTimedOutTransactionCleanupIntervalMs }).atLeast(1),
	key("transaction.remove.expired.transaction.cleanup.interval.ms", kindInt, "3600000", func(c *Config) any { return &c.TransactionRemoveExpiredTransactionCleanupIntervalMs }).atLeast(1),
	key("transaction.partition.verification.enable", kindBool, "true", func(c *Config) any { return &c.TransactionPartitionVerificationEnable }),
	key("producer.id.expiration.ms", kindInt, num(DefaultProducerIDExpirationMs), func(c *Config) any { return &c.ProducerIDExpirationMs }).atLeast(1),
	key("producer.id.expiration.check.interval.ms", kindInt, "600000", func(c *Config) any { return &c.ProducerIDExpirationCheckIntervalMs }).atLeast(1),

	// faultline.
	key(metricsAddressKey, kindString, "", func(c *Config) any { return &c.MetricsAddress }).parsedBy(parseMetricsAddress),
	key("faultline.transaction.version", kindShort, "2", func(c *Config) any { return &c.TransactionVersion }).between(0, 2),
}

const (
	metricsAddressKey = "faultline.metrics.address"
	unsafePrefix      = "unsafe."
)

var compressionTypes = []string{"uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"}

var keyIndex = func() map[string]*keyDef {
	m := make(map[string]*keyDef, len(brokerKeys))
	for i := range brokerKeys {
		m[brokerKeys[i].name] = &brokerKeys[i]
	}
	return m
}()

// unimplemented are families of real Kafka keys faultline does not act on:
// they warn with a reason instead of "unknown key".
var unimplemented = []struct{ prefix, reason string }{
	{"zookeeper.", "ZooKeeper mode is gone; faultline runs KRaft only: set process.roles and controller.quorum.voters instead"},
	{"ssl.", "faultline serves PLAINTEXT only"},
	{"sasl.", "faultline serves PLAINTEXT only"},
	{"listener.name.", "faultline serves PLAINTEXT only"},
	{"security.", "faultline serves PLAINTEXT only"},
	{"authorizer.", "faultline has no authorizer"},
	{"super.users", "faultline has no authorizer"},
	{"remote.log.", "faultline has no tiered storage"},
	{"log.local.retention.", "faultline has no tiered storage"},
	{"log.cleaner.", "faultline's cleaner has no I/O throttle or buffer tuning beyond log.cleaner.dedupe.buffer.size"},
	{"quota.", "faultline has no quotas"},
	{"client.quota.", "faultline has no quotas"},
	{"metric.", "faultline exports Prometheus metrics only (faultline.metrics.address)"},
	{"metrics.", "faultline exports Prometheus metrics only (faultline.metrics.address)"},
	{"kafka.metrics.", "faultline exports Prometheus metrics only (faultline.metrics.address)"},
	{"confluent.", "a Confluent Platform key"},
	{"share.", "faultline has no share groups"},
	{"group.share.", "faultline has no share groups"},
	{"group.consumer.", "faultline serves classic consumer groups only"},
	{"group.streams.", "faultline serves classic consumer groups only"},
	{"delegation.token.", "faultline has no delegation tokens"},
	{"replica.selector.class", "faultline serves fetches from the leader only"},
	{"log.message.format.version", "removed in Kafka 4.0"},
	{"inter.broker.protocol.version", "removed in Kafka 4.0"},
	{"control.plane.listener.name", "removed in Kafka 4.0"},
}

// expectation describes what a key accepts, for "must be ..." messages.
func (d *keyDef) expectation(outOfType bool) string {
	switch d.kind {
	case kindBool:
		return "true or false"
	case kindDouble:
		return "a number"
	case kindList:
		return "a comma-separated list of " + strings.Join(d.oneOf, ", ")
	case kindString:
		return "one of " + strings.Join(d.oneOf, ", ")
	}
	lo, hi := d.typeBounds()
	switch {
	case d.hasMax || outOfType:
		if d.hasMin {
			lo = d.min
		}
		if d.hasMax {
			hi = d.max
		}
		return fmt.Sprintf("an integer from %d to %d", lo, hi)
	case d.hasMin:
		return fmt.Sprintf("an integer >= %d", d.min)
	}
	return "an integer"
}

func (d *keyDef) typeBounds() (int64, int64) {
	switch d.kind {
	case kindInt:
		return math.MinInt32, math.MaxInt32
	case kindShort:
		return math.MinInt16, math.MaxInt16
	}
	return math.MinInt64, math.MaxInt64
}

// parseValue turns a trimmed value into the key's Go value: int64, bool,
// string, []string, float64, or whatever a custom parse returns.
func (d *keyDef) parseValue(s string) (any, error) {
	if d.parse != nil {
		return d.parse(s)
	}
	bad := func(outOfType bool) error {
		return fmt.Errorf("must be %s, got %q", d.expectation(outOfType), s)
	}
	switch d.kind {
	case kindInt, kindShort, kindLong:
		lo, hi := d.typeBounds()
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return nil, bad(errors.Is(err, strconv.ErrRange))
		}
		if n < lo || n > hi {
			return nil, bad(true)
		}
		if (d.hasMin && n < d.min) || (d.hasMax && n > d.max) {
			return nil, bad(false)
		}
		return n, nil
	case kindBool:
		switch strings.ToLower(s) {
		case "true":
			return true, nil
		case "false":
			return false, nil
		}
		return nil, bad(false)
	case kindDouble:
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			return nil, bad(false)
		}
		return f, nil
	case kindList:
		items := SplitList(s)
		if d.oneOf != nil {
			seen := map[string]bool{}
			for _, it := range items {
				if !contains(d.oneOf, it) {
					return nil, bad(false)
				}
				if seen[it] {
					return nil, fmt.Errorf("lists %s twice, got %q", it, s)
				}
				seen[it] = true
			}
		}
		return items, nil
	default:
		if d.oneOf != nil && !contains(d.oneOf, s) {
			return nil, bad(false)
		}
		return s, nil
	}
}

// assign stores a parsed value in the Go field it belongs to.
func assign(field any, v any) {
	switch p := field.(type) {
	case *int64:
		*p = v.(int64)
	case *int32:
		*p = int32(v.(int64))
	case *int16:
		*p = int16(v.(int64))
	case *bool:
		*p = v.(bool)
	case *string:
		*p = v.(string)
	case *[]string:
		*p = v.([]string)
	case *float64:
		*p = v.(float64)
	case *[]Listener:
		*p = v.([]Listener)
	case *[]Voter:
		*p = v.([]Voter)
	case *[]HostPort:
		*p = v.([]HostPort)
	default:
		panic(fmt.Sprintf("config: key table binds unsupported field type %T", field))
	}
}
