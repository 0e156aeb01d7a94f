// Package node runs one faultline broker: it wires configuration, storage,
// the metadata quorum, the controller, the replica manager, the group
// coordinator and the network layer together and drives them through the
// startup and shutdown phases of Kafka's broker lifecycle (seed 000).
//
// Use:
//
//	cfg, err := config.Load("server.properties")
//	n, err := node.Start(ctx, cfg, logger) // returns once the broker serves requests
//	defer n.Shutdown(ctx)                  // controlled shutdown: flush, checkpoints, clean marker
//	addr := n.Addr()                       // the bound client listener (port 0 works)
//
// Start logs the seeds' lines in order ("Loading logs from log dirs [...]",
// "Registered broker N with controller quorum", "Kafka broker N is ready to
// serve requests"), moves the BrokerState through STARTING, RECOVERY and
// RUNNING, and serves Prometheus metrics on faultline.metrics.address.
// Format stamps meta.properties into every log dir, as kafka-storage.sh
// format does, and Start refuses directories that are not formatted or that
// belong to another cluster.
//
// The node holds no broker logic of its own: decisions belong to the
// packages it wires. It must never use fakes or mocks for them, and never
// write the clean-shutdown marker unless every log was flushed and
// checkpointed first.
package node
