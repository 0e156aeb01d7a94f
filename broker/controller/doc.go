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
// Multi-node work (issue 3) plugs in here: session tracking calls
// ClusterState.FenceBroker for brokers whose heartbeats stopped; AlterPartition
// becomes another ClusterState method returning a PartitionChange; a
// controller that is not the quorum leader answers NOT_CONTROLLER.
//
// What it must never do: append a record it has not applied to its own image
// first, or answer a client before the records of the answer are committed.
package controller
