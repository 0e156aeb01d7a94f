package raftq

import (
	"math"

	"go.etcd.io/raft/v3/raftpb"
)

// RaftID is the raft id of a node: node.id + 1, because raft reserves 0
// for "none" while Kafka node ids start at 0.
func RaftID(nodeID int32) uint64 { return uint64(nodeID) + 1 }

// NodeID is the node.id of a raft id (-1 for raft's "none", 0).
func NodeID(raftID uint64) int32 {
	if raftID == 0 || raftID > math.MaxInt32+1 {
		return -1
	}
	return int32(raftID - 1)
}

// Receiver is what a transport delivers to; the Quorum is one. Its methods
// never block: they queue the work for the raft goroutine.
type Receiver interface {
	// Receive hands over a message addressed to this node.
	Receive(m *raftpb.Message)
	// ReportUnreachable says that messages to the raft id `to` were lost
	// (the connection failed or the queue was full).
	ReportUnreachable(to uint64)
	// ReportSnapshot says whether a MsgSnap to `to` was handed to the
	// network (failed false) or dropped; raft keeps the follower waiting
	// for a snapshot until it hears either.
	ReportSnapshot(to uint64, failed bool)
}

// Transport carries raft messages between voters.
type Transport interface {
	// Start begins delivering received messages to r. Called once, by Open.
	Start(r Receiver) error
	// Send queues messages for their destinations (m.To, a raft id) and
	// returns without waiting for the network: a message that cannot be
	// queued is dropped, and raft retransmits. Called only from the raft
	// goroutine; it may serialize the messages before returning, and must
	// not keep references to them afterwards.
	Send(msgs []*raftpb.Message)
	// Close stops the transport and its goroutines.
	Close() error
}
