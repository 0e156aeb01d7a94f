// Package node runs one faultline broker: it wires configuration, storage,
// the metadata quorum, the controller, the replica manager, the group
// coordinator and the network layer together and drives them through the
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
// slow the links between the nodes of an in-process cluster.
//
// Start runs the phases in order, each logging the seeds' lines:
// configuration (banner, unsafe.* switches as a WARN, data dirs checked and
// formatted for this node and cluster); metrics endpoint; log manager
// ("Loading logs from log dirs [...]", recovery when the clean-shutdown
// marker is missing); metadata replay from the local single-voter quorum on
// __cluster_metadata-0; the controller, the replica manager and the group
// coordinator following the image; registration ("Registered broker N with
// controller quorum") until unfenced; the network layer; "Kafka broker N is
// ready to serve requests". The BrokerState moves STARTING → RECOVERY →
// RUNNING, and at Shutdown PENDING_CONTROLLED_SHUTDOWN (requests finish,
// leadership moves away) → SHUTTING_DOWN (coordinator, replicas, quorum,
// log manager flush, checkpoints and marker) → NOT_RUNNING. A failed start
// undoes the phases that completed.
//
// Roles (process.roles, controller.quorum.voters) pick the topology:
//   - a combined node that is the only voter: the single-node broker above,
//     on a Local quorum, no controller listener;
//   - a combined voter of several: a raftq voter on __cluster_metadata-0
//     whose raft traffic and controller RPCs share the controller listener
//     (connections are sniffed: raft ones go to the raft transport, Kafka
//     ones to a server whose Backend is the controller itself, plus Fetch
//     of the metadata log for observers); admin requests on the client
//     listener go through a controller.Forwarder; registration and
//     heartbeats through a controller.BrokerLifecycle (ready once
//     unfenced); a replica.Fetcher follows the leaders, a replica.ISRLoop
//     sends AlterPartition, RunExpiry fences expired brokers;
//   - a broker-only node: the same broker side, following the metadata log
//     as an observer (Fetch of __cluster_metadata-0 from the quorum leader;
//     below the log start it loads the newest snapshot over the controller
//     listener, a connection opening with "FLSNAP01");
//   - a controller-only voter: the quorum, the controller and its listener
//     (alone or one of several: a single controller-only voter runs the
//     raft quorum by itself and brokers register with it).
//
// On a cluster Shutdown starts with the controlled shutdown (the controller
// moves leadership away; bounded by a session timeout when no controller
// answers), then the network layer, the ISR loop, the fetcher, the replica
// manager, the controller listener after the quorum, the logs.
// Format stamps meta.properties into every log dir, as kafka-storage.sh
// format does, and Start refuses directories that are not formatted or that
// belong to another cluster.
//
// The node holds no broker logic of its own: decisions belong to the
// packages it wires. It must never use fakes or mocks for them, and never
// write the clean-shutdown marker unless every log was flushed and
// checkpointed first.
package node
