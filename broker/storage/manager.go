package storage

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/faultline/faultline/broker/config"
)

// ManagerOptions configure a LogManager. Zero values take Kafka's defaults
// (broker/config's) except where noted.
type ManagerOptions struct {
	// RecoveryThreadsPerDataDir mirrors num.recovery.threads.per.data.dir.
	RecoveryThreadsPerDataDir int
	// DefaultLogConfig is used for logs without a topic config (default
	// DefaultLogConfig()).
	DefaultLogConfig LogConfig
	// TopicConfig, when set, returns the config of a topic's logs at load.
	TopicConfig func(topic string) (LogConfig, bool)
	Logger      *slog.Logger
	// Now is the clock (default time.Now).
	Now func() time.Time
	// HighWatermarkCheckpointIntervalMs mirrors
	// replica.high.watermark.checkpoint.interval.ms.
	HighWatermarkCheckpointIntervalMs int64
	// RecoveryPointCheckpointIntervalMs mirrors
	// log.flush.offset.checkpoint.interval.ms and
	// log.flush.start.offset.checkpoint.interval.ms.
	RecoveryPointCheckpointIntervalMs int64
	// RetentionCheckIntervalMs mirrors log.retention.check.interval.ms.
	RetentionCheckIntervalMs int64
	// ProducerIDExpirationMs mirrors producer.id.expiration.ms; expiry runs
	// with the retention check.
	ProducerIDExpirationMs int64
	// OnDirOffline, when set, is called once per log dir that went offline
	// (an I/O error or a failed fsync in one of its logs), after every log
	// of the dir was taken offline.
	OnDirOffline func(dir string, cause error)
	// FlushCheckIntervalMs is how often flush.ms is checked
	// (log.flush.scheduler.interval.ms; default 1000 here, as Kafka's
	// Long.MAX default would never check).
	FlushCheckIntervalMs int64
	// Unsafe are the planted bugs every log runs with; the zero value is
	// the safe broker.
	Unsafe Unsafe
	// Cleaner configures the log cleaner of the compacted logs.
	Cleaner CleanerOptions
}

// LoadStats summarises a Load.
type LoadStats struct {
	// LogLoadTimeMs is the wall time of the whole load in ms (Kafka's
	// kafka.log:type=LogManager,name=LogLoadTime).
	LogLoadTimeMs int64
	Logs          int
	RecoveredLogs int
	Segments      int
	// UncleanDirs are the log dirs that had no clean shutdown marker.
	UncleanDirs []string
}

// LogManager owns the logs of every partition in a set of log dirs: it loads
// and recovers them at startup, creates and deletes them, checkpoints their
// offsets and writes the clean shutdown marker.
type LogManager struct {
	fs     FS
	dirs   []string
	opts   ManagerOptions
	logger *slog.Logger

	mu      sync.RWMutex
	logs    map[TopicPartition]*Log
	logDirs map[TopicPartition]string
	// offline are the log dirs that failed (failDir).
	offline map[string]bool

	checkpointMu sync.Mutex
	cleaner      *logCleaner
	bgCancel     context.CancelFunc
	bgDone       sync.WaitGroup
}

// NewLogManager makes a manager for dirs (log.dirs). Call Load before use.
func NewLogManager(fs FS, dirs []string, opts ManagerOptions) (*LogManager, error) {
	if len(dirs) == 0 {
		return nil, errors.New("log manager: no log dirs (set log.dirs)")
	}
	if opts.RecoveryThreadsPerDataDir < 1 {
		opts.RecoveryThreadsPerDataDir = config.DefaultNumRecoveryThreadsPerDataDir
	}
	if opts.DefaultLogConfig == (LogConfig{}) {
		opts.DefaultLogConfig = DefaultLogConfig()
	}
	if err := opts.DefaultLogConfig.Validate(); err != nil {
		return nil, fmt.Errorf("log manager: %w", err)
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.HighWatermarkCheckpointIntervalMs <= 0 {
		opts.HighWatermarkCheckpointIntervalMs = config.DefaultReplicaHighWatermarkCheckpointIntervalMs
	}
	if opts.RecoveryPointCheckpointIntervalMs <= 0 {
		opts.RecoveryPointCheckpointIntervalMs = config.DefaultLogFlushOffsetCheckpointIntervalMs
	}
	if opts.RetentionCheckIntervalMs <= 0 {
		opts.RetentionCheckIntervalMs = config.DefaultLogRetentionCheckIntervalMs
	}
	if opts.ProducerIDExpirationMs <= 0 {
		opts.ProducerIDExpirationMs = config.DefaultProducerIDExpirationMs
	}
	if opts.FlushCheckIntervalMs <= 0 {
		opts.FlushCheckIntervalMs = 1000
	}
	abs := make([]string, len(dirs))
	for i, d := range dirs {
		a, err := filepath.Abs(d)
		if err != nil {
			return nil, fmt.Errorf("log manager: log dir %s: %w", d, err)
		}
		abs[i] = a
	}
	opts.Cleaner.setDefaults()
	m := &LogManager{
		fs:      fs,
		dirs:    abs,
		opts:    opts,
		logger:  opts.Logger,
		logs:    map[TopicPartition]*Log{},
		logDirs: map[TopicPartition]string{},
		offline: map[string]bool{},
	}
	m.cleaner = newLogCleaner(m, opts.Cleaner)
	return m, nil
}

// dirFailure is what a log of dir calls when it finds its disk failed.
func (m *LogManager) dirFailure(dir string) func(error) {
	return func(cause error) { m.failDir(dir, cause) }
}

// checkDiskFailure takes dir offline when err is a failure of its disk
// (creating a log there), and returns err, wrapping ErrLogDirOffline if so.
// The caller holds m.mu.
func (m *LogManager) checkDiskFailure(dir string, err error) error {
	if !diskFailure(err) {
		return err
	}
	err = fmt.Errorf("%w: %w", ErrLogDirOffline, err)
	go m.failDir(dir, err)
	return err
}

// failDir takes a log dir offline once: every log in it stops being read
// or written (its partitions answer KAFKA_STORAGE_ERROR), no new log is
// created there, it gets no clean-shutdown marker, and OnDirOffline is
// told.
func (m *LogManager) failDir(dir string, cause error) {
	m.mu.Lock()
	if m.offline[dir] {
		m.mu.Unlock()
		return
	}
	m.offline[dir] = true
	var logs []*Log
	for tp, d := range m.logDirs {
		if d == dir {
			logs = append(logs, m.logs[tp])
		}
	}
	m.mu.Unlock()
	for _, l := range logs {
		l.takeOffline(cause)
	}
	m.logger.Error(fmt.Sprintf("Log dir %s is offline: stopped serving its %d partitions", dir, len(logs)), "err", cause)
	if m.opts.OnDirOffline != nil {
		m.opts.OnDirOffline(dir, cause)
	}
}

// OfflineDirs are the log dirs that went offline, in configuration order.
func (m *LogManager) OfflineDirs() []string {
	m.mu.RLock()
	defer m.mu.RUnlock()
	var out []string
	for _, d := range m.dirs {
		if m.offline[d] {
			out = append(out, d)
		}
	}
	return out
}

// Dirs are the absolute log dirs.
func (m *LogManager) Dirs() []string { return append([]string(nil), m.dirs...) }

type cleanShutdownMarker struct {
	Version     int   `json:"version"`
	BrokerEpoch int64 `json:"brokerEpoch"`
}

// ReadCleanShutdownMarker parses a .kafka_cleanshutdown file's content.
func ReadCleanShutdownMarker(data []byte) (brokerEpoch int64, err error) {
	var m cleanShutdownMarker
	if err := json.Unmarshal(data, &m); err != nil {
		return -1, fmt.Errorf("%w: clean shutdown marker: %v", ErrCorruptCheckpoint, err)
	}
	if m.Version != 0 {
		return -1, fmt.Errorf("%w: clean shutdown marker version %d", ErrCorruptCheckpoint, m.Version)
	}
	return m.BrokerEpoch, nil
}

// PreviousBrokerEpoch is the broker epoch a restarting broker offers as
// PreviousBrokerEpoch in its registration: the epoch of its last clean
// shutdown, read from the .kafka_cleanshutdown marker of every log dir. It
// is -1 (an unclean restart) unless every dir holds a readable marker and
// all name the same epoch, as Kafka's
// LogManager.readBrokerEpochFromCleanShutdownFiles decides: a dir that
// crashed may have lost its unflushed tail even if another dir shut down
// cleanly. It must be read before Load consumes the markers.
func PreviousBrokerEpoch(fs FS, dirs []string) int64 {
	epoch := int64(-1)
	for i, dir := range dirs {
		data, err := readFile(fs, filepath.Join(dir, CleanShutdownFile))
		if err != nil {
			return -1
		}
		e, err := ReadCleanShutdownMarker(data)
		if err != nil || (i > 0 && e != epoch) {
			return -1
		}
		epoch = e
	}
	return epoch
}

// Load opens every partition dir of every log dir. A log dir without the
// clean shutdown marker is recovered; the marker is deleted as soon as it is
// seen, so a crash during loading counts as unclean. Partitions of a dir are
// loaded by RecoveryThreadsPerDataDir workers.
func (m *LogManager) Load() (LoadStats, error) {
	start := time.Now()
	var stats LoadStats
	m.logger.Info(fmt.Sprintf("Loading logs from log dirs %v", m.dirs))
	results := make([]dirResult, len(m.dirs))
	var wg sync.WaitGroup
	for i, dir := range m.dirs {
		clean, tps, params, err := m.prepareDir(dir)
		if err != nil {
			m.closeLoaded(results)
			return stats, err
		}
		if !clean {
			stats.UncleanDirs = append(stats.UncleanDirs, dir)
		}
		wg.Add(1)
		go func(i int, dir string) {
			defer wg.Done()
			results[i].logs, results[i].recovered, results[i].segments, results[i].err = m.loadDir(dir, tps, params)
		}(i, dir)
	}
	wg.Wait()
	for _, r := range results {
		if r.err != nil {
			m.closeLoaded(results)
			return stats, r.err
		}
	}
	m.mu.Lock()
	for i, r := range results {
		for tp, l := range r.logs {
			if _, dup := m.logs[tp]; dup {
				m.mu.Unlock()
				m.closeLoaded(results)
				return stats, fmt.Errorf("load logs: partition %s is in two log dirs (%s and %s)", tp, m.logDirs[tp], m.dirs[i])
			}
			m.logs[tp] = l
			m.logDirs[tp] = m.dirs[i]
		}
		stats.RecoveredLogs += r.recovered
		stats.Segments += r.segments
	}
	stats.Logs = len(m.logs)
	m.mu.Unlock()
	stats.LogLoadTimeMs = time.Since(start).Milliseconds()
	m.logger.Info(fmt.Sprintf("Loaded %d logs in %dms", stats.Logs, stats.LogLoadTimeMs))
	return stats, nil
}

type dirResult struct {
	logs      map[TopicPartition]*Log
	recovered int
	segments  int
	err       error
}

func (m *LogManager) closeLoaded(results []dirResult) {
	for _, r := range results {
		for _, l := range r.logs {
			_ = l.Close()
		}
	}
}

// dirParams are the checkpoints of one log dir.
type dirParams struct {
	clean          bool
	recoveryPoints map[TopicPartition]int64
	logStarts      map[TopicPartition]int64
	highWatermarks map[TopicPartition]int64
}

// prepareDir creates the dir if needed, consumes the clean shutdown marker,
// reads the checkpoints and lists the partition dirs.
func (m *LogManager) prepareDir(dir string) (bool, []TopicPartition, dirParams, error) {
	var p dirParams
	if err := m.fs.MkdirAll(dir, 0o755); err != nil {
		return false, nil, p, fmt.Errorf("log dir %s: %w", dir, err)
	}
	marker := filepath.Join(dir, CleanShutdownFile)
	if data, err := readFile(m.fs, marker); err == nil {
		p.clean = true
		if _, perr := ReadCleanShutdownMarker(data); perr != nil {
			m.logger.Warn(fmt.Sprintf("Clean shutdown file of %s is unreadable; trusting its presence", dir), "err", perr)
		}
		if err := m.fs.Remove(marker); err != nil {
			return false, nil, p, fmt.Errorf("log dir %s: delete clean shutdown marker: %w", dir, err)
		}
		if err := m.fs.SyncDir(dir); err != nil {
			return false, nil, p, fmt.Errorf("log dir %s: %w", dir, err)
		}
	} else if !os.IsNotExist(err) {
		return false, nil, p, fmt.Errorf("log dir %s: read clean shutdown marker: %w", dir, err)
	}
	read := func(name string) map[TopicPartition]int64 {
		cp, err := ReadOffsetCheckpoint(m.fs, filepath.Join(dir, name))
		if err != nil {
			m.logger.Warn(fmt.Sprintf("Error reading %s of %s; treating it as empty", name, dir), "err", err)
			return map[TopicPartition]int64{}
		}
		return cp
	}
	m.cleaner.loadCheckpoint(dir)
	p.recoveryPoints = read(RecoveryPointCheckpointFile)
	p.logStarts = read(LogStartOffsetCheckpointFile)
	p.highWatermarks = read(HighWatermarkCheckpointFile)
	ents, err := m.fs.ReadDir(dir)
	if err != nil {
		return false, nil, p, fmt.Errorf("log dir %s: %w", dir, err)
	}
	var tps []TopicPartition
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		name := e.Name()
		if strings.HasSuffix(name, "-delete") {
			if err := m.fs.RemoveAll(filepath.Join(dir, name)); err != nil {
				m.logger.Warn(fmt.Sprintf("Failed to delete %s", name), "err", err)
			}
			continue
		}
		tp, ok := ParseTopicPartitionDir(name)
		if !ok {
			m.logger.Warn(fmt.Sprintf("Skipping %s in log dir %s: not a <topic>-<partition> directory", name, dir))
			continue
		}
		tps = append(tps, tp)
	}
	if p.clean {
		m.logger.Info(fmt.Sprintf("Skipping recovery of %d logs from %s since clean shutdown file was found", len(tps), dir))
	} else {
		m.logger.Info(fmt.Sprintf("Found unclean shutdown file marker for directory %s - triggering recovery of %d logs", dir, len(tps)))
	}
	return p.clean, tps, p, nil
}

func (m *LogManager) configFor(topic string) LogConfig {
	if m.opts.TopicConfig != nil {
		if c, ok := m.opts.TopicConfig(topic); ok {
			return c
		}
	}
	return m.opts.DefaultLogConfig
}

func offsetOr(m map[TopicPartition]int64, tp TopicPartition) int64 {
	if v, ok := m[tp]; ok {
		return v
	}
	return -1
}

// loadDir loads the partitions of one log dir with the configured number of
// workers.
func (m *LogManager) loadDir(dir string, tps []TopicPartition, p dirParams) (map[TopicPartition]*Log, int, int, error) {
	jobs := make(chan TopicPartition)
	type out struct {
		tp  TopicPartition
		l   *Log
		res loadResult
		err error
	}
	outs := make(chan out, len(tps))
	var wg sync.WaitGroup
	for w := 0; w < m.opts.RecoveryThreadsPerDataDir; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for tp := range jobs {
				l, res, err := openLog(m.fs, filepath.Join(dir, tp.DirName()), tp, m.configFor(tp.Topic), loadParams{
					cleanShutdown:  p.clean,
					recoveryPoint:  offsetOr(p.recoveryPoints, tp),
					logStartOffset: offsetOr(p.logStarts, tp),
					highWatermark:  offsetOr(p.highWatermarks, tp),
					logger:         m.logger,
					now:            m.opts.Now,
					dirFailed:      m.dirFailure(dir),
					unsafe:         m.opts.Unsafe,
				})
				outs <- out{tp: tp, l: l, res: res, err: err}
			}
		}()
	}
	for _, tp := range tps {
		jobs <- tp
	}
	close(jobs)
	wg.Wait()
	close(outs)
	logs := map[TopicPartition]*Log{}
	recovered, segments := 0, 0
	var first error
	for o := range outs {
		if o.err != nil {
			if first == nil {
				first = fmt.Errorf("log dir %s: %w", dir, o.err)
			}
			continue
		}
		logs[o.tp] = o.l
		segments += o.res.segments
		if o.res.recovered {
			recovered++
		}
	}
	if first != nil {
		for _, l := range logs {
			_ = l.Close()
		}
		return nil, 0, 0, first
	}
	return logs, recovered, segments, nil
}

// GetLog returns the log of tp.
func (m *LogManager) GetLog(tp TopicPartition) (*Log, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	l, ok := m.logs[tp]
	return l, ok
}

// Logs returns every log (a copy of the map).
func (m *LogManager) Logs() map[TopicPartition]*Log {
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := make(map[TopicPartition]*Log, len(m.logs))
	for tp, l := range m.logs {
		out[tp] = l
	}
	return out
}

// GetOrCreateLog returns the log of tp, creating it empty (in the log dir
// with the fewest logs) with cfg when it does not exist.
func (m *LogManager) GetOrCreateLog(tp TopicPartition, cfg LogConfig) (*Log, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if l, ok := m.logs[tp]; ok {
		return l, nil
	}
	if !ValidTopicName(tp.Topic) || tp.Partition < 0 {
		return nil, fmt.Errorf("create log %q-%d: illegal topic name or partition", tp.Topic, tp.Partition)
	}
	counts := map[string]int{}
	for _, d := range m.logDirs {
		counts[d]++
	}
	dir := ""
	for _, d := range m.dirs {
		if !m.offline[d] && (dir == "" || counts[d] < counts[dir]) {
			dir = d
		}
	}
	if dir == "" {
		return nil, fmt.Errorf("create log %s: every log dir is offline: %w", tp, ErrLogDirOffline)
	}
	l, _, err := openLog(m.fs, filepath.Join(dir, tp.DirName()), tp, cfg, loadParams{
		cleanShutdown:  true,
		recoveryPoint:  -1,
		logStartOffset: -1,
		highWatermark:  -1,
		unsafe:         m.opts.Unsafe,
		logger:         m.logger,
		now:            m.opts.Now,
		dirFailed:      m.dirFailure(dir),
	})
	if err != nil {
		return nil, m.checkDiskFailure(dir, err)
	}
	if err := m.fs.SyncDir(dir); err != nil {
		_ = l.Close()
		return nil, m.checkDiskFailure(dir, fmt.Errorf("create log %s: %w", tp, err))
	}
	m.logs[tp] = l
	m.logDirs[tp] = dir
	return l, nil
}

// DeleteLog closes the log of tp and deletes its directory.
func (m *LogManager) DeleteLog(tp TopicPartition) error {
	m.mu.Lock()
	l, ok := m.logs[tp]
	dir := m.logDirs[tp]
	delete(m.logs, tp)
	delete(m.logDirs, tp)
	m.mu.Unlock()
	if !ok {
		return nil
	}
	_ = l.Close()
	if err := m.fs.RemoveAll(l.Dir()); err != nil {
		return fmt.Errorf("delete log %s: %w", tp, err)
	}
	if err := m.fs.SyncDir(dir); err != nil {
		return fmt.Errorf("delete log %s: %w", tp, err)
	}
	return nil
}

// TruncateTo truncates the log of tp (Log.TruncateTo) and checkpoints the
// recovery points and log starts of its log dir right away, as Kafka's
// LogManager does: the periodic checkpoint may still hold a recovery point
// above the new log end, and a crash before the next one would take the
// records appended after the truncation below that point as flushed and
// skip their recovery.
func (m *LogManager) TruncateTo(tp TopicPartition, offset int64) error {
	return m.truncate(tp, func(l *Log) error { return l.TruncateTo(offset) })
}

// TruncateFullyAndStartAt restarts the log of tp empty at offset
// (Log.TruncateFullyAndStartAt) and checkpoints its log dir, as TruncateTo.
func (m *LogManager) TruncateFullyAndStartAt(tp TopicPartition, offset int64) error {
	return m.truncate(tp, func(l *Log) error { return l.TruncateFullyAndStartAt(offset) })
}

// IncrementLogStartOffset advances the log start of tp
// (Log.IncrementLogStartOffset: DeleteRecords, a follower following its
// leader's) and writes its log dir's log-start-offset-checkpoint before it
// returns, so that a crash right after does not bring the records below
// it back.
func (m *LogManager) IncrementLogStartOffset(tp TopicPartition, offset int64) error {
	l, dir, err := m.logIn(tp, "advance log start of")
	if err != nil {
		return err
	}
	if err := l.IncrementLogStartOffset(offset); err != nil {
		return err
	}
	return m.checkpoint(dir, LogStartOffsetCheckpointFile, logStartToCheckpoint)
}

// logIn returns the open log of tp and its log dir, or ErrLogClosed
// wrapped as what failed on it.
func (m *LogManager) logIn(tp TopicPartition, what string) (*Log, string, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	l, ok := m.logs[tp]
	if !ok {
		return nil, "", fmt.Errorf("%s %s: %w", what, tp, ErrLogClosed)
	}
	return l, m.logDirs[tp], nil
}

func (m *LogManager) truncate(tp TopicPartition, cut func(*Log) error) error {
	l, dir, err := m.logIn(tp, "truncate")
	if err != nil {
		return err
	}
	if err := cut(l); err != nil {
		return err
	}
	m.cleaner.truncated(dir, tp, l.LogEndOffset())
	return m.checkpointRecoveryPointsIn(dir)
}

// logsByDir groups the logs by log dir.
func (m *LogManager) logsByDir() map[string]map[TopicPartition]*Log {
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := map[string]map[TopicPartition]*Log{}
	for _, d := range m.dirs {
		out[d] = map[TopicPartition]*Log{}
	}
	for tp, l := range m.logs {
		out[m.logDirs[tp]][tp] = l
	}
	return out
}

// CheckpointHighWatermarks writes replication-offset-checkpoint in every
// log dir.
func (m *LogManager) CheckpointHighWatermarks() error {
	return m.checkpoint("", HighWatermarkCheckpointFile, func(l *Log) (int64, bool) { return l.HighWatermark(), true })
}

// CheckpointRecoveryPoints writes recovery-point-offset-checkpoint and
// log-start-offset-checkpoint in every log dir. The log start is written
// only where it is above the first segment's base, as Kafka does.
func (m *LogManager) CheckpointRecoveryPoints() error {
	return m.checkpointRecoveryPointsIn("")
}

// checkpointRecoveryPointsIn is CheckpointRecoveryPoints for one log dir,
// or for all of them with dir "".
func (m *LogManager) checkpointRecoveryPointsIn(dir string) error {
	if err := m.checkpoint(dir, RecoveryPointCheckpointFile, func(l *Log) (int64, bool) { return l.RecoveryPoint(), true }); err != nil {
		return err
	}
	return m.checkpoint(dir, LogStartOffsetCheckpointFile, logStartToCheckpoint)
}

// CheckpointLogStartOffsets writes log-start-offset-checkpoint in every log
// dir.
func (m *LogManager) CheckpointLogStartOffsets() error {
	return m.checkpoint("", LogStartOffsetCheckpointFile, logStartToCheckpoint)
}

// logStartToCheckpoint is a log's entry in log-start-offset-checkpoint:
// only a log start above the first segment's base is written.
func logStartToCheckpoint(l *Log) (int64, bool) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if len(l.segments) == 0 || l.logStartOffset <= l.segments[0].baseOffset {
		return 0, false
	}
	return l.logStartOffset, true
}

// checkpoint writes the checkpoint file name in log dir only (every log
// dir with only ""), one entry per log for which value says so.
func (m *LogManager) checkpoint(only, name string, value func(*Log) (int64, bool)) error {
	m.checkpointMu.Lock()
	defer m.checkpointMu.Unlock()
	var first error
	for dir, logs := range m.logsByDir() {
		if only != "" && dir != only {
			continue
		}
		offsets := make(map[TopicPartition]int64, len(logs))
		for tp, l := range logs {
			if v, ok := value(l); ok {
				offsets[tp] = v
			}
		}
		if err := WriteOffsetCheckpoint(m.fs, filepath.Join(dir, name), offsets); err != nil && first == nil {
			first = fmt.Errorf("checkpoint %s in %s: %w", name, dir, err)
		}
	}
	return first
}

// RunBackground starts the periodic work until ctx ends or Shutdown: high
// watermark checkpoints, recovery point and log start checkpoints,
// retention, flush.ms flushes, and the log cleaner's threads.
func (m *LogManager) RunBackground(ctx context.Context) {
	ctx, cancel := context.WithCancel(ctx)
	m.mu.Lock()
	m.bgCancel = cancel
	m.mu.Unlock()
	every := func(ms int64, fn func()) {
		m.bgDone.Add(1)
		go func() {
			defer m.bgDone.Done()
			t := time.NewTicker(time.Duration(ms) * time.Millisecond)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
					fn()
				}
			}
		}()
	}
	warn := func(what string, err error) {
		if err != nil {
			m.logger.Warn(what+" failed", "err", err)
		}
	}
	every(m.opts.HighWatermarkCheckpointIntervalMs, func() { warn("High watermark checkpoint", m.CheckpointHighWatermarks()) })
	every(m.opts.RecoveryPointCheckpointIntervalMs, func() { warn("Recovery point checkpoint", m.CheckpointRecoveryPoints()) })
	every(m.opts.RetentionCheckIntervalMs, func() {
		now := m.opts.Now().UnixMilli()
		for tp, l := range m.Logs() {
			if _, err := l.DeleteOldSegments(now); err != nil && !errors.Is(err, ErrLogClosed) {
				warn("Retention of "+tp.String(), err)
			}
			l.ExpireProducers(now, m.opts.ProducerIDExpirationMs)
		}
	})
	m.startCleaner(ctx)
	every(m.opts.FlushCheckIntervalMs, func() {
		now := m.opts.Now().UnixMilli()
		for tp, l := range m.Logs() {
			if err := l.MaybeFlushByTime(now); err != nil {
				warn("Flush of "+tp.String(), err)
			}
		}
	})
}

// Shutdown stops the background work, flushes and closes every log, writes
// the checkpoints and then, in every log dir where all of that succeeded,
// the clean shutdown marker {"version":0,"brokerEpoch":N}.
func (m *LogManager) Shutdown(brokerEpoch int64) error {
	m.mu.Lock()
	cancel := m.bgCancel
	m.bgCancel = nil
	m.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	m.bgDone.Wait()
	m.logger.Info("Shutting down the log manager")
	for _, dir := range m.dirs {
		if slices.Contains(m.OfflineDirs(), dir) {
			continue
		}
		if err := m.cleaner.writeCheckpoint(dir); err != nil {
			m.logger.Warn("Cleaner checkpoint failed", "err", err)
		}
	}
	byDir := m.logsByDir()
	failedDirs := map[string]error{}
	var failedMu sync.Mutex
	var wg sync.WaitGroup
	for dir, logs := range byDir {
		jobs := make(chan TopicPartition)
		for w := 0; w < m.opts.RecoveryThreadsPerDataDir; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for tp := range jobs {
					if err := logs[tp].closeForShutdown(); err != nil {
						failedMu.Lock()
						if failedDirs[dir] == nil {
							failedDirs[dir] = fmt.Errorf("close %s: %w", tp, err)
						}
						failedMu.Unlock()
					}
				}
			}()
		}
		go func() {
			defer close(jobs)
			for tp := range logs {
				jobs <- tp
			}
		}()
	}
	wg.Wait()
	if err := m.CheckpointHighWatermarks(); err != nil {
		return err
	}
	if err := m.CheckpointRecoveryPoints(); err != nil {
		return err
	}
	marker, _ := json.Marshal(cleanShutdownMarker{Version: 0, BrokerEpoch: brokerEpoch})
	var first error
	for _, dir := range m.dirs {
		if err := failedDirs[dir]; err != nil {
			m.logger.Warn(fmt.Sprintf("Not writing the clean shutdown marker in %s", dir), "err", err)
			if first == nil {
				first = err
			}
			continue
		}
		if err := writeFileAtomic(m.fs, filepath.Join(dir, CleanShutdownFile), marker); err != nil && first == nil {
			first = fmt.Errorf("write clean shutdown marker in %s: %w", dir, err)
		}
	}
	m.mu.Lock()
	m.logs = map[TopicPartition]*Log{}
	m.logDirs = map[TopicPartition]string{}
	m.mu.Unlock()
	m.logger.Info("Shutdown complete")
	return first
}
