// Package replica holds the partitions of one broker: their logs, their
// roles (leader, follower, offline) taken from the metadata image, and the
// leader's replication state: leader epoch, ISR, every replica's log end
// offset and the high watermark.
//
// Use it like this: New a Manager over the broker's LogManager, subscribe
// its ApplyImage to the metadata.Publisher, and hand it to the server as
// server.Replicas. The group coordinator writes through AppendInternal and
// reads back with ReadCommitted.
//
// The replication rules live in pure code: State (leader side: appends and
// follower fetches go in, high-watermark moves and ISR shrink/expand
// proposals come out) and FollowerTruncation (follower side: where to cut a
// divergent log). No locks, no clock, no I/O there. With a single node every
// ISR is {this broker} and the high watermark follows the log end. The
// follower side is ready for issue 3's network fetchers: FollowerPosition
// gives the next fetch, ApplyFetchResponse applies the leader's answer, and
// ISRChanges gives the AlterPartition proposals.
//
// What it must never do: acknowledge an acks=all write before the high
// watermark passed it, let consumers read past the high watermark, append
// without the leader epoch of the image that made this broker leader, or
// panic on client bytes (the storage layer validates every batch).
package replica
