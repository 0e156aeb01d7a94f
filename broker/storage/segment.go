package storage

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sync"
)

const (
	logSuffix       = ".log"
	indexSuffix     = ".index"
	timeIndexSuffix = ".timeindex"
	txnIndexSuffix  = ".txnindex"
	snapshotSuffix  = ".snapshot"
)

// offsetFileName is Kafka's 20-digit zero-padded base offset plus suffix.
func offsetFileName(dir string, offset int64, suffix string) string {
	return filepath.Join(dir, fmt.Sprintf("%020d%s", offset, suffix))
}

// segment is one .log file with its .index and .timeindex. It is not safe for
// concurrent use: the owning Log serializes access.
type segment struct {
	fs         FS
	dir        string
	baseOffset int64
	logPath    string
	log        File
	size       int64 // bytes in the .log file
	idx        segmentIndex
	// nextOffset is the offset after the segment's last batch; baseOffset
	// when empty.
	nextOffset int64
	// maxTimestamp and offsetOfMaxTimestamp track the largest batch max
	// timestamp (NoTimestamp when empty) and the last offset of its batch.
	maxTimestamp         int64
	offsetOfMaxTimestamp int64
	bytesSinceIndexEntry int64
	// rollBaseTimestamp is the first batch's max timestamp, the base of
	// time-based rolling; NoTimestamp when empty.
	rollBaseTimestamp int64
	createdMs         int64
	// needsRecovery: the segment's indexes or tail failed the checks at
	// open; it must be recovered before use.
	needsRecovery      bool
	indexIntervalBytes int64
}

func newSegmentShell(fs FS, dir string, base int64, cfg LogConfig, nowMs int64) *segment {
	s := &segment{
		fs:                   fs,
		dir:                  dir,
		baseOffset:           base,
		logPath:              offsetFileName(dir, base, logSuffix),
		nextOffset:           base,
		maxTimestamp:         NoTimestamp,
		offsetOfMaxTimestamp: -1,
		rollBaseTimestamp:    NoTimestamp,
		createdMs:            nowMs,
		indexIntervalBytes:   int64(cfg.IndexIntervalBytes),
	}
	s.idx = segmentIndex{
		offPath:    offsetFileName(dir, base, indexSuffix),
		timePath:   offsetFileName(dir, base, timeIndexSuffix),
		maxEntries: int(cfg.SegmentIndexBytes) / offsetIndexEntrySize,
	}
	return s
}

// createSegment creates an empty segment, replacing any files of that base.
func createSegment(fs FS, dir string, base int64, cfg LogConfig, nowMs int64) (*segment, error) {
	s := newSegmentShell(fs, dir, base, cfg, nowMs)
	var err error
	if s.log, err = fs.OpenFile(s.logPath, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644); err != nil {
		return nil, fmt.Errorf("create segment %s: %w", s.logPath, err)
	}
	if err := s.openIndexes(true); err != nil {
		_ = s.log.Close()
		return nil, err
	}
	return s, nil
}

func (s *segment) openIndexes(truncate bool) error {
	flag := os.O_RDWR | os.O_CREATE
	if truncate {
		flag |= os.O_TRUNC
	}
	var err error
	if s.idx.offFile, err = s.fs.OpenFile(s.idx.offPath, flag, 0o644); err != nil {
		return fmt.Errorf("open index %s: %w", s.idx.offPath, err)
	}
	if s.idx.timeFile, err = s.fs.OpenFile(s.idx.timePath, flag, 0o644); err != nil {
		_ = s.idx.offFile.Close()
		return fmt.Errorf("open index %s: %w", s.idx.timePath, err)
	}
	return nil
}

// openSegment opens an existing segment. needsRecovery reports that its
// indexes are missing or fail the sanity check, or that its tail does not
// parse; the caller must then call recover before using it.
func openSegment(fs FS, dir string, base int64, cfg LogConfig, nowMs int64) (s *segment, needsRecovery bool, err error) {
	s = newSegmentShell(fs, dir, base, cfg, nowMs)
	if s.log, err = fs.OpenFile(s.logPath, os.O_RDWR, 0o644); err != nil {
		return nil, false, fmt.Errorf("open segment %s: %w", s.logPath, err)
	}
	fi, err := s.log.Stat()
	if err != nil {
		_ = s.log.Close()
		return nil, false, fmt.Errorf("stat %s: %w", s.logPath, err)
	}
	s.size = fi.Size()
	if _, err := s.log.Seek(s.size, io.SeekStart); err != nil {
		_ = s.log.Close()
		return nil, false, fmt.Errorf("seek %s: %w", s.logPath, err)
	}
	missing := !fileExists(fs, s.idx.offPath) || !fileExists(fs, s.idx.timePath)
	if err := s.openIndexes(false); err != nil {
		_ = s.log.Close()
		return nil, false, err
	}
	if missing {
		return s, true, nil
	}
	if err := s.loadIndexes(); err != nil {
		return s, true, nil
	}
	if err := s.scanTail(); err != nil {
		return s, true, nil
	}
	return s, false, nil
}

// loadIndexes reads both index files and applies Kafka's sanity checks plus
// bounds against the log file.
func (s *segment) loadIndexes() error {
	ob, err := readAllAt(s.idx.offFile)
	if err != nil {
		return fmt.Errorf("read %s: %w", s.idx.offPath, err)
	}
	if s.idx.offsets, err = parseOffsetIndex(ob); err != nil {
		return fmt.Errorf("%s: %w", s.idx.offPath, err)
	}
	tb, err := readAllAt(s.idx.timeFile)
	if err != nil {
		return fmt.Errorf("read %s: %w", s.idx.timePath, err)
	}
	if s.idx.times, err = parseTimeIndex(tb); err != nil {
		return fmt.Errorf("%s: %w", s.idx.timePath, err)
	}
	if n := len(s.idx.offsets); n > 0 && int64(s.idx.offsets[n-1].position) >= s.size {
		return fmt.Errorf("%w: %s points past the log", ErrCorruptCheckpoint, s.idx.offPath)
	}
	if _, err := s.idx.offFile.Seek(int64(len(ob)), io.SeekStart); err != nil {
		return fmt.Errorf("seek %s: %w", s.idx.offPath, err)
	}
	if _, err := s.idx.timeFile.Seek(int64(len(tb)), io.SeekStart); err != nil {
		return fmt.Errorf("seek %s: %w", s.idx.timePath, err)
	}
	return nil
}

func readAllAt(f File) ([]byte, error) {
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if fi.Size() > math.MaxInt32 {
		return nil, fmt.Errorf("%w: index of %d bytes", ErrCorruptCheckpoint, fi.Size())
	}
	b := make([]byte, fi.Size())
	n, err := f.ReadAt(b, 0)
	if err != nil && !(errors.Is(err, io.EOF) && n == len(b)) {
		return nil, err
	}
	return b, nil
}

// scanTail derives nextOffset, the max timestamp and the roll base from the
// index and the batch headers after the last indexed position, without
// checking CRCs (a clean segment's content is trusted).
func (s *segment) scanTail() error {
	start := int64(0)
	if n := len(s.idx.offsets); n > 0 {
		start = int64(s.idx.offsets[n-1].position)
	}
	if n := len(s.idx.times); n > 0 {
		s.maxTimestamp = s.idx.times[n-1].timestamp
		s.offsetOfMaxTimestamp = s.baseOffset + int64(s.idx.times[n-1].relOffset)
	}
	if s.size > 0 {
		var hb [BatchHeaderSize]byte
		if _, err := s.log.ReadAt(hb[:], 0); err != nil && !errors.Is(err, io.EOF) {
			return fmt.Errorf("read %s: %w", s.logPath, err)
		}
		if h, err := ParseBatchHeader(hb[:]); err == nil {
			s.rollBaseTimestamp = h.MaxTimestamp
		}
	}
	pos := start
	var hb [BatchHeaderSize]byte
	for pos < s.size {
		h, err := s.headerAt(pos, hb[:])
		if err != nil {
			return err
		}
		if h.BaseOffset < max(s.baseOffset, s.nextOffset) || !s.canHold(h.LastOffset()) {
			return fmt.Errorf("%w: batch offset %d outside segment %d", ErrCorruptBatch, h.BaseOffset, s.baseOffset)
		}
		s.nextOffset = h.NextOffset()
		if h.MaxTimestamp > s.maxTimestamp {
			s.maxTimestamp = h.MaxTimestamp
			s.offsetOfMaxTimestamp = h.LastOffset()
		}
		pos += int64(h.Size())
	}
	s.bytesSinceIndexEntry = s.size - start
	return nil
}

// headerAt reads and parses the header of the batch at pos, checking that
// the batch fits in the file.
func (s *segment) headerAt(pos int64, buf []byte) (BatchHeader, error) {
	n, err := s.log.ReadAt(buf[:BatchHeaderSize], pos)
	if err != nil && !errors.Is(err, io.EOF) {
		return BatchHeader{}, fmt.Errorf("read %s at %d: %w", s.logPath, pos, err)
	}
	h, err := ParseBatchHeader(buf[:n])
	if err != nil {
		return h, fmt.Errorf("%s at %d: %w", s.logPath, pos, err)
	}
	if pos+int64(h.Size()) > s.size {
		return h, fmt.Errorf("%s at %d: %w: batch of %d bytes past end %d", s.logPath, pos, ErrIncompleteBatch, h.Size(), s.size)
	}
	return h, nil
}

// relative converts an absolute offset to the index's 32-bit form.
func (s *segment) relative(offset int64) int32 {
	return int32(offset - s.baseOffset)
}

// canHold reports whether the offsets up to last fit the relative index.
func (s *segment) canHold(last int64) bool {
	return last >= s.baseOffset && last-s.baseOffset <= math.MaxInt32
}

// append writes whole batches with final offsets. On a write error it cuts
// the file back to its previous size so the segment stays whole; if that
// fails too the returned error wraps errSegmentDamaged.
func (s *segment) append(data []byte, headers []BatchHeader) error {
	pos := s.size
	n, err := s.log.Write(data)
	if err != nil || n != len(data) {
		if err == nil {
			err = io.ErrShortWrite
		}
		werr := fmt.Errorf("append to %s: %w", s.logPath, err)
		if terr := s.log.Truncate(pos); terr != nil {
			return fmt.Errorf("%w (and cutting back failed: %v): %w", werr, terr, errSegmentDamaged)
		}
		if _, serr := s.log.Seek(pos, io.SeekStart); serr != nil {
			return fmt.Errorf("%w (and seeking back failed: %v): %w", werr, serr, errSegmentDamaged)
		}
		return werr
	}
	if s.size == 0 && len(headers) > 0 {
		s.rollBaseTimestamp = headers[0].MaxTimestamp
	}
	s.size += int64(len(data))
	for _, h := range headers {
		if h.MaxTimestamp > s.maxTimestamp {
			s.maxTimestamp = h.MaxTimestamp
			s.offsetOfMaxTimestamp = h.LastOffset()
		}
		if err := s.indexBatch(h, pos); err != nil {
			return err
		}
		pos += int64(h.Size())
		s.nextOffset = h.NextOffset()
	}
	return nil
}

// indexBatch applies Kafka's index rule to a batch written at pos.
func (s *segment) indexBatch(h BatchHeader, pos int64) error {
	if s.bytesSinceIndexEntry > s.indexIntervalBytes {
		if err := s.idx.appendOffset(s.relative(h.LastOffset()), int32(pos)); err != nil {
			return err
		}
		if err := s.idx.maybeAppendTime(s.maxTimestamp, s.relative(s.offsetOfMaxTimestamp)); err != nil {
			return err
		}
		s.bytesSinceIndexEntry = 0
	}
	s.bytesSinceIndexEntry += int64(h.Size())
	return nil
}

// errSegmentDamaged marks a segment whose file no longer matches its
// in-memory state; the log refuses further writes.
var errSegmentDamaged = errors.New("segment damaged; restart to recover")

// finalizeTimeIndex appends the last max timestamp to the time index, as
// Kafka does when a segment becomes inactive or is closed.
func (s *segment) finalizeTimeIndex() error {
	if s.maxTimestamp == NoTimestamp || s.offsetOfMaxTimestamp < s.baseOffset {
		return nil
	}
	return s.idx.maybeAppendTime(s.maxTimestamp, s.relative(s.offsetOfMaxTimestamp))
}

// findPosition returns the position and header of the first batch whose last
// offset is >= offset, or found=false when there is none.
func (s *segment) findPosition(offset int64, buf []byte) (pos int64, h BatchHeader, found bool, err error) {
	rel := int64(0)
	if offset > s.baseOffset {
		rel = offset - s.baseOffset
	}
	if rel > math.MaxInt32 {
		rel = math.MaxInt32
	}
	pos = int64(s.idx.lookupOffset(int32(rel)))
	if pos >= s.size {
		pos = 0
	}
	for pos < s.size {
		h, err = s.headerAt(pos, buf)
		if err != nil {
			return 0, h, false, err
		}
		if h.LastOffset() >= offset {
			return pos, h, true, nil
		}
		pos += int64(h.Size())
	}
	return s.size, h, false, nil
}

// read returns whole batches starting with the one holding offset: at most
// maxBytes (at least one batch when minOne), none with a base offset at or
// after maxOffset.
func (s *segment) read(offset int64, maxBytes int, maxOffset int64, minOne bool) ([]byte, error) {
	var hb [BatchHeaderSize]byte
	pos, first, found, err := s.findPosition(offset, hb[:])
	if err != nil || !found || first.BaseOffset >= maxOffset {
		return nil, err
	}
	want := int64(maxBytes)
	if want < int64(first.Size()) {
		if !minOne {
			return nil, nil
		}
		want = int64(first.Size())
	}
	if rest := s.size - pos; want > rest {
		want = rest
	}
	buf := make([]byte, want)
	n, err := s.log.ReadAt(buf, pos)
	if err != nil && !(errors.Is(err, io.EOF) && n == len(buf)) {
		return nil, fmt.Errorf("read %s at %d: %w", s.logPath, pos, err)
	}
	end := 0
	for end < len(buf) {
		h, err := ParseBatchHeader(buf[end:])
		if err != nil || end+h.Size() > len(buf) || h.BaseOffset >= maxOffset {
			break
		}
		end += h.Size()
	}
	return buf[:end], nil
}

// truncateTo removes every batch whose last offset is >= offset and returns
// the number of bytes removed.
func (s *segment) truncateTo(offset int64) (int64, error) {
	var hb [BatchHeaderSize]byte
	pos, h, found, err := s.findPosition(offset, hb[:])
	if err != nil {
		return 0, err
	}
	if !found {
		return 0, nil
	}
	removed := s.size - pos
	if err := s.log.Truncate(pos); err != nil {
		return 0, fmt.Errorf("truncate %s: %w", s.logPath, err)
	}
	if _, err := s.log.Seek(pos, io.SeekStart); err != nil {
		return 0, fmt.Errorf("seek %s: %w", s.logPath, err)
	}
	s.size = pos
	if err := s.idx.truncateTo(s.relative(h.BaseOffset), int32(pos)); err != nil {
		return 0, err
	}
	s.nextOffset = min(offset, h.BaseOffset)
	s.maxTimestamp = NoTimestamp
	s.offsetOfMaxTimestamp = -1
	if pos == 0 {
		s.rollBaseTimestamp = NoTimestamp
		s.nextOffset = s.baseOffset
		s.bytesSinceIndexEntry = 0
		return removed, nil
	}
	next := s.nextOffset
	s.nextOffset = s.baseOffset
	if err := s.scanTail(); err != nil {
		return 0, err
	}
	s.nextOffset = next
	return removed, nil
}

// recover rescans the whole segment, validating every batch (size, magic,
// CRC-32C unless verifyCRC is false, offsets inside the segment and
// increasing), rebuilds both indexes, and truncates the file at the first
// invalid byte. onBatch sees every valid batch in order. It returns the
// number of bytes cut.
func (s *segment) recover(verifyCRC bool, onBatch func(h BatchHeader)) (int64, error) {
	s.idx.offsets = s.idx.offsets[:0]
	s.idx.times = s.idx.times[:0]
	s.nextOffset = s.baseOffset
	s.maxTimestamp = NoTimestamp
	s.offsetOfMaxTimestamp = -1
	s.rollBaseTimestamp = NoTimestamp
	s.bytesSinceIndexEntry = 0
	sc := newBatchScanner(s.log, s.size)
	defer sc.release()
	valid := int64(0)
	for {
		pos, h, _, err := sc.next(verifyCRC)
		if err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			if errors.Is(err, ErrCorruptBatch) || errors.Is(err, ErrIncompleteBatch) || errors.Is(err, ErrUnsupportedMagic) {
				break
			}
			return 0, fmt.Errorf("recover %s: %w", s.logPath, err)
		}
		if h.BaseOffset < s.nextOffset || !s.canHold(h.LastOffset()) {
			break
		}
		if valid == 0 {
			s.rollBaseTimestamp = h.MaxTimestamp
		}
		if h.MaxTimestamp > s.maxTimestamp {
			s.maxTimestamp = h.MaxTimestamp
			s.offsetOfMaxTimestamp = h.LastOffset()
		}
		if s.bytesSinceIndexEntry > s.indexIntervalBytes {
			s.idx.offsets = append(s.idx.offsets, offsetEntry{relOffset: s.relative(h.LastOffset()), position: int32(pos)})
			if n := len(s.idx.times); n == 0 || s.maxTimestamp > s.idx.times[n-1].timestamp {
				s.idx.times = append(s.idx.times, timeEntry{timestamp: s.maxTimestamp, relOffset: s.relative(s.offsetOfMaxTimestamp)})
			}
			s.bytesSinceIndexEntry = 0
		}
		s.bytesSinceIndexEntry += int64(h.Size())
		s.nextOffset = h.NextOffset()
		valid = pos + int64(h.Size())
		if onBatch != nil {
			onBatch(h)
		}
	}
	if n := len(s.idx.times); s.maxTimestamp != NoTimestamp && (n == 0 || s.maxTimestamp > s.idx.times[n-1].timestamp) {
		s.idx.times = append(s.idx.times, timeEntry{timestamp: s.maxTimestamp, relOffset: s.relative(s.offsetOfMaxTimestamp)})
	}
	cut := s.size - valid
	if cut > 0 {
		if err := s.log.Truncate(valid); err != nil {
			return 0, fmt.Errorf("truncate %s to %d: %w", s.logPath, valid, err)
		}
		s.size = valid
	}
	if _, err := s.log.Seek(s.size, io.SeekStart); err != nil {
		return 0, fmt.Errorf("seek %s: %w", s.logPath, err)
	}
	if err := s.idx.rewrite(); err != nil {
		return 0, err
	}
	s.needsRecovery = false
	return cut, nil
}

func (s *segment) sync() error {
	if err := s.log.Sync(); err != nil {
		return fmt.Errorf("fsync %s: %w", s.logPath, err)
	}
	return s.idx.sync()
}

func (s *segment) close() error {
	err1 := s.log.Close()
	err2 := s.idx.close()
	if err1 != nil {
		return fmt.Errorf("close %s: %w", s.logPath, err1)
	}
	return err2
}

// remove closes the segment and deletes its files.
func (s *segment) remove() error {
	_ = s.close()
	var first error
	for _, p := range []string{s.logPath, s.idx.offPath, s.idx.timePath, offsetFileName(s.dir, s.baseOffset, txnIndexSuffix)} {
		if err := s.fs.Remove(p); err != nil && !os.IsNotExist(err) && first == nil {
			first = fmt.Errorf("delete %s: %w", p, err)
		}
	}
	return first
}

// batchScanner reads a segment file sequentially in large chunks and yields
// its batches without per-batch allocation.
type batchScanner struct {
	f        File
	fileSize int64
	buf      []byte
	bufPos   int64 // file position of buf[0]
	start    int   // next unread byte in buf
	end      int   // valid bytes in buf
}

const scanChunkBytes = 1 << 20

// scanBuffers recycles scanner chunks across segments and partitions.
var scanBuffers = sync.Pool{New: func() any { b := make([]byte, scanChunkBytes); return &b }}

// newBatchScanner scans f. A batch may be as large as the file: a declared
// size past the end of the file is caught before anything is allocated.
// Call release when done.
func newBatchScanner(f File, fileSize int64) *batchScanner {
	return &batchScanner{f: f, fileSize: fileSize, buf: *scanBuffers.Get().(*[]byte)}
}

// release returns the scanner's chunk for reuse; batches it returned are
// invalid afterwards.
func (sc *batchScanner) release() {
	if len(sc.buf) == scanChunkBytes {
		b := sc.buf
		scanBuffers.Put(&b)
	}
	sc.buf = nil
}

// fill makes at least need bytes available from start, growing the buffer
// when needed; it returns false when the file ends first.
func (sc *batchScanner) fill(need int) (bool, error) {
	if sc.end-sc.start >= need {
		return true, nil
	}
	left := sc.fileSize - (sc.bufPos + int64(sc.start))
	if left < int64(need) {
		return false, nil
	}
	copy(sc.buf, sc.buf[sc.start:sc.end])
	sc.bufPos += int64(sc.start)
	sc.end -= sc.start
	sc.start = 0
	if need > len(sc.buf) {
		nb := make([]byte, need)
		copy(nb, sc.buf[:sc.end])
		sc.buf = nb
	}
	want := len(sc.buf)
	if rem := sc.fileSize - sc.bufPos; int64(want) > rem {
		want = int(rem)
	}
	for sc.end < need {
		n, err := sc.f.ReadAt(sc.buf[sc.end:want], sc.bufPos+int64(sc.end))
		sc.end += n
		if err != nil {
			if errors.Is(err, io.EOF) {
				return sc.end >= need, nil
			}
			return false, err
		}
		if n == 0 {
			return false, io.ErrNoProgress
		}
	}
	return true, nil
}

// batchesValid reports whether every batch of the segment is whole and
// valid (CRC, sizes) with increasing offsets from the segment's base.
func (s *segment) batchesValid(verifyCRC bool) (bool, error) {
	sc := newBatchScanner(s.log, s.size)
	defer sc.release()
	next := s.baseOffset
	for {
		_, h, _, err := sc.next(verifyCRC)
		switch {
		case errors.Is(err, io.EOF):
			return true, nil
		case err != nil && diskFailure(err):
			return false, fmt.Errorf("check %s: %w", s.logPath, err)
		case err != nil:
			return false, nil
		case h.BaseOffset < next:
			return false, nil
		}
		next = h.NextOffset()
	}
}

// next returns the next batch's position, header and bytes (valid until the
// next call). With validate it checks the CRC and header consistency. It
// returns io.EOF at a clean end, ErrIncompleteBatch for a torn tail and
// ErrCorruptBatch/ErrUnsupportedMagic for garbage.
func (sc *batchScanner) next(validate bool) (int64, BatchHeader, []byte, error) {
	pos := sc.bufPos + int64(sc.start)
	if pos >= sc.fileSize {
		return pos, BatchHeader{}, nil, io.EOF
	}
	ok, err := sc.fill(minBatchPrefix)
	if err != nil {
		return pos, BatchHeader{}, nil, err
	}
	if !ok {
		return pos, BatchHeader{}, nil, fmt.Errorf("at %d: %w", pos, ErrIncompleteBatch)
	}
	h, err := ParseBatchHeader(sc.buf[sc.start:sc.end])
	if err != nil && !errors.Is(err, ErrIncompleteBatch) {
		return pos, h, nil, err
	}
	// Whole already (the usual case: the chunk holds the header), the
	// header needs no second parse once the batch is in the buffer.
	parsed := err == nil
	size := h.Size()
	if ok, err = sc.fill(size); err != nil {
		return pos, h, nil, err
	} else if !ok {
		return pos, h, nil, fmt.Errorf("at %d: %w: batch of %d bytes past end of file", pos, ErrIncompleteBatch, size)
	}
	batch := sc.buf[sc.start : sc.start+size]
	if validate {
		if h, err = ValidateBatch(batch); err != nil {
			return pos, h, nil, err
		}
	} else if !parsed {
		if h, err = ParseBatchHeader(batch); err != nil {
			return pos, h, nil, err
		}
	}
	sc.start += size
	return pos, h, batch, nil
}
