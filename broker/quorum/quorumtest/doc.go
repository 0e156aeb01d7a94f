// Package quorumtest holds Local, a one-voter metadata quorum without raft
// for the unit tests of the packages above the quorum (controller, replica,
// node): a batch is committed as soon as it is fsynced to the local
// __cluster_metadata log, and Subscribe replays the log before it follows
// it, as raftq's quorum does.
//
// Use it only from tests: a node, whatever its roles, always runs the raft
// quorum of broker/quorum/raftq (a lone combined node is a one-voter raft
// quorum). It must never be imported by non-test code.
package quorumtest
