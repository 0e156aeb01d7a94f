// Package raftq is the controller quorum of every cluster, a single node's
// included (one voter, which elects itself at once): a quorum.Quorum whose
// voters replicate the metadata log __cluster_metadata-0
// with etcd raft (go.etcd.io/raft/v3), PreVote and CheckQuorum on. A batch
// is committed once a majority of the voters (controller.quorum.voters)
// has fsynced it; elections only go to a voter whose log is at least as
// up to date as a majority's, so the controller never has an unclean
// election of its own.
//
// # How to use it
//
//	tr, _ := raftq.NewTCPTransport(raftq.TCPConfig{NodeID: 1, Voters: voters, ListenAddr: ":9094"})
//	q, err := raftq.Open(raftq.Config{NodeID: 1, Voters: voters, DataDir: metadataLogDir, Transport: tr, Logger: log})
//	defer q.Close()
//	quorum.FeedPublisher(q, publisher)        // replay, then follow
//	last, err := q.Append(ctx, records)       // on the leader only
//
// Voters are node ids; raft ids are node.id + 1 (RaftID, NodeID), because
// raft reserves 0. Leader() is raft's leader and term (the term is the
// quorum epoch). Describe() lists the voters; on the leader each voter's
// log end offset is its raft match index mapped to an offset.
//
// # One goroutine drives raft
//
// A RawNode is driven by the raft goroutine only: it ticks on a ticker,
// steps received messages, proposes, and handles each Ready in raft's
// order: send the messages that do not vouch for local durability (a
// leader's appends, so that its fsync overlaps its followers'), persist the
// entries (metadata log, fsync) and the hard state (quorum-state), send the
// votes and append acknowledgements, hand committed entries to the
// applier, Advance. The applier goroutine decodes committed batches, folds
// them into a metadata.Image, delivers them to subscribers and answers the
// waiting Appends, so a slow subscriber never holds up heartbeats. Leader
// and Describe read a copy refreshed by the raft goroutine.
//
// # Storage: raft index and offsets
//
// The metadata log is a storage.Log like any partition's, and every raft
// entry is exactly one record batch in it: the batch the proposer built
// with the encoded records, stamped with the entry's term as partition
// leader epoch; raft's empty entry of a new leader becomes a control batch
// with a LeaderChangeMessage. Offsets cannot equal raft indexes (a batch
// holds many records, each with its own offset), so the quorum keeps a map
// from raft index to the batch's end offset. It needs no index on disk:
// entry snapshot-index + k is the k-th batch after the snapshot's end
// offset, so on boot the map and raft's log (a raft.MemoryStorage, refilled
// from the stored batches after the snapshot) are rebuilt by one scan.
// Offsets of committed entries are the same on every voter, because the
// committed prefix of their logs is the same sequence of batches.
//
// quorum-state (JSON: leaderEpoch = term, votedId, commitIndex,
// currentVoters, data_version) is written tmp + fsync + rename + dir fsync
// whenever the term or the vote changes, before any message that depends
// on it is sent; a change of the commit index alone is written at the next
// tick, since raft relearns a lost commit index from the leader. On boot
// the entries up to quorum-state's commit index are applied before raft
// starts (raft is told they are applied); committed entries after it come
// out of raft as committed again and are applied then, so nothing is
// applied twice or skipped.
//
// Snapshots <20-digit end offset>-<10-digit epoch>.checkpoint hold the
// records that rebuild the metadata image (written from the image itself,
// so they stay as short as the cluster is big), framed as Kafka frames its
// snapshots: a SnapshotHeader control batch, record batches, a
// SnapshotFooter control batch, each batch with its CRC. One is taken after
// SnapshotIntervalBytes (or SnapshotIntervalRecords) of applied batches;
// raft's log is then compacted behind it (keeping CompactionLagEntries for
// slow followers) and the metadata log starts at its end. A follower too
// far behind is sent the snapshot by raft; it writes it as .part, restarts
// its log at the snapshot's end, renames it, and delivers to its
// subscribers one batch with the records that take their image to the
// snapshot's. Boot loads the newest snapshot that parses and replays the
// log after it.
//
// # Transport
//
// Transport is the network: Send never blocks (messages that cannot be
// queued are dropped; raft retransmits), received messages go to the
// Receiver (the Quorum), MsgSnap outcomes are reported back. MemNetwork is
// the in-process network for tests, with drop/delay faults between any two
// nodes. TCPTransport keeps one outgoing connection per peer, redialled
// with exponential backoff, each with a bounded queue; a connection opens
// with Magic ("FLRAFT01") and the sender's node id, then carries
// length-prefixed protobuf raftpb.Message frames. ServeConn takes a
// connection accepted elsewhere: a voter's ControllerListener, the one
// listener its raft peers, observers and Kafka clients share, reads the
// first 8 bytes of each connection once and hands raft connections (Magic)
// to the transport, snapshot requests (SnapshotMagic) to the quorum's
// newest snapshot, and every other connection, those bytes replayed, to
// its Accept for the Kafka server.
//
// # Observers
//
// Brokers follow the log without a vote. On the voter, ReadCommitted(
// replicaID, offset, maxBytes) returns whole batches below the high
// watermark, from one segment per call (DecodeBatches decodes them), or
// storage.ErrOffsetOutOfRange below the log start; the node serves it as a
// Fetch of __cluster_metadata-0, as Kafka brokers fetch it. On the broker,
// an Observer (a quorum.Quorum that never appends) sends those Fetches and
// DescribeQuorum through a Sender (the broker's controller channel) to the
// quorum leader and delivers the batches to its subscribers; below the log
// start it asks a controller listener for LatestSnapshot (SnapshotMagic)
// and delivers one batch taking its image to the snapshot's. Describe on a
// voter lists each non-voter that read in the last 5 minutes as an
// observer, with the offset it read from as its log end offset.
//
// # What it must never do
//
// Acknowledge an Append before a majority has fsynced the batch and it was
// applied here; let raft send a message before the entries and the
// term/vote it depends on are durable; deliver a batch twice or out of
// order to a subscriber; panic on bytes from the network or the disk (raft
// itself panics only on its own broken invariants); block the raft
// goroutine on the network or on subscribers. Subscribers must not call
// Append from their callback.
package raftq
