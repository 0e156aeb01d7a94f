// Package quorum is the controller quorum of faultline: the replicated
// metadata log __cluster_metadata-0 that the active controller appends to and
// every node replays.
//
// The controller talks to a Quorum: Append returns once the records are
// committed; Subscribe replays every committed batch from the start of the
// log and then delivers each new one, in order; Leader and Describe report
// who leads (DescribeQuorum). FeedPublisher keeps a metadata image
// following a Quorum. Package raftq is the quorum every controller runs
// (go.etcd.io/raft/v3, a single node being its only voter); quorumtest.Local
// is a single voter without raft on a local storage.Log, for the unit tests
// of the controller and the replica manager (no node runs it).
//
// What it must never do: report a batch as committed before it is durable,
// deliver batches out of order or twice to one subscriber, or interpret the
// records (that is package metadata's job).
package quorum
