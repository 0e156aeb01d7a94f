// Package quorum is the controller quorum of faultline: the replicated
// metadata log __cluster_metadata-0 that the active controller appends to and
// every node replays.
//
// The controller talks to a Quorum: Append returns once the records are
// committed; Subscribe replays every committed batch from the start of the
// log and then delivers each new one, in order; Leader and Describe report
// who leads (DescribeQuorum). Local is the single-voter quorum of a
// single-node cluster: its log is a storage.Log like any partition, each
// append is fsynced before it counts as committed, and it is replayed from
// disk on boot. The Raft quorum of issue 3 (go.etcd.io/raft/v3) implements
// the same interface: Append proposes and waits for the entry to commit,
// Subscribe feeds from Raft's committed entries, Leader is Raft's lead and
// term.
//
// What it must never do: report a batch as committed before it is durable,
// deliver batches out of order or twice to one subscriber, or interpret the
// records (that is package metadata's job).
package quorum
