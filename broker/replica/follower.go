package replica

import (
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/faultline/faultline/broker/storage"
)

// ErrNotFollower: the partition is not (or no longer) a follower of the
// leader epoch a fetch response belongs to; the response is dropped.
var ErrNotFollower = errors.New("not a follower of this leader epoch")

// FetchPosition is what a follower's next fetch of a partition carries.
type FetchPosition struct {
	Leader           int32
	LeaderEpoch      int32 // sent as CurrentLeaderEpoch
	FetchOffset      int64 // the follower's log end offset
	LastFetchedEpoch int32 // the newest epoch in the follower's log, -1 for none
	LogStartOffset   int64
}

// FollowerPosition returns the next fetch of a partition this broker
// follows; false when it does not follow it (leader, offline, absent).
// Issue 3's fetchers call it before each fetch.
func (m *Manager) FollowerPosition(topic string, partition int32) (FetchPosition, bool) {
	p := m.get(topic, partition)
	if p == nil {
		return FetchPosition{}, false
	}
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.state != OnlineFetchingReplica && p.state != TruncatingLog {
		return FetchPosition{}, false
	}
	last, ok := p.log.LatestEpoch()
	if !ok || m.cfg.Unsafe.SkipDivergenceTruncation {
		last = -1
	}
	return FetchPosition{
		Leader:           p.leader,
		LeaderEpoch:      p.leaderEpoch,
		FetchOffset:      p.log.LogEndOffset(),
		LastFetchedEpoch: last,
		LogStartOffset:   p.log.LogStartOffset(),
	}, true
}

// ApplyFetchResponse applies the leader's answer to a follower fetch made
// at leaderEpoch: a DivergingEpoch truncates the divergent tail
// (TruncatingLog, then OnlineFetchingReplica; the next fetch continues from
// the new end; the log store checkpoints the recovery point before the
// records after the cut arrive), records are appended with the leader's offsets and epochs,
// and the high watermark follows the leader's, clamped to this log. An
// OFFSET_OUT_OF_RANGE below the leader's log start (an empty replacement
// disk, or a log far behind retention) restarts the log at the leader's log
// start; one above the leader's log end (a fetch without a last fetched
// epoch) truncates to the leader's high watermark. Other error codes are
// returned as kerr errors for the fetcher to
// back off on; a response for an older leader epoch gives ErrNotFollower.
func (m *Manager) ApplyFetchResponse(topic string, partition int32, leaderEpoch int32, res LeaderData) error {
	p := m.get(topic, partition)
	if p == nil {
		return fmt.Errorf("apply fetch of %s-%d: %w", topic, partition, ErrNotFollower)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if (p.state != OnlineFetchingReplica && p.state != TruncatingLog) || p.leaderEpoch != leaderEpoch {
		return fmt.Errorf("apply fetch of %s at leader epoch %d (now %s at %d): %w", p.tp, leaderEpoch, p.state, p.leaderEpoch, ErrNotFollower)
	}
	leo := p.log.LogEndOffset()
	switch {
	case res.ErrorCode == kerr.OffsetOutOfRange.Code && res.LogStartOffset > leo:
		m.logger.Info(fmt.Sprintf("Partition %s: log end %d is below the leader's log start %d; restarting the log there", p.tp, leo, res.LogStartOffset))
		if err := m.cfg.Logs.TruncateFullyAndStartAt(p.tp, res.LogStartOffset); err != nil {
			return fmt.Errorf("apply fetch of %s: %w", p.tp, err)
		}
		return nil
	case res.ErrorCode == kerr.OffsetOutOfRange.Code && res.HighWatermark >= 0 && res.HighWatermark < leo:
		// Above the leader's log end: a fetch without a last fetched epoch
		// (an empty epoch cache) cannot be told where it diverged, so, as
		// Kafka's followers do without one, cut back to what the leader
		// has committed and fetch the rest again.
		m.logger.Warn(fmt.Sprintf("Partition %s: log end %d is beyond leader %d's log end; truncating to its high watermark %d", p.tp, leo, p.leader, res.HighWatermark))
		if err := m.cfg.Logs.TruncateTo(p.tp, max(res.HighWatermark, p.log.LogStartOffset())); err != nil {
			return fmt.Errorf("truncate %s to %d: %w", p.tp, res.HighWatermark, err)
		}
		return nil
	case res.ErrorCode != 0:
		return fmt.Errorf("fetch of %s from leader %d: %w", p.tp, p.leader, kerr.ErrorForCode(res.ErrorCode))
	case res.DivergingEpoch != nil:
		m.transition(p, TruncatingLog)
		t := FollowerTruncation(p.log.EpochEntries(), leo, p.log.HighWatermark(), res.DivergingEpoch.Epoch, res.DivergingEpoch.EndOffset)
		m.logger.Info(fmt.Sprintf("Partition %s: log diverged from leader %d after epoch %d ending at %d; truncating from %d to %d",
			p.tp, p.leader, res.DivergingEpoch.Epoch, res.DivergingEpoch.EndOffset, leo, t.Offset))
		if err := m.cfg.Logs.TruncateTo(p.tp, t.Offset); err != nil {
			return fmt.Errorf("truncate %s to %d: %w", p.tp, t.Offset, err)
		}
		m.transition(p, OnlineFetchingReplica)
		return nil
	}
	if len(res.Records) > 0 {
		// An empty log that starts inside the leader's first batch (it was
		// restarted at the leader's log start) restarts at the batch's base
		// offset instead, as Kafka's follower does.
		if h, err := storage.ParseBatchHeader(res.Records); err == nil && h.BaseOffset < leo && p.log.LogStartOffset() == leo {
			if err := m.cfg.Logs.TruncateFullyAndStartAt(p.tp, h.BaseOffset); err != nil {
				return fmt.Errorf("apply fetch of %s: %w", p.tp, err)
			}
		}
		if err := p.log.AppendAsFollower(res.Records); err != nil {
			return fmt.Errorf("append to follower %s: %w", p.tp, err)
		}
	}
	hwBefore := p.log.HighWatermark()
	hw := p.log.UpdateHighWatermark(min(res.HighWatermark, p.log.LogEndOffset()))
	if p.log.LogEndOffset() > leo || hw != hwBefore {
		m.signalChanged()
	}
	// The log start follows the leader's (DeleteRecords, retention), up
	// to what this replica has committed, as Kafka's followers do.
	if start := min(res.LogStartOffset, hw); start > p.log.LogStartOffset() {
		if err := m.cfg.Logs.IncrementLogStartOffset(p.tp, start); err != nil {
			m.logger.Warn(fmt.Sprintf("Partition %s: could not advance the log start to the leader's %d", p.tp, start), "err", err)
		}
	}
	return nil
}
