package storage

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// The cleaner's I/O on one log: it maps the dirty range, rewrites the
// segments below its end into cleaned segments and swaps them in with
// Kafka's crash-safe protocol:
//
//  1. write <base>.log.cleaned, .index.cleaned and .timeindex.cleaned,
//     fsync them (no lock held; reads and appends go on);
//  2. under the log's lock, check the segments are still the ones cleaned,
//     rename the index files to .swap, then the .log file to .log.swap (the
//     commit point) and fsync the dir;
//  3. delete the replaced segments other than the one at base;
//  4. rename the .swap files into place, .log last, and fsync the dir.
//
// recoverSwaps, run by every log's load, finishes what a crash
// interrupted: a leftover .cleaned file is deleted (the clean never
// committed), a .log.swap replaces the segments its offsets cover.

const (
	cleanedSuffix = ".cleaned"
	swapSuffix    = ".swap"
)

// Steps of the swap protocol, named for the fault hook of tests (a crash
// right after the step).
const (
	stepCleanedWritten = "cleaned-written"
	stepSwapCommitted  = "swap-committed"
	stepOldDeleted     = "old-deleted"
	stepSwapped        = "swapped"
)

// errCleanAborted: the log changed (truncation, retention, deletion)
// while it was being cleaned; the cleaned files were dropped.
var errCleanAborted = errors.New("log changed during cleaning; clean abandoned")

// cleanerState is a log's state taken under its lock at the start of a
// clean.
type cleanerState struct {
	view     cleanerView
	segments []*segment
	gen      int64
	cfg      LogConfig
	// producerLast maps each producer id to the last offset of its last
	// batch.
	producerLast map[int64]int64
}

func (l *Log) cleanerState(checkpoint, nowMs int64) (cleanerState, error) {
	// The cleaner never cleans at or above the last stable offset (the
	// oldest open transaction, at most the high watermark); l.mu is not held.
	lso := l.LastStableOffset()
	l.mu.RLock()
	defer l.mu.RUnlock()
	if err := l.checkUsable(); err != nil {
		return cleanerState{}, err
	}
	st := cleanerState{segments: append([]*segment(nil), l.segments...), gen: l.truncations, cfg: l.cfg,
		producerLast: map[int64]int64{}}
	stable := min(l.highWatermark, lso)
	if l.unsafe.CleanerPastLSO {
		stable = l.highWatermark
	}
	st.view = cleanerView{logStart: l.logStartOffset, checkpoint: checkpoint, stableOffset: stable,
		minCompactionLagMs: l.cfg.MinCompactionLagMs, nowMs: nowMs}
	for _, s := range l.segments {
		st.view.segments = append(st.view.segments, segmentView{base: s.baseOffset, next: s.nextOffset, size: s.size,
			maxTimestamp: s.maxTimestamp, offsetIndexBytes: int64(len(s.idx.offsets) * offsetIndexEntrySize),
			timeIndexBytes: int64(len(s.idx.times) * timeIndexEntrySize)})
	}
	for pid, e := range l.producers.producers {
		if n := len(e.batches); n > 0 {
			st.producerLast[pid] = e.batches[n-1].lastOffset
		}
	}
	return st, nil
}

// cleanStats reports one clean of a log.
type cleanStats struct {
	firstDirty int64
	// endOffset is the end of the range cleaned: the log's new
	// cleaner-offset-checkpoint entry.
	endOffset    int64
	bytesRead    int64
	bytesWritten int64
	segments     int
	// recordsRemoved counts the records dropped.
	recordsRemoved int64
}

// cleanPass is the state of one clean of one log.
type cleanPass struct {
	// ctx stops the clean between segments (a shutdown).
	ctx          context.Context
	l            *Log
	m            *offsetMap
	tracker      *txnTracker
	endOffset    int64
	nowMs        int64
	producerLast map[int64]int64
	fault        func(step string) error
	stats        cleanStats
	// scratch buffers reused across batches.
	body, out []byte
	spans     []recordSpan
}

// clean compacts the log once if its cleanable range is not empty: it
// returns ok false when there was nothing to clean. checkpoint is the
// log's cleaner-offset-checkpoint entry (-1 if none); fault, when set, is
// called after each step of the swap and stops the clean where it returns
// an error (tests crash there).
func (l *Log) clean(ctx context.Context, m *offsetMap, checkpoint, nowMs int64, fault func(string) error) (cleanStats, bool, error) {
	st, err := l.cleanerState(checkpoint, nowMs)
	if err != nil {
		return cleanStats{}, false, err
	}
	plan := planCleaning(st.view)
	if plan.firstUncleanable <= plan.firstDirty {
		return cleanStats{}, false, nil
	}
	m.reset()
	p := &cleanPass{ctx: ctx, l: l, m: m, tracker: newTxnTracker(), nowMs: nowMs, producerLast: st.producerLast, fault: fault}
	p.stats.firstDirty = plan.firstDirty
	if err := p.buildOffsetMap(st.segments, plan.firstDirty, plan.firstUncleanable); err != nil {
		return p.stats, false, err
	}
	if p.endOffset <= plan.firstDirty {
		return p.stats, false, nil
	}
	p.stats.endOffset = p.endOffset
	var views []segmentView
	var segs []*segment
	for i, s := range st.segments[:len(st.segments)-1] {
		if s.baseOffset >= p.endOffset {
			break
		}
		views = append(views, st.view.segments[i])
		segs = append(segs, s)
	}
	for _, n := range groupSegments(views, st.cfg.SegmentBytes, int64(st.cfg.SegmentIndexBytes)) {
		if err := p.cleanGroup(segs[:n], st.gen, st.cfg); err != nil {
			return p.stats, false, err
		}
		segs = segs[n:]
	}
	return p.stats, true, nil
}

// buildOffsetMap maps every key of the data records in [from, to) that are
// not part of an aborted transaction to the offset of its latest record,
// and sets endOffset: to, or the base of the first batch that did not fit
// the map, or the first offset of a transaction undecided at the end.
// Records of a transaction enter the map only once its commit marker is
// seen.
func (p *cleanPass) buildOffsetMap(segs []*segment, from, to int64) error {
	type pendingKey struct {
		h1, h2 uint64
		offset int64
	}
	pending := map[int64][]pendingKey{}
	npending := 0
	p.endOffset = to
scan:
	for _, s := range segs {
		if err := p.ctx.Err(); err != nil {
			return err
		}
		if s.nextOffset <= from {
			continue
		}
		if s.baseOffset >= to {
			break
		}
		sc := newBatchScanner(s.log, s.size)
		var hb [BatchHeaderSize]byte
		start, _, found, err := s.findPosition(from, hb[:])
		if err != nil {
			sc.release()
			return fmt.Errorf("clean %s: %w", p.l.tp, err)
		}
		if !found {
			sc.release()
			continue
		}
		sc.bufPos = start
		for {
			_, h, batch, err := sc.next(true)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				sc.release()
				return fmt.Errorf("clean %s: segment %d: %w", p.l.tp, s.baseOffset, err)
			}
			p.stats.bytesRead += int64(len(batch))
			if h.NextOffset() > to {
				p.endOffset = min(p.endOffset, h.BaseOffset)
				sc.release()
				break scan
			}
			if h.LastOffset() < from {
				continue
			}
			if h.IsControl() {
				if h.IsTransactional() && h.HasProducerID() {
					ct := controlType(batch)
					if ct == controlTypeCommit {
						for _, k := range pending[h.ProducerID] {
							p.m.putHash(k.h1, k.h2, k.offset)
						}
					}
					npending -= len(pending[h.ProducerID])
					delete(pending, h.ProducerID)
					p.tracker.observe(h, ct)
				}
				continue
			}
			if p.m.room()-npending < int(h.RecordCount) {
				if h.BaseOffset <= from {
					sc.release()
					return fmt.Errorf("clean %s: a batch of %d records at offset %d does not fit the offset map of %d keys; raise log.cleaner.dedupe.buffer.size",
						p.l.tp, h.RecordCount, h.BaseOffset, p.m.capacity())
				}
				p.endOffset = min(p.endOffset, h.BaseOffset)
				sc.release()
				break scan
			}
			p.tracker.observe(h, -1)
			txn := h.IsTransactional() && h.HasProducerID()
			err = p.forEachRecord(h, batch, func(r recordSpan, offset int64) {
				if r.key == nil {
					return
				}
				if txn {
					h1, h2 := p.m.hash(r.key)
					pending[h.ProducerID] = append(pending[h.ProducerID], pendingKey{h1: h1, h2: h2, offset: offset})
					npending++
					return
				}
				p.m.put(r.key, offset)
			})
			if err != nil {
				sc.release()
				return fmt.Errorf("clean %s: batch at offset %d: %w", p.l.tp, h.BaseOffset, err)
			}
		}
		sc.release()
	}
	if first, ok := p.tracker.firstOpen(); ok && !p.l.unsafe.CleanerPastLSO {
		p.endOffset = min(p.endOffset, first)
	}
	return nil
}

// forEachRecord calls fn for every record of a data batch with its
// absolute offset. The spans point into p.body, valid until the next call.
func (p *cleanPass) forEachRecord(h BatchHeader, batch []byte, fn func(r recordSpan, offset int64)) error {
	body, err := p.batchBody(h, batch)
	if err != nil {
		return err
	}
	return forEachRecordSpan(h, body, func(r recordSpan) error {
		fn(r, h.BaseOffset+r.offsetDelta)
		return nil
	})
}

// batchBody is the decompressed record bytes of a batch.
func (p *cleanPass) batchBody(h BatchHeader, batch []byte) ([]byte, error) {
	if h.Compression() == CompressionNone {
		return batch[BatchHeaderSize:], nil
	}
	body, err := batchBody(h, batch)
	if err != nil {
		return nil, err
	}
	p.body = body
	return body, nil
}

// cleanedPaths are the files of a cleaned segment at base.
func cleanedPaths(dir string, base int64, suffix string) (log, index, timeIndex string) {
	return offsetFileName(dir, base, logSuffix) + suffix, offsetFileName(dir, base, indexSuffix) + suffix,
		offsetFileName(dir, base, timeIndexSuffix) + suffix
}

// cleanGroup rewrites a group of segments into one cleaned segment at the
// first one's base and swaps it in. A group whose rewrite changes nothing
// is left alone.
func (p *cleanPass) cleanGroup(group []*segment, gen int64, cfg LogConfig) error {
	l := p.l
	base := group[0].baseOffset
	out := newSegmentShell(l.fs, l.dir, base, cfg, p.nowMs)
	out.logPath, out.idx.offPath, out.idx.timePath = cleanedPaths(l.dir, base, cleanedSuffix)
	out.idx.maxEntries = 0
	removeCleaned := func() {
		_ = out.close()
		for _, f := range []string{out.logPath, out.idx.offPath, out.idx.timePath} {
			_ = l.fs.Remove(f)
		}
	}
	var err error
	if out.log, err = l.fs.OpenFile(out.logPath, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644); err != nil {
		return fmt.Errorf("clean %s: %w", l.tp, err)
	}
	if err := out.openIndexes(true); err != nil {
		_ = out.log.Close()
		_ = l.fs.Remove(out.logPath)
		return fmt.Errorf("clean %s: %w", l.tp, err)
	}
	w := cleanedWriter{seg: out}
	changed := len(group) > 1
	for gi, s := range group {
		if err := p.ctx.Err(); err != nil {
			removeCleaned()
			return err
		}
		c, err := p.rewriteSegment(s, &w, gi == len(group)-1)
		if err != nil {
			removeCleaned()
			return err
		}
		changed = changed || c
	}
	if err := w.flush(); err != nil {
		removeCleaned()
		return fmt.Errorf("clean %s: %w", l.tp, err)
	}
	if !changed {
		removeCleaned()
		return nil
	}
	if err := out.finalizeTimeIndex(); err != nil {
		removeCleaned()
		return fmt.Errorf("clean %s: %w", l.tp, err)
	}
	if err := out.sync(); err != nil {
		removeCleaned()
		return fmt.Errorf("clean %s: %w", l.tp, err)
	}
	if err := out.close(); err != nil {
		removeCleaned()
		return fmt.Errorf("clean %s: %w", l.tp, err)
	}
	p.stats.bytesWritten += out.size
	if err := p.step(stepCleanedWritten); err != nil {
		return err
	}
	if err := p.swapIn(group, gen, cfg); err != nil {
		if errors.Is(err, errCleanAborted) {
			removeCleaned()
		}
		return err
	}
	p.stats.segments += len(group)
	return nil
}

func (p *cleanPass) step(name string) error {
	if p.fault == nil {
		return nil
	}
	return p.fault(name)
}

// swapIn replaces group with the cleaned segment at its base, under the
// log's lock, by the .swap protocol.
func (p *cleanPass) swapIn(group []*segment, gen int64, cfg LogConfig) error {
	l := p.l
	base := group[0].baseOffset
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.checkUsable(); err != nil {
		return fmt.Errorf("clean %s: %w: %w", l.tp, err, errCleanAborted)
	}
	at := -1
	for i, s := range l.segments {
		if s == group[0] {
			at = i
			break
		}
	}
	if l.truncations != gen || at < 0 || at+len(group) >= len(l.segments) {
		return fmt.Errorf("clean %s: %w", l.tp, errCleanAborted)
	}
	for k, s := range group {
		if l.segments[at+k] != s {
			return fmt.Errorf("clean %s: %w", l.tp, errCleanAborted)
		}
	}
	// The merged segment's aborted-transactions index covers the whole
	// group (the groups' other indexes go with their segments), written
	// before the swap commits: a clean stopped earlier leaves entries that
	// the other indexes also hold, which loading merges.
	if err := l.writeTxnIndexFile(base, group[len(group)-1].nextOffset); err != nil {
		return fmt.Errorf("clean %s: aborted transaction index: %w: %w", l.tp, err, errCleanAborted)
	}
	cLog, cIdx, cTime := cleanedPaths(l.dir, base, cleanedSuffix)
	sLog, sIdx, sTime := cleanedPaths(l.dir, base, swapSuffix)
	for _, r := range [][2]string{{cIdx, sIdx}, {cTime, sTime}, {cLog, sLog}} {
		if err := l.fs.Rename(r[0], r[1]); err != nil {
			return l.fail(fmt.Errorf("clean %s: %w", l.tp, err))
		}
	}
	if err := l.fs.SyncDir(l.dir); err != nil {
		return l.goOffline(fmt.Errorf("clean %s: %w", l.tp, err))
	}
	if err := p.step(stepSwapCommitted); err != nil {
		return err
	}
	for _, s := range group {
		_ = s.close()
	}
	for _, s := range group[1:] {
		if err := s.remove(); err != nil {
			return l.fail(fmt.Errorf("clean %s: %w: %w", l.tp, err, errSegmentDamaged))
		}
	}
	if err := p.step(stepOldDeleted); err != nil {
		return err
	}
	for _, r := range [][2]string{{sIdx, group[0].idx.offPath}, {sTime, group[0].idx.timePath}, {sLog, group[0].logPath}} {
		if err := l.fs.Rename(r[0], r[1]); err != nil {
			return l.fail(fmt.Errorf("clean %s: %w: %w", l.tp, err, errSegmentDamaged))
		}
	}
	if err := l.fs.SyncDir(l.dir); err != nil {
		return l.goOffline(fmt.Errorf("clean %s: %w", l.tp, err))
	}
	if err := p.step(stepSwapped); err != nil {
		return err
	}
	s, needsRecovery, err := openSegment(l.fs, l.dir, base, cfg, p.nowMs)
	if err != nil {
		return l.fail(fmt.Errorf("clean %s: %w: %w", l.tp, err, errSegmentDamaged))
	}
	if needsRecovery {
		if _, err := s.recover(true, nil); err != nil {
			_ = s.close()
			return l.fail(fmt.Errorf("clean %s: %w: %w", l.tp, err, errSegmentDamaged))
		}
	}
	segs := append([]*segment(nil), l.segments[:at]...)
	segs = append(segs, s)
	l.segments = append(segs, l.segments[at+len(group):]...)
	return nil
}

// cleanedWriter buffers the batches of a cleaned segment and appends them
// in large writes.
type cleanedWriter struct {
	seg     *segment
	buf     []byte
	headers []BatchHeader
}

const cleanedWriteBytes = 1 << 20

func (w *cleanedWriter) add(batch []byte) error {
	h, err := ParseBatchHeader(batch)
	if err != nil {
		return err
	}
	w.buf = append(w.buf, batch...)
	w.headers = append(w.headers, h)
	if len(w.buf) >= cleanedWriteBytes {
		return w.flush()
	}
	return nil
}

func (w *cleanedWriter) flush() error {
	if len(w.buf) == 0 {
		return nil
	}
	if err := w.seg.append(w.buf, w.headers); err != nil {
		return err
	}
	w.buf, w.headers = w.buf[:0], w.headers[:0]
	return nil
}

// rewriteSegment writes the batches of s that the cleaner keeps to w and
// reports whether anything changed. lastOfGroup: s is the last segment of
// its group, whose last batch is kept even when emptied.
func (p *cleanPass) rewriteSegment(s *segment, w *cleanedWriter, lastOfGroup bool) (bool, error) {
	sc := newBatchScanner(s.log, s.size)
	defer sc.release()
	changed := false
	var held []byte // an emptied batch, kept if it turns out to be the group's last
	for {
		_, h, batch, err := sc.next(true)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return false, fmt.Errorf("clean %s: segment %d: %w", p.l.tp, s.baseOffset, err)
		}
		p.stats.bytesRead += int64(len(batch))
		held = nil
		kept, empty, err := p.filterBatch(h, batch)
		if err != nil {
			return false, fmt.Errorf("clean %s: batch at offset %d: %w", p.l.tp, h.BaseOffset, err)
		}
		if len(kept) != len(batch) || &kept[0] != &batch[0] {
			changed = true
		}
		if empty && !keepEmptyBatch(h, p.producerLast, false) {
			held = kept
			continue
		}
		if err := w.add(kept); err != nil {
			return false, err
		}
	}
	if held != nil && lastOfGroup {
		if err := w.add(held); err != nil {
			return false, err
		}
	}
	return changed, nil
}

// filterBatch returns what the cleaner keeps of one batch: the batch
// itself when it keeps it whole, a rebuilt batch holding the records it
// keeps, or an empty batch (empty true) when it keeps none (all records
// superseded, or the batch belongs to an aborted transaction), which the
// caller keeps only where keepEmptyBatch says so.
func (p *cleanPass) filterBatch(h BatchHeader, batch []byte) (kept []byte, empty bool, err error) {
	if h.IsControl() || h.BaseOffset >= p.endOffset {
		return batch, false, nil
	}
	if h.IsTransactional() && h.HasProducerID() && p.tracker.isAborted(h.ProducerID, h.BaseOffset) {
		p.stats.recordsRemoved += int64(h.RecordCount)
		return emptyBatch(h), true, nil
	}
	body, err := p.batchBody(h, batch)
	if err != nil {
		return nil, false, err
	}
	horizonPassed := deleteHorizonPassed(h, p.nowMs)
	spans := p.spans[:0]
	all := true
	tombstoneKept := false
	maxTs := int64(NoTimestamp)
	err = forEachRecordSpan(h, body, func(r recordSpan) error {
		offset := h.BaseOffset + r.offsetDelta
		if !keepRecord(offset, r.key, r.tombstone, p.m, p.endOffset, horizonPassed) || p.unsafeDropsLatest(offset, r.key) {
			all = false
			p.stats.recordsRemoved++
			return nil
		}
		spans = append(spans, r)
		tombstoneKept = tombstoneKept || r.tombstone
		maxTs = max(maxTs, h.BaseTimestamp+r.tsDelta)
		return nil
	})
	p.spans = spans
	if err != nil {
		return nil, false, err
	}
	setHorizon := tombstoneKept && h.Attributes&attrDeleteHorizon == 0
	if all && !setHorizon {
		return batch, false, nil
	}
	if len(spans) == 0 {
		return emptyBatch(h), true, nil
	}
	baseTs := h.BaseTimestamp
	attrs := h.Attributes
	if setHorizon {
		baseTs = p.nowMs + p.l.cfg.DeleteRetentionMs
		attrs |= attrDeleteHorizon
	}
	records := p.out[:0]
	for _, r := range spans {
		if baseTs == h.BaseTimestamp {
			records = append(records, body[r.start:r.end]...)
			continue
		}
		records = appendRetimedRecord(records, body, r, h.BaseTimestamp+r.tsDelta-baseTs)
	}
	p.out = records
	if h.HasLogAppendTime() {
		maxTs = h.MaxTimestamp
	}
	b, err := encodeBatch(h, attrs, baseTs, maxTs, int32(len(spans)), records)
	return b, false, err
}

// appendRetimedRecord re-encodes record r of body with a new timestamp
// delta (a batch whose base timestamp became its delete horizon).
// unsafeDropsLatest is unsafe.cleaner.drops.latest: in a log recovered
// after an unclean shutdown, the record the offset map names as its key's
// latest in the cleaned range counts as superseded too (the map's offset
// compared with <= instead of <), so a key not written again since loses
// its latest value. Always false without the switch.
func (p *cleanPass) unsafeDropsLatest(offset int64, key []byte) bool {
	if !p.l.unsafe.CleanerDropsLatest || !p.l.recoveredUnclean || key == nil || offset >= p.endOffset {
		return false
	}
	latest, ok := p.m.get(key)
	return ok && offset == latest
}

func appendRetimedRecord(dst, body []byte, r recordSpan, tsDelta int64) []byte {
	var head [1 + 2*binary.MaxVarintLen64]byte
	n := 1 // attributes: always 0 in v2
	n += binary.PutVarint(head[n:], tsDelta)
	n += binary.PutVarint(head[n:], r.offsetDelta)
	fields := body[r.fieldsStart:r.end]
	dst = binary.AppendVarint(dst, int64(n+len(fields)))
	dst = append(dst, head[:n]...)
	return append(dst, fields...)
}

// encodeBatch builds a batch from h's identity (base offset, last offset
// delta, leader epoch, producer) with new attributes, timestamps, record
// count and record bytes, compressed with h's codec.
func encodeBatch(h BatchHeader, attrs int16, baseTs, maxTs int64, count int32, records []byte) ([]byte, error) {
	body := records
	if c := h.Compression(); c != CompressionNone {
		z, err := compress(c, records)
		if err != nil {
			return nil, err
		}
		body = z
	}
	b := make([]byte, BatchHeaderSize, BatchHeaderSize+len(body))
	binary.BigEndian.PutUint64(b[offBaseOffset:], uint64(h.BaseOffset))
	binary.BigEndian.PutUint32(b[offBatchLength:], uint32(BatchHeaderSize+len(body)-LogOverhead))
	binary.BigEndian.PutUint32(b[offLeaderEpoch:], uint32(h.PartitionLeaderEpoch))
	b[offMagic] = Magic
	binary.BigEndian.PutUint16(b[offAttributes:], uint16(attrs))
	binary.BigEndian.PutUint32(b[offLastOffsetDelta:], uint32(h.LastOffsetDelta))
	binary.BigEndian.PutUint64(b[offBaseTimestamp:], uint64(baseTs))
	binary.BigEndian.PutUint64(b[offMaxTimestamp:], uint64(maxTs))
	binary.BigEndian.PutUint64(b[offProducerID:], uint64(h.ProducerID))
	binary.BigEndian.PutUint16(b[offProducerEpoch:], uint16(h.ProducerEpoch))
	binary.BigEndian.PutUint32(b[offBaseSequence:], uint32(h.BaseSequence))
	binary.BigEndian.PutUint32(b[offRecordCount:], uint32(count))
	b = append(b, body...)
	binary.BigEndian.PutUint32(b[offCRC:], crc32.Checksum(b[offAttributes:], castagnoli))
	return b, nil
}

// emptyBatch is h with no records and no codec: what the cleaner keeps of
// a batch it emptied, so that its offsets and producer stay in the log.
func emptyBatch(h BatchHeader) []byte {
	b, _ := encodeBatch(BatchHeader{BaseOffset: h.BaseOffset, LastOffsetDelta: h.LastOffsetDelta,
		PartitionLeaderEpoch: h.PartitionLeaderEpoch, ProducerID: h.ProducerID, ProducerEpoch: h.ProducerEpoch,
		BaseSequence: h.BaseSequence}, h.Attributes&^attrCompressionMask, h.BaseTimestamp, h.MaxTimestamp, 0, nil)
	return b
}

// recoverSwaps finishes or undoes, in a partition dir, swaps a crash
// interrupted (Kafka's LogLoader does the same at load): every .cleaned
// file is deleted (its clean never committed); every <base>.log.swap
// replaces the segments whose base lies in [base, the offset after its
// last batch), its indexes are rebuilt at load, and index .swap files
// without a .log.swap are deleted. It reports whether it changed the dir.
func recoverSwaps(fs FS, dir string, names []string) (bool, error) {
	changed := false
	var swaps []int64
	logs := map[int64]bool{}
	for _, name := range names {
		switch {
		case strings.HasSuffix(name, cleanedSuffix):
			if err := removeIfExists(fs, filepath.Join(dir, name)); err != nil {
				return changed, err
			}
			changed = true
		case strings.HasSuffix(name, logSuffix+swapSuffix):
			if base, ok := parseOffsetName(strings.TrimSuffix(name, swapSuffix), logSuffix); ok {
				swaps = append(swaps, base)
			}
		case strings.HasSuffix(name, logSuffix):
			if base, ok := parseOffsetName(name, logSuffix); ok {
				logs[base] = true
			}
		}
	}
	for _, name := range names {
		if strings.HasSuffix(name, swapSuffix) && !strings.HasSuffix(name, logSuffix+swapSuffix) {
			if err := removeIfExists(fs, filepath.Join(dir, name)); err != nil {
				return changed, err
			}
			changed = true
		}
	}
	for _, base := range swaps {
		swapPath := offsetFileName(dir, base, logSuffix) + swapSuffix
		next, err := swapEnd(fs, swapPath, base)
		if err != nil {
			return changed, err
		}
		for old := range logs {
			if old < base || old >= max(next, base+1) {
				continue
			}
			for _, suffix := range []string{logSuffix, indexSuffix, timeIndexSuffix} {
				if err := removeIfExists(fs, offsetFileName(dir, old, suffix)); err != nil {
					return changed, err
				}
			}
			if old != base {
				if err := removeIfExists(fs, offsetFileName(dir, old, txnIndexSuffix)); err != nil {
					return changed, err
				}
			}
			delete(logs, old)
		}
		if err := fs.Rename(swapPath, offsetFileName(dir, base, logSuffix)); err != nil {
			return changed, fmt.Errorf("complete swap %s: %w", swapPath, err)
		}
		logs[base] = true
		changed = true
	}
	return changed, nil
}

// swapEnd is the offset after the last whole batch of a .log.swap file
// (base when it holds none).
func swapEnd(fs FS, path string, base int64) (int64, error) {
	f, err := fs.OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		return 0, fmt.Errorf("open %s: %w", path, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return 0, fmt.Errorf("stat %s: %w", path, err)
	}
	sc := newBatchScanner(f, fi.Size())
	defer sc.release()
	next := base
	for {
		_, h, _, err := sc.next(false)
		if err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, ErrCorruptBatch) || errors.Is(err, ErrIncompleteBatch) || errors.Is(err, ErrUnsupportedMagic) {
				return next, nil
			}
			return 0, fmt.Errorf("read %s: %w", path, err)
		}
		next = max(next, h.NextOffset())
	}
}

func removeIfExists(fs FS, path string) error {
	if err := fs.Remove(path); err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("delete %s: %w", path, err)
	}
	return nil
}
