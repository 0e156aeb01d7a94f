// Package controller is the active controller of faultline: it decides
// metadata changes and writes them, as metadata records, through the
// controller quorum (a quorum.Quorum: raftq on every node, a single node
// being its only voter).
//
// Two layers, in etcd raft's spirit:
//   - ClusterState holds pure decision functions: given the controller's
//     image and a request it returns the answer and the records that carry
//     it out, already checked against the image. Replica placement
//     (PlaceReplicas) and topic-name rules (ValidateTopicName) are plain
//     functions. None of it does I/O, reads a clock or draws randomness it
//     was not handed.
//   - Controller wraps a ClusterState around a quorum.Quorum: one decision
//     at a time, records appended and committed before the answer goes back,
//     its image following the committed log. It implements
//     server.Controller and the controller listener's APIs.
//
// The files follow the broker lifecycle of the seeds, each with its tests
// alongside:
//   - registration.go: BrokerRegistration (62) makes a fenced broker at a
//     new broker epoch (a new incarnation first loses its leaderships);
//     DUPLICATE_BROKER_REGISTRATION while the old incarnation's session is
//     alive, unless it names the registered epoch as PreviousBrokerEpoch;
//   - sessions.go, sessions and fencing: BrokerHeartbeat (63) renews the
//     broker's session, unfences it once caught up with the metadata log
//     and not wanting to be fenced; RunExpiry fences one broker per tick
//     whose session (broker.session.timeout.ms) expired;
//   - election.go: a fenced or departing leader's partitions get the first
//     live ISR member in replica order (with unclean election, a live
//     replica outside the ISR), the ISR never emptied;
//   - activation.go: only the active controller decides: the quorum
//     leader, once it has committed a NoOp in its epoch (so its image holds
//     every earlier record) and renewed every broker's session (so a
//     failover fences nobody; the previous leader's broker gets a third of
//     a session, its own node's broker none until it heartbeats). Everyone
//     else answers NOT_CONTROLLER;
//   - controlled_shutdown.go: a heartbeat wanting to shut down moves the
//     broker's leaderships away (to no leader on a single node) and tells
//     it to stop once it leads nothing;
//   - alterpartition.go: a leader's ISR changes (AlterPartition, 56);
//   - describequorum.go: DescribeQuorum (55) from the quorum's Describe;
//   - state.go, controller.go, placement.go, topicname.go: topics,
//     partitions and producer ids.
//
// The controller listener's handlers take the decoded request and return a
// complete response; the server sets the response version. Versions:
// BrokerRegistration v0-v4, BrokerHeartbeat v0-v2 (OfflineLogDirs is
// ignored), AlterPartition v0-v3 (topic names v0-v1, topic ids v2+, ISR with
// broker epochs v3+), DescribeQuorum v0-v2 (v2 Nodes left empty). A
// controller that is not the active one answers NOT_CONTROLLER
// (DescribeQuorum: NOT_LEADER_OR_FOLLOWER with the leader it knows), so
// brokers retry on another controller. The broker side of these exchanges
// is package lifecycle.
//
// A controller listener must hand CreateTopics, DeleteTopics,
// CreatePartitions, ElectLeaders, IncrementalAlterConfigs, AlterConfigs and
// InitProducerId to the Controller itself, never to a
// lifecycle.Forwarder: a standby would forward to itself.
//
// What it must never do: append a record it has not applied to its own image
// first, or answer a client before the records of the answer are committed.
// Config.Unsafe plants election bugs on purpose (broker/config's unsafe.*
// switches, for the harness's planted suite); its zero value, the only one
// a real deployment has, plants none.
package controller
