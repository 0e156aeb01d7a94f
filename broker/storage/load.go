package storage

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// loadParams is what the LogManager knows about a partition before opening
// it: the log dir's checkpoints and whether the dir shut down cleanly.
type loadParams struct {
	cleanShutdown  bool
	recoveryPoint  int64 // -1: not in the checkpoint
	logStartOffset int64 // -1: not in the checkpoint
	highWatermark  int64 // -1: not in the checkpoint
	logger         *slog.Logger
	now            func() time.Time
	// dirFailed is told, once, when the log finds its disk failed.
	dirFailed func(error)
	unsafe    Unsafe
}

// loadResult reports what loading a log did.
type loadResult struct {
	recovered bool
	segments  int
}

// openLog opens (creating if needed) the log in dir, recovering it when the
// shutdown was unclean, as Kafka's LogLoader does.
func openLog(fs FS, dir string, tp TopicPartition, cfg LogConfig, p loadParams) (*Log, loadResult, error) {
	start := time.Now()
	var res loadResult
	if err := cfg.Validate(); err != nil {
		return nil, res, fmt.Errorf("log %s: %w", tp, err)
	}
	if p.now == nil {
		p.now = time.Now
	}
	if p.logger == nil {
		p.logger = slog.New(slog.DiscardHandler)
	}
	if err := fs.MkdirAll(dir, 0o755); err != nil {
		return nil, res, fmt.Errorf("create %s: %w", dir, err)
	}
	l := &Log{fs: fs, dir: dir, tp: tp, cfg: cfg, logger: p.logger, now: p.now, producers: newProducerState(), dirDirty: true, dirFailed: p.dirFailed, unsafe: p.unsafe}
	nowMs := p.now().UnixMilli()
	l.lastFlushMs = nowMs
	bases, err := cleanupPartitionDir(fs, dir)
	if err != nil {
		return nil, res, fmt.Errorf("load %s: %w", tp, err)
	}
	epochs, err := loadEpochCache(fs, dir)
	rebuildEpochs := err != nil
	if rebuildEpochs {
		p.logger.Warn(fmt.Sprintf("Rebuilding unreadable leader epoch checkpoint of %s from the log", tp), "err", err)
		epochs.entries = nil
		epochs.dirty = true
	}
	l.epochs = epochs
	fail := func(err error) (*Log, loadResult, error) {
		for _, s := range l.segments {
			_ = s.close()
		}
		return nil, res, fmt.Errorf("load %s: %w", tp, err)
	}
	for _, base := range bases {
		s, needsRecovery, err := openSegment(fs, dir, base, cfg, nowMs)
		if err != nil {
			return fail(err)
		}
		s.needsRecovery = needsRecovery
		if needsRecovery && p.cleanShutdown {
			p.logger.Info(fmt.Sprintf("Rebuilding indexes of segment %d of %s", base, tp))
			if _, err := s.recover(true, nil); err != nil {
				_ = s.close()
				return fail(err)
			}
		}
		l.segments = append(l.segments, s)
	}
	recoveryPoint := max(p.recoveryPoint, 0)
	if !p.cleanShutdown && len(l.segments) > 0 {
		res.recovered = true
		l.recoveredUnclean = true
		p.logger.Info(fmt.Sprintf("Recovering log %s", tp))
		if err := l.recoverSegments(recoveryPoint); err != nil {
			return fail(err)
		}
	}
	if len(l.segments) == 0 {
		s, err := createSegment(fs, dir, max(p.logStartOffset, 0), cfg, nowMs)
		if err != nil {
			return fail(err)
		}
		l.segments = append(l.segments, s)
	}
	leo := l.leo()
	l.logStartOffset = max(p.logStartOffset, l.segments[0].baseOffset)
	if leo < l.logStartOffset {
		p.logger.Warn(fmt.Sprintf("Log end offset %d of %s is below its log start offset %d; starting empty at the log start", leo, tp, l.logStartOffset))
		if err := l.truncateFullyAndStartAt(l.logStartOffset); err != nil {
			return fail(err)
		}
		leo = l.leo()
	}
	if p.cleanShutdown {
		l.recoveryPoint = leo
	} else {
		l.recoveryPoint = min(recoveryPoint, leo)
	}
	l.highWatermark = min(max(p.highWatermark, l.logStartOffset), leo)
	if rebuildEpochs {
		if err := l.rebuildEpochCache(); err != nil {
			return fail(err)
		}
	}
	if err := l.epochs.truncateFromEnd(leo, false); err != nil {
		return fail(err)
	}
	if err := l.epochs.truncateFromStart(l.logStartOffset, false); err != nil {
		return fail(err)
	}
	if l.epochs.dirty {
		if err := l.epochs.flush(); err != nil {
			return fail(fmt.Errorf("leader epoch checkpoint: %w", err))
		}
	}
	if err := l.rebuildProducerState(leo, true); err != nil {
		return fail(err)
	}
	if res.recovered {
		p.logger.Info(fmt.Sprintf("Completed recovery of %s. New Log End Offset is %d", tp, leo))
	}
	res.segments = len(l.segments)
	p.logger.Info(fmt.Sprintf("Completed load of log %s with %d segments, log start offset %d and log end offset %d in %d ms",
		tp, len(l.segments), l.logStartOffset, leo, time.Since(start).Milliseconds()))
	return l, res, nil
}

// recoverSegments validates every segment from the one holding the recovery
// point to the end, truncating at the first invalid byte and deleting every
// later segment, and reassigns leader epochs from the surviving batches.
// The segments below the recovery point are checked too (CRC, sizes,
// increasing offsets; Kafka trusts them): the first one holding a corrupt
// batch is recovered the same way, so a bit flip on the disk is cut off and
// the replica fetches the rest again from its leader instead of serving it.
func (l *Log) recoverSegments(recoveryPoint int64) error {
	verifyCRC := !l.unsafe.RecoverySkipCRC
	first := l.segmentFor(recoveryPoint)
	for i, s := range l.segments[:first] {
		if s.needsRecovery {
			first = i
			break
		}
		whole, err := s.batchesValid(verifyCRC)
		if err != nil {
			return err
		}
		if !whole {
			l.logger.Warn(fmt.Sprintf("Found a corrupt batch in flushed segment %d of %s below its recovery point %d; recovering from there", s.baseOffset, l.tp, recoveryPoint))
			first = i
			break
		}
	}
	prevEnd := int64(-1)
	if first > 0 {
		prevEnd = l.segments[first-1].nextOffset
	}
	for i := first; i < len(l.segments); i++ {
		s := l.segments[i]
		if s.baseOffset < prevEnd {
			l.logger.Warn(fmt.Sprintf("Segment %d of %s overlaps the previous one ending at %d; deleting it and later segments", s.baseOffset, l.tp, prevEnd))
			return l.dropSegmentsFrom(i)
		}
		l.logger.Info(fmt.Sprintf("Recovering unflushed segment %d of %s", s.baseOffset, l.tp))
		cut, err := s.recover(verifyCRC, func(h BatchHeader) {
			if h.PartitionLeaderEpoch >= 0 {
				if e, ok := l.epochs.latest(); !ok || e.Epoch < h.PartitionLeaderEpoch {
					_, _ = l.epochs.assign(h.PartitionLeaderEpoch, h.BaseOffset, false)
				}
			}
		})
		if err != nil {
			return err
		}
		prevEnd = s.nextOffset
		if cut > 0 {
			l.logger.Warn(fmt.Sprintf("Found invalid bytes at byte %d of segment %d of %s; truncated %d bytes, log end offset is now %d",
				s.size, s.baseOffset, l.tp, cut, s.nextOffset))
			return l.dropSegmentsFrom(i + 1)
		}
	}
	return nil
}

// rebuildEpochCache reassigns every leader epoch from the partition leader
// epochs of the batches in the log.
func (l *Log) rebuildEpochCache() error {
	l.epochs.entries = nil
	for _, s := range l.segments {
		sc := newBatchScanner(s.log, s.size)
		for {
			_, h, _, err := sc.next(false)
			if err != nil {
				sc.release()
				if errors.Is(err, io.EOF) {
					break
				}
				return fmt.Errorf("rebuild leader epochs of %s: %w", l.tp, err)
			}
			if e, ok := l.epochs.latest(); h.PartitionLeaderEpoch >= 0 && (!ok || e.Epoch < h.PartitionLeaderEpoch) {
				if _, err := l.epochs.assign(h.PartitionLeaderEpoch, h.BaseOffset, false); err != nil {
					sc.release()
					return err
				}
			}
		}
	}
	return nil
}

// dropSegmentsFrom deletes segments i and later, keeping at least one.
func (l *Log) dropSegmentsFrom(i int) error {
	if i == 0 {
		i = 1
		if err := l.segments[0].remove(); err != nil {
			return err
		}
		s, err := createSegment(l.fs, l.dir, l.segments[0].baseOffset, l.cfg, l.now().UnixMilli())
		if err != nil {
			return err
		}
		l.segments[0] = s
	}
	for j := len(l.segments) - 1; j >= i; j-- {
		l.logger.Warn(fmt.Sprintf("Deleting segment %d of %s after a truncation during recovery", l.segments[j].baseOffset, l.tp))
		if err := l.segments[j].remove(); err != nil {
			return err
		}
	}
	l.segments = l.segments[:i]
	return nil
}

// cleanupPartitionDir deletes leftovers of interrupted operations (.deleted,
// .tmp files, index files without a log), finishes or undoes the
// cleaner's interrupted swaps (recoverSwaps: .cleaned files go, .log.swap
// files replace the segments they cover) and returns the base offsets of
// the .log files, ascending.
func cleanupPartitionDir(fs FS, dir string) ([]int64, error) {
	ents, err := fs.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", dir, err)
	}
	names := make([]string, 0, len(ents))
	for _, e := range ents {
		if !e.IsDir() {
			names = append(names, e.Name())
		}
	}
	if changed, err := recoverSwaps(fs, dir, names); err != nil {
		return nil, fmt.Errorf("recover cleaner swaps in %s: %w", dir, err)
	} else if changed {
		if err := fs.SyncDir(dir); err != nil {
			return nil, fmt.Errorf("recover cleaner swaps in %s: %w", dir, err)
		}
		if ents, err = fs.ReadDir(dir); err != nil {
			return nil, fmt.Errorf("list %s: %w", dir, err)
		}
	}
	logs := map[int64]bool{}
	var indexes []string
	for _, e := range ents {
		name := e.Name()
		full := filepath.Join(dir, name)
		switch {
		case e.IsDir():
			continue
		case strings.HasSuffix(name, ".deleted"), strings.HasSuffix(name, ".cleaned"), strings.HasSuffix(name, ".tmp"), strings.HasSuffix(name, ".swap"):
			if err := fs.Remove(full); err != nil && !os.IsNotExist(err) {
				return nil, fmt.Errorf("delete %s: %w", full, err)
			}
		case strings.HasSuffix(name, logSuffix):
			if base, ok := parseOffsetName(name, logSuffix); ok {
				logs[base] = true
			}
		case strings.HasSuffix(name, indexSuffix), strings.HasSuffix(name, timeIndexSuffix), strings.HasSuffix(name, txnIndexSuffix):
			indexes = append(indexes, name)
		}
	}
	for _, name := range indexes {
		suffix := filepath.Ext(name)
		if base, ok := parseOffsetName(name, suffix); ok && !logs[base] {
			if err := fs.Remove(filepath.Join(dir, name)); err != nil && !os.IsNotExist(err) {
				return nil, fmt.Errorf("delete orphan index %s: %w", name, err)
			}
		}
	}
	bases := make([]int64, 0, len(logs))
	for b := range logs {
		bases = append(bases, b)
	}
	sort.Slice(bases, func(i, j int) bool { return bases[i] < bases[j] })
	return bases, nil
}

func parseOffsetName(name, suffix string) (int64, bool) {
	s := strings.TrimSuffix(name, suffix)
	if len(s) != 20 {
		return 0, false
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v < 0 {
		return 0, false
	}
	return v, true
}
