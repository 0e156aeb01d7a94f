package replica

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/faultline/faultline/broker/storage"
)

// Produce appends a client's batches to a partition this broker leads with
// the leader epoch stamped in, and answers per acks: 0 and 1 after the
// local append, -1 once the high watermark passes the last appended offset.
// acks is one of 0, 1, -1: it is a property of the whole Produce request,
// so the server rejects any other value (INVALID_REQUIRED_ACKS on every
// partition) while decoding it, before any partition is touched, and the
// broker's own writes (AppendInternal) use -1. acks=-1 with the ISR below
// min.insync.replicas fails with NOT_ENOUGH_REPLICAS before anything is
// written. A batch the log recognizes as a retry of one of its producer's
// last five batches is answered with the original offsets.
func (m *Manager) Produce(ctx context.Context, topic string, partition int32, records []byte, acks int16) ProduceResult {
	return m.produce(ctx, topic, partition, records, acks, false)
}

// InTransaction reports whether the producer, at epoch, has a transaction
// open on a partition this broker holds (storage.Log.InTransaction); false
// for a partition it does not hold.
func (m *Manager) InTransaction(topic string, partition int32, producerID int64, epoch int16) bool {
	p := m.get(topic, partition)
	if p == nil {
		return false
	}
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.log != nil && p.log.InTransaction(producerID, epoch)
}

// Producers returns the producers of a partition this broker leads
// (DescribeProducers), or NOT_LEADER_OR_FOLLOWER / UNKNOWN_TOPIC_OR_PARTITION.
func (m *Manager) Producers(topic string, partition int32) ([]storage.ProducerState, int16) {
	p := m.get(topic, partition)
	if p == nil {
		return nil, m.unknownOrNotLeader(topic, partition)
	}
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.state != OnlineReplica || p.log == nil {
		return nil, kerr.NotLeaderForPartition.Code
	}
	return p.log.Producers(), 0
}

// produce is Produce; coordinator appends records a coordinator of this
// broker writes for a producer (storage.Log.AppendAsCoordinator).
func (m *Manager) produce(ctx context.Context, topic string, partition int32, records []byte, acks int16, coordinator bool) ProduceResult {
	res := ProduceResult{BaseOffset: -1, LogAppendTime: -1, LogStartOffset: -1}
	p := m.get(topic, partition)
	if p == nil {
		res.ErrorCode = m.unknownOrNotLeader(topic, partition)
		return res
	}
	p.mu.RLock()
	if p.state != OnlineReplica {
		p.mu.RUnlock()
		res.ErrorCode = kerr.NotLeaderForPartition.Code
		return res
	}
	p.stMu.Lock()
	st := p.st
	under := st.UnderMinISR()
	isrSize := len(st.ISR)
	p.stMu.Unlock()
	if acks == -1 && under {
		p.mu.RUnlock()
		res.ErrorCode = kerr.NotEnoughReplicas.Code
		res.ErrorMessage = fmt.Sprintf("the ISR of %s has %d replica(s), min.insync.replicas is %d", p.tp, isrSize, p.settings.MinInsyncReplicas)
		return res
	}
	if segmentBytes := p.log.Config().SegmentBytes; int64(len(records)) > segmentBytes {
		p.mu.RUnlock()
		res.ErrorCode = kerr.RecordListTooLarge.Code
		res.ErrorMessage = fmt.Sprintf("%d bytes of records do not fit in a segment of %s (segment.bytes %d)", len(records), p.tp, segmentBytes)
		return res
	}
	appendFn := p.log.AppendAsLeader
	if coordinator {
		appendFn = p.log.AppendAsCoordinator
	}
	info, err := appendFn(records, p.leaderEpoch, m.cfg.Now().UnixMilli())
	if err != nil {
		code := errorCode(err)
		p.mu.RUnlock()
		res.ErrorCode, res.ErrorMessage = code, err.Error()
		if !clientError(code) {
			m.logger.Error(fmt.Sprintf("Append to partition %s failed", p.tp), "err", err)
		}
		return res
	}
	p.appended(st)
	p.mu.RUnlock()
	if !info.Duplicate {
		m.signalChanged()
	}
	res.BaseOffset = info.FirstOffset
	res.LogAppendTime = info.LogAppendTime
	res.LogStartOffset = p.log.LogStartOffset()
	if acks != -1 || m.cfg.Unsafe.AckBeforeISR || (m.cfg.Unsafe.TxnMarkersBeforeDurable && transactional(records)) {
		return res
	}
	res.ErrorCode, res.ErrorMessage = m.awaitHW(ctx, p, st, info.LastOffset)
	return res
}

// transactional reports whether records is a transactional batch (the
// first batch's attribute: a producer's batches of one request share it).
func transactional(records []byte) bool {
	h, err := storage.ParseBatchHeader(records)
	return err == nil && h.IsTransactional()
}

// WaitBound returns ctx carrying d as the longest an append made with it
// (AppendInternal, WriteTxnMarkers, Produce with acks=-1) waits for the
// high watermark. Unlike context.WithTimeout it arms no timer and
// registers nothing with ctx: the deadline is set only when an append
// has to wait, which a partition whose ISR is the leader alone never does.
// A deadline ctx already has still applies.
//
// The bound is one for every wait made with ctx: the first that has to
// wait fixes the deadline, and later ones (the markers of one
// WriteTxnMarkers call) share it.
func WaitBound(ctx context.Context, d time.Duration) context.Context {
	return context.WithValue(ctx, waitBoundKey{}, &waitBound{d: d})
}

type waitBoundKey struct{}

// waitBound is a WaitBound: d, and once armed the deadline it fixed.
type waitBound struct {
	d        time.Duration
	once     sync.Once
	deadline time.Time
}

func (b *waitBound) arm() time.Time {
	b.once.Do(func() { b.deadline = time.Now().Add(b.d) })
	return b.deadline
}

// awaitHW waits until the high watermark of p passes lastOffset while st is
// still p's leader state.
func (m *Manager) awaitHW(ctx context.Context, p *partition, st *State, lastOffset int64) (int16, string) {
	bounded := false
	for {
		p.stMu.Lock()
		current, hw, under, ch := p.st, st.HW, st.UnderMinISR(), p.hwMoved
		p.stMu.Unlock()
		if current != st {
			return kerr.NotLeaderForPartition.Code, fmt.Sprintf("%s lost leadership before offset %d was replicated", p.tp, lastOffset)
		}
		if under {
			// The high watermark is frozen (or passed the write with too
			// few replicas holding it): the write is not acknowledged.
			return kerr.NotEnoughReplicasAfterAppend.Code, fmt.Sprintf("%s: the ISR shrank below min.insync.replicas after the append", p.tp)
		}
		if hw > lastOffset {
			return 0, ""
		}
		if b, ok := ctx.Value(waitBoundKey{}).(*waitBound); ok && !bounded {
			var cancel context.CancelFunc
			ctx, cancel = context.WithDeadline(ctx, b.arm())
			defer cancel()
			bounded = true
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return kerr.RequestTimedOut.Code, fmt.Sprintf("%s: high watermark %d did not pass offset %d in time", p.tp, hw, lastOffset)
		}
	}
}

// AppendInternal appends records written by the broker itself (the group
// coordinator's offsets and group metadata in __consumer_offsets) with
// acks=all semantics and returns the offset of the last one. Errors wrap
// the Kafka error (kerr) the append failed with.
func (m *Manager) AppendInternal(ctx context.Context, topic string, partition int32, records []storage.Record) (int64, error) {
	if len(records) == 0 {
		return -1, fmt.Errorf("append to %s-%d: no records", topic, partition)
	}
	batch := storage.BuildBatch(records, storage.BatchOptions{})
	return m.appendInternal(ctx, topic, partition, batch, len(records), false)
}

func (m *Manager) appendInternal(ctx context.Context, topic string, partition int32, batch []byte, n int, coordinator bool) (int64, error) {
	acks := int16(-1)
	if m.cfg.Unsafe.OffsetsUnreplicated {
		acks = 1
	}
	res := m.produce(ctx, topic, partition, batch, acks, coordinator)
	if res.ErrorCode != 0 {
		return -1, fmt.Errorf("append to %s-%d: %w: %s", topic, partition, kerr.ErrorForCode(res.ErrorCode), res.ErrorMessage)
	}
	return res.BaseOffset + int64(n) - 1, nil
}

// AppendInternalTxn is AppendInternal for records written inside a
// producer's transaction (the group coordinator's TxnOffsetCommit): one
// transactional batch of producerID at epoch, without a sequence; the
// transaction's marker ends it.
func (m *Manager) AppendInternalTxn(ctx context.Context, topic string, partition int32, producerID int64, epoch int16, records []storage.Record) (int64, error) {
	if len(records) == 0 {
		return -1, fmt.Errorf("append to %s-%d: no records", topic, partition)
	}
	batch := storage.BuildBatch(records, storage.BatchOptions{
		Producer:      &storage.BatchProducer{ID: producerID, Epoch: epoch, BaseSequence: -1},
		Transactional: true,
	})
	return m.appendInternal(ctx, topic, partition, batch, len(records), true)
}

// TxnMarker is one partition's transaction marker: the commit or abort of
// a producer's transaction there, from coordinator epoch CoordinatorEpoch.
type TxnMarker struct {
	Topic            string
	Partition        int32
	ProducerID       int64
	ProducerEpoch    int16
	Commit           bool
	CoordinatorEpoch int32
}

// WriteTxnMarkers appends transaction markers (WriteTxnMarkers, from a
// transaction coordinator) to partitions this broker leads and answers
// once the high watermark passes each, as an acks=all produce; codes[i] is
// markers[i]'s. Every marker is appended before any is waited for, so the
// partitions replicate them together, with no goroutine per partition. A
// marker ends the producer's open transaction in its partition; an abort
// goes to the aborted-transactions index. A marker from an older
// coordinator epoch gets TRANSACTION_COORDINATOR_FENCED, one for an older
// producer epoch INVALID_PRODUCER_EPOCH.
func (m *Manager) WriteTxnMarkers(ctx context.Context, markers []TxnMarker) []int16 {
	type written struct {
		p      *partition
		st     *State
		offset int64
	}
	codes := make([]int16, len(markers))
	waits := make([]written, len(markers))
	appended := false
	for i, mk := range markers {
		p, st, offset, code := m.appendMarker(mk)
		codes[i] = code
		if code == 0 {
			waits[i] = written{p, st, offset}
			appended = true
		}
	}
	if appended {
		m.signalChanged()
	}
	for i, w := range waits {
		if w.p != nil {
			codes[i], _ = m.awaitHW(ctx, w.p, w.st, w.offset)
		}
	}
	return codes
}

// appendMarker appends one marker as the partition's leader and returns
// where, or the error code that refused it.
func (m *Manager) appendMarker(mk TxnMarker) (*partition, *State, int64, int16) {
	p := m.get(mk.Topic, mk.Partition)
	if p == nil {
		return nil, nil, 0, m.unknownOrNotLeader(mk.Topic, mk.Partition)
	}
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.state != OnlineReplica {
		return nil, nil, 0, kerr.NotLeaderForPartition.Code
	}
	p.stMu.Lock()
	st := p.st
	p.stMu.Unlock()
	offset, err := p.log.AppendMarker(mk.ProducerID, mk.ProducerEpoch, mk.Commit, mk.CoordinatorEpoch, p.leaderEpoch, m.cfg.Now().UnixMilli())
	if err != nil {
		code := errorCode(err)
		if !clientError(code) {
			m.logger.Error(fmt.Sprintf("Marker append to partition %s failed", p.tp), "err", err)
		}
		return nil, nil, 0, code
	}
	p.appended(st)
	return p, st, offset, 0
}

// appended tells the leader state st of the new log end after an append,
// publishing a high watermark that moved.
func (p *partition) appended(st *State) {
	p.stMu.Lock()
	moved := st.Appended(p.log.VisibleEnd())
	p.stMu.Unlock()
	if moved {
		p.publishHW()
	}
}

// DeleteRecords advances the log start offset of a partition this broker
// leads to offset (-1: its high watermark), as Kafka's DeleteRecords does,
// and answers with the low watermark once the log start of every follower
// that may lead (the maximal ISR, and any follower fetching lately) has
// followed (State.LowWatermark; followers take the leader's log start
// from their fetches), so that no replica that may take over still serves
// the deleted records; REQUEST_TIMED_OUT when ctx ends first.
// OFFSET_OUT_OF_RANGE for an offset above the high watermark or below -1,
// POLICY_VIOLATION for a topic that is compacted and not deleted.
func (m *Manager) DeleteRecords(ctx context.Context, topic string, partition int32, offset int64) (int64, int16, string) {
	p := m.get(topic, partition)
	if p == nil {
		return -1, m.unknownOrNotLeader(topic, partition), ""
	}
	p.mu.RLock()
	if p.state != OnlineReplica {
		p.mu.RUnlock()
		return -1, kerr.NotLeaderForPartition.Code, ""
	}
	if p.log.Config().CleanupPolicy == storage.CleanupCompact {
		p.mu.RUnlock()
		return -1, kerr.PolicyViolation.Code, fmt.Sprintf("records cannot be deleted from %s: cleanup.policy is compact", p.tp)
	}
	hw := p.log.HighWatermark()
	if offset == -1 {
		offset = hw
	}
	if offset < 0 || offset > hw {
		p.mu.RUnlock()
		return -1, kerr.OffsetOutOfRange.Code, fmt.Sprintf("offset %d of %s is not between 0 and the high watermark %d", offset, p.tp, hw)
	}
	if err := m.cfg.Logs.IncrementLogStartOffset(p.tp, offset); err != nil {
		p.mu.RUnlock()
		return -1, errorCode(err), err.Error()
	}
	p.stMu.Lock()
	st := p.st
	p.stMu.Unlock()
	p.mu.RUnlock()
	m.signalChanged()
	for {
		p.stMu.Lock()
		current, ch := p.st, p.hwMoved
		low := int64(-1)
		if current != nil {
			low = current.LowWatermark(p.log.LogStartOffset(), m.cfg.Now().UnixMilli(), m.cfg.ReplicaLagTimeMaxMs)
		}
		p.stMu.Unlock()
		switch {
		case current != st:
			return -1, kerr.NotLeaderForPartition.Code, fmt.Sprintf("%s lost leadership before its replicas deleted up to %d", p.tp, offset)
		case low >= offset:
			return low, 0, ""
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return low, kerr.RequestTimedOut.Code, fmt.Sprintf("%s: the replicas' low watermark %d did not reach %d in time", p.tp, low, offset)
		}
	}
}
