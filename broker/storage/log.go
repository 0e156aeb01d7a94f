package storage

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// TopicPartition names a partition.
type TopicPartition struct {
	Topic     string
	Partition int32
}

func (tp TopicPartition) String() string { return tp.Topic + "-" + strconv.Itoa(int(tp.Partition)) }

// DirName is the partition's directory name, <topic>-<partition>.
func (tp TopicPartition) DirName() string { return tp.String() }

// ParseTopicPartitionDir parses a partition directory name at its last '-'.
// It rejects names of directories pending deletion or replacement
// (-delete, -future, -stray).
func ParseTopicPartitionDir(name string) (TopicPartition, bool) {
	for _, suffix := range []string{"-delete", "-future", "-stray"} {
		if strings.HasSuffix(name, suffix) {
			return TopicPartition{}, false
		}
	}
	i := strings.LastIndexByte(name, '-')
	if i <= 0 || i == len(name)-1 {
		return TopicPartition{}, false
	}
	p, err := strconv.ParseInt(name[i+1:], 10, 32)
	if err != nil || p < 0 || strconv.FormatInt(p, 10) != name[i+1:] {
		return TopicPartition{}, false
	}
	return TopicPartition{Topic: name[:i], Partition: int32(p)}, true
}

// ValidTopicName reports whether name is a legal Kafka topic name: 1 to 249
// characters of [a-zA-Z0-9._-], and not "." or "..".
func ValidTopicName(name string) bool {
	if name == "" || len(name) > 249 || name == "." || name == ".." {
		return false
	}
	for _, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

func sortedPartitions[V any](m map[TopicPartition]V) []TopicPartition {
	tps := make([]TopicPartition, 0, len(m))
	for tp := range m {
		tps = append(tps, tp)
	}
	sort.Slice(tps, func(i, j int) bool {
		if tps[i].Topic != tps[j].Topic {
			return tps[i].Topic < tps[j].Topic
		}
		return tps[i].Partition < tps[j].Partition
	})
	return tps
}

// AppendInfo describes a completed append.
type AppendInfo struct {
	FirstOffset   int64
	LastOffset    int64
	MaxTimestamp  int64
	LogAppendTime int64 // -1 unless the log uses LogAppendTime
	// Duplicate: the batch repeated one already in the log; nothing was
	// appended and the offsets are the original ones.
	Duplicate   bool
	RecordCount int
}

// Log is one partition's log: its segments, indexes, leader epoch cache and
// producer state. It is safe for concurrent use: appends and mutations are
// serialized; reads run concurrently with each other.
type Log struct {
	mu sync.RWMutex
	// flushMu serializes fsync rounds (syncTo), which run without mu.
	flushMu sync.Mutex
	fs      FS
	dir     string
	tp      TopicPartition
	cfg     LogConfig
	logger  *slog.Logger
	now     func() time.Time

	segments       []*segment // ascending base offset; the last is active
	logStartOffset int64
	highWatermark  int64
	recoveryPoint  int64
	epochs         *epochCache
	producers      *producerState
	// aborted is the aborted-transactions index of every segment, by
	// marker offset (see txn.go).
	aborted []AbortedTxn

	unflushedMessages int64
	// dirty: files changed (append, truncation, roll) since the last flush.
	dirty bool
	// dirDirty: files were created in the partition dir since its last
	// fsync.
	dirDirty    bool
	lastFlushMs int64
	// truncations counts truncations, so that a background flush started
	// before one does not move the recovery point over rewritten offsets.
	truncations int64
	// failed is set when the files may no longer hold what memory says
	// (it wraps ErrLogDirOffline); every later read and write fails with
	// it.
	failed error
	// dirFailed reports the failure to the log manager, which takes the
	// log's whole dir offline.
	dirFailed func(error)
	// unsafe are the planted bugs this log runs with (zero: none).
	unsafe Unsafe
	// recoveredUnclean: this log was recovered after an unclean shutdown
	// when it was loaded (only unsafe.cleaner.drops.latest looks at it).
	recoveredUnclean bool
	closed           bool
	flushes          sync.WaitGroup
}

// Dir is the partition directory.
func (l *Log) Dir() string { return l.dir }

// TopicPartition is the log's partition.
func (l *Log) TopicPartition() TopicPartition { return l.tp }

// Config returns the log's configuration.
func (l *Log) Config() LogConfig {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.cfg
}

// SetConfig replaces the log's configuration (a topic config change).
func (l *Log) SetConfig(cfg LogConfig) error {
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("log %s: %w", l.tp, err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cfg = cfg
	for _, s := range l.segments {
		s.indexIntervalBytes = int64(cfg.IndexIntervalBytes)
		s.idx.maxEntries = int(cfg.SegmentIndexBytes) / offsetIndexEntrySize
	}
	return nil
}

func (l *Log) active() *segment { return l.segments[len(l.segments)-1] }

func (l *Log) leo() int64 { return l.active().nextOffset }

// LogEndOffset is the offset the next appended record gets.
func (l *Log) LogEndOffset() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.leo()
}

// VisibleEnd is how far the leader's own log counts toward the high
// watermark: the log end, except when flush.messages asks for an fsync at
// every append, where it is the flushed end. Appends here go on while
// another append's fsync runs (group commit), so without this a reader
// could see, and a power loss then take back, records whose own fsync has
// not finished; Kafka flushes inside the append under the log's lock, so
// its high watermark never passes an unflushed record either. Under
// unsafe.ack.before.fsync the log end counts, as the planted bug's
// acknowledgement does.
func (l *Log) VisibleEnd() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.cfg.FlushIntervalMessages == 1 && !l.unsafe.AckBeforeFsync {
		return min(max(l.recoveryPoint, l.logStartOffset), l.leo())
	}
	return l.leo()
}

// LogStartOffset is the first offset still readable.
func (l *Log) LogStartOffset() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.logStartOffset
}

// HighWatermark is the last value set with UpdateHighWatermark (or loaded
// from the checkpoint), clamped to [log start, LEO].
func (l *Log) HighWatermark() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.highWatermark
}

// UpdateHighWatermark sets the high watermark clamped to [log start, LEO]
// and returns the value set.
func (l *Log) UpdateHighWatermark(hw int64) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.highWatermark = min(max(hw, l.logStartOffset), l.leo())
	return l.highWatermark
}

// RecoveryPoint is the offset below which everything is known flushed.
func (l *Log) RecoveryPoint() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.recoveryPoint
}

// NumSegments is the number of segments.
func (l *Log) NumSegments() int {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return len(l.segments)
}

// Size is the total size of the segment files in bytes.
func (l *Log) Size() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.size()
}

func (l *Log) size() int64 {
	var n int64
	for _, s := range l.segments {
		n += s.size
	}
	return n
}

// SegmentBaseOffsets lists the base offsets of the segments, ascending.
func (l *Log) SegmentBaseOffsets() []int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	out := make([]int64, len(l.segments))
	for i, s := range l.segments {
		out[i] = s.baseOffset
	}
	return out
}

func (l *Log) checkUsable() error {
	if l.closed {
		return fmt.Errorf("log %s: %w", l.tp, ErrLogClosed)
	}
	if l.failed != nil {
		return fmt.Errorf("log %s: %w", l.tp, l.failed)
	}
	return nil
}

// fail takes the log offline when err is a failure of its disk (see
// diskFailure) and returns err, wrapping ErrLogDirOffline if so. The caller
// holds l.mu.
func (l *Log) fail(err error) error {
	if !diskFailure(err) {
		return err
	}
	return l.goOffline(err)
}

// goOffline makes every later read and write of the log fail and tells the
// log manager, which takes the log's dir offline (Kafka's
// LogDirFailureChannel). The caller holds l.mu.
func (l *Log) goOffline(cause error) error {
	if l.failed == nil {
		l.failed = fmt.Errorf("%w: %w", ErrLogDirOffline, cause)
		if l.dirFailed != nil {
			go l.dirFailed(l.failed)
		}
	}
	return l.failed
}

// takeOffline is goOffline for a log whose dir failed elsewhere.
func (l *Log) takeOffline(cause error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.failed == nil {
		l.failed = fmt.Errorf("%w: %w", ErrLogDirOffline, cause)
	}
}

// Offline reports whether the log's dir failed.
func (l *Log) Offline() bool {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.failed != nil
}

// diskFailure reports whether err says the files may no longer hold what
// memory says: a damaged segment, or an I/O error of the file system. A
// full disk (ENOSPC) on a write is not one: the write is cut back whole and
// the log serves again once there is space. A file closed under a flush by
// a concurrent deletion is not one either.
func diskFailure(err error) bool {
	if errors.Is(err, errSegmentDamaged) {
		return true
	}
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, os.ErrClosed) || errors.Is(err, ErrLogClosed) {
		return false
	}
	var pathErr *fs.PathError
	var errno syscall.Errno
	return errors.As(err, &pathErr) || errors.As(err, &errno)
}

// parseForAppend validates every batch of records (whole batches, v2,
// CRC, sizes) and returns their headers.
func (l *Log) parseForAppend(records []byte, leader bool, coordinator bool) ([]BatchHeader, error) {
	var headers []BatchHeader
	err := ForEachBatch(records, func(parsed BatchHeader, batch []byte) error {
		h := parsed
		if leader || !l.unsafe.FollowerSkipValidation {
			var err error
			if h, err = ValidateBatch(batch); err != nil {
				return err
			}
		}
		if l.cfg.MaxMessageBytes > 0 && h.Size() > int(l.cfg.MaxMessageBytes) && leader {
			return fmt.Errorf("%w: batch of %d bytes, max.message.bytes %d", ErrRecordTooLarge, h.Size(), l.cfg.MaxMessageBytes)
		}
		if int64(h.Size()) > l.cfg.SegmentBytes {
			return fmt.Errorf("%w: batch of %d bytes, segment.bytes %d", ErrRecordTooLarge, h.Size(), l.cfg.SegmentBytes)
		}
		if leader {
			if h.Compression() == CompressionNone {
				if err := checkUncompressedRecords(h, batch); err != nil {
					return err
				}
			} else if int64(h.RecordCount) != int64(h.LastOffsetDelta)+1 {
				return fmt.Errorf("%w: %d records, lastOffsetDelta %d", ErrInvalidRecord, h.RecordCount, h.LastOffsetDelta)
			}
			if h.HasProducerID() && h.BaseSequence < 0 && !(coordinator && h.IsTransactional()) {
				return fmt.Errorf("%w: producer %d batch without a sequence number", ErrInvalidRecord, h.ProducerID)
			}
			if h.Compression() > CompressionZstd {
				return fmt.Errorf("%w: codec %d", ErrUnsupportedCompression, h.Compression())
			}
			if l.cfg.Compacts() && !h.IsControl() {
				if err := checkRecordKeys(h, batch); err != nil {
					return err
				}
			}
		}
		headers = append(headers, h)
		return nil
	})
	if err != nil {
		if !leader && errors.Is(err, ErrIncompleteBatch) && len(headers) > 0 {
			return headers, nil
		}
		return nil, fmt.Errorf("append to %s: %w", l.tp, err)
	}
	if len(headers) == 0 {
		return nil, fmt.Errorf("append to %s: %w: no record batch", l.tp, ErrInvalidRecord)
	}
	return headers, nil
}

// AppendAsLeader validates records (one or more v2 batches from a client),
// checks idempotent producer sequences, assigns offsets from the log end,
// stamps leaderEpoch into every batch (and the append time for
// LogAppendTime logs) and appends them. It modifies records in place.
// A batch that repeats one of its producer's last five batches appends
// nothing and returns the original offsets with Duplicate set; with
// flush.messages set, only after an fsync made them durable (the original
// append may have failed its fsync), and with the fsync's error if it
// fails again.
func (l *Log) AppendAsLeader(records []byte, leaderEpoch int32, nowMs int64) (AppendInfo, error) {
	info, flush, err := l.appendAsLeader(records, leaderEpoch, nowMs, false)
	if err != nil || !flush {
		return info, err
	}
	if l.unsafe.AckBeforeFsync {
		// The fsync's failure still takes the log offline; a log closed
		// meanwhile fails it with ErrLogClosed.
		go func() { _ = l.syncTo(info.LastOffset+1, nowMs) }()
		return info, nil
	}
	return info, l.syncTo(info.LastOffset+1, nowMs)
}

// recompress re-encodes every data batch whose codec is not target (a
// topic's compression.type), keeping its producer, sequence, timestamps
// and attributes; control batches stay as they are. It returns records
// itself when nothing needs re-encoding.
func recompress(records []byte, headers []BatchHeader, target Compression) ([]byte, error) {
	need := false
	for _, h := range headers {
		need = need || (!h.IsControl() && h.Compression() != target)
	}
	if !need {
		return records, nil
	}
	out := make([]byte, 0, len(records))
	pos := 0
	for _, h := range headers {
		b := records[pos : pos+h.Size()]
		pos += h.Size()
		if h.IsControl() || h.Compression() == target {
			out = append(out, b...)
			continue
		}
		recs, err := DecodeRecords(b)
		if err != nil {
			return nil, fmt.Errorf("re-encode batch for compression.type: %w", err)
		}
		opts := BatchOptions{BaseOffset: h.BaseOffset, PartitionLeaderEpoch: h.PartitionLeaderEpoch,
			Transactional: h.IsTransactional(), LogAppendTime: h.HasLogAppendTime(), Compression: target}
		if h.HasProducerID() {
			opts.Producer = &BatchProducer{ID: h.ProducerID, Epoch: h.ProducerEpoch, BaseSequence: h.BaseSequence}
		}
		out = append(out, BuildBatch(recs, opts)...)
	}
	return out, nil
}

// checkTimestamps refuses CreateTime batches whose timestamps lie outside
// [now - message.timestamp.before.max.ms, now + message.timestamp.after.max.ms].
// The batch header bounds its records: no record is later than
// MaxTimestamp, and the first record's is BaseTimestamp.
func (l *Log) checkTimestamps(headers []BatchHeader, nowMs int64) error {
	if l.cfg.MessageTimestampType == TimestampLogAppendTime {
		return nil
	}
	before, after := l.cfg.MessageTimestampBeforeMaxMs, l.cfg.MessageTimestampAfterMaxMs
	for _, h := range headers {
		if h.IsControl() {
			continue
		}
		if after > 0 && after < math.MaxInt64-nowMs && h.MaxTimestamp > nowMs+after {
			return fmt.Errorf("append to %s: %w: timestamp %d is more than message.timestamp.after.max.ms=%d ahead of the broker's time %d",
				l.tp, ErrInvalidTimestamp, h.MaxTimestamp, after, nowMs)
		}
		if before > 0 && before < nowMs && h.BaseTimestamp >= 0 && h.BaseTimestamp < nowMs-before {
			return fmt.Errorf("append to %s: %w: timestamp %d is more than message.timestamp.before.max.ms=%d behind the broker's time %d",
				l.tp, ErrInvalidTimestamp, h.BaseTimestamp, before, nowMs)
		}
	}
	return nil
}

func (l *Log) appendAsLeader(records []byte, leaderEpoch int32, nowMs int64, coordinator bool) (AppendInfo, bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.checkUsable(); err != nil {
		return AppendInfo{}, false, err
	}
	headers, err := l.parseForAppend(records, true, coordinator)
	if err != nil {
		return AppendInfo{}, false, err
	}
	if err := l.checkTimestamps(headers, nowMs); err != nil {
		return AppendInfo{}, false, err
	}
	if target, ok := l.cfg.targetCompression(); ok {
		if records, err = recompress(records, headers, target); err != nil {
			return AppendInfo{}, false, fmt.Errorf("append to %s: %w", l.tp, err)
		}
		if headers, err = l.parseForAppend(records, true, coordinator); err != nil {
			return AppendInfo{}, false, err
		}
	}
	pa := l.producers.begin()
	pa.olderEpochsPass = l.unsafe.ProduceNoEpochFence
	for _, h := range headers {
		if !h.HasProducerID() {
			continue
		}
		if coordinator {
			if err := pa.checkEpoch(h); err != nil {
				return AppendInfo{}, false, fmt.Errorf("append to %s: %w", l.tp, err)
			}
			continue
		}
		dup, isDup, err := pa.check(h)
		if err != nil {
			return AppendInfo{}, false, fmt.Errorf("append to %s: %w", l.tp, err)
		}
		if isDup && !l.unsafe.IdempotenceOff {
			// The original append may have been answered with a failed
			// fsync: under flush.messages the retry is answered only once
			// the log is durable up to the batch's end.
			owed := flushEnabled(l.cfg.FlushIntervalMessages) && l.recoveryPoint <= dup.lastOffset
			return AppendInfo{
				FirstOffset:   dup.firstOffset,
				LastOffset:    dup.lastOffset,
				MaxTimestamp:  dup.timestamp,
				LogAppendTime: -1,
				Duplicate:     true,
			}, owed, nil
		}
		pa.record(h) // offsets fixed below, before commit
	}
	logAppendTime := l.cfg.MessageTimestampType == TimestampLogAppendTime
	info := AppendInfo{FirstOffset: l.leo(), MaxTimestamp: NoTimestamp, LogAppendTime: -1}
	if logAppendTime {
		info.LogAppendTime = nowMs
	}
	next := info.FirstOffset
	pos := 0
	pa = l.producers.begin()
	for i := range headers {
		h := &headers[i]
		b := records[pos : pos+h.Size()]
		setBaseOffset(b, next)
		setPartitionLeaderEpoch(b, leaderEpoch)
		h.BaseOffset = next
		h.PartitionLeaderEpoch = leaderEpoch
		if logAppendTime {
			setLogAppendTime(b, nowMs)
			h.MaxTimestamp = nowMs
			h.Attributes |= attrLogAppendTime
		}
		if h.MaxTimestamp > info.MaxTimestamp {
			info.MaxTimestamp = h.MaxTimestamp
		}
		if h.HasProducerID() {
			pa.record(*h)
		}
		info.RecordCount += int(h.RecordCount)
		next = h.NextOffset()
		pos += h.Size()
	}
	info.LastOffset = next - 1
	if err := l.appendBatches(records[:pos], headers, nowMs); err != nil {
		return AppendInfo{}, false, err
	}
	pa.commit()
	if leaderEpoch >= 0 {
		if l2, ok := l.epochs.latest(); !ok || l2.Epoch < leaderEpoch {
			if _, err := l.epochs.assign(leaderEpoch, info.FirstOffset, true); err != nil {
				return info, false, fmt.Errorf("append to %s: leader epoch checkpoint: %w", l.tp, err)
			}
		}
	}
	return info, l.noteAppended(info.RecordCount), nil
}

// AppendAsFollower appends batches whose offsets the leader assigned. The
// first batch must start at or after the log end offset and offsets must
// increase; a trailing partial batch is ignored. It updates the leader
// epoch cache from the batches' partition leader epochs and the producer
// state without sequence checks.
func (l *Log) AppendAsFollower(records []byte) error {
	nowMs := l.now().UnixMilli()
	leo, flush, err := l.appendAsFollower(records, nowMs)
	if err != nil || !flush {
		return err
	}
	return l.syncTo(leo, nowMs)
}

func (l *Log) appendAsFollower(records []byte, nowMs int64) (int64, bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.checkUsable(); err != nil {
		return 0, false, err
	}
	headers, err := l.parseForAppend(records, false, false)
	if err != nil {
		return 0, false, err
	}
	next := l.leo()
	size := 0
	count := 0
	for _, h := range headers {
		if h.BaseOffset < next || h.BaseOffset > math.MaxInt64-int64(h.LastOffsetDelta)-1 {
			return 0, false, fmt.Errorf("append to %s: %w: batch at %d, expected at least %d", l.tp, ErrNonMonotonicOffset, h.BaseOffset, next)
		}
		next = h.NextOffset()
		size += h.Size()
		count += int(h.RecordCount)
	}
	if err := l.appendBatches(records[:size], headers, nowMs); err != nil {
		return 0, false, err
	}
	pos := 0
	for _, h := range headers {
		l.replayBatch(h, records[pos:pos+h.Size()], true)
		pos += h.Size()
		if h.PartitionLeaderEpoch >= 0 {
			if e, ok := l.epochs.latest(); !ok || e.Epoch < h.PartitionLeaderEpoch {
				if _, err := l.epochs.assign(h.PartitionLeaderEpoch, h.BaseOffset, true); err != nil {
					return 0, false, fmt.Errorf("append to %s: leader epoch checkpoint: %w", l.tp, err)
				}
			}
		}
	}
	return l.leo(), l.noteAppended(count), nil
}

// appendBatches writes batches with final offsets, rolling first when the
// active segment cannot take them. The caller applies the batches to the
// producer state once they are written; a roll between them snapshots the
// state with the batches written before it.
func (l *Log) appendBatches(data []byte, headers []BatchHeader, nowMs int64) error {
	startLEO := l.leo()
	written := false
	start, startPos, pos := 0, 0, 0
	var pending int64
	flushGroup := func(end int) error {
		if end == start {
			return nil
		}
		if err := l.active().append(data[startPos:pos], headers[start:end]); err != nil {
			return l.fail(fmt.Errorf("append to %s: %w", l.tp, err))
		}
		written = true
		start, startPos, pending = end, pos, 0
		return nil
	}
	var err error
	for i, h := range headers {
		if l.shouldRoll(pending, int64(h.Size()), h.MaxTimestamp, h.BaseOffset, h.LastOffset(), nowMs) {
			if err = flushGroup(i); err != nil {
				break
			}
			if err = l.roll(h.BaseOffset, nowMs, l.producers.withBatches(headers[:i])); err != nil {
				break
			}
		}
		pending += int64(h.Size())
		pos += h.Size()
	}
	if err == nil {
		err = flushGroup(len(headers))
	}
	if err != nil && written && l.failed == nil {
		// Part of the batches went to an earlier segment: take them back
		// so that a failed append leaves no trace.
		if terr := l.truncateTo(startLEO); terr != nil {
			err = l.fail(fmt.Errorf("append to %s: undo partial append: %w: %w", l.tp, terr, errSegmentDamaged))
		}
	}
	return err
}

// shouldRoll reports whether a batch of size bytes must go to a new
// segment, given pending bytes about to be written to the active one.
func (l *Log) shouldRoll(pending, size, maxTs, firstOffset, lastOffset, nowMs int64) bool {
	s := l.active()
	if s.size+pending == 0 {
		return !s.canHold(lastOffset) || firstOffset < s.baseOffset
	}
	waited := nowMs - s.createdMs
	if s.rollBaseTimestamp >= 0 && maxTs >= 0 {
		waited = maxTs - s.rollBaseTimestamp
	}
	return s.size+pending > l.cfg.SegmentBytes-size ||
		waited > l.cfg.SegmentMs ||
		s.idx.full() ||
		!s.canHold(lastOffset)
}

// noteAppended counts appended records and reports whether flush.messages
// asks for a flush now.
func (l *Log) noteAppended(count int) bool {
	l.unflushedMessages += int64(count)
	l.dirty = true
	return flushEnabled(l.cfg.FlushIntervalMessages) && l.unflushedMessages >= l.cfg.FlushIntervalMessages
}

// syncTo makes every offset below target durable. The fsyncs run without
// the log's lock, so reads and appends go on meanwhile, and appends that
// wait for the same fsync share it (group commit).
func (l *Log) syncTo(target int64, nowMs int64) error {
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	l.mu.Lock()
	if err := l.checkUsable(); err != nil {
		l.mu.Unlock()
		return fmt.Errorf("flush %s: %w", l.tp, err)
	}
	if l.recoveryPoint >= target && !l.dirDirty {
		l.mu.Unlock()
		return nil
	}
	var segs []*segment
	for _, s := range l.segments {
		if s.nextOffset > l.recoveryPoint || s == l.active() {
			segs = append(segs, s)
		}
	}
	leo, gen, syncDir, count := l.leo(), l.truncations, l.dirDirty, l.unflushedMessages
	l.dirDirty = false
	l.unflushedMessages = 0
	l.mu.Unlock()

	var err error
	var failed *segment
	for _, s := range segs {
		if err = s.sync(); err != nil {
			failed = s
			break
		}
	}
	if err == nil && syncDir {
		err = l.fs.SyncDir(l.dir)
	}

	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case err != nil && l.closed:
		// Closed (or deleted) during the flush: its files are gone, not
		// failed.
		err = fmt.Errorf("log closed during the flush (%v): %w", err, ErrLogClosed)
	case err != nil && failed != nil && errors.Is(err, os.ErrClosed) && !slices.Contains(l.segments, failed):
		err = fmt.Errorf("segment %d was deleted during the flush: %w", failed.baseOffset, ErrLogClosed)
	}
	if errors.Is(err, ErrLogClosed) {
		l.unflushedMessages += count
		l.dirDirty = l.dirDirty || syncDir
		return fmt.Errorf("flush %s: %w", l.tp, err)
	}
	if err != nil && !l.unsafe.IgnoreFsyncError {
		// fsyncgate: after a failed fsync the kernel may have dropped the
		// dirty pages, and a later fsync can succeed without them, so the
		// log is never trusted again; whatever waited for this fsync gets
		// the failure, never an acknowledgement.
		return l.goOffline(fmt.Errorf("flush %s: %w", l.tp, err))
	}
	if gen == l.truncations && leo > l.recoveryPoint && leo <= l.leo() {
		l.recoveryPoint = leo
	}
	if l.recoveryPoint == l.leo() {
		l.dirty = false
	}
	l.lastFlushMs = nowMs
	return nil
}

// Roll starts a new active segment at the log end offset (a no-op when the
// active segment is empty).
func (l *Log) Roll() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.checkUsable(); err != nil {
		return err
	}
	return l.roll(l.leo(), l.now().UnixMilli(), l.producers)
}

// roll closes the active segment for writes, creates a new one at base,
// snapshots there producers, the producer state of the log below base, and
// flushes the older segments in the background, moving the recovery point
// to base.
func (l *Log) roll(base int64, nowMs int64, producers *producerState) error {
	old := l.active()
	if old.size == 0 {
		if old.baseOffset == base {
			return nil
		}
		if err := old.remove(); err != nil {
			return l.fail(fmt.Errorf("roll %s: %w: %w", l.tp, err, errSegmentDamaged))
		}
		l.segments = l.segments[:len(l.segments)-1]
	} else if err := old.finalizeTimeIndex(); err != nil {
		return l.fail(fmt.Errorf("roll %s: %w", l.tp, err))
	}
	s, err := createSegment(l.fs, l.dir, base, l.cfg, nowMs)
	if err != nil {
		if len(l.segments) == 0 {
			return l.fail(fmt.Errorf("roll %s: %w: %w", l.tp, err, errSegmentDamaged))
		}
		return l.fail(fmt.Errorf("roll %s: %w", l.tp, err))
	}
	l.segments = append(l.segments, s)
	l.dirty = true
	l.dirDirty = true
	if err := writeProducerSnapshot(l.fs, l.dir, base, producers); err != nil {
		l.logger.Warn(fmt.Sprintf("Failed to snapshot producer state of %s at offset %d", l.tp, base), "err", err)
	}
	if len(l.segments) > 1 {
		l.flushAsync(base)
	}
	return nil
}

// flushAsync fsyncs, without holding the lock, every segment below upTo and
// then moves the recovery point to upTo.
func (l *Log) flushAsync(upTo int64) {
	var segs []*segment
	for _, s := range l.segments {
		if s.baseOffset < upTo && s.nextOffset > l.recoveryPoint {
			segs = append(segs, s)
		}
	}
	gen := l.truncations
	l.flushes.Add(1)
	go func() {
		defer l.flushes.Done()
		for _, s := range segs {
			if err := s.sync(); err != nil && !errors.Is(err, os.ErrClosed) {
				l.logger.Warn(fmt.Sprintf("Failed to flush segment %d of %s", s.baseOffset, l.tp), "err", err)
				return
			}
		}
		if err := l.fs.SyncDir(l.dir); err != nil {
			l.logger.Warn(fmt.Sprintf("Failed to flush directory of %s", l.tp), "err", err)
			return
		}
		l.mu.Lock()
		if gen == l.truncations && upTo > l.recoveryPoint && upTo <= l.leo() {
			l.recoveryPoint = upTo
		}
		l.mu.Unlock()
	}()
}

// Flush fsyncs every segment with unflushed data and the partition
// directory, and moves the recovery point to the log end offset.
func (l *Log) Flush() error {
	return l.syncTo(l.LogEndOffset(), l.now().UnixMilli())
}

func (l *Log) flushLocked(nowMs int64) error {
	leo := l.leo()
	for _, s := range l.segments {
		if s.nextOffset <= l.recoveryPoint && s != l.active() {
			continue
		}
		if err := s.sync(); err != nil {
			return fmt.Errorf("flush %s: %w", l.tp, err)
		}
	}
	if l.dirDirty {
		if err := l.fs.SyncDir(l.dir); err != nil {
			return fmt.Errorf("flush %s: dir: %w", l.tp, err)
		}
		l.dirDirty = false
	}
	l.recoveryPoint = leo
	l.unflushedMessages = 0
	l.dirty = false
	l.lastFlushMs = nowMs
	return nil
}

// MaybeFlushByTime flushes when flush.ms has passed since the last flush.
func (l *Log) MaybeFlushByTime(nowMs int64) error {
	l.mu.RLock()
	due := !l.closed && flushEnabled(l.cfg.FlushIntervalMs) && l.unflushedMessages > 0 && nowMs-l.lastFlushMs >= l.cfg.FlushIntervalMs
	leo := l.leo()
	l.mu.RUnlock()
	if !due {
		return nil
	}
	return l.syncTo(leo, nowMs)
}

// segmentFor returns the index of the segment holding offset: the last
// segment whose base is <= offset.
func (l *Log) segmentFor(offset int64) int {
	i := sort.Search(len(l.segments), func(i int) bool { return l.segments[i].baseOffset > offset })
	return max(i-1, 0)
}

// Read returns whole batches starting with the one holding offset, at most
// maxBytes of them (but at least one when minOneBatch), and none whose base
// offset is at or after maxOffset (pass the high watermark for consumers,
// the LEO for followers). An offset below the log start or above the log end
// fails with ErrOffsetOutOfRange; reading at the log end returns nothing.
func (l *Log) Read(offset int64, maxBytes int32, maxOffset int64, minOneBatch bool) ([]byte, error) {
	b, err := l.read(offset, maxBytes, maxOffset, minOneBatch)
	if err != nil && diskFailure(err) {
		l.mu.Lock()
		err = l.goOffline(err)
		l.mu.Unlock()
	}
	return b, err
}

func (l *Log) read(offset int64, maxBytes int32, maxOffset int64, minOneBatch bool) ([]byte, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if err := l.checkUsable(); err != nil {
		return nil, fmt.Errorf("read %s: %w", l.tp, err)
	}
	leo := l.leo()
	if offset < l.logStartOffset || offset > leo {
		return nil, fmt.Errorf("read %s at %d: %w: log is [%d, %d)", l.tp, offset, ErrOffsetOutOfRange, l.logStartOffset, leo)
	}
	maxOffset = min(maxOffset, leo)
	if offset >= maxOffset || maxBytes < 0 {
		return nil, nil
	}
	for i := l.segmentFor(offset); i < len(l.segments); i++ {
		b, err := l.segments[i].read(offset, int(maxBytes), maxOffset, minOneBatch)
		if err != nil {
			return nil, fmt.Errorf("read %s at %d: %w", l.tp, offset, err)
		}
		if len(b) > 0 || l.segments[i].nextOffset > offset {
			return b, nil
		}
	}
	return nil, nil
}

// LatestEpoch is the newest leader epoch in the epoch cache.
func (l *Log) LatestEpoch() (int32, bool) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	e, ok := l.epochs.latest()
	return e.Epoch, ok
}

// EpochEntries returns a copy of the leader epoch cache.
func (l *Log) EpochEntries() []EpochEntry {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.epochs.snapshot()
}

// AssignEpochStartOffset records that epoch starts at startOffset (a new
// leader calls it with its LEO) and persists the epoch cache.
func (l *Log) AssignEpochStartOffset(epoch int32, startOffset int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.checkUsable(); err != nil {
		return err
	}
	if _, err := l.epochs.assign(epoch, startOffset, true); err != nil {
		return fmt.Errorf("assign epoch %d of %s: %w", epoch, l.tp, err)
	}
	return nil
}

// EndOffsetForEpoch is Kafka's endOffsetFor: the largest epoch <= epoch and
// the offset where it ended (the LEO for the latest epoch); (-1, -1) when
// epoch is undefined or newer than every known epoch.
func (l *Log) EndOffsetForEpoch(epoch int32) (int32, int64) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.epochs.endOffsetFor(epoch, l.leo())
}

// FetchOffsetByTimestamp finds the first record at or after the log start
// whose timestamp is >= ts and returns its offset, timestamp and the leader
// epoch of its batch; ok is false when no record qualifies.
func (l *Log) FetchOffsetByTimestamp(ts int64) (offset int64, timestamp int64, epoch int32, ok bool, err error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	for i := l.segmentFor(l.logStartOffset); i < len(l.segments); i++ {
		s := l.segments[i]
		if s.maxTimestamp < ts || s.size == 0 {
			continue
		}
		start := l.logStartOffset
		if rel, found := s.idx.lookupTime(ts); found && s.baseOffset+int64(rel) > start {
			start = s.baseOffset + int64(rel)
		}
		off, rts, ep, found, err := l.searchTimestamp(s, start, ts)
		if err != nil {
			return -1, -1, -1, false, fmt.Errorf("offset for timestamp %d in %s: %w", ts, l.tp, err)
		}
		if found {
			return off, rts, ep, true, nil
		}
	}
	return -1, -1, -1, false, nil
}

func (l *Log) searchTimestamp(s *segment, from int64, ts int64) (int64, int64, int32, bool, error) {
	var hb [BatchHeaderSize]byte
	pos, _, found, err := s.findPosition(from, hb[:])
	if err != nil || !found {
		return 0, 0, 0, false, err
	}
	for pos < s.size {
		h, err := s.headerAt(pos, hb[:])
		if err != nil {
			return 0, 0, 0, false, err
		}
		if h.MaxTimestamp >= ts && h.LastOffset() >= l.logStartOffset {
			batch := make([]byte, h.Size())
			if _, err := s.log.ReadAt(batch, pos); err != nil {
				return 0, 0, 0, false, err
			}
			recs, err := DecodeRecords(batch)
			if err != nil {
				return 0, 0, 0, false, err
			}
			for _, r := range recs {
				if r.TimestampMs >= ts && r.Offset >= l.logStartOffset {
					return r.Offset, r.TimestampMs, h.PartitionLeaderEpoch, true, nil
				}
			}
		}
		pos += int64(h.Size())
	}
	return 0, 0, 0, false, nil
}

// TruncateTo removes every batch whose last offset is >= offset (a follower
// cutting a diverged suffix). The log end becomes min(offset, base of the
// first removed batch); the high watermark, recovery point, epoch cache and
// producer state follow. An offset at or past the log end removes no batch
// but still drops the epochs that start at the log end.
func (l *Log) TruncateTo(offset int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.checkUsable(); err != nil {
		return err
	}
	if offset < 0 {
		return fmt.Errorf("truncate %s to %d: %w", l.tp, offset, ErrInvalidOffset)
	}
	return l.truncateTo(offset)
}

func (l *Log) truncateTo(offset int64) error {
	if leo := l.leo(); offset >= leo {
		// Nothing to cut from the log, but an epoch this broker started
		// as leader without appending to it starts at the log end; the
		// leader that sent the follower here never had it, and a follower
		// that kept it would name it in every fetch and be sent back
		// here forever. Kafka's truncateTo trims the cache the same way.
		if err := l.epochs.truncateFromEnd(leo, true); err != nil {
			return fmt.Errorf("truncate %s: leader epoch checkpoint: %w", l.tp, err)
		}
		return nil
	}
	if offset <= l.segments[0].baseOffset || offset < l.logStartOffset {
		return l.truncateFullyAndStartAt(offset)
	}
	l.truncations++
	l.dirty = true
	i := l.segmentFor(offset)
	for j := len(l.segments) - 1; j > i; j-- {
		if err := l.segments[j].remove(); err != nil {
			l.segments = l.segments[:j]
			return l.fail(fmt.Errorf("truncate %s: %w: %w", l.tp, err, errSegmentDamaged))
		}
	}
	l.segments = l.segments[:i+1]
	if _, err := l.segments[i].truncateTo(offset); err != nil {
		return l.fail(fmt.Errorf("truncate %s: %w: %w", l.tp, err, errSegmentDamaged))
	}
	leo := l.leo()
	if leo < l.logStartOffset {
		// The batch holding offset started below the log start: nothing
		// readable is left.
		return l.truncateFullyAndStartAt(l.logStartOffset)
	}
	l.highWatermark = min(l.highWatermark, leo)
	l.recoveryPoint = min(l.recoveryPoint, leo)
	if err := l.epochs.truncateFromEnd(leo, true); err != nil {
		return fmt.Errorf("truncate %s: leader epoch checkpoint: %w", l.tp, err)
	}
	return l.rebuildProducerState(leo, false)
}

// TruncateFullyAndStartAt deletes every segment and restarts the log empty
// at offset (a follower far behind a leader's log start).
func (l *Log) TruncateFullyAndStartAt(offset int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.checkUsable(); err != nil {
		return err
	}
	if offset < 0 {
		return fmt.Errorf("truncate %s to %d: %w", l.tp, offset, ErrInvalidOffset)
	}
	return l.truncateFullyAndStartAt(offset)
}

func (l *Log) truncateFullyAndStartAt(offset int64) error {
	l.truncations++
	l.dirty = true
	l.dirDirty = true
	for _, s := range l.segments {
		if err := s.remove(); err != nil {
			return l.fail(fmt.Errorf("truncate %s: %w: %w", l.tp, err, errSegmentDamaged))
		}
	}
	l.segments = l.segments[:0]
	s, err := createSegment(l.fs, l.dir, offset, l.cfg, l.now().UnixMilli())
	if err != nil {
		return l.fail(fmt.Errorf("truncate %s: %w: %w", l.tp, err, errSegmentDamaged))
	}
	l.segments = append(l.segments, s)
	l.logStartOffset = offset
	l.highWatermark = offset
	l.recoveryPoint = offset
	if err := l.epochs.clear(true); err != nil {
		return fmt.Errorf("truncate %s: leader epoch checkpoint: %w", l.tp, err)
	}
	l.producers = newProducerState()
	l.aborted = nil
	if offs, err := listSnapshots(l.fs, l.dir); err == nil {
		for _, o := range offs {
			_ = removeSnapshot(l.fs, l.dir, o)
		}
	}
	return nil
}

// IncrementLogStartOffset advances the log start offset (DeleteRecords, or a
// follower following its leader's log start) and deletes segments that lie
// wholly below it. offset may not pass the high watermark.
func (l *Log) IncrementLogStartOffset(offset int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.checkUsable(); err != nil {
		return err
	}
	if offset > l.highWatermark {
		return fmt.Errorf("advance log start of %s to %d: %w: high watermark is %d", l.tp, offset, ErrOffsetOutOfRange, l.highWatermark)
	}
	if offset <= l.logStartOffset {
		return nil
	}
	l.logStartOffset = offset
	if err := l.epochs.truncateFromStart(offset, true); err != nil {
		return fmt.Errorf("advance log start of %s: leader epoch checkpoint: %w", l.tp, err)
	}
	// Producers stay (KIP-360): a producer whose batches are all below
	// the new start still has its sequence checked, so its retry of a
	// batch written before is answered as a duplicate, not written again;
	// producer.id expiration forgets it.
	_, err := l.deleteSegmentsWhile(func(s *segment, next *segment) bool {
		return next != nil && next.baseOffset <= l.logStartOffset
	})
	return err
}

// DeleteOldSegments applies retention: segments wholly below the log start,
// and unless cleanup.policy is compact only, segments whose newest timestamp
// is older than retention.ms and the oldest segments while the log is larger
// than retention.bytes. The active segment
// is rolled first when it has to go. It returns how many were deleted.
func (l *Log) DeleteOldSegments(nowMs int64) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.checkUsable(); err != nil {
		return 0, err
	}
	total := 0
	n, err := l.deleteSegmentsWhile(func(s, next *segment) bool {
		return next != nil && next.baseOffset <= l.logStartOffset
	})
	total += n
	if err != nil {
		return total, err
	}
	if l.cfg.RetentionMs >= 0 && l.cfg.retentionApplies() {
		n, err := l.deleteSegmentsWhile(func(s, _ *segment) bool {
			return s.size > 0 && s.maxTimestamp != NoTimestamp && nowMs-s.maxTimestamp > l.cfg.RetentionMs
		})
		total += n
		if err != nil {
			return total, err
		}
	}
	if l.cfg.RetentionBytes >= 0 && l.cfg.retentionApplies() {
		excess := l.size() - l.cfg.RetentionBytes
		n, err := l.deleteSegmentsWhile(func(s, _ *segment) bool {
			if s.size == 0 || excess-s.size < 0 {
				return false
			}
			excess -= s.size
			return true
		})
		total += n
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

// deleteSegmentsWhile deletes segments from the oldest while pred holds,
// rolling first when the active segment is among them, then advances the
// log start offset to the first remaining segment.
func (l *Log) deleteSegmentsWhile(pred func(s, next *segment) bool) (int, error) {
	n := 0
	for n < len(l.segments) {
		var next *segment
		if n+1 < len(l.segments) {
			next = l.segments[n+1]
		}
		if !pred(l.segments[n], next) {
			break
		}
		n++
	}
	if n == 0 {
		return 0, nil
	}
	if n == len(l.segments) {
		if err := l.roll(l.leo(), l.now().UnixMilli(), l.producers); err != nil {
			return 0, err
		}
	}
	for i := 0; i < n; i++ {
		s := l.segments[0]
		l.segments = l.segments[1:]
		if err := s.remove(); err != nil {
			l.logger.Warn(fmt.Sprintf("Failed to delete segment %d of %s", s.baseOffset, l.tp), "err", err)
		}
	}
	base := l.segments[0].baseOffset
	if base > l.logStartOffset {
		l.logStartOffset = base
		l.highWatermark = max(l.highWatermark, base)
		l.recoveryPoint = max(l.recoveryPoint, base)
		if err := l.epochs.truncateFromStart(base, true); err != nil {
			return n, fmt.Errorf("retention of %s: leader epoch checkpoint: %w", l.tp, err)
		}
		kept := l.aborted[:0]
		for _, a := range l.aborted {
			if a.LastOffset >= base {
				kept = append(kept, a)
			}
		}
		l.aborted = kept
	}
	if offs, err := listSnapshots(l.fs, l.dir); err == nil {
		for _, o := range offs {
			if o < base {
				_ = removeSnapshot(l.fs, l.dir, o)
			}
		}
	}
	l.logger.Info(fmt.Sprintf("Deleted %d segments of %s; log start offset is now %d", n, l.tp, l.logStartOffset))
	return n, nil
}

// rebuildProducerState loads the newest valid snapshot at or below upTo
// and replays the batches between it and upTo. Snapshots above upTo are
// deleted.
func (l *Log) rebuildProducerState(upTo int64, logLoad bool) error {
	offs, err := listSnapshots(l.fs, l.dir)
	if err != nil {
		return err
	}
	l.producers = newProducerState()
	from := l.logStartOffset
	for i := len(offs) - 1; i >= 0; i-- {
		o := offs[i]
		if o > upTo {
			_ = removeSnapshot(l.fs, l.dir, o)
			continue
		}
		if o < l.segments[0].baseOffset {
			break
		}
		data, err := readFile(l.fs, offsetFileName(l.dir, o, snapshotSuffix))
		if err == nil {
			var ps *producerState
			if ps, err = decodeProducerSnapshot(data); err == nil {
				l.producers = ps
				from = o
				break
			}
		}
		l.logger.Warn(fmt.Sprintf("Deleting unreadable producer snapshot %d of %s", o, l.tp), "err", err)
		_ = removeSnapshot(l.fs, l.dir, o)
	}
	if logLoad {
		l.logger.Info(fmt.Sprintf("Loading producer state from offset %d for partition %s", from, l.tp))
	}
	l.loadTxnIndexes(from)
	if from >= upTo {
		return nil
	}
	defer func() {
		for _, s := range l.segments[l.segmentFor(from):] {
			l.writeTxnIndex(s)
		}
	}()
	for i := l.segmentFor(from); i < len(l.segments); i++ {
		s := l.segments[i]
		if s.baseOffset >= upTo {
			break
		}
		start := int64(0)
		if from > s.baseOffset {
			var hb [BatchHeaderSize]byte
			pos, _, found, err := s.findPosition(from, hb[:])
			if err != nil {
				return fmt.Errorf("replay producer state of %s: %w", l.tp, err)
			}
			if !found {
				continue
			}
			start = pos
		}
		if err := l.replaySegment(s, start, from, upTo); err != nil {
			return err
		}
	}
	return nil
}

// ExpireProducers forgets idempotent producers idle for expirationMs
// (producer.id.expiration.ms): their next batch is accepted with any
// sequence, as from an unknown producer. It returns how many were dropped.
func (l *Log) ExpireProducers(nowMs, expirationMs int64) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.producers.expire(nowMs, expirationMs)
}

// replaySegment applies the batches of s from byte start, with offsets in
// [from, upTo), to the producer state.
func (l *Log) replaySegment(s *segment, start, from, upTo int64) error {
	sc := newBatchScanner(s.log, s.size)
	defer sc.release()
	sc.bufPos = start
	for {
		_, h, batch, err := sc.next(false)
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("replay producer state of %s: %w", l.tp, err)
		}
		if h.BaseOffset >= upTo {
			return nil
		}
		if h.LastOffset() >= from {
			l.replayBatch(h, batch, false)
		}
	}
}

// Close flushes nothing: it finalizes the active time index and closes the
// files. Use Flush first for durability (the LogManager's Shutdown does).
func (l *Log) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	l.mu.Unlock()
	l.flushes.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	var first error
	if len(l.segments) > 0 && l.failed == nil {
		if err := l.active().finalizeTimeIndex(); err != nil {
			first = err
		}
	}
	for _, s := range l.segments {
		if err := s.close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// flushIfDirty flushes unless nothing changed since the last flush.
func (l *Log) flushIfDirty() error {
	if !l.dirty && l.recoveryPoint == l.leo() {
		return nil
	}
	return l.flushLocked(l.now().UnixMilli())
}

// snapshotAtEnd writes the producer snapshot at the LEO unless one exists:
// a snapshot at an offset always describes the log below it.
func (l *Log) snapshotAtEnd() error {
	if fileExists(l.fs, offsetFileName(l.dir, l.leo(), snapshotSuffix)) {
		return nil
	}
	if err := writeProducerSnapshot(l.fs, l.dir, l.leo(), l.producers); err != nil {
		return fmt.Errorf("snapshot producer state of %s: %w", l.tp, err)
	}
	return nil
}

// closeForShutdown flushes, snapshots producer state at the LEO and closes.
func (l *Log) closeForShutdown() error {
	l.mu.Lock()
	var first error
	if l.failed != nil {
		first = l.failed
	} else if !l.closed {
		if err := l.active().finalizeTimeIndex(); err != nil {
			first = err
		} else if err := l.flushIfDirty(); err != nil {
			first = err
		} else if err := l.snapshotAtEnd(); err != nil {
			first = err
		}
	}
	l.mu.Unlock()
	if err := l.Close(); err != nil && first == nil {
		first = err
	}
	return first
}
