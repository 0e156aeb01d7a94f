// Package node runs one faultline broker: it wires configuration, storage,
// the metadata quorum, the controller, the replica manager, the group and
// transaction coordinators and the network layer together and drives them through the
// startup and shutdown phases of Kafka's broker lifecycle (seed 000).
//
// Use:
//
//	cfg, warnings, err := config.Load("server.properties")
//	logger := slog.New(node.NewKafkaHandler(os.Stderr, slog.LevelInfo))
//	n, err := node.Start(ctx, cfg, logger) // returns once the broker serves requests
//	defer n.Shutdown(ctx)                  // controlled shutdown: flush, checkpoints, clean marker
//	addr := n.Addr()                       // the bound client listener (port 0 works)
//
// StartWith takes Options as well: Options.Dial opens every connection the
// node makes to other nodes (raft, controller channel, replica fetchers,
// snapshots), which is where tests put internal/faultnet's switch to cut or
// slow the links between the nodes of an in-process cluster; Options.FS
// carries the file operations on log.dirs, where tests put storage's
// ErrorFS to fail a node's disk.
//
// A log dir that goes offline (an I/O error or a failed fsync) stops the
// node with an error (Err, and a non-zero exit of cmd/broker) through a
// controlled shutdown, so the controller moves its leaderships at once;
// the dir's partitions answer KAFKA_STORAGE_ERROR meanwhile and it gets no
// clean-shutdown marker.
//
// Start runs the phases of seed 000 in order (startup in node.go reads like
// the seed), each logging the seeds' lines, and every role goes through the
// same steps: a single combined node is the only voter of a one-voter raft
// quorum, as in KRaft, and registers and heartbeats like any broker.
//
//  1. configuration: banner, unsafe.* switches as a WARN, the quorum's
//     voters (a combined node listing none is the only voter), data dirs
//     checked and formatted for this node and cluster; metrics endpoint;
//  2. log manager: "Loading logs from log dirs [...]", recovery when the
//     clean-shutdown marker is missing;
//  3. metadata: on a controller, its raftq voter on __cluster_metadata-0
//     replayed into the image, the controller listener (a
//     raftq.ControllerListener: raft connections go to the raft
//     transport, snapshot requests to the quorum, Kafka ones to a server
//     whose Backend is the controller, plus Fetch of the metadata log for
//     observers, metadatalog.go) and the controller with RunExpiry fencing
//     expired brokers; on a broker-only node, a raftq.Observer fetching
//     the metadata log from the quorum leader, caught up before the next
//     phase. A controller-only node is ready here;
//  4. registration: client listener bound (for the endpoint registered),
//     the channel to the active controller (admin requests on the client
//     listener go through a lifecycle.Forwarder, decided in process while
//     this node's controller is active), registration ("Registered broker
//     N with controller quorum") and heartbeats through a
//     lifecycle.Manager until the controller says the image caught up
//     with the metadata log (RECOVERY). No part of the broker follows the
//     image before that: a voter restarted on its own metadata log
//     replays an image that can still make it the leader of partitions
//     and __transaction_state partitions that moved while it was down;
//  5. the broker's parts following the caught-up image: the replica
//     manager (stray logs deleted once the image caught up with the
//     quorum), a replica.Fetcher and a replica.ISRLoop, the group
//     coordinator, the transaction coordinator (broker/txn over
//     __transaction_state; its markers go to this node's partitions
//     directly and to other leaders with WriteTxnMarkers); then ready to
//     be unfenced, and heartbeats until unfenced;
//  6. the network layer; "Kafka broker N is ready to serve requests".
//
// The BrokerState moves STARTING → RECOVERY → RUNNING, and at Shutdown
// PENDING_CONTROLLED_SHUTDOWN (the controller moves leadership away, to no
// leader on a single node; bounded by a session timeout when no controller
// answers; requests finish) → SHUTTING_DOWN (coordinator, replicas,
// controller listener after the quorum, log manager flush, checkpoints and
// marker) → NOT_RUNNING. A failed start undoes the phases that completed.
//
// Format stamps meta.properties into every log dir, as kafka-storage.sh
// format does, and Start refuses directories that are not formatted or that
// belong to another cluster.
//
// The node holds no broker logic of its own: decisions belong to the
// packages it wires. It must never use fakes or mocks for them, and never
// write the clean-shutdown marker unless every log was flushed and
// checkpointed first.
package node
