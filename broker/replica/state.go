package replica

import (
	"fmt"
	"slices"
)

// ReplicaState is a replica's place in seed 000's replica state machine.
type ReplicaState int8

// Replica states (seed 000, "Replica State Machine").
const (
	// NonExistentReplica: no replica (never created, or fully deleted).
	NonExistentReplica ReplicaState = iota
	// NewReplica: the log exists, no role assigned yet.
	NewReplica
	// OnlineReplica: the leader, serving produce and fetch.
	OnlineReplica
	// OnlineFetchingReplica: a follower, replicating from the leader.
	OnlineFetchingReplica
	// OfflineReplica: the replica cannot serve: the partition has no leader
	// or its log failed.
	OfflineReplica
	// TruncatingLog: truncating a divergent tail after a leader change.
	TruncatingLog
	// DeletingReplica: the log is being deleted.
	DeletingReplica
)

func (s ReplicaState) String() string {
	switch s {
	case NonExistentReplica:
		return "NonExistentReplica"
	case NewReplica:
		return "NewReplica"
	case OnlineReplica:
		return "OnlineReplica"
	case OnlineFetchingReplica:
		return "OnlineFetchingReplica"
	case OfflineReplica:
		return "OfflineReplica"
	case TruncatingLog:
		return "TruncatingLog"
	case DeletingReplica:
		return "DeletingReplica"
	}
	return fmt.Sprintf("ReplicaState(%d)", int8(s))
}

// validTransitions lists, per state, the states it may move to (seed 000's
// diagram, plus the moves a restart and a leaderless partition need:
// NewReplica and OfflineReplica may become leader or follower directly).
var validTransitions = map[ReplicaState][]ReplicaState{
	NonExistentReplica:    {NewReplica},
	NewReplica:            {OnlineReplica, OnlineFetchingReplica, OfflineReplica, DeletingReplica},
	OnlineReplica:         {OnlineFetchingReplica, OfflineReplica, DeletingReplica, OnlineReplica},
	OnlineFetchingReplica: {OnlineReplica, OfflineReplica, DeletingReplica, TruncatingLog, OnlineFetchingReplica},
	OfflineReplica:        {TruncatingLog, OnlineReplica, OnlineFetchingReplica, DeletingReplica, OfflineReplica},
	TruncatingLog:         {OnlineFetchingReplica, OfflineReplica, DeletingReplica},
	DeletingReplica:       {NonExistentReplica},
}

// CanTransition reports whether a replica may move from one state to
// another.
func CanTransition(from, to ReplicaState) bool {
	return slices.Contains(validTransitions[from], to)
}

// FollowerProgress is what the leader knows of one follower's replication.
type FollowerProgress struct {
	ID  int32
	LEO int64 // -1 until the first fetch
	// LastCaughtUpMs is the last time the follower was known to have all of
	// the leader's log (Kafka's lastCaughtUpTimeMs).
	LastCaughtUpMs int64
	// LastFetchMs and LastFetchLeaderLEO are the time of the previous fetch
	// and the leader's LEO then.
	LastFetchMs        int64
	LastFetchLeaderLEO int64
	// LogStart is the follower's log start offset as its last fetch
	// reported it, -1 until one did (DeleteRecords' low watermark).
	LogStart int64
}

// State is the leader's replication state of one partition: leader epoch,
// ISR, every replica's log end offset, and the high watermark. It is a pure
// state machine: callers feed it appends, follower fetches and ISR changes
// with the time, and act on what it returns. It is not safe for concurrent
// use; the partition serializes access.
type State struct {
	LeaderID       int32
	LeaderEpoch    int32
	PartitionEpoch int32
	Replicas       []int32
	ISR            []int32
	// MinInsyncReplicas is the topic's min.insync.replicas.
	MinInsyncReplicas int
	// EpochStartOffset is the leader's LEO when it took this epoch.
	EpochStartOffset int64
	LeaderLEO        int64
	HW               int64
	Followers        map[int32]*FollowerProgress
	// PendingISR is the ISR of an AlterPartition sent to the controller
	// at PartitionEpoch and not settled yet (nil when none): the
	// controller may have committed it already, so the high watermark
	// counts its members too (the maximal ISR of KIP-497).
	PendingISR []int32
	// HWFromLeaderLEO is the planted bug unsafe.hw.from.leader.leo (see
	// Unsafe): the high watermark follows the leader's LEO alone.
	HWFromLeaderLEO bool
	// ISRBeforeCommit is the planted bug unsafe.skip.epoch.fencing (see
	// Unsafe): a proposed ISR is in force as soon as it is proposed.
	ISRBeforeCommit bool
}

// NewLeaderState is the state of a replica that just became leader: its LEO
// is the epoch's start offset, the high watermark is what it knew (clamped
// to its log), followers are unknown.
func NewLeaderState(leader int32, leaderEpoch, partitionEpoch int32, replicas, isr []int32, minISR int, leo, hw, nowMs int64) *State {
	s := &State{
		LeaderID:          leader,
		LeaderEpoch:       leaderEpoch,
		PartitionEpoch:    partitionEpoch,
		Replicas:          slices.Clone(replicas),
		ISR:               slices.Clone(isr),
		MinInsyncReplicas: minISR,
		EpochStartOffset:  leo,
		LeaderLEO:         leo,
		HW:                min(max(hw, 0), leo),
		Followers:         map[int32]*FollowerProgress{},
	}
	for _, r := range replicas {
		if r != leader {
			// A new leader gives every follower a full lag period to show
			// up before it counts as out of sync.
			s.Followers[r] = &FollowerProgress{ID: r, LEO: -1, LastCaughtUpMs: nowMs, LastFetchMs: -1, LastFetchLeaderLEO: -1, LogStart: -1}
		}
	}
	s.maybeAdvanceHW()
	return s
}

// OffsetsAvailable reports whether the high watermark reached the offset
// this leader's epoch started at. Until it does, offsets up to the epoch
// start may have been committed and read under the previous leader, so
// the latest offset is OFFSET_NOT_AVAILABLE rather than an offset below
// one clients already saw (KIP-207, as Kafka's leader answers).
func (s *State) OffsetsAvailable() bool { return s.HW >= s.EpochStartOffset }

// EffectiveMinISR is min(min.insync.replicas, replication factor).
func (s *State) EffectiveMinISR() int {
	return min(max(s.MinInsyncReplicas, 1), len(s.Replicas))
}

// HWFrozen reports whether the ISR is too small for the high watermark to
// move.
func (s *State) HWFrozen() bool { return len(s.ISR) < s.EffectiveMinISR() }

// UnderMinISR reports whether acks=all produce must fail.
func (s *State) UnderMinISR() bool { return len(s.ISR) < max(s.MinInsyncReplicas, 1) }

// UnderReplicated reports whether the ISR is smaller than the replica set.
func (s *State) UnderReplicated() bool { return len(s.ISR) < len(s.Replicas) }

// leo returns the LEO of replica r as the leader knows it.
func (s *State) leo(r int32) int64 {
	if r == s.LeaderID {
		return s.LeaderLEO
	}
	if f := s.Followers[r]; f != nil {
		return f.LEO
	}
	return -1
}

// MaximalISR is the ISR the controller may hold: the committed ISR and,
// while an AlterPartition is in flight, the members it adds. A pending
// shrink removes nobody here until it is committed.
func (s *State) MaximalISR() []int32 {
	isr := slices.Clone(s.ISR)
	for _, r := range s.PendingISR {
		if !slices.Contains(isr, r) {
			isr = append(isr, r)
		}
	}
	return isr
}

// maybeAdvanceHW moves the high watermark to the smallest LEO in the
// maximal ISR, never backwards and not while the committed ISR is below
// the effective minimum. It reports whether the high watermark moved.
func (s *State) maybeAdvanceHW() bool {
	if s.HWFrozen() {
		return false
	}
	hw := s.LeaderLEO
	for _, r := range s.MaximalISR() {
		if l := s.leo(r); l < hw && !s.HWFromLeaderLEO {
			hw = l
		}
	}
	if hw > s.HW {
		s.HW = hw
		return true
	}
	return false
}

// Appended records the leader's new LEO after an append and reports whether
// the high watermark moved.
func (s *State) Appended(leo int64) bool {
	if leo > s.LeaderLEO {
		s.LeaderLEO = leo
	}
	return s.maybeAdvanceHW()
}

// FollowerFetched records a follower's fetch at fetchOffset (its LEO) at
// nowMs, following Kafka's caught-up rule: caught up now when it fetched at
// the leader's LEO, or caught up as of the previous fetch when it fetched at
// the leader's LEO of that time. It reports whether the high watermark
// moved. Fetches from non-replicas are ignored.
func (s *State) FollowerFetched(id int32, fetchOffset int64, nowMs int64) bool {
	f := s.Followers[id]
	if f == nil {
		return false
	}
	switch {
	case fetchOffset >= s.LeaderLEO:
		f.LastCaughtUpMs = max(f.LastCaughtUpMs, nowMs)
	case f.LastFetchLeaderLEO >= 0 && fetchOffset >= f.LastFetchLeaderLEO:
		f.LastCaughtUpMs = max(f.LastCaughtUpMs, f.LastFetchMs)
	}
	f.LEO = min(fetchOffset, s.LeaderLEO)
	f.LastFetchMs = nowMs
	f.LastFetchLeaderLEO = s.LeaderLEO
	return s.maybeAdvanceHW()
}

// FollowerLogStart records the log start offset a follower's fetch
// reported and reports whether it changed. Fetches from non-replicas are
// ignored.
func (s *State) FollowerLogStart(id int32, logStart int64) bool {
	f := s.Followers[id]
	if f == nil || logStart < 0 || f.LogStart == logStart {
		return false
	}
	f.LogStart = logStart
	return true
}

// LowWatermark is the smallest log start offset among the leader's
// (leaderStart) and every follower that may lead or soon may: the maximal
// ISR's, and any other follower that fetched within liveMs of nowMs (it
// may join the ISR before its next fetch response moves its log start),
// as Kafka's low watermark counts every live replica. It is -1 while one
// of them has not reported a log start. Below it no such replica holds
// records any more (DeleteRecords' answer).
func (s *State) LowWatermark(leaderStart, nowMs, liveMs int64) int64 {
	low := leaderStart
	isr := s.MaximalISR()
	for _, r := range s.Replicas {
		f := s.Followers[r]
		if r == s.LeaderID || f == nil {
			continue
		}
		if !slices.Contains(isr, r) && (f.LastFetchMs < 0 || nowMs-f.LastFetchMs > liveMs) {
			continue
		}
		if f.LogStart < 0 {
			return -1
		}
		low = min(low, f.LogStart)
	}
	return low
}

// OutOfSync returns the ISR followers that have not caught up within
// lagMaxMs (replica.lag.time.max.ms): the candidates of an ISR shrink.
func (s *State) OutOfSync(nowMs, lagMaxMs int64) []int32 {
	var out []int32
	for _, r := range s.ISR {
		f := s.Followers[r]
		if r == s.LeaderID || f == nil {
			continue
		}
		if f.LEO != s.LeaderLEO && nowMs-f.LastCaughtUpMs > lagMaxMs {
			out = append(out, r)
		}
	}
	return out
}

// CaughtUp returns the replicas outside the ISR that may join it: their LEO
// reached both the high watermark and the start of the leader's epoch.
func (s *State) CaughtUp() []int32 {
	var out []int32
	for _, r := range s.Replicas {
		f := s.Followers[r]
		if f == nil || slices.Contains(s.ISR, r) {
			continue
		}
		if f.LEO >= s.HW && f.LEO >= s.EpochStartOffset {
			out = append(out, r)
		}
	}
	return out
}

// ShrinkISR is the ISR without the out-of-sync followers (the proposal an
// AlterPartition would carry); nil when nobody is out of sync.
func (s *State) ShrinkISR(nowMs, lagMaxMs int64) []int32 {
	out := s.OutOfSync(nowMs, lagMaxMs)
	if len(out) == 0 {
		return nil
	}
	return slices.DeleteFunc(slices.Clone(s.ISR), func(r int32) bool { return slices.Contains(out, r) })
}

// ExpandISR is the ISR with the caught-up replicas added; nil when nobody
// qualifies.
func (s *State) ExpandISR() []int32 {
	in := s.CaughtUp()
	if len(in) == 0 {
		return nil
	}
	isr := slices.Clone(s.ISR)
	for _, r := range in {
		isr = append(isr, r)
	}
	return isr
}

// Propose records an ISR change sent to the controller (PendingISR) until
// SetISR installs a newer partition epoch or ProposalRefused settles it,
// and reports whether the high watermark moved: never, unless
// ISRBeforeCommit puts the change in force before the controller, which
// fences proposals of a deposed leader by its epochs, has committed it.
func (s *State) Propose(isr []int32) bool {
	s.PendingISR = slices.Clone(isr)
	if !s.ISRBeforeCommit {
		return false
	}
	s.ISR = slices.Clone(isr)
	return s.maybeAdvanceHW()
}

// ProposalRefused drops the pending change after the controller refused it
// at the current partition epoch, so that nothing of it was committed, and
// reports whether the high watermark moved.
func (s *State) ProposalRefused() bool {
	s.PendingISR = nil
	return s.maybeAdvanceHW()
}

// SetISR installs an ISR the controller committed and reports whether the
// high watermark moved (a smaller ISR can let it advance). A new partition
// epoch settles the pending change: the controller's ISR is now known.
func (s *State) SetISR(isr []int32, partitionEpoch int32) bool {
	if partitionEpoch != s.PartitionEpoch {
		s.PendingISR = nil
	}
	s.ISR = slices.Clone(isr)
	s.PartitionEpoch = partitionEpoch
	return s.maybeAdvanceHW()
}
