// Package metadata holds the cluster metadata of faultline: the records the
// controller writes to the metadata log (__cluster_metadata-0), their binary
// encoding, and the Image obtained by replaying them.
//
// Use it like this: the controller builds Records and appends them through
// the quorum; every node decodes committed records (Decode) and folds them
// into an Image with (*Image).Apply or ApplyBatch; a Publisher holds the
// newest Image and tells subscribers (the replica manager, the group
// coordinator, the server's Metadata handler) about each change, in order.
//
// Encoding. Each record is framed as Kafka frames metadata records: unsigned
// varints frameVersion (1), apiKey, version, then the body. Bodies use
// Kafka's flexible encoding (compact strings and arrays, a tagged-field
// section after every struct) in the field order of Kafka's record schemas.
// Differences from Kafka, all deliberate:
//   - RegisterBrokerRecord is written at version 1 without the
//     IsMigratingZkBroker and LogDirs fields; Features is always empty.
//   - PartitionRecord is written at version 0: no LeaderRecoveryState,
//     Directories or ELR fields; RemovingReplicas and AddingReplicas are
//     always empty.
//   - PartitionChangeRecord carries only Isr (tag 0), Leader (tag 1) and
//     Replicas (tag 2) as tagged fields; other tags are skipped on read.
//   - ConfigRecord's resource types are Kafka's (2 topic, 4 broker).
//
// What it must never do: no I/O, no clocks, no goroutines (the Publisher
// calls subscribers on the publishing goroutine). Decode must never panic on
// any input: metadata comes from disk and, in a cluster, from the network.
// An Image handed out is never mutated.
package metadata
