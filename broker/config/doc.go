// Package config turns a Kafka server.properties file into a typed,
// validated Config with Kafka's defaults (Apache Kafka 4.x, KRaft mode).
//
// # Using it
//
// cmd/broker loads the file, logs the warnings, refuses to start on an error
// and then checks the data directories:
//
//	cfg, warnings, err := config.Load(path)
//	for _, w := range warnings {
//		logger.Warn(w)
//	}
//	if err != nil {
//		for _, line := range config.Problems(err) {
//			fmt.Fprintln(os.Stderr, line)
//		}
//		os.Exit(1)
//	}
//	if err := cfg.CheckDirs(); err != nil { ... same ... }
//	if on := cfg.EnabledUnsafe(); len(on) > 0 {
//		logger.Warn("unsafe switches enabled", "keys", on)
//	}
//
// Every problem is reported at once, one line each, in the form
// "key: what is wrong; what to do", e.g.
//
//	log.segment.bytes: must be an integer >= 14, got "abc"
//	controller.quorum.voters: this node (node.id=4) has the controller role but is not among the voters [1, 2, 3]; add 4@<host>:<port> or fix node.id
//
// Unknown keys are warnings, never errors: Kafka users carry many keys
// faultline has no use for. A likely typo gets a "did you mean" hint; real
// Kafka families faultline does not implement (ssl.*, sasl.*, zookeeper.*,
// log.cleaner.*, remote.log.*, ...) say why they are ignored. Risky but legal
// settings (min.insync.replicas above default.replication.factor, a session
// timeout not above the heartbeat interval, a key set twice in the file) warn
// too.
//
// Kafka's defaults that other packages also apply when their caller leaves a
// setting at zero (storage's LogConfig and LogManager options, the group
// coordinator's Config, ...) are the Default* constants: the key table
// parses those same constants, so each such default is written once.
//
// Entries answers DescribeConfigs for the broker; TopicDefaults,
// ValidateTopicConfig, TopicConfig and TopicEntries serve CreateTopics and
// DescribeConfigs for topics. Example files are in testdata/: server.properties
// (one node, broker and controller) and cluster/ (3 controllers, 3 brokers).
//
// # Syntax
//
// ParseProperties follows java.util.Properties: '#' and '!' comments, '=',
// ':' or blanks between key and value, a trailing backslash continues a line,
// escapes \t \n \r \f \uXXXX and backslash-anything. Files are read as UTF-8.
// Values are trimmed before they are interpreted, as Kafka trims them.
//
// # Keys
//
// Keys marked "accepted" are parsed, validated and reported by Entries but
// change nothing in faultline. Durations are milliseconds unless the key says
// otherwise; Config stores every duration in an int64 field ending in Ms.
//
// Identity and roles:
//
//	node.id                    required; >= 0
//	broker.id                  alias of node.id; the two must agree if both are set
//	process.roles              required: broker, controller, or broker,controller
//	broker.rack                none
//
// Listeners (faultline serves PLAINTEXT only; an SSL or SASL listener is an error):
//
//	listeners                       required for a broker, e.g. PLAINTEXT://:9092,CONTROLLER://:9093; port 0 = ephemeral
//	advertised.listeners            default: listeners (never 0.0.0.0); controller listeners are kept apart
//	controller.listener.names       required for a controller, e.g. CONTROLLER; a broker-only node must not listen on it
//	listener.security.protocol.map  PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL (+ CONTROLLER names:PLAINTEXT when unset)
//	inter.broker.listener.name      default: security.inter.broker.protocol (PLAINTEXT); must be an advertised broker listener
//	security.inter.broker.protocol  PLAINTEXT (accepted; set inter.broker.listener.name instead)
//
// Controller quorum (KRaft):
//
//	controller.quorum.voters                   id@host:port,... ; a controller's node.id must be a voter, a broker's must not
//	controller.quorum.bootstrap.servers        host:port,... ; one of the two is required; ignored when voters are set
//	controller.quorum.election.timeout.ms      1000; raft's election timeout (a tick is a tenth of it)
//	controller.quorum.fetch.timeout.ms         2000; accepted, the election timeout stands for it (raft has one timer)
//	controller.quorum.election.backoff.max.ms  1000; accepted, raft randomises the election timeout instead
//	controller.quorum.request.timeout.ms       2000; accepted, not used
//	controller.quorum.retry.backoff.ms         20; accepted, not used
//	controller.quorum.append.linger.ms         25; accepted, appends are not lingered
//	broker.heartbeat.interval.ms               2000
//	broker.session.timeout.ms                  9000
//	initial.broker.registration.timeout.ms     60000
//
// Metadata log:
//
//	metadata.log.dir                                 default: the first of log.dirs
//	metadata.max.idle.interval.ms                    500
//	metadata.log.segment.bytes                       1073741824
//	metadata.log.segment.ms                          604800000
//	metadata.max.retention.bytes                     104857600
//	metadata.max.retention.ms                        604800000
//	metadata.log.max.record.bytes.between.snapshots  20971520
//	metadata.log.max.snapshot.interval.ms            3600000
//
// Log storage:
//
//	log.dirs                                       comma-separated data dirs; default: log.dir
//	log.dir                                        /tmp/kafka-logs
//	num.recovery.threads.per.data.dir              2 (Kafka 4.x; 1 before)
//	log.segment.bytes                              1073741824; >= 14 (Kafka 4.x demands 1 MiB; faultline allows tiny segments for tests)
//	log.roll.ms                                    default: log.roll.hours
//	log.roll.hours                                 168
//	log.roll.jitter.ms                             default: log.roll.jitter.hours
//	log.roll.jitter.hours                          0
//	log.index.interval.bytes                       4096
//	log.index.size.max.bytes                       10485760
//	log.flush.interval.messages                    9223372036854775807 (never: the OS flushes)
//	log.flush.interval.ms                          default: log.flush.scheduler.interval.ms
//	log.flush.scheduler.interval.ms                9223372036854775807
//	log.flush.offset.checkpoint.interval.ms        60000
//	log.flush.start.offset.checkpoint.interval.ms  60000
//	log.retention.ms, .minutes, .hours             ms wins over minutes over hours (168); negative = unlimited
//	log.retention.bytes                            -1 (unlimited)
//	log.retention.check.interval.ms                300000
//	log.cleanup.policy                             delete (or compact, or compact,delete: the log cleaner runs)
//	log.message.timestamp.type                     CreateTime or LogAppendTime
//	log.message.timestamp.before.max.ms            9223372036854775807
//	log.message.timestamp.after.max.ms             3600000
//	log.preallocate                                false
//	log.segment.delete.delay.ms                    60000
//	log.cleaner.enable                             true
//	log.cleaner.threads                            1 (0: no cleaner thread)
//	log.cleaner.backoff.ms                         15000
//	log.cleaner.dedupe.buffer.size                 134217728 (shared by the threads)
//	log.cleaner.delete.retention.ms                86400000
//	log.cleaner.min.compaction.lag.ms              0
//	log.cleaner.max.compaction.lag.ms              9223372036854775807 (accepted)
//	log.cleaner.min.cleanable.ratio                0.5
//	message.max.bytes                              1048588
//	compression.type                               producer (or uncompressed, zstd, lz4, snappy, gzip)
//
// Topics and replication:
//
//	num.partitions                                 1
//	default.replication.factor                     1
//	min.insync.replicas                            1 (a warning when above default.replication.factor)
//	unclean.leader.election.enable                 false
//	auto.create.topics.enable                      true
//	delete.topic.enable                            true
//	auto.leader.rebalance.enable                   true (the active controller moves leadership back to each partition's preferred replica once it is live and in the ISR)
//	leader.imbalance.check.interval.seconds        300 (how often it looks)
//	leader.imbalance.per.broker.percentage         10 (accepted: as in Kafka's KRaft controller, every imbalanced partition is balanced)
//	replica.lag.time.max.ms                        30000
//	replica.fetch.max.bytes                        1048576
//	replica.fetch.min.bytes                        1
//	replica.fetch.wait.max.ms                      500; must not exceed replica.lag.time.max.ms or replica.socket.timeout.ms
//	replica.fetch.backoff.ms                       1000
//	replica.fetch.response.max.bytes               10485760
//	replica.socket.timeout.ms                      30000
//	replica.socket.receive.buffer.bytes            65536 (accepted)
//	replica.high.watermark.checkpoint.interval.ms  5000
//	num.replica.fetchers                           1
//	fetch.max.bytes                                57671680
//
// Shutdown:
//
//	controlled.shutdown.enable            true
//	controlled.shutdown.max.retries       3
//	controlled.shutdown.retry.backoff.ms  5000
//
// Network:
//
//	socket.request.max.bytes     104857600 (larger frames close the connection)
//	socket.send.buffer.bytes     102400 (-1: OS default)
//	socket.receive.buffer.bytes  102400 (-1: OS default)
//	socket.listen.backlog.size   50
//	connections.max.idle.ms      600000
//	max.connections              2147483647 (accepted)
//	max.connections.per.ip       2147483647 (accepted)
//	num.network.threads          3 (accepted: a goroutine serves each connection)
//	num.io.threads               8 (accepted, as above)
//	background.threads           10 (accepted)
//	queued.max.requests          500
//	request.timeout.ms           30000 (accepted)
//
// Consumer groups and offsets:
//
//	offsets.topic.replication.factor     3 (set 1 on a single node)
//	offsets.topic.num.partitions         50
//	offsets.topic.segment.bytes          104857600
//	offsets.topic.compression.codec      0 (accepted)
//	offsets.load.buffer.size             5242880 (accepted)
//	offsets.retention.minutes            10080
//	offsets.retention.check.interval.ms  600000
//	offsets.commit.timeout.ms            5000
//	offset.metadata.max.bytes            4096
//	group.initial.rebalance.delay.ms     3000
//	group.min.session.timeout.ms         6000
//	group.max.session.timeout.ms         1800000; must be >= the minimum
//	group.max.size                       2147483647
//	group.coordinator.rebalance.protocols  classic,consumer (accepted; faultline serves classic groups)
//	share.coordinator.state.topic.replication.factor  3 (accepted)
//	share.coordinator.state.topic.min.isr             2 (accepted)
//
// Transactions and producer ids:
//
//	transaction.state.log.replication.factor                      3 (set 1 on a single node)
//	transaction.state.log.num.partitions                          50
//	transaction.state.log.min.isr                                 2 (set 1 on a single node)
//	transaction.state.log.segment.bytes                           104857600
//	transaction.state.log.load.buffer.size                        5242880 (accepted)
//	transactional.id.expiration.ms                                604800000
//	transaction.max.timeout.ms                                    900000
//	transaction.abort.timed.out.transaction.cleanup.interval.ms   10000
//	transaction.remove.expired.transaction.cleanup.interval.ms    3600000
//	transaction.partition.verification.enable                     true
//	producer.id.expiration.ms                                     86400000
//	producer.id.expiration.check.interval.ms                      600000
//
// faultline's own keys:
//
//	faultline.metrics.address      host:port of the Prometheus /metrics endpoint; empty (default) disables it
//	faultline.transaction.version  2; 0 to 2, the transaction.version feature level (KIP-890)
//	                               advertised in ApiVersions; 2 has clients add partitions through
//	                               Produce v12 and TxnOffsetCommit v5 and bump the epoch with every
//	                               EndTxn (v5)
//	unsafe.enable              false; must be true for any unsafe.* switch below to load
//	unsafe.*                   true/false switches that plant known replication bugs (UnsafeSwitches);
//	                           off unless set, refused without unsafe.enable=true, an unknown one is
//	                           refused; never warned about here: the node logs a WARN per switch
//	                           (UnsafeWarnings); collected in Config.Unsafe
//
// # Topic-level keys
//
// Each defaults from a broker key: cleanup.policy <- log.cleanup.policy,
// segment.bytes <- log.segment.bytes, segment.ms <- log.roll.ms,
// segment.jitter.ms <- log.roll.jitter.ms, segment.index.bytes <-
// log.index.size.max.bytes, index.interval.bytes <- log.index.interval.bytes,
// flush.messages <- log.flush.interval.messages, flush.ms <-
// log.flush.interval.ms, retention.ms <- log.retention.ms, retention.bytes <-
// log.retention.bytes, min.insync.replicas, unclean.leader.election.enable,
// max.message.bytes <- message.max.bytes, message.timestamp.type <-
// log.message.timestamp.type, message.timestamp.before.max.ms,
// message.timestamp.after.max.ms, compression.type, preallocate <-
// log.preallocate, file.delete.delay.ms <- log.segment.delete.delay.ms, and
// the compaction keys delete.retention.ms, min.compaction.lag.ms,
// min.cleanable.dirty.ratio and max.compaction.lag.ms (accepted only).
//
// cleanup.policy: "delete", "compact" and "compact,delete". A compacted log
// is cleaned by broker/storage's log cleaner (the last value per key, see
// TopicConfig.Compacts). As in Kafka, retention deletes segments only when
// the policy includes delete (TopicConfig.DeletesByRetention).
//
// # What it must never do
//
// It never touches the disk except in Load (reading the file) and CheckDirs
// (creating the data dirs and writing a probe file), never logs (it returns
// warnings for the caller to log), and never panics on any input:
// ParseProperties and FromMap are fuzzed (FuzzParseProperties). It imports
// nothing of the module, so that any broker package can import its
// defaults.
package config
