package storage

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"maps"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// producerBatchesMax is how many batches per producer Kafka remembers for
// duplicate detection (the client keeps at most 5 in flight).
const producerBatchesMax = 5

// batchMeta is one remembered batch of an idempotent producer.
type batchMeta struct {
	firstSeq    int32
	lastSeq     int32
	firstOffset int64
	lastOffset  int64
	timestamp   int64
}

// producerEntry is the state of one producer id in one partition.
type producerEntry struct {
	epoch                 int16
	batches               []batchMeta // oldest first, at most producerBatchesMax
	coordinatorEpoch      int32
	currentTxnFirstOffset int64
	lastTimestamp         int64
}

func (e *producerEntry) lastSeq() int32 {
	if len(e.batches) == 0 {
		return -1
	}
	return e.batches[len(e.batches)-1].lastSeq
}

func (e *producerEntry) clone() *producerEntry {
	c := *e
	c.batches = append([]batchMeta(nil), e.batches...)
	return &c
}

// add records a batch; a new epoch forgets the older epoch's batches.
func (e *producerEntry) add(h BatchHeader) {
	if h.ProducerEpoch != e.epoch {
		e.epoch = h.ProducerEpoch
		e.batches = e.batches[:0]
	}
	if len(e.batches) == producerBatchesMax {
		copy(e.batches, e.batches[1:])
		e.batches = e.batches[:producerBatchesMax-1]
	}
	e.batches = append(e.batches, batchMeta{
		firstSeq:    h.BaseSequence,
		lastSeq:     h.LastSequence(),
		firstOffset: h.BaseOffset,
		lastOffset:  h.LastOffset(),
		timestamp:   h.MaxTimestamp,
	})
	e.lastTimestamp = h.MaxTimestamp
	if h.IsTransactional() && e.currentTxnFirstOffset < 0 {
		e.currentTxnFirstOffset = h.BaseOffset
	}
}

// duplicateOf returns the remembered batch h duplicates, if any. A
// transactional h can only be a retry of a batch of the producer's still
// open transaction: a batch of a transaction that has ended (a marker came
// after it) is never retried by a later one, and answering h as its
// duplicate would acknowledge records never written with the offsets of an
// ended, maybe aborted, transaction. Such an h is no duplicate; the
// sequence checks refuse it as out of order.
func (e *producerEntry) duplicateOf(h BatchHeader) (batchMeta, bool) {
	if h.ProducerEpoch != e.epoch {
		return batchMeta{}, false
	}
	txnFirst := int64(-1) // no bound for a batch outside transactions
	if h.IsTransactional() {
		if e.currentTxnFirstOffset < 0 {
			return batchMeta{}, false
		}
		txnFirst = e.currentTxnFirstOffset
	}
	last := h.LastSequence()
	for _, b := range e.batches {
		if b.firstSeq == h.BaseSequence && b.lastSeq == last && b.firstOffset >= txnFirst {
			return b, true
		}
	}
	return batchMeta{}, false
}

// producerState maps producer ids to their state for one partition.
type producerState struct {
	producers map[int64]*producerEntry
}

func newProducerState() *producerState {
	return &producerState{producers: map[int64]*producerEntry{}}
}

// producerAppend validates a leader append's batches against the producer
// state without changing it; commit applies them.
type producerAppend struct {
	state   *producerState
	pending map[int64]*producerEntry
	// olderEpochsPass is Unsafe.ProduceNoEpochFence.
	olderEpochsPass bool
}

func (ps *producerState) begin() *producerAppend {
	return &producerAppend{state: ps}
}

func (pa *producerAppend) entry(pid int64) (*producerEntry, bool) {
	if e, ok := pa.pending[pid]; ok {
		return e, true
	}
	e, ok := pa.state.producers[pid]
	return e, ok
}

// check validates h (client origin) and returns a duplicate's metadata when
// h repeats a remembered batch.
func (pa *producerAppend) check(h BatchHeader) (batchMeta, bool, error) {
	e, ok := pa.entry(h.ProducerID)
	if !ok {
		return batchMeta{}, false, nil
	}
	if dup, ok := e.duplicateOf(h); ok {
		return dup, true, nil
	}
	if h.ProducerEpoch < e.epoch {
		if pa.olderEpochsPass {
			return batchMeta{}, false, nil
		}
		return batchMeta{}, false, fmt.Errorf("%w: producer %d epoch %d is older than %d", ErrInvalidProducerEpoch, h.ProducerID, h.ProducerEpoch, e.epoch)
	}
	if h.ProducerEpoch > e.epoch {
		if h.BaseSequence != 0 {
			return batchMeta{}, false, fmt.Errorf("%w: producer %d new epoch %d must start at sequence 0, got %d", ErrOutOfOrderSequence, h.ProducerID, h.ProducerEpoch, h.BaseSequence)
		}
		return batchMeta{}, false, nil
	}
	last := e.lastSeq()
	if last < 0 {
		if h.BaseSequence != 0 {
			return batchMeta{}, false, fmt.Errorf("%w: producer %d epoch %d expects sequence 0, got %d", ErrOutOfOrderSequence, h.ProducerID, h.ProducerEpoch, h.BaseSequence)
		}
		return batchMeta{}, false, nil
	}
	if want := incrementSequence(last, 1); h.BaseSequence != want {
		return batchMeta{}, false, fmt.Errorf("%w: producer %d epoch %d expects sequence %d, got %d", ErrOutOfOrderSequence, h.ProducerID, h.ProducerEpoch, want, h.BaseSequence)
	}
	return batchMeta{}, false, nil
}

// record notes h (with final offsets) in the pending state.
func (pa *producerAppend) record(h BatchHeader) {
	if pa.pending == nil {
		pa.pending = map[int64]*producerEntry{}
	}
	e, ok := pa.pending[h.ProducerID]
	if !ok {
		if cur, ok := pa.state.producers[h.ProducerID]; ok {
			e = cur.clone()
		} else {
			e = &producerEntry{epoch: h.ProducerEpoch, coordinatorEpoch: -1, currentTxnFirstOffset: -1}
		}
		pa.pending[h.ProducerID] = e
	}
	if pa.olderEpochsPass && h.ProducerEpoch < e.epoch {
		// The planted bug takes the batch and nothing else: the
		// producer's epoch and batches stay its successor's; the batch
		// only opens a transaction when none is open.
		if h.IsTransactional() && e.currentTxnFirstOffset < 0 {
			e.currentTxnFirstOffset = h.BaseOffset
		}
		return
	}
	e.add(h)
}

func (pa *producerAppend) commit() {
	for pid, e := range pa.pending {
		pa.state.producers[pid] = e
	}
}

// replay applies a batch read from the log without checks.
func (ps *producerState) replay(h BatchHeader) {
	if !h.HasProducerID() || h.IsControl() {
		return
	}
	e, ok := ps.producers[h.ProducerID]
	if !ok {
		e = &producerEntry{epoch: h.ProducerEpoch, coordinatorEpoch: -1, currentTxnFirstOffset: -1}
		ps.producers[h.ProducerID] = e
	}
	e.add(h)
}

// withBatches returns the state after replaying headers on ps, leaving ps
// unchanged: the producer state at an offset inside an append whose
// batches are written but not yet applied.
func (ps *producerState) withBatches(headers []BatchHeader) *producerState {
	var out *producerState
	var cloned map[int64]bool
	for _, h := range headers {
		if !h.HasProducerID() || h.IsControl() {
			continue
		}
		if out == nil {
			out = &producerState{producers: maps.Clone(ps.producers)}
			cloned = map[int64]bool{}
		}
		if e, ok := out.producers[h.ProducerID]; ok && !cloned[h.ProducerID] {
			out.producers[h.ProducerID] = e.clone()
		}
		cloned[h.ProducerID] = true
		out.replay(h)
	}
	if out == nil {
		return ps
	}
	return out
}

// expire forgets producers whose last batch timestamp is older than
// nowMs-expirationMs and that have no open transaction.
func (ps *producerState) expire(nowMs, expirationMs int64) int {
	n := 0
	for pid, e := range ps.producers {
		if e.currentTxnFirstOffset < 0 && nowMs-e.lastTimestamp >= expirationMs {
			delete(ps.producers, pid)
			n++
		}
	}
	return n
}

// Producer snapshot v1 (Kafka's ProducerSnapshot): i16 version, u32
// CRC-32C over the bytes after it, i32 count, then 46-byte entries.
const (
	snapshotVersion     = 1
	snapshotHeaderSize  = 10
	snapshotEntrySize   = 46
	snapshotCRCStart    = 6
	maxSnapshotProducer = 1 << 22
)

func encodeProducerSnapshot(ps *producerState) []byte {
	pids := make([]int64, 0, len(ps.producers))
	for pid, e := range ps.producers {
		if len(e.batches) > 0 {
			pids = append(pids, pid)
		}
	}
	sort.Slice(pids, func(i, j int) bool { return pids[i] < pids[j] })
	b := make([]byte, snapshotHeaderSize, snapshotHeaderSize+len(pids)*snapshotEntrySize)
	binary.BigEndian.PutUint16(b[0:], snapshotVersion)
	binary.BigEndian.PutUint32(b[6:], uint32(len(pids)))
	for _, pid := range pids {
		e := ps.producers[pid]
		last := e.batches[len(e.batches)-1]
		b = binary.BigEndian.AppendUint64(b, uint64(pid))
		b = binary.BigEndian.AppendUint16(b, uint16(e.epoch))
		b = binary.BigEndian.AppendUint32(b, uint32(last.lastSeq))
		b = binary.BigEndian.AppendUint64(b, uint64(last.lastOffset))
		b = binary.BigEndian.AppendUint32(b, uint32(last.lastOffset-last.firstOffset))
		b = binary.BigEndian.AppendUint64(b, uint64(last.timestamp))
		b = binary.BigEndian.AppendUint32(b, uint32(e.coordinatorEpoch))
		b = binary.BigEndian.AppendUint64(b, uint64(e.currentTxnFirstOffset))
	}
	binary.BigEndian.PutUint32(b[2:], crc32.Checksum(b[snapshotCRCStart:], castagnoli))
	return b
}

// decodeProducerSnapshot parses and checks a v1 producer snapshot.
func decodeProducerSnapshot(b []byte) (*producerState, error) {
	if len(b) < snapshotHeaderSize {
		return nil, fmt.Errorf("%w: producer snapshot of %d bytes", ErrCorruptCheckpoint, len(b))
	}
	if v := binary.BigEndian.Uint16(b); v != snapshotVersion {
		return nil, fmt.Errorf("%w: producer snapshot version %d", ErrCorruptCheckpoint, v)
	}
	if crc, want := crc32.Checksum(b[snapshotCRCStart:], castagnoli), binary.BigEndian.Uint32(b[2:]); crc != want {
		return nil, fmt.Errorf("%w: producer snapshot crc %08x, computed %08x", ErrCorruptCheckpoint, want, crc)
	}
	count := int32(binary.BigEndian.Uint32(b[6:]))
	if count < 0 || count > maxSnapshotProducer || len(b) != snapshotHeaderSize+int(count)*snapshotEntrySize {
		return nil, fmt.Errorf("%w: producer snapshot count %d in %d bytes", ErrCorruptCheckpoint, count, len(b))
	}
	ps := newProducerState()
	for p := snapshotHeaderSize; p < len(b); p += snapshotEntrySize {
		e := b[p : p+snapshotEntrySize]
		pid := int64(binary.BigEndian.Uint64(e[0:]))
		lastSeq := int32(binary.BigEndian.Uint32(e[10:]))
		lastOffset := int64(binary.BigEndian.Uint64(e[14:]))
		delta := int32(binary.BigEndian.Uint32(e[22:]))
		ts := int64(binary.BigEndian.Uint64(e[26:]))
		if delta < 0 || lastOffset < int64(delta) {
			return nil, fmt.Errorf("%w: producer %d offset delta %d", ErrCorruptCheckpoint, pid, delta)
		}
		firstSeq64 := int64(lastSeq) - int64(delta)
		if firstSeq64 < 0 && lastSeq >= 0 {
			firstSeq64 += math.MaxInt32 + 1
		}
		firstSeq := int32(firstSeq64)
		ps.producers[pid] = &producerEntry{
			epoch: int16(binary.BigEndian.Uint16(e[8:])),
			batches: []batchMeta{{
				firstSeq:    firstSeq,
				lastSeq:     lastSeq,
				firstOffset: lastOffset - int64(delta),
				lastOffset:  lastOffset,
				timestamp:   ts,
			}},
			coordinatorEpoch:      int32(binary.BigEndian.Uint32(e[34:])),
			currentTxnFirstOffset: int64(binary.BigEndian.Uint64(e[38:])),
			lastTimestamp:         ts,
		}
	}
	return ps, nil
}

// listSnapshots returns the offsets of the .snapshot files in dir, ascending.
func listSnapshots(fs FS, dir string) ([]int64, error) {
	ents, err := fs.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", dir, err)
	}
	var offs []int64
	for _, e := range ents {
		name := e.Name()
		if !strings.HasSuffix(name, snapshotSuffix) {
			continue
		}
		off, err := strconv.ParseInt(strings.TrimSuffix(name, snapshotSuffix), 10, 64)
		if err != nil || off < 0 {
			continue
		}
		offs = append(offs, off)
	}
	sort.Slice(offs, func(i, j int) bool { return offs[i] < offs[j] })
	return offs, nil
}

func writeProducerSnapshot(fs FS, dir string, offset int64, ps *producerState) error {
	return writeFileAtomic(fs, offsetFileName(dir, offset, snapshotSuffix), encodeProducerSnapshot(ps))
}

func removeSnapshot(fs FS, dir string, offset int64) error {
	p := offsetFileName(dir, offset, snapshotSuffix)
	if err := fs.Remove(p); err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("delete %s: %w", filepath.Base(p), err)
	}
	return nil
}
