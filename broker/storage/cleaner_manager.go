package storage

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"github.com/faultline/faultline/broker/config"
)

// CleanerOffsetCheckpointFile is the cleaner's checkpoint in a log dir:
// Kafka's offset checkpoint format (version 0, count, "topic partition
// offset" lines), one entry per compacted log, the offset up to which the
// log was cleaned (its first dirty offset).
const CleanerOffsetCheckpointFile = "cleaner-offset-checkpoint"

// CleanerOptions configure the log cleaner (log.cleaner.*). Zero values
// take Kafka's defaults.
type CleanerOptions struct {
	// Disabled turns the cleaner threads off (log.cleaner.enable=false or
	// log.cleaner.threads=0); CleanOnce still cleans when called.
	Disabled bool
	// Threads mirrors log.cleaner.threads (default 1).
	Threads int
	// BackoffMs mirrors log.cleaner.backoff.ms: a thread's sleep when no
	// log needs cleaning (default 15000).
	BackoffMs int64
	// DedupeBufferSize mirrors log.cleaner.dedupe.buffer.size: the memory
	// of the threads' offset maps together (default 128 MiB).
	DedupeBufferSize int64
}

func (o *CleanerOptions) setDefaults() {
	if o.Threads < 1 {
		o.Threads = config.DefaultLogCleanerThreads
	}
	if o.BackoffMs <= 0 {
		o.BackoffMs = config.DefaultLogCleanerBackoffMs
	}
	if o.DedupeBufferSize <= 0 {
		o.DedupeBufferSize = config.DefaultLogCleanerDedupeBufferSize
	}
}

// logCleaner compacts the logs whose cleanup policy includes compact: its
// threads pick the filthiest log, clean it and checkpoint how far it got.
type logCleaner struct {
	m    *LogManager
	opts CleanerOptions

	mu sync.Mutex
	// checkpoints holds, per log dir, the cleaner-offset-checkpoint
	// entries.
	checkpoints map[string]map[TopicPartition]int64
	inProgress  map[TopicPartition]bool
	// maps are offset maps not in use, reused across cleans.
	maps []*offsetMap
	// fault, set by tests, is called after each step of a swap and stops
	// the clean where it returns an error.
	fault func(step string) error
	// checkpointMu serializes checkpoint file writes.
	checkpointMu sync.Mutex
}

func newLogCleaner(m *LogManager, opts CleanerOptions) *logCleaner {
	opts.setDefaults()
	return &logCleaner{m: m, opts: opts, checkpoints: map[string]map[TopicPartition]int64{}, inProgress: map[TopicPartition]bool{}}
}

// loadCheckpoint reads the cleaner checkpoint of a log dir at Load; an
// unreadable one is treated as empty (the logs are cleaned from their
// start again, which is always safe).
func (c *logCleaner) loadCheckpoint(dir string) {
	cp, err := ReadOffsetCheckpoint(c.m.fs, filepath.Join(dir, CleanerOffsetCheckpointFile))
	if err != nil {
		c.m.logger.Warn(fmt.Sprintf("Error reading %s of %s; cleaning its compacted logs from their start", CleanerOffsetCheckpointFile, dir), "err", err)
		cp = map[TopicPartition]int64{}
	}
	c.mu.Lock()
	c.checkpoints[dir] = cp
	c.mu.Unlock()
}

func (c *logCleaner) checkpointOf(dir string, tp TopicPartition) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if v, ok := c.checkpoints[dir][tp]; ok {
		return v
	}
	return -1
}

// setCheckpoint records tp's entry and writes its dir's checkpoint file.
func (c *logCleaner) setCheckpoint(dir string, tp TopicPartition, offset int64) error {
	c.mu.Lock()
	if c.checkpoints[dir] == nil {
		c.checkpoints[dir] = map[TopicPartition]int64{}
	}
	c.checkpoints[dir][tp] = offset
	c.mu.Unlock()
	return c.writeCheckpoint(dir)
}

// writeCheckpoint writes a dir's checkpoint file with the entries of the
// logs it still holds.
func (c *logCleaner) writeCheckpoint(dir string) error {
	c.checkpointMu.Lock()
	defer c.checkpointMu.Unlock()
	present := c.m.logsByDir()[dir]
	c.mu.Lock()
	entries := map[TopicPartition]int64{}
	for tp, off := range c.checkpoints[dir] {
		if _, ok := present[tp]; ok {
			entries[tp] = off
		}
	}
	c.checkpoints[dir] = entries
	c.mu.Unlock()
	if err := WriteOffsetCheckpoint(c.m.fs, filepath.Join(dir, CleanerOffsetCheckpointFile), entries); err != nil {
		return fmt.Errorf("checkpoint %s in %s: %w", CleanerOffsetCheckpointFile, dir, err)
	}
	return nil
}

// truncated lowers tp's entry to the log's new end after a truncation, as
// Kafka's LogCleanerManager does, so that records appended again at those
// offsets count as dirty.
func (c *logCleaner) truncated(dir string, tp TopicPartition, leo int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if v, ok := c.checkpoints[dir][tp]; ok && v > leo {
		c.checkpoints[dir][tp] = leo
	}
}

func (c *logCleaner) takeMap() *offsetMap {
	c.mu.Lock()
	defer c.mu.Unlock()
	if n := len(c.maps); n > 0 {
		m := c.maps[n-1]
		c.maps = c.maps[:n-1]
		return m
	}
	return newOffsetMap(c.opts.DedupeBufferSize / int64(c.opts.Threads))
}

func (c *logCleaner) putMap(m *offsetMap) {
	c.mu.Lock()
	c.maps = append(c.maps, m)
	c.mu.Unlock()
}

// candidate is a compacted log the cleaner may pick.
type candidate struct {
	tp  TopicPartition
	dir string
	l   *Log
}

// ranked lists the compacted logs whose dirty ratio reaches their
// min.cleanable.dirty.ratio, the filthiest first.
func (c *logCleaner) ranked(nowMs int64) []candidate {
	var cands []candidate
	var views []cleanCandidate
	for dir, logs := range c.m.logsByDir() {
		for tp, l := range logs {
			cfg := l.Config()
			if !cfg.Compacts() {
				continue
			}
			st, err := l.cleanerState(c.checkpointOf(dir, tp), nowMs)
			if err != nil {
				continue
			}
			cands = append(cands, candidate{tp: tp, dir: dir, l: l})
			views = append(views, cleanCandidate{plan: planCleaning(st.view), minRatio: cfg.MinCleanableDirtyRatio})
		}
	}
	order := rankFilthiest(views)
	out := make([]candidate, len(order))
	for i, j := range order {
		out[i] = cands[j]
	}
	return out
}

// claim marks tp in progress; false when another thread cleans it.
func (c *logCleaner) claim(tp TopicPartition) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.inProgress[tp] {
		return false
	}
	c.inProgress[tp] = true
	return true
}

func (c *logCleaner) release(tp TopicPartition) {
	c.mu.Lock()
	delete(c.inProgress, tp)
	c.mu.Unlock()
}

// cleanOne cleans the filthiest log that can be cleaned, if any, and
// checkpoints it. It reports whether it cleaned one.
func (c *logCleaner) cleanOne(ctx context.Context, thread int) (bool, error) {
	nowMs := c.m.opts.Now().UnixMilli()
	for _, cand := range c.ranked(nowMs) {
		if !c.claim(cand.tp) {
			continue
		}
		cleaned, err := c.cleanLog(ctx, thread, cand, nowMs)
		c.release(cand.tp)
		if err != nil || cleaned {
			return cleaned || err != nil, err
		}
	}
	return false, nil
}

// cleanLog cleans one log and checkpoints how far it got.
func (c *logCleaner) cleanLog(ctx context.Context, thread int, cand candidate, nowMs int64) (bool, error) {
	m := c.takeMap()
	defer c.putMap(m)
	start := time.Now()
	stats, cleaned, err := cand.l.clean(ctx, m, c.checkpointOf(cand.dir, cand.tp), nowMs, c.fault)
	if err != nil {
		return false, fmt.Errorf("clean %s: %w", cand.tp, err)
	}
	if !cleaned {
		return false, nil
	}
	secs := max(time.Since(start).Seconds(), 1e-9)
	c.m.logger.Info(fmt.Sprintf("Cleaner %d: cleaned log %s (dirty section = [%d, %d)): read %.1f MB, wrote %.1f MB in %.3f s (%.1f MB/s), %d segments, %d records removed",
		thread, cand.tp, stats.firstDirty, stats.endOffset, float64(stats.bytesRead)/1e6, float64(stats.bytesWritten)/1e6,
		secs, float64(stats.bytesRead)/1e6/secs, stats.segments, stats.recordsRemoved))
	if err := c.setCheckpoint(cand.dir, cand.tp, stats.endOffset); err != nil {
		return true, err
	}
	return true, nil
}

// run is one cleaner thread: clean while some log needs it, then back off.
func (c *logCleaner) run(ctx context.Context, thread int) {
	backoff := time.Duration(c.opts.BackoffMs) * time.Millisecond
	for ctx.Err() == nil {
		cleaned, err := c.cleanOne(ctx, thread)
		if err != nil && !errors.Is(err, errCleanAborted) && !errors.Is(err, ErrLogClosed) && ctx.Err() == nil {
			c.m.logger.Warn(fmt.Sprintf("Cleaner %d: clean failed", thread), "err", err)
		}
		if cleaned && err == nil {
			continue
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// CleanOnce runs the cleaner until no compacted log needs cleaning (each
// log at most once per call, bounded by the number of logs), in the
// calling goroutine, and returns how many logs it cleaned. It is what the
// cleaner threads do; tests and tools call it to clean now.
func (m *LogManager) CleanOnce(ctx context.Context) (int, error) {
	n := 0
	for range len(m.Logs()) {
		cleaned, err := m.cleaner.cleanOne(ctx, -1)
		if err != nil {
			return n, err
		}
		if !cleaned {
			break
		}
		n++
	}
	return n, nil
}

// startCleaner starts the cleaner threads unless they are disabled.
func (m *LogManager) startCleaner(ctx context.Context) {
	if m.cleaner.opts.Disabled {
		return
	}
	m.logger.Info(fmt.Sprintf("Starting the log cleaner with %d threads", m.cleaner.opts.Threads))
	for i := range m.cleaner.opts.Threads {
		m.bgDone.Add(1)
		go func() {
			defer m.bgDone.Done()
			m.cleaner.run(ctx, i)
		}()
	}
}
