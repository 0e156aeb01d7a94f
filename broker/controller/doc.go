// Package controller is the active controller of faultline: it decides
// metadata changes and writes them, as metadata records, through the
// controller quorum.
//
// Two layers, in etcd raft's spirit:
//   - ClusterState holds pure decision functions: given the controller's
//     image and a request (CreateTopics, DeleteTopics, CreatePartitions,
//     producer-id allocation, broker registration, heartbeats, fencing) it
//     returns the answer and the records that carry it out, already checked
//     against the image. Replica placement (PlaceReplicas) and topic-name
//     rules (ValidateTopicName) are plain functions. None of it does I/O,
//     reads a clock or draws randomness it was not handed.
//   - Controller wraps a ClusterState around a quorum.Quorum: one decision
//     at a time, records appended and committed before the answer goes back,
//     its image following the committed log. It implements
//     server.Controller.
//
// On a cluster (Config.Cluster, RunExpiry) three more pieces take part:
//   - The controller side of the controller listener: HandleBrokerRegistration
//     (62), HandleBrokerHeartbeat (63), HandleAlterPartition (56) and
//     HandleDescribeQuorum (55) take decoded kmsg requests and return whole
//     responses. Only the active controller decides: the quorum leader, once
//     it has committed a NoOp in its epoch (so its image holds every earlier
//     record) and renewed every broker's session (so a failover fences
//     nobody). Everyone else answers NOT_CONTROLLER. RunExpiry fences one
//     broker per tick whose session (broker.session.timeout.ms) expired.
//   - Forwarder, the server.Controller of a broker-only node or a standby
//     controller: admin requests go to the active controller over the Kafka
//     protocol (ControllerTransport; KgoTransport in production), retried on
//     NOT_CONTROLLER until the request's deadline.
//   - BrokerLifecycle, the broker side: registration, heartbeats and the
//     broker state machine (STARTING, RECOVERY, RUNNING,
//     PENDING_CONTROLLED_SHUTDOWN, SHUTTING_DOWN), over a ControllerTransport.
//
// A controller listener must hand CreateTopics, DeleteTopics,
// CreatePartitions and InitProducerId to the Controller itself, never to a
// Forwarder: a standby would forward to itself.
//
// What it must never do: append a record it has not applied to its own image
// first, or answer a client before the records of the answer are committed.
package controller
