package replica

import (
	"sort"

	"github.com/faultline/faultline/broker/storage"
)

// EndOffsetFor is Kafka's endOffsetFor over a leader epoch cache: the
// largest epoch at or below epoch and the offset where it ended (leo for
// the latest epoch). (-1, -1) when epoch is undefined, the cache is empty or
// epoch is above every known epoch; an epoch below every known one ends
// where the first known one starts. entries are ascending by epoch.
func EndOffsetFor(entries []storage.EpochEntry, epoch int32, leo int64) (int32, int64) {
	if epoch < 0 || len(entries) == 0 {
		return -1, -1
	}
	last := entries[len(entries)-1]
	if last.Epoch == epoch {
		return epoch, leo
	}
	hi := sort.Search(len(entries), func(i int) bool { return entries[i].Epoch > epoch })
	switch {
	case hi == len(entries):
		return -1, -1
	case hi == 0:
		return epoch, entries[0].StartOffset
	}
	return entries[hi-1].Epoch, entries[hi].StartOffset
}

// Truncation is a follower's decision after the leader told it where an
// epoch ended.
type Truncation struct {
	// Offset is where to truncate the log (TruncateTo): every record at or
	// after it goes.
	Offset int64
	// Done is false when the follower must ask again with the newest epoch
	// left in its log after truncating (the leader answered with an epoch
	// the follower never had).
	Done bool
}

// FollowerTruncation decides how far a returning follower truncates before
// it fetches (seed 003, "Broker reintegration"; KAFKA-INTERNALS §3). The
// follower asked the leader where its newest epoch ended and got
// (leaderEpoch, leaderEnd):
//   - leaderEpoch -1 (the leader knows no such epoch): truncate to the high
//     watermark, everything above it is unconfirmed.
//   - the follower has leaderEpoch too: truncate to the smaller of the
//     leader's and its own end of that epoch (and its LEO). Done.
//   - otherwise: truncate to where the follower's own largest epoch below
//     leaderEpoch ended, and ask again.
//
// local is the follower's epoch cache, leo its log end offset, hw its high
// watermark.
func FollowerTruncation(local []storage.EpochEntry, leo, hw int64, leaderEpoch int32, leaderEnd int64) Truncation {
	if leaderEpoch < 0 || leaderEnd < 0 {
		return Truncation{Offset: min(hw, leo), Done: true}
	}
	localEpoch, localEnd := EndOffsetFor(local, leaderEpoch, leo)
	if localEpoch == leaderEpoch {
		return Truncation{Offset: min(leaderEnd, localEnd, leo), Done: true}
	}
	if localEpoch < 0 {
		return Truncation{Offset: min(hw, leo), Done: true}
	}
	return Truncation{Offset: min(localEnd, leo), Done: false}
}
