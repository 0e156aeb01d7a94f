// Package faultnet is the fault switch between the nodes of a cluster that
// runs inside one test process: every node opens its connections to its
// peers through Switch.Dialer, and the test cuts or slows the link between
// any two nodes while clients keep talking to every node directly, as
// Jepsen's clients do.
//
// Use: build a switch with New, Register each node's listener addresses
// under its node id, and start each node with the switch's dialer
// (node.StartWith(ctx, cfg, logger, node.Options{Dial: sw.Dialer(id)})).
// Then Cut, Partition, Isolate or Delay links, and Heal them all:
//
//	sw := faultnet.New()
//	sw.Register(1, "127.0.0.1:9093")
//	...
//	sw.Isolate(1, 2, 3) // node 1 cut off from 2 and 3
//	sw.Heal()
//
// A cut link behaves as a reset, not as a black hole: the connections
// across it are closed at once and new ones are refused until the link is
// healed. Nodes see their peer go away, retry with their own backoff, and
// reconnect after the heal; no byte is silently lost inside a connection
// that stays open, so what the nodes observe is what a TCP peer that
// vanished and came back would give them. A delayed link holds every write
// across it for the delay. Silent drops (a black hole) are the Docker
// harness's nftables partitions, not this package's.
//
// It is a test aid for in-process clusters: it never touches the host's
// network, and production code never depends on it (a node's zero
// Options dial directly).
package faultnet
