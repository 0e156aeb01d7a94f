package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"sort"
)

// Control record types of transaction markers (Kafka's ControlRecordType).
const (
	ControlAbort  int16 = 0
	ControlCommit int16 = 1
)

// ErrTransactionCoordinatorFenced: a marker from a coordinator whose epoch
// is older than one this partition has seen from the producer's
// coordinator.
var ErrTransactionCoordinatorFenced = errors.New("transaction coordinator fenced")

// AbortedTxn is one entry of the aborted-transactions index (.txnindex): a
// transaction of ProducerID whose data lies in [FirstOffset, LastOffset]
// (LastOffset is its ABORT marker) was aborted. LastStableOffset is the
// partition's LSO right after the marker.
type AbortedTxn struct {
	ProducerID       int64
	FirstOffset      int64
	LastOffset       int64
	LastStableOffset int64
}

// txnIndexEntrySize is Kafka's .txnindex entry: i16 version 0, i64 pid,
// i64 first offset, i64 last offset, i64 LSO.
const txnIndexEntrySize = 34

func encodeTxnIndex(entries []AbortedTxn) []byte {
	b := make([]byte, 0, len(entries)*txnIndexEntrySize)
	for _, e := range entries {
		b = binary.BigEndian.AppendUint16(b, 0)
		b = binary.BigEndian.AppendUint64(b, uint64(e.ProducerID))
		b = binary.BigEndian.AppendUint64(b, uint64(e.FirstOffset))
		b = binary.BigEndian.AppendUint64(b, uint64(e.LastOffset))
		b = binary.BigEndian.AppendUint64(b, uint64(e.LastStableOffset))
	}
	return b
}

// decodeTxnIndex parses a .txnindex file; a torn tail (a partial last
// entry) is ignored, an unknown version or an entry that contradicts
// itself is an error.
func decodeTxnIndex(b []byte) ([]AbortedTxn, error) {
	var out []AbortedTxn
	for p := 0; p+txnIndexEntrySize <= len(b); p += txnIndexEntrySize {
		e := b[p : p+txnIndexEntrySize]
		if v := int16(binary.BigEndian.Uint16(e)); v != 0 {
			return nil, fmt.Errorf("%w: txnindex entry version %d", ErrCorruptCheckpoint, v)
		}
		a := AbortedTxn{
			ProducerID:       int64(binary.BigEndian.Uint64(e[2:])),
			FirstOffset:      int64(binary.BigEndian.Uint64(e[10:])),
			LastOffset:       int64(binary.BigEndian.Uint64(e[18:])),
			LastStableOffset: int64(binary.BigEndian.Uint64(e[26:])),
		}
		if a.FirstOffset < 0 || a.LastOffset < a.FirstOffset {
			return nil, fmt.Errorf("%w: txnindex entry [%d, %d]", ErrCorruptCheckpoint, a.FirstOffset, a.LastOffset)
		}
		out = append(out, a)
	}
	return out, nil
}

// parseMarker reads the control record of a control batch: its type and,
// for COMMIT and ABORT, the coordinator epoch of the value.
func parseMarker(batch []byte) (typ int16, coordinatorEpoch int32, err error) {
	recs, err := DecodeRecords(batch)
	if err != nil {
		return 0, 0, err
	}
	if len(recs) == 0 || len(recs[0].Key) < 4 {
		return 0, 0, fmt.Errorf("%w: control batch without a control record key", ErrInvalidRecord)
	}
	typ = int16(binary.BigEndian.Uint16(recs[0].Key[2:]))
	if (typ == ControlAbort || typ == ControlCommit) && len(recs[0].Value) >= 6 {
		coordinatorEpoch = int32(binary.BigEndian.Uint32(recs[0].Value[2:]))
	}
	return typ, coordinatorEpoch, nil
}

// BuildMarker encodes a transaction marker: a control batch of one record
// with key (version 0, type) and value (version 0, coordinator epoch).
func BuildMarker(producerID int64, epoch int16, commit bool, coordinatorEpoch int32, nowMs int64) []byte {
	typ := ControlAbort
	if commit {
		typ = ControlCommit
	}
	key := binary.BigEndian.AppendUint16(make([]byte, 0, 4), 0)
	key = binary.BigEndian.AppendUint16(key, uint16(typ))
	value := binary.BigEndian.AppendUint16(make([]byte, 0, 6), 0)
	value = binary.BigEndian.AppendUint32(value, uint32(coordinatorEpoch))
	return BuildBatch([]Record{{TimestampMs: nowMs, Key: key, Value: value}}, BatchOptions{
		Producer:      &BatchProducer{ID: producerID, Epoch: epoch, BaseSequence: -1},
		Transactional: true,
		Control:       true,
	})
}

// txnEnd is what a marker did to one producer's open transaction.
type txnEnd struct {
	aborted     bool
	firstOffset int64 // -1: no transaction was open
}

// applyMarker ends the open transaction of h's producer (h is a marker at
// its final offset): the producer's epoch rises to the marker's (a
// coordinator that fenced the producer bumped it) and its coordinator
// epoch is noted.
func (ps *producerState) applyMarker(h BatchHeader, typ int16, coordinatorEpoch int32) txnEnd {
	e, ok := ps.producers[h.ProducerID]
	if !ok {
		e = &producerEntry{epoch: h.ProducerEpoch, coordinatorEpoch: -1, currentTxnFirstOffset: -1}
		ps.producers[h.ProducerID] = e
	}
	end := txnEnd{aborted: typ == ControlAbort, firstOffset: e.currentTxnFirstOffset}
	if h.ProducerEpoch > e.epoch {
		e.epoch = h.ProducerEpoch
		e.batches = e.batches[:0]
	}
	e.currentTxnFirstOffset = -1
	e.coordinatorEpoch = coordinatorEpoch
	e.lastTimestamp = max(e.lastTimestamp, h.MaxTimestamp)
	return end
}

// checkMarker refuses a marker from a fenced coordinator or for an epoch
// older than the producer's.
func (ps *producerState) checkMarker(h BatchHeader, coordinatorEpoch int32) error {
	e, ok := ps.producers[h.ProducerID]
	if !ok {
		return nil
	}
	if coordinatorEpoch < e.coordinatorEpoch {
		return fmt.Errorf("%w: marker of producer %d from coordinator epoch %d, seen %d", ErrTransactionCoordinatorFenced, h.ProducerID, coordinatorEpoch, e.coordinatorEpoch)
	}
	if h.ProducerEpoch < e.epoch {
		return fmt.Errorf("%w: marker of producer %d epoch %d is older than %d", ErrInvalidProducerEpoch, h.ProducerID, h.ProducerEpoch, e.epoch)
	}
	return nil
}

// firstUnstableOffset is the first offset of the oldest open transaction,
// -1 when none is open.
func (ps *producerState) firstUnstableOffset() int64 {
	first := int64(-1)
	for _, e := range ps.producers {
		if o := e.currentTxnFirstOffset; o >= 0 && (first < 0 || o < first) {
			first = o
		}
	}
	return first
}

// replayBatch applies one batch read from the log (follower append,
// recovery, truncation) to the producer state and, for an abort marker
// that ended an open transaction, to the aborted index; with persist the
// index file of the active segment is rewritten.
func (l *Log) replayBatch(h BatchHeader, batch []byte, persist bool) {
	if !h.IsControl() {
		l.producers.replay(h)
		return
	}
	if !h.HasProducerID() {
		return
	}
	typ, coordEpoch, err := parseMarker(batch)
	if err != nil || (typ != ControlAbort && typ != ControlCommit) {
		return
	}
	l.endTxn(h, typ, coordEpoch, persist)
}

func (l *Log) endTxn(h BatchHeader, typ int16, coordEpoch int32, persist bool) {
	end := l.producers.applyMarker(h, typ, coordEpoch)
	if !end.aborted || end.firstOffset < 0 {
		return
	}
	lso := l.producers.firstUnstableOffset()
	if lso < 0 {
		lso = h.NextOffset()
	}
	l.aborted = append(l.aborted, AbortedTxn{ProducerID: h.ProducerID, FirstOffset: end.firstOffset, LastOffset: h.BaseOffset, LastStableOffset: lso})
	if persist {
		l.writeTxnIndex(l.active())
	}
}

// writeTxnIndex rewrites the .txnindex of s from the in-memory entries
// whose marker lies in s; an empty index has no file.
func (l *Log) writeTxnIndex(s *segment) {
	to := s.nextOffset
	if s == l.active() {
		to = math.MaxInt64
	}
	if err := l.writeTxnIndexFile(s.baseOffset, to); err != nil {
		l.logger.Warn(fmt.Sprintf("Failed to write the aborted transaction index of segment %d of %s", s.baseOffset, l.tp), "err", err)
	}
}

// writeTxnIndexFile writes, as the .txnindex of the segment at base, the
// in-memory entries whose marker lies in [base, to); with none the file
// is removed.
func (l *Log) writeTxnIndexFile(base, to int64) error {
	var entries []AbortedTxn
	for _, a := range l.aborted {
		if a.LastOffset >= base && a.LastOffset < to {
			entries = append(entries, a)
		}
	}
	name := offsetFileName(l.dir, base, txnIndexSuffix)
	l.dirDirty = true
	if len(entries) == 0 {
		if err := l.fs.Remove(name); err != nil && !os.IsNotExist(err) {
			return err
		}
		return nil
	}
	return writeFileAtomic(l.fs, name, encodeTxnIndex(entries))
}

// loadTxnIndexes reads the .txnindex of every segment, keeping the entries
// whose marker is below upTo; an unreadable file is skipped with a warning
// (the replay from the last snapshot rebuilds what lies above it).
func (l *Log) loadTxnIndexes(upTo int64) {
	l.aborted = l.aborted[:0]
	for i, s := range l.segments {
		if s.baseOffset >= upTo {
			break
		}
		// A segment's index holds the markers of its own offsets: a clean
		// stopped before its swap leaves the merged index (written first)
		// beside the segments it would have replaced, whose entries past
		// the first segment are theirs to give (and a truncation since
		// may have rewritten them).
		end := upTo
		if i+1 < len(l.segments) {
			end = min(end, l.segments[i+1].baseOffset)
		}
		name := offsetFileName(l.dir, s.baseOffset, txnIndexSuffix)
		data, err := readFile(l.fs, name)
		if err != nil {
			if !os.IsNotExist(err) {
				l.logger.Warn(fmt.Sprintf("Failed to read the aborted transaction index of segment %d of %s", s.baseOffset, l.tp), "err", err)
			}
			continue
		}
		entries, err := decodeTxnIndex(data)
		if err != nil {
			l.logger.Warn(fmt.Sprintf("Ignoring the unreadable aborted transaction index of segment %d of %s", s.baseOffset, l.tp), "err", err)
			continue
		}
		for _, a := range entries {
			if a.LastOffset < end && a.LastOffset >= s.baseOffset {
				l.aborted = append(l.aborted, a)
			}
		}
	}
	sort.SliceStable(l.aborted, func(i, j int) bool { return l.aborted[i].LastOffset < l.aborted[j].LastOffset })
}

// AppendMarker writes a transaction marker (COMMIT or ABORT) for a
// producer to this leader's log and ends the producer's open transaction;
// an abort is added to the aborted-transactions index. A marker from a
// coordinator epoch older than the producer's last one fails with
// ErrTransactionCoordinatorFenced, one for an older producer epoch with
// ErrInvalidProducerEpoch. It returns the marker's offset.
func (l *Log) AppendMarker(producerID int64, epoch int16, commit bool, coordinatorEpoch, leaderEpoch int32, nowMs int64) (int64, error) {
	offset, flush, err := l.appendMarker(producerID, epoch, commit, coordinatorEpoch, leaderEpoch, nowMs)
	if err != nil || !flush {
		return offset, err
	}
	return offset, l.syncTo(offset+1, nowMs)
}

func (l *Log) appendMarker(producerID int64, epoch int16, commit bool, coordinatorEpoch, leaderEpoch int32, nowMs int64) (int64, bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.checkUsable(); err != nil {
		return -1, false, err
	}
	batch := BuildMarker(producerID, epoch, commit, coordinatorEpoch, nowMs)
	h, err := ParseBatchHeader(batch)
	if err != nil {
		return -1, false, fmt.Errorf("marker for %s: %w", l.tp, err)
	}
	if err := l.producers.checkMarker(h, coordinatorEpoch); err != nil {
		return -1, false, fmt.Errorf("marker for %s: %w", l.tp, err)
	}
	offset := l.leo()
	setBaseOffset(batch, offset)
	setPartitionLeaderEpoch(batch, leaderEpoch)
	h.BaseOffset, h.PartitionLeaderEpoch = offset, leaderEpoch
	if err := l.appendBatches(batch, []BatchHeader{h}, nowMs); err != nil {
		return -1, false, err
	}
	typ := ControlAbort
	if commit {
		typ = ControlCommit
	}
	l.endTxn(h, typ, coordinatorEpoch, true)
	if leaderEpoch >= 0 {
		if e, ok := l.epochs.latest(); !ok || e.Epoch < leaderEpoch {
			if _, err := l.epochs.assign(leaderEpoch, offset, true); err != nil {
				return offset, false, fmt.Errorf("marker for %s: leader epoch checkpoint: %w", l.tp, err)
			}
		}
	}
	return offset, l.noteAppended(1), nil
}

// InTransaction reports whether producerID, at epoch, has a transaction
// open on this log: a batch of its since the last marker is here, so a
// later batch of the same transaction needs no verification (KIP-890
// part 1).
func (l *Log) InTransaction(producerID int64, epoch int16) bool {
	l.mu.RLock()
	defer l.mu.RUnlock()
	e := l.producers.producers[producerID]
	return e != nil && e.epoch == epoch && e.currentTxnFirstOffset >= 0
}

// ProducerState is one producer id's state in a partition, as
// DescribeProducers reports it.
type ProducerState struct {
	ProducerID    int64
	Epoch         int16
	LastSequence  int32 // -1 before its first batch of this epoch
	LastTimestamp int64
	// CoordinatorEpoch is that of the last marker written for it (-1:
	// none).
	CoordinatorEpoch int32
	// CurrentTxnStartOffset is the first offset of its open transaction,
	// -1 when it has none.
	CurrentTxnStartOffset int64
}

// Producers returns the state of every producer the log remembers, by
// producer id.
func (l *Log) Producers() []ProducerState {
	l.mu.RLock()
	defer l.mu.RUnlock()
	out := make([]ProducerState, 0, len(l.producers.producers))
	for id, e := range l.producers.producers {
		out = append(out, ProducerState{ProducerID: id, Epoch: e.epoch, LastSequence: e.lastSeq(), LastTimestamp: e.lastTimestamp,
			CoordinatorEpoch: e.coordinatorEpoch, CurrentTxnStartOffset: e.currentTxnFirstOffset})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ProducerID < out[j].ProducerID })
	return out
}

// LastStableOffset is the first offset of the oldest open transaction,
// or the high watermark when that is lower (or no transaction is open):
// read_committed consumers read below it.
func (l *Log) LastStableOffset() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if first := l.producers.firstUnstableOffset(); first >= 0 && first < l.highWatermark {
		return max(first, l.logStartOffset)
	}
	return l.highWatermark
}

// FirstUnstableOffset is the first offset of the oldest open transaction,
// -1 when none is open.
func (l *Log) FirstUnstableOffset() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.producers.firstUnstableOffset()
}

// AbortedTxns lists the aborted transactions that overlap [from, to): a
// read_committed fetch of those offsets hands them to the consumer, which
// drops their records.
func (l *Log) AbortedTxns(from, to int64) []AbortedTxn {
	l.mu.RLock()
	defer l.mu.RUnlock()
	i := sort.Search(len(l.aborted), func(i int) bool { return l.aborted[i].LastOffset >= from })
	var out []AbortedTxn
	for _, a := range l.aborted[i:] {
		if a.FirstOffset < to {
			out = append(out, a)
		}
	}
	return out
}

// AppendAsCoordinator is AppendAsLeader for records a coordinator of this
// broker writes on behalf of a producer (the group coordinator's
// transactional offset commits): transactional batches carry the
// producer's id and epoch but no sequence, and only the epoch is checked.
func (l *Log) AppendAsCoordinator(records []byte, leaderEpoch int32, nowMs int64) (AppendInfo, error) {
	info, flush, err := l.appendAsLeader(records, leaderEpoch, nowMs, true)
	if err != nil || !flush {
		return info, err
	}
	return info, l.syncTo(info.LastOffset+1, nowMs)
}

// checkEpoch refuses a batch from an epoch older than its producer's.
func (pa *producerAppend) checkEpoch(h BatchHeader) error {
	if e, ok := pa.entry(h.ProducerID); ok && h.ProducerEpoch < e.epoch {
		return fmt.Errorf("%w: producer %d epoch %d is older than %d", ErrInvalidProducerEpoch, h.ProducerID, h.ProducerEpoch, e.epoch)
	}
	return nil
}

// MarkerType is the control record type of a control batch (ControlAbort,
// ControlCommit, or another control type).
func MarkerType(batch []byte) (int16, error) {
	typ, _, err := parseMarker(batch)
	return typ, err
}
