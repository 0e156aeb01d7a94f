package replica

import "github.com/faultline/faultline/broker/storage"

// ProduceResult is the outcome of appending one partition's records
// (Manager.Produce). The server turns it into a Produce response partition.
type ProduceResult struct {
	ErrorCode      int16
	ErrorMessage   string
	BaseOffset     int64
	LogAppendTime  int64 // -1 unless the topic uses LogAppendTime
	LogStartOffset int64
}

// FetchPartition is one partition of a Fetch request as the leader decides
// on it (Manager.Fetch).
type FetchPartition struct {
	ReplicaID          int32 // -1 for consumers, the broker id for followers
	ReplicaEpoch       int64 // the follower's broker epoch, -1 if unknown
	CurrentLeaderEpoch int32 // -1 when the client does not know it
	FetchOffset        int64
	LastFetchedEpoch   int32 // -1 when not sent
	LogStartOffset     int64 // the follower's log start offset, -1 for consumers
	MaxBytes           int32
	Isolation          int8 // 0 read_uncommitted, 1 read_committed
}

// DivergingEpoch tells a follower where its log diverged from the leader's:
// the largest epoch the leader has at or below the follower's last fetched
// epoch, and where that epoch ends on the leader.
type DivergingEpoch struct {
	Epoch     int32
	EndOffset int64
}

// FetchResult is the leader's answer for one partition of a Fetch
// (Manager.Fetch).
type FetchResult struct {
	ErrorCode        int16
	HighWatermark    int64
	LastStableOffset int64
	LogStartOffset   int64
	Records          []byte // whole record batches, possibly empty
	DivergingEpoch   *DivergingEpoch
	PreferredReplica int32 // -1
	// AbortedTxns are the aborted transactions overlapping the records of
	// a read_committed fetch; the consumer drops their records.
	AbortedTxns []storage.AbortedTxn
}

// LeaderData is what a follower's fetch brought back from its leader for
// one partition (Manager.ApplyFetchResponse): the Fetcher decodes it from
// the wire.
type LeaderData struct {
	ErrorCode      int16
	HighWatermark  int64
	LogStartOffset int64
	Records        []byte // whole record batches, possibly empty
	DivergingEpoch *DivergingEpoch
}
