package storage

import (
	"encoding/binary"
	"fmt"
	"hash/maphash"
	"math"
	"sort"
)

// The log cleaner's decisions, free of I/O: which part of a log is
// cleanable, which log is the filthiest, how the cleaned segments are
// grouped, the key -> latest offset map, and which records and batches a
// cleaned segment keeps. cleaner_rewrite.go does the reading, writing and
// swapping around them; cleaner_manager.go runs the threads.
//
// Learned from Kafka's LogCleaner and LogCleanerManager (not copied):
//   - the cleanable range of a log is [first dirty offset, first
//     uncleanable offset): the first dirty offset is the
//     cleaner-offset-checkpoint entry (the log start when the entry is
//     missing or outside the log), the first uncleanable offset the
//     smallest of the last stable offset (the high watermark while the log
//     has no LSO), the active segment's base and the base of the first
//     segment younger than min.compaction.lag.ms;
//   - a log is cleaned when its dirty ratio (dirty bytes over cleanable
//     bytes) reaches min.cleanable.dirty.ratio, the filthiest first;
//   - a record is kept unless a later record of its key lies in the mapped
//     range, or it is a tombstone whose batch's delete horizon (Kafka's
//     KIP-534: set to now + delete.retention.ms the first time the cleaner
//     keeps the tombstone, stored in the batch's base timestamp with
//     attribute bit 6) has passed;
//   - records of aborted transactions are dropped, control batches kept;
//   - a batch that loses every record is kept empty (its header, with its
//     offsets) when it is its producer's last batch, so that the producer
//     state rebuilt from the log still knows the producer's sequence.

// segmentView is what the cleaner's decisions know of one segment.
type segmentView struct {
	base int64
	// next is the offset after the segment's last batch (base when empty).
	next         int64
	size         int64
	maxTimestamp int64 // NoTimestamp when empty
	// offsetIndexBytes and timeIndexBytes are the sizes of its indexes.
	offsetIndexBytes int64
	timeIndexBytes   int64
}

// cleanerView is one log as the cleaner sees it at one moment.
type cleanerView struct {
	// segments ascend by base offset; the last one is the active segment.
	segments []segmentView
	logStart int64
	// checkpoint is the log's cleaner-offset-checkpoint entry, -1 if none.
	checkpoint int64
	// stableOffset is the offset the cleaner must stay below: the last
	// stable offset, or the high watermark while the log has none.
	stableOffset       int64
	minCompactionLagMs int64
	nowMs              int64
}

// cleanablePlan is the cleanable range of a log and its byte counts.
type cleanablePlan struct {
	firstDirty       int64
	firstUncleanable int64
	// cleanBytes are the bytes of the segments wholly below firstDirty,
	// dirtyBytes those of the segments overlapping the cleanable range.
	cleanBytes int64
	dirtyBytes int64
	// resetCheckpoint: the checkpoint was outside the log and was ignored.
	resetCheckpoint bool
}

// dirtyRatio is dirty bytes over clean plus dirty bytes (0 when empty).
func (p cleanablePlan) dirtyRatio() float64 {
	total := p.cleanBytes + p.dirtyBytes
	if total == 0 {
		return 0
	}
	return float64(p.dirtyBytes) / float64(total)
}

// planCleaning computes the cleanable range of a log.
func planCleaning(v cleanerView) cleanablePlan {
	var p cleanablePlan
	if len(v.segments) == 0 {
		return p
	}
	active := v.segments[len(v.segments)-1]
	leo := active.next
	p.firstDirty = v.checkpoint
	if p.firstDirty < v.logStart || p.firstDirty > leo {
		p.resetCheckpoint = v.checkpoint >= 0
		p.firstDirty = v.logStart
	}
	p.firstUncleanable = min(v.stableOffset, active.base)
	if v.minCompactionLagMs > 0 {
		for _, s := range v.segments[:len(v.segments)-1] {
			if s.base >= p.firstUncleanable {
				break
			}
			if s.next > p.firstDirty && s.maxTimestamp != NoTimestamp && v.nowMs-s.maxTimestamp < v.minCompactionLagMs {
				p.firstUncleanable = max(s.base, p.firstDirty)
				break
			}
		}
	}
	if p.firstUncleanable <= p.firstDirty {
		p.firstUncleanable = p.firstDirty
	}
	for i, s := range v.segments[:len(v.segments)-1] {
		end := v.segments[i+1].base
		switch {
		case end <= p.firstDirty:
			p.cleanBytes += s.size
		case s.base < p.firstUncleanable && end > p.firstDirty:
			p.dirtyBytes += s.size
		}
	}
	return p
}

// cleanCandidate is one log offered to the cleaner's choice.
type cleanCandidate struct {
	plan     cleanablePlan
	minRatio float64
}

// rankFilthiest returns the indexes of the candidates with dirty bytes
// whose dirty ratio reaches their min.cleanable.dirty.ratio, the filthiest
// first (ties in input order). The cleaner tries them in that order, so
// that a log it cannot clean yet (an undecided transaction at its first
// dirty offset) does not starve the others.
func rankFilthiest(cands []cleanCandidate) []int {
	var out []int
	for i, c := range cands {
		if c.plan.dirtyBytes > 0 && c.plan.dirtyRatio() >= c.minRatio {
			out = append(out, i)
		}
	}
	sort.SliceStable(out, func(a, b int) bool { return cands[out[a]].plan.dirtyRatio() > cands[out[b]].plan.dirtyRatio() })
	return out
}

// groupSegments splits the segments to clean (consecutive, ascending) into
// groups that are each rewritten into one cleaned segment: a group's total
// size stays within maxSize (segment.bytes), its index sizes within
// maxIndexBytes (segment.index.bytes), and its offsets within the 32-bit
// relative offsets of one segment. A segment larger than the limits forms
// a group of its own. It returns the group sizes.
func groupSegments(segs []segmentView, maxSize, maxIndexBytes int64) []int {
	var groups []int
	for i := 0; i < len(segs); {
		first := segs[i]
		size, offIdx, timeIdx := first.size, first.offsetIndexBytes, first.timeIndexBytes
		j := i + 1
		for ; j < len(segs); j++ {
			s := segs[j]
			if size+s.size > maxSize || offIdx+s.offsetIndexBytes > maxIndexBytes || timeIdx+s.timeIndexBytes > maxIndexBytes ||
				s.next-1-first.base > math.MaxInt32 {
				break
			}
			size += s.size
			offIdx += s.offsetIndexBytes
			timeIdx += s.timeIndexBytes
		}
		groups = append(groups, j-i)
		i = j
	}
	return groups
}

// offsetMapSlotBytes is the memory of one slot of the offset map: a 128-bit
// key hash and an offset (Kafka's SkimpyOffsetMap spends 16 bytes of MD5
// and 8 of offset too).
const offsetMapSlotBytes = 24

// offsetMapMaxLoad is the share of slots the map fills before it counts as
// full (Kafka's 0.9).
const offsetMapMaxLoad = 0.9

// offsetMap maps a key (by a 128-bit hash) to the offset of its latest
// record in the range scanned so far. It grows by doubling up to the slots
// its memory allows. Two keys with the same 128-bit hash would be taken
// for one; the odds are those of Kafka's MD5-keyed map.
type offsetMap struct {
	seed1, seed2 maphash.Seed
	slots        []offsetSlot // a power of two long
	used         int
	maxSlots     int
	// latest is the highest offset put, -1 when empty.
	latest int64
}

type offsetSlot struct {
	h1, h2 uint64
	// offset1 is the offset plus one; 0 marks an empty slot.
	offset1 int64
}

const offsetMapMinSlots = 1 << 12

// newOffsetMap makes a map that may use memBytes bytes.
func newOffsetMap(memBytes int64) *offsetMap {
	maxSlots := offsetMapMinSlots
	for int64(maxSlots)*2*offsetMapSlotBytes <= memBytes {
		maxSlots *= 2
	}
	return &offsetMap{seed1: maphash.MakeSeed(), seed2: maphash.MakeSeed(), maxSlots: maxSlots,
		slots: make([]offsetSlot, min(maxSlots, offsetMapMinSlots)), latest: -1}
}

// capacity is how many keys the map takes before it is full.
func (m *offsetMap) capacity() int { return int(float64(m.maxSlots) * offsetMapMaxLoad) }

// room is how many more keys the map takes.
func (m *offsetMap) room() int { return m.capacity() - m.used }

func (m *offsetMap) reset() {
	clear(m.slots)
	m.used = 0
	m.latest = -1
}

func (m *offsetMap) find(h1, h2 uint64) int {
	mask := uint64(len(m.slots) - 1)
	for i := h1 & mask; ; i = (i + 1) & mask {
		s := &m.slots[i]
		if s.offset1 == 0 || (s.h1 == h1 && s.h2 == h2) {
			return int(i)
		}
	}
}

func (m *offsetMap) grow() {
	old := m.slots
	m.slots = make([]offsetSlot, 2*len(old))
	for _, s := range old {
		if s.offset1 != 0 {
			m.slots[m.find(s.h1, s.h2)] = s
		}
	}
}

// hash is the map's 128-bit hash of key.
func (m *offsetMap) hash(key []byte) (uint64, uint64) {
	return maphash.Bytes(m.seed1, key), maphash.Bytes(m.seed2, key)
}

// put records offset as the latest of key unless a later offset is
// recorded already; false when the key is new and the map is full
// (nothing is recorded then).
func (m *offsetMap) put(key []byte, offset int64) bool {
	h1, h2 := m.hash(key)
	return m.putHash(h1, h2, offset)
}

// putHash is put for a key given by its hash.
func (m *offsetMap) putHash(h1, h2 uint64, offset int64) bool {
	i := m.find(h1, h2)
	if m.slots[i].offset1 == 0 {
		if m.used >= m.capacity() {
			return false
		}
		if float64(m.used+1) > 0.75*float64(len(m.slots)) && len(m.slots) < m.maxSlots {
			m.grow()
			i = m.find(h1, h2)
		}
		m.used++
	} else if m.slots[i].offset1 > offset {
		return true
	}
	m.slots[i] = offsetSlot{h1: h1, h2: h2, offset1: offset + 1}
	m.latest = max(m.latest, offset)
	return true
}

// get returns the latest offset recorded for key.
func (m *offsetMap) get(key []byte) (int64, bool) {
	s := m.slots[m.find(m.hash(key))]
	return s.offset1 - 1, s.offset1 != 0
}

// keepRecord decides whether the cleaner keeps one record of a data batch
// that is not part of an aborted transaction. endOffset is the end of the
// range the map covers: records at or after it are kept untouched.
// horizonPassed reports that the record's batch has a delete horizon in
// the past.
func keepRecord(offset int64, key []byte, tombstone bool, m *offsetMap, endOffset int64, horizonPassed bool) bool {
	if offset >= endOffset {
		return true
	}
	if key == nil {
		// A compacted log refuses records without a key; one written
		// before the topic became compacted has nothing to be the latest
		// value of, and Kafka's cleaner drops it too.
		return false
	}
	if latest, ok := m.get(key); ok && offset < latest {
		return false
	}
	return !(tombstone && horizonPassed)
}

// deleteHorizonPassed reports whether the batch carries a delete horizon
// (KIP-534) that lies at or before nowMs.
func deleteHorizonPassed(h BatchHeader, nowMs int64) bool {
	return h.Attributes&attrDeleteHorizon != 0 && nowMs >= h.BaseTimestamp
}

// keepEmptyBatch decides whether a data batch that lost all its records is
// kept as an empty batch: when it is its producer's last batch in the log
// (producerLast maps a producer id to the last offset of its last batch),
// or when it is the last batch of a cleaned group (so that the cleaned
// segment ends where the group ended, and recovery of an interrupted swap
// knows which old segments it replaces).
func keepEmptyBatch(h BatchHeader, producerLast map[int64]int64, lastOfGroup bool) bool {
	if lastOfGroup {
		return true
	}
	if !h.HasProducerID() {
		return false
	}
	last, ok := producerLast[h.ProducerID]
	return ok && last == h.LastOffset()
}

// Control record types of a transaction marker (the key's second i16).
const (
	controlTypeAbort  int16 = 0
	controlTypeCommit int16 = 1
)

// offsetRange is [first, last], inclusive.
type offsetRange struct{ first, last int64 }

// txnTracker follows transactions through the batches of a log, in offset
// order, to tell records of aborted transactions from the others.
type txnTracker struct {
	// open maps a producer id to the first offset of its transaction not
	// yet decided by a marker.
	open map[int64]int64
	// aborted maps a producer id to its aborted transactions, ascending.
	aborted map[int64][]offsetRange
}

func newTxnTracker() *txnTracker {
	return &txnTracker{open: map[int64]int64{}, aborted: map[int64][]offsetRange{}}
}

// observe takes one batch; controlType is the marker's type for a control
// batch (-1 for a data batch or another control record).
func (t *txnTracker) observe(h BatchHeader, controlType int16) {
	if !h.IsTransactional() || !h.HasProducerID() {
		return
	}
	if !h.IsControl() {
		if _, ok := t.open[h.ProducerID]; !ok {
			t.open[h.ProducerID] = h.BaseOffset
		}
		return
	}
	first, ok := t.open[h.ProducerID]
	if !ok {
		return
	}
	switch controlType {
	case controlTypeAbort:
		t.aborted[h.ProducerID] = append(t.aborted[h.ProducerID], offsetRange{first: first, last: h.BaseOffset})
		delete(t.open, h.ProducerID)
	case controlTypeCommit:
		delete(t.open, h.ProducerID)
	}
}

// isAborted reports whether a transactional batch of producer pid at
// offset belongs to an aborted transaction.
func (t *txnTracker) isAborted(pid, offset int64) bool {
	rs := t.aborted[pid]
	i := sort.Search(len(rs), func(i int) bool { return rs[i].last >= offset })
	return i < len(rs) && rs[i].first <= offset
}

// firstOpen is the smallest first offset of a transaction not decided in
// the batches observed, if any: the cleaner must not clean from there on,
// since it cannot tell yet whether those records count.
func (t *txnTracker) firstOpen() (int64, bool) {
	first, ok := int64(math.MaxInt64), false
	for _, o := range t.open {
		first, ok = min(first, o), true
	}
	return first, ok
}

// controlType reads the type of a control batch's first record: the i16
// after the key's i16 version. It returns -1 when the batch has no
// readable control key.
func controlType(batch []byte) int16 {
	recs, err := DecodeRecords(batch)
	if err != nil || len(recs) == 0 || len(recs[0].Key) < 4 {
		return -1
	}
	return int16(binary.BigEndian.Uint16(recs[0].Key[2:]))
}

// recordSpan is one record of a decompressed batch body, located without
// copying: its bytes are body[start:end], its key and value fields start at
// fieldsStart (after the attributes, timestamp delta and offset delta).
type recordSpan struct {
	start, end  int
	fieldsStart int
	tsDelta     int64
	offsetDelta int64
	key         []byte // nil: no key
	tombstone   bool
}

// nextRecordSpan parses the record at body[pos:] of a batch whose last
// offset delta is lastOffsetDelta.
func nextRecordSpan(body []byte, pos int, lastOffsetDelta int32) (recordSpan, error) {
	var r recordSpan
	r.start = pos
	size, n := binary.Varint(body[pos:])
	if n <= 0 || size < 1 || size > int64(len(body)-pos-n) {
		return r, fmt.Errorf("%w: bad record size at byte %d", ErrInvalidRecord, pos)
	}
	p := pos + n
	r.end = p + int(size)
	p++ // attributes
	var err error
	read := func() int64 {
		if err != nil {
			return 0
		}
		if p >= r.end {
			err = fmt.Errorf("%w: record at byte %d ends early", ErrInvalidRecord, pos)
			return 0
		}
		v, n := binary.Varint(body[p:r.end])
		if n <= 0 {
			err = fmt.Errorf("%w: bad varint in record at byte %d", ErrInvalidRecord, pos)
			return 0
		}
		p += n
		return v
	}
	r.tsDelta = read()
	r.offsetDelta = read()
	r.fieldsStart = p
	keyLen := read()
	if err != nil {
		return r, err
	}
	if r.offsetDelta < 0 || r.offsetDelta > int64(lastOffsetDelta) {
		return r, fmt.Errorf("%w: offset delta %d outside [0, %d]", ErrInvalidRecord, r.offsetDelta, lastOffsetDelta)
	}
	if keyLen >= 0 {
		if keyLen > int64(r.end-p) {
			return r, fmt.Errorf("%w: key of %d bytes in record at byte %d", ErrInvalidRecord, keyLen, pos)
		}
		r.key = body[p : p+int(keyLen) : p+int(keyLen)]
		p += int(keyLen)
	}
	valLen := read()
	if err != nil {
		return r, err
	}
	r.tombstone = valLen < 0
	return r, nil
}

// forEachRecordSpan calls fn for every record of a decompressed batch
// body, stopping at the first error.
func forEachRecordSpan(h BatchHeader, body []byte, fn func(r recordSpan) error) error {
	pos := 0
	for i := int32(0); i < h.RecordCount; i++ {
		r, err := nextRecordSpan(body, pos, h.LastOffsetDelta)
		if err != nil {
			return err
		}
		if err := fn(r); err != nil {
			return err
		}
		pos = r.end
	}
	return nil
}

// checkRecordKeys refuses a data batch for a compacted log that holds a
// record without a key, as Kafka's LogValidator does: the cleaner could
// only drop it.
func checkRecordKeys(h BatchHeader, batch []byte) error {
	body, err := batchBody(h, batch)
	if err != nil {
		return err
	}
	return forEachRecordSpan(h, body, func(r recordSpan) error {
		if r.key == nil {
			return fmt.Errorf("%w: compacted topic cannot accept a record without a key (offset delta %d)", ErrInvalidRecord, r.offsetDelta)
		}
		return nil
	})
}
