// Package replica holds the partitions of one broker: their logs, their
// roles (leader, follower, offline) taken from the metadata image, and the
// leader's replication state: leader epoch, ISR, every replica's log end
// offset and the high watermark.
//
// Use it like this: New a Manager over the broker's LogManager, subscribe
// its ApplyImage to the metadata.Publisher, and hand it to the server as
// server.Replicas. The group and transaction coordinators write through
// AppendInternal (AppendInternalTxn for transactional offset commits) and
// read back with ReadToEnd (ReadToEndTxn). Transactions: WriteTxnMarker
// appends a coordinator's COMMIT or ABORT marker; read_committed fetches
// stop at the last stable offset and carry the aborted transactions they
// overlap.
//
// The Manager speaks its own types, not the wire's: FetchPartition in and
// FetchResult out for a fetch it answers as leader, ProduceResult for a
// produce, LeaderData for what its follower fetches brought back. The
// server decodes and encodes them; this package never imports
// broker/server (TestDecisionsDoNotImportServer), and its in-process
// cluster tests, which put a real server in front of every Manager, are
// in package replica_test.
//
// The replication rules live in pure code: State (leader side: appends and
// follower fetches go in, high-watermark moves and ISR shrink/expand
// proposals come out) and FollowerTruncation (follower side: where to cut a
// divergent log). No locks, no clock, no I/O there. With a single node every
// ISR is {this broker} and the high watermark follows the log end.
//
// On a cluster two more pieces run next to the Manager. A Fetcher (one
// goroutine per leader this broker follows partitions of) sends Fetch
// requests with this broker's replica id and broker epoch, built from
// FollowerPosition, and hands the answers to ApplyFetchResponse; subscribe
// its ApplyImage after the Manager's, and Stop it before the logs close.
// An ISRLoop sends ISRChanges (shrink every replica.lag.time.max.ms/2,
// expand as soon as a follower catches up) through an ISRSender to the
// controller and installs what it commits (InstallISR). Until a change
// settles, the high watermark counts the members it adds (the maximal ISR
// of KIP-497: the controller may have committed it already) and the same
// change is sent again. Dialer and
// ISRSender are interfaces so tests can cut links and fake the controller.
//
// What it must never do: acknowledge an acks=all write before the high
// watermark passed it, let consumers read past the high watermark, append
// without the leader epoch of the image that made this broker leader, or
// panic on client bytes (the storage layer validates every batch).
// Config.Unsafe breaks some of these rules on purpose (broker/config's
// unsafe.* switches, for the harness's planted suite); its zero value, the
// only one a real deployment has, breaks none.
package replica
