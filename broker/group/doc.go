// Package group is the classic (pre-KIP-848) consumer-group coordinator of
// the faultline broker: JoinGroup, SyncGroup, Heartbeat, LeaveGroup,
// OffsetCommit, OffsetFetch, OffsetDelete, DescribeGroups, ListGroups,
// DeleteGroups and FindCoordinator, with committed offsets and group metadata stored in the replicated
// __consumer_offsets topic in Kafka's own record formats.
//
// # How to use it
//
// The node builds one Coordinator per broker with New, handing it a Config
// (fields left at zero take Kafka's defaults from broker/config), the
// metadata image (metadata.Source) and an OffsetsLog, the node's adapter
// over the partition layer that appends to and replays __consumer_offsets.
// It subscribes ApplyImage to metadata changes, after the partition layer
// (or calls OnPartitionLeadership itself): when this broker becomes leader
// of an offsets partition, or stays leader under a new leader epoch, the
// coordinator replays that partition (COORDINATOR_LOAD_IN_PROGRESS
// meanwhile, retried every second while Replay fails) and then owns the
// groups hashed to it; when it stops leading, the groups are dropped and
// clients get NOT_COORDINATOR. The Coordinator implements server.Groups; the server can
// attach the client id and host of a request with WithClient so member ids
// look like Kafka's (clientId-UUID).
//
// A group lives on partition abs(javaHashCode(group)) mod the partition
// count of __consumer_offsets, exactly as Kafka places it, so a Kafka client
// and a Kafka broker agree on the coordinator.
//
// # State machine
//
// Groups move through Empty → PreparingRebalance → CompletingRebalance →
// Stable, back to PreparingRebalance on any membership change, and to Empty
// when the last member leaves. JoinGroup and SyncGroup park until the
// rebalance completes; timers (an injectable Clock) drive the initial
// rebalance delay, the rebalance timeout, the wait for SyncGroup and session
// expiry. One mutex guards all group state; appends to an offsets partition
// are serialised by a per-partition lock that is always taken before the
// state mutex and never while holding it, so the order of records in the
// log is the order in which their effects are applied in memory.
//
// Transactional offset commits (TxnOffsetCommit) need an OffsetsLog that is
// also a TxnOffsetsLog: the offsets are written as a transactional batch of
// the producer, kept pending, and applied by CompleteTxn once the
// transaction's COMMIT marker is in the partition (an abort drops them); a
// load replays committed transactions at their marker and keeps open ones
// pending.
//
// A deleted topic's committed offsets are removed and tombstoned when the
// metadata shows it gone (or back under a new topic id), as Kafka does, so
// a topic created again under the same name starts with no offsets.
//
// Not implemented: offsets retention (offsets.retention.minutes; committed
// offsets never expire), DeleteGroups and
// OffsetDelete, KIP-848 consumer groups, ACLs (authorized operations read
// as "not provided"). OffsetFetch with RequireStable answers
// UNSTABLE_OFFSET_COMMIT for a partition with transactional offsets
// pending. FindCoordinator for transaction coordinators answers
// COORDINATOR_NOT_AVAILABLE (the server sends those to broker/txn). Static
// membership is supported in its KIP-345 form (a rejoining instance takes
// over its old member and fences the old id), but a static leader that
// rejoins always rebalances (no KIP-814 SkipAssignment).
//
// # What it must never do
//
// Panic on bytes from the network or from the log: a record in
// __consumer_offsets that does not decode is skipped with a log line. Answer
// a commit or a SyncGroup before its record is committed in the log. Hold
// the state mutex while waiting for the log.
package group
