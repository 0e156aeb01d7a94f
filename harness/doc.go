// Package harness runs Jepsen-style tests against Kafka-compatible brokers:
// it sets up a cluster of nodes (Docker containers built FROM scratch around
// static binaries, or local processes), drives a workload through a real
// Kafka client, injects faults, records the history and hands it to the
// checker.
//
// docker.go is the container runtime: it builds the node image from an
// in-memory context tagged by content hash (an unchanged broker is never
// rebuilt), creates a private bridge network where nodes reach each other as
// n1..nK, gives each node a named data volume that outlives its container (a
// killed node restarts on its own data), signals, pauses, execs the in-node
// fault agent, streams logs, and labels everything it creates so that a run's
// leftovers are removed at the end, after Ctrl-C, and at the next start.
//
// The harness never imports broker/...: it reaches a broker only through the
// Kafka protocol and the container runtime, so any Kafka-compatible image can
// be tested.
package harness
