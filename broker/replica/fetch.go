package replica

import (
	"context"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/faultline/faultline/broker/storage"
)

// Fetch decides one partition of a Fetch. Consumers read up to the high
// watermark, replicas (ReplicaID >= 0) up to the log end. A stale
// CurrentLeaderEpoch gets FENCED_LEADER_EPOCH, a newer one
// UNKNOWN_LEADER_EPOCH. With LastFetchedEpoch set, a fetch whose epoch
// ended before the fetch offset (or is unknown here) gets no records and a
// DivergingEpoch telling the fetcher where to truncate (KAFKA-INTERNALS §3).
func (m *Manager) Fetch(_ context.Context, topic string, partition int32, req FetchPartition) FetchResult {
	res := FetchResult{HighWatermark: -1, LastStableOffset: -1, LogStartOffset: -1, PreferredReplica: -1}
	p := m.get(topic, partition)
	if p == nil {
		res.ErrorCode = m.unknownOrNotLeader(topic, partition)
		return res
	}
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.state != OnlineReplica {
		res.ErrorCode = kerr.NotLeaderForPartition.Code
		return res
	}
	if code := checkLeaderEpoch(req.CurrentLeaderEpoch, p.leaderEpoch); code != 0 {
		res.ErrorCode = code
		return res
	}
	if p.log.Offline() {
		res.ErrorCode = kerr.KafkaStorageError.Code
		return res
	}
	logStart := p.log.LogStartOffset()
	res.LogStartOffset = logStart
	fill := func() {
		res.HighWatermark, res.LastStableOffset = p.log.HighWatermark(), p.log.LastStableOffset()
	}
	if req.LastFetchedEpoch >= 0 {
		if req.FetchOffset < logStart {
			fill()
			res.ErrorCode = kerr.OffsetOutOfRange.Code
			return res
		}
		epoch, end := p.log.EndOffsetForEpoch(req.LastFetchedEpoch)
		if epoch < req.LastFetchedEpoch || end < req.FetchOffset {
			fill()
			res.DivergingEpoch = &DivergingEpoch{Epoch: epoch, EndOffset: end}
			return res
		}
	}
	maxOffset := p.log.HighWatermark()
	replica := req.ReplicaID >= 0
	switch {
	case replica:
		maxOffset = p.log.LogEndOffset()
	case req.Isolation == 1 && !m.cfg.Unsafe.ReadCommittedPastLSO:
		maxOffset = p.log.LastStableOffset()
	}
	data, err := p.log.Read(req.FetchOffset, req.MaxBytes, maxOffset, true)
	if err != nil {
		fill()
		res.ErrorCode = errorCode(err)
		if res.ErrorCode == kerr.KafkaStorageError.Code {
			m.logger.Error(fmt.Sprintf("Read of partition %s failed", p.tp), "err", err)
		}
		return res
	}
	res.Records = data
	if req.Isolation == 1 && !replica && len(data) > 0 {
		res.AbortedTxns = p.log.AbortedTxns(req.FetchOffset, lastOffset(data)+1)
	}
	if replica {
		p.stMu.Lock()
		moved := p.st != nil && p.st.FollowerFetched(req.ReplicaID, req.FetchOffset, m.cfg.Now().UnixMilli())
		startMoved := p.st != nil && p.st.FollowerLogStart(req.ReplicaID, req.LogStartOffset)
		joins := p.st != nil && slices.Contains(p.st.CaughtUp(), req.ReplicaID)
		p.stMu.Unlock()
		if joins {
			m.wakeISR()
		}
		if startMoved && !moved {
			p.publishHW() // wakes a DeleteRecords waiting for the low watermark
		}
		if moved {
			p.publishHW()
			defer m.signalChanged()
		}
	}
	fill()
	return res
}

// ListOffset answers ListOffsets for one partition: -2 is the log start
// offset, -1 the high watermark (the last stable offset for
// read_committed, isolation 1), -3 the offset of the record with the largest timestamp
// below the high watermark, any other timestamp the first offset whose
// record's timestamp is at least it (offset -1 when none is below the high
// watermark). While the high watermark of a new leader is below its
// epoch's start offset (State.OffsetsAvailable) the latest offset, and a
// timestamp with no answer below the high watermark, are
// OFFSET_NOT_AVAILABLE.
func (m *Manager) ListOffset(_ context.Context, topic string, partition int32, currentLeaderEpoch int32, timestamp int64, isolation int8) (int64, int64, int32, int16) {
	p := m.get(topic, partition)
	if p == nil {
		return -1, -1, -1, m.unknownOrNotLeader(topic, partition)
	}
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.state != OnlineReplica {
		return -1, -1, -1, kerr.NotLeaderForPartition.Code
	}
	if code := checkLeaderEpoch(currentLeaderEpoch, p.leaderEpoch); code != 0 {
		return -1, -1, -1, code
	}
	hw := p.log.HighWatermark()
	if isolation == 1 {
		hw = p.log.LastStableOffset()
	}
	p.stMu.Lock()
	notFound := int16(0)
	if p.st != nil && !p.st.OffsetsAvailable() {
		notFound = kerr.OffsetNotAvailable.Code
	}
	p.stMu.Unlock()
	entries := p.log.EpochEntries()
	switch timestamp {
	case -2:
		start := p.log.LogStartOffset()
		return start, -1, epochAt(entries, start), 0
	case -1:
		if notFound != 0 {
			return -1, -1, -1, notFound
		}
		// Kafka answers the latest offset with the current leader epoch.
		return hw, -1, p.leaderEpoch, 0
	case -3:
		off, ts, err := p.maxTimestamp(hw)
		if err != nil {
			return -1, -1, -1, errorCode(err)
		}
		if off < 0 {
			return -1, -1, -1, notFound
		}
		return off, ts, epochAt(entries, off), 0
	}
	if timestamp < 0 {
		return -1, -1, -1, kerr.InvalidRequest.Code
	}
	off, ts, epoch, ok, err := p.log.FetchOffsetByTimestamp(timestamp)
	if err != nil {
		return -1, -1, -1, errorCode(err)
	}
	if !ok || off >= hw {
		return -1, -1, -1, notFound
	}
	return off, ts, epoch, 0
}

// scanReadBytes bounds one read of a scan over a log.
const scanReadBytes = 1 << 20

// maxTimestamp scans the batches below hw for the largest timestamp and
// returns the offset of the first record carrying it (-1 for an empty log).
func (p *partition) maxTimestamp(hw int64) (int64, int64, error) {
	bestOff, bestTs := int64(-1), int64(-1)
	err := p.scan(p.log.LogStartOffset(), hw, func(h storage.BatchHeader, batch []byte) error {
		if h.MaxTimestamp <= bestTs {
			return nil
		}
		if h.HasLogAppendTime() {
			bestOff, bestTs = h.BaseOffset, h.MaxTimestamp
			return nil
		}
		recs, err := storage.DecodeRecords(batch)
		if err != nil {
			return err
		}
		for _, r := range recs {
			if r.TimestampMs > bestTs {
				bestOff, bestTs = r.Offset, r.TimestampMs
			}
		}
		return nil
	})
	return bestOff, bestTs, err
}

// scan calls fn for every batch holding offsets in [from, to).
func (p *partition) scan(from, to int64, fn func(h storage.BatchHeader, batch []byte) error) error {
	for off := from; off < to; {
		data, err := p.log.Read(off, scanReadBytes, to, true)
		if err != nil {
			return err
		}
		if len(data) == 0 {
			return nil
		}
		next := off
		err = storage.ForEachBatch(data, func(h storage.BatchHeader, b []byte) error {
			next = h.NextOffset()
			return fn(h, b)
		})
		if err != nil {
			return err
		}
		if next <= off {
			return fmt.Errorf("scan %s: no progress at offset %d", p.tp, off)
		}
		off = next
	}
	return nil
}

// epochAt is the leader epoch of the batch holding offset, -1 when unknown.
func epochAt(entries []storage.EpochEntry, offset int64) int32 {
	epoch := int32(-1)
	for _, e := range entries {
		if e.StartOffset > offset {
			break
		}
		epoch = e.Epoch
	}
	return epoch
}

// OffsetForLeaderEpoch answers OffsetForLeaderEpoch: the largest epoch at or
// below leaderEpoch and the offset where it ended on this leader
// (KAFKA-INTERNALS §3, endOffsetFor).
func (m *Manager) OffsetForLeaderEpoch(_ context.Context, topic string, partition int32, currentLeaderEpoch, leaderEpoch int32) (int32, int64, int16) {
	p := m.get(topic, partition)
	if p == nil {
		return -1, -1, m.unknownOrNotLeader(topic, partition)
	}
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.state != OnlineReplica {
		return -1, -1, kerr.NotLeaderForPartition.Code
	}
	if code := checkLeaderEpoch(currentLeaderEpoch, p.leaderEpoch); code != 0 {
		return -1, -1, code
	}
	epoch, end := p.log.EndOffsetForEpoch(leaderEpoch)
	return epoch, end, 0
}

// ReadCommitted calls fn for every record of a partition on this broker
// from fromOffset up to the high watermark, in order (control batches
// skipped). The group coordinator uses it to load __consumer_offsets. An
// error from fn stops the read and is returned.
func (m *Manager) ReadCommitted(topic string, partition int32, fromOffset int64, fn func(offset int64, rec storage.Record) error) error {
	return m.read(topic, partition, fromOffset, false, fn)
}

// ReadToEnd is ReadCommitted up to the log end offset instead of the high
// watermark. A coordinator that just became leader loads its state with it:
// its high watermark may still lag records that were acknowledged under
// the previous leader, and everything in a leader's log gets committed
// unless it loses the leadership.
func (m *Manager) ReadToEnd(topic string, partition int32, fromOffset int64, fn func(offset int64, rec storage.Record) error) error {
	return m.read(topic, partition, fromOffset, true, fn)
}

func (m *Manager) read(topic string, partition int32, fromOffset int64, toEnd bool, fn func(offset int64, rec storage.Record) error) error {
	p := m.get(topic, partition)
	if p == nil {
		return fmt.Errorf("read %s-%d: %w", topic, partition, kerr.ErrorForCode(m.unknownOrNotLeader(topic, partition)))
	}
	from := max(fromOffset, p.log.LogStartOffset())
	hw := p.log.HighWatermark()
	if toEnd {
		hw = p.log.LogEndOffset()
	}
	return p.scan(from, hw, func(h storage.BatchHeader, batch []byte) error {
		if h.IsControl() {
			return nil
		}
		recs, err := storage.DecodeRecords(batch)
		if err != nil {
			return fmt.Errorf("read %s at offset %d: %w", p.tp, h.BaseOffset, err)
		}
		for _, r := range recs {
			if r.Offset < fromOffset || r.Offset >= hw {
				continue
			}
			if err := fn(r.Offset, r); err != nil {
				return err
			}
		}
		return nil
	})
}

// lastOffset is the last offset of the last whole batch in data.
func lastOffset(data []byte) int64 {
	last := int64(-1)
	_ = storage.ForEachBatch(data, func(h storage.BatchHeader, _ []byte) error {
		last = h.LastOffset()
		return nil
	})
	return last
}

// ReadToEndTxn is ReadToEnd for a topic holding transactional batches (a
// coordinator's own topic): records of a committed transaction reach fn at
// its COMMIT marker, records of an aborted one never do, and those of
// transactions still open at the log end reach open, in order, with their
// producer id.
func (m *Manager) ReadToEndTxn(topic string, partition int32, fromOffset int64, fn func(offset int64, rec storage.Record) error, open func(producerID int64, rec storage.Record) error) error {
	p := m.get(topic, partition)
	if p == nil {
		return fmt.Errorf("read %s-%d: %w", topic, partition, kerr.ErrorForCode(m.unknownOrNotLeader(topic, partition)))
	}
	from := max(fromOffset, p.log.LogStartOffset())
	pending := map[int64][]storage.Record{}
	var order []int64
	err := p.scan(from, p.log.LogEndOffset(), func(h storage.BatchHeader, batch []byte) error {
		if h.IsControl() {
			typ, err := storage.MarkerType(batch)
			if err != nil || !h.HasProducerID() {
				return nil
			}
			recs := pending[h.ProducerID]
			delete(pending, h.ProducerID)
			if typ != storage.ControlCommit {
				return nil
			}
			for _, r := range recs {
				if err := fn(r.Offset, r); err != nil {
					return err
				}
			}
			return nil
		}
		recs, err := storage.DecodeRecords(batch)
		if err != nil {
			return fmt.Errorf("read %s at offset %d: %w", p.tp, h.BaseOffset, err)
		}
		if h.IsTransactional() && h.HasProducerID() {
			if _, ok := pending[h.ProducerID]; !ok {
				order = append(order, h.ProducerID)
			}
			pending[h.ProducerID] = append(pending[h.ProducerID], recs...)
			return nil
		}
		for _, r := range recs {
			if r.Offset < fromOffset {
				continue
			}
			if err := fn(r.Offset, r); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	seen := map[int64]bool{}
	for _, pid := range order {
		if seen[pid] {
			continue
		}
		seen[pid] = true
		for _, r := range pending[pid] {
			if err := open(pid, r); err != nil {
				return err
			}
		}
	}
	return nil
}
