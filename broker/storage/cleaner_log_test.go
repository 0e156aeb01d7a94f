package storage

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeClock is a settable clock for the cleaner's horizons.
type fakeClock struct{ ms atomic.Int64 }

func (c *fakeClock) now() time.Time   { return time.UnixMilli(c.ms.Load()) }
func (c *fakeClock) advance(ms int64) { c.ms.Add(ms) }

func compactConfig() LogConfig {
	c := testConfig()
	c.CleanupPolicy = CleanupCompact
	c.SegmentBytes = 4096
	c.DeleteRetentionMs = 60000
	c.MinCleanableDirtyRatio = 0.01
	return c
}

var compactTP = TopicPartition{Topic: "kv", Partition: 0}

func newCompactManager(t *testing.T, fs FS, dir string, clock *fakeClock) (*LogManager, *Log) {
	t.Helper()
	m, err := NewLogManager(fs, []string{dir}, ManagerOptions{DefaultLogConfig: compactConfig(), Now: clock.now,
		Cleaner: CleanerOptions{Disabled: true}})
	require.NoError(t, err)
	_, err = m.Load()
	require.NoError(t, err)
	l, err := m.GetOrCreateLog(compactTP, compactConfig())
	require.NoError(t, err)
	return m, l
}

// restartCompactManager shuts m down cleanly and loads dir again, as
// newCompactManager does, returning the new manager and the compacted log.
func restartCompactManager(t *testing.T, m *LogManager, dir string, clock *fakeClock) (*LogManager, *Log) {
	t.Helper()
	require.NoError(t, m.Shutdown(1))
	m, err := NewLogManager(OS, []string{dir}, ManagerOptions{DefaultLogConfig: compactConfig(), Now: clock.now,
		Cleaner: CleanerOptions{Disabled: true}})
	require.NoError(t, err)
	_, err = m.Load()
	require.NoError(t, err)
	l, ok := m.GetLog(compactTP)
	require.True(t, ok)
	return m, l
}

// kvModel is the latest value per key the test wrote (nil: a tombstone).
type kvModel map[string][]byte

// writeUpserts appends n keyed records over keys keys, in batches of up to
// 5, deleting a key now and then; the model follows.
func writeUpserts(t *testing.T, l *Log, rng *rand.Rand, model kvModel, n, keys int, nowMs int64) {
	t.Helper()
	for i := 0; i < n; {
		var recs []Record
		for j := 0; j < 1+rng.Intn(5) && i < n; j++ {
			k := fmt.Sprintf("key-%d", rng.Intn(keys))
			var v []byte
			if rng.Intn(10) > 0 {
				v = []byte(fmt.Sprintf("%s=%d", k, i))
			}
			recs = append(recs, Record{TimestampMs: nowMs, Key: []byte(k), Value: v})
			model[k] = v
			i++
		}
		_, err := l.AppendAsLeader(BuildBatch(recs, BatchOptions{}), 0, nowMs)
		require.NoError(t, err)
	}
	require.NoError(t, l.Roll())
	l.UpdateHighWatermark(l.LogEndOffset())
}

type readRecord struct {
	Record
	tombstone bool
}

// readAll reads the whole log through Read, as a consumer fetching from the
// log start does, and returns every record.
func readAll(t *testing.T, l *Log) []Record {
	t.Helper()
	var out []Record
	off := l.LogStartOffset()
	for i := 0; off < l.LogEndOffset(); i++ {
		require.Less(t, i, 100000, "read loop bounded")
		b, err := l.Read(off, 1<<20, l.LogEndOffset(), true)
		require.NoError(t, err)
		require.NotEmpty(t, b, "read at %d returned nothing below the log end %d", off, l.LogEndOffset())
		require.NoError(t, ForEachBatch(b, func(h BatchHeader, batch []byte) error {
			recs, err := DecodeRecords(batch)
			if err != nil {
				return err
			}
			if !h.IsControl() {
				out = append(out, recs...)
			}
			off = h.NextOffset()
			return nil
		}))
	}
	return out
}

// latestPerKey folds records into the latest value per key.
func latestPerKey(recs []Record) kvModel {
	m := kvModel{}
	for _, r := range recs {
		m[string(r.Key)] = r.Value
	}
	return m
}

func TestCleanKeepsTheLatestValueOfEveryKey(t *testing.T) {
	clock := &fakeClock{}
	clock.ms.Store(1_700_000_000_000)
	m, l := newCompactManager(t, OS, t.TempDir(), clock)
	rng := rand.New(rand.NewSource(11))
	model := kvModel{}
	writeUpserts(t, l, rng, model, 3000, 60, clock.ms.Load())
	before := readAll(t, l)
	offsets := map[int64]string{}
	for _, r := range before {
		offsets[r.Offset] = string(r.Value)
	}
	segsBefore, sizeBefore := l.NumSegments(), l.Size()

	n, err := m.CleanOnce(context.Background())
	require.NoError(t, err)
	require.Equal(t, 1, n)
	after := readAll(t, l)
	assert.Equal(t, model, latestPerKey(after), "every key's latest value survives")
	assert.Len(t, after, len(model), "one record per key (tombstones kept until their horizon)")
	for _, r := range after {
		assert.Equal(t, offsets[r.Offset], string(r.Value), "offsets are preserved")
	}
	assert.Less(t, l.Size(), sizeBefore/4)
	// Segments are grouped by their size before cleaning (as Kafka
	// does): the next clean merges the small cleaned ones.
	cp, err := ReadOffsetCheckpoint(OS, filepath.Join(m.Dirs()[0], CleanerOffsetCheckpointFile))
	require.NoError(t, err)
	assert.Equal(t, map[TopicPartition]int64{compactTP: l.LogEndOffset()}, cp)

	// A fetch at an offset compaction removed returns the next batch.
	for off := int64(0); off < 50; off++ {
		b, err := l.Read(off, 1<<20, l.LogEndOffset(), true)
		require.NoError(t, err)
		require.NotEmpty(t, b)
		h, err := ParseBatchHeader(b)
		require.NoError(t, err)
		assert.GreaterOrEqual(t, h.LastOffset(), off)
	}

	// Nothing dirty: no clean.
	n, err = m.CleanOnce(context.Background())
	require.NoError(t, err)
	assert.Equal(t, 0, n)

	// Past delete.retention.ms, the next clean drops the tombstones.
	tombstones := 0
	for _, v := range model {
		if v == nil {
			tombstones++
		}
	}
	require.Positive(t, tombstones)
	clock.advance(compactConfig().DeleteRetentionMs + 1)
	writeUpserts(t, l, rng, model, 3000, 60, clock.ms.Load())
	segsBefore = l.NumSegments()
	n, err = m.CleanOnce(context.Background())
	require.NoError(t, err)
	require.Equal(t, 1, n)
	assert.Less(t, l.NumSegments(), segsBefore-20)
	after = readAll(t, l)
	got := latestPerKey(after)
	for k, v := range model {
		if v != nil {
			assert.Equal(t, string(v), string(got[k]), "key %s", k)
		}
	}
	// The tombstones of the first round passed their horizon; those of
	// the second round are still kept.
	clock.advance(compactConfig().DeleteRetentionMs + 1)
	writeUpserts(t, l, rng, kvModel{}, 10, 1, clock.ms.Load())
	_, err = m.CleanOnce(context.Background())
	require.NoError(t, err)
	for _, r := range readAll(t, l) {
		if r.Value == nil {
			t.Fatalf("tombstone of %s at %d outlived its delete horizon", r.Key, r.Offset)
		}
	}
	require.NoError(t, m.Shutdown(1))
}

func TestCompactedLogRefusesKeylessRecords(t *testing.T) {
	clock := &fakeClock{}
	clock.ms.Store(1_700_000_000_000)
	_, l := newCompactManager(t, OS, t.TempDir(), clock)
	_, err := l.AppendAsLeader(BuildBatch([]Record{{TimestampMs: clock.ms.Load(), Value: []byte("x")}}, BatchOptions{}), 0, clock.ms.Load())
	assert.ErrorIs(t, err, ErrInvalidRecord)
}

func TestCleanDropsAbortedTransactionsAndKeepsMarkers(t *testing.T) {
	clock := &fakeClock{}
	clock.ms.Store(1_700_000_000_000)
	m, l := newCompactManager(t, OS, t.TempDir(), clock)
	now := clock.ms.Load()
	appendB := func(recs []Record, opts BatchOptions) {
		opts.BaseOffset = l.LogEndOffset()
		require.NoError(t, l.AppendAsFollower(BuildBatch(recs, opts)))
	}
	rec := func(k, v string) []Record { return []Record{{TimestampMs: now, Key: []byte(k), Value: []byte(v)}} }
	marker := func(typ int16) []Record {
		return []Record{{TimestampMs: now, Key: []byte{0, 0, 0, byte(typ)}, Value: []byte{0, 0, 0, 0, 0, 0}}}
	}
	appendB(rec("a", "committed-1"), BatchOptions{})
	appendB(rec("a", "aborted"), BatchOptions{Transactional: true, Producer: &BatchProducer{ID: 5, Epoch: 0, BaseSequence: 0}})
	appendB(rec("b", "txn-committed"), BatchOptions{Transactional: true, Producer: &BatchProducer{ID: 6, Epoch: 0, BaseSequence: 0}})
	appendB(marker(controlTypeAbort), BatchOptions{Control: true, Transactional: true, Producer: &BatchProducer{ID: 5, Epoch: 0, BaseSequence: -1}})
	appendB(marker(controlTypeCommit), BatchOptions{Control: true, Transactional: true, Producer: &BatchProducer{ID: 6, Epoch: 0, BaseSequence: -1}})
	appendB(rec("b", "older-than-nothing"), BatchOptions{})
	appendB(rec("c", "open-txn"), BatchOptions{Transactional: true, Producer: &BatchProducer{ID: 7, Epoch: 0, BaseSequence: 0}})
	appendB(rec("c", "after-open"), BatchOptions{})
	require.NoError(t, l.Roll())
	l.UpdateHighWatermark(l.LogEndOffset())
	_, err := m.CleanOnce(context.Background())
	require.NoError(t, err)
	var values []string
	controls := 0
	b, err := l.Read(0, 1<<20, l.LogEndOffset(), true)
	require.NoError(t, err)
	require.NoError(t, ForEachBatch(b, func(h BatchHeader, batch []byte) error {
		if h.IsControl() {
			controls++
			return nil
		}
		recs, err := DecodeRecords(batch)
		for _, r := range recs {
			values = append(values, string(r.Value))
		}
		return err
	}))
	assert.Equal(t, []string{"committed-1", "older-than-nothing", "open-txn", "after-open"}, values,
		"the aborted record goes, the committed one is superseded, nothing from the undecided transaction on is cleaned")
	assert.Equal(t, 2, controls, "markers are kept")
}

// TestCleanerCrashAtEachStepOfTheSwap kills the clean after each step of the
// swap protocol (the fault hook stops it there; the files stay as they are
// and every write not fsynced is lost), restarts the log manager as after a
// crash, and checks that every key's latest value is present, no .cleaned
// or .swap file is left, and that the cleaner then finishes from its
// checkpoint.
func TestCleanerCrashAtEachStepOfTheSwap(t *testing.T) {
	for _, step := range []string{stepCleanedWritten, stepSwapCommitted, stepOldDeleted, stepSwapped} {
		t.Run(step, func(t *testing.T) {
			dir := t.TempDir()
			efs := NewErrorFS(OS)
			clock := &fakeClock{}
			clock.ms.Store(1_700_000_000_000)
			m, l := newCompactManager(t, efs, dir, clock)
			rng := rand.New(rand.NewSource(int64(len(step))))
			model := kvModel{}
			writeUpserts(t, l, rng, model, 1500, 40, clock.ms.Load())
			require.NoError(t, l.Flush())
			_, err := m.CleanOnce(context.Background())
			require.NoError(t, err)
			// The second round updates half the keys: the latest values
			// of the others live only in the segments cleaned first,
			// which the next clean merges and swaps.
			writeUpserts(t, l, rng, model, 1500, 20, clock.ms.Load())
			require.NoError(t, l.Flush())
			require.NoError(t, m.CheckpointRecoveryPoints())
			require.NoError(t, m.CheckpointHighWatermarks())

			crash := errors.New("crash at " + step)
			m.cleaner.fault = func(s string) error {
				if s == step {
					return crash
				}
				return nil
			}
			_, err = m.CleanOnce(context.Background())
			require.ErrorIs(t, err, crash)
			for _, lg := range m.Logs() {
				_ = lg.Close()
			}
			require.NoError(t, efs.Crash())

			m2, err := NewLogManager(efs, []string{dir}, ManagerOptions{DefaultLogConfig: compactConfig(), Now: clock.now,
				Cleaner: CleanerOptions{Disabled: true}})
			require.NoError(t, err)
			stats, err := m2.Load()
			require.NoError(t, err)
			require.Equal(t, []string{dir}, stats.UncleanDirs)
			l2, ok := m2.GetLog(compactTP)
			require.True(t, ok)
			ents, err := os.ReadDir(l2.Dir())
			require.NoError(t, err)
			for _, e := range ents {
				assert.False(t, strings.HasSuffix(e.Name(), cleanedSuffix) || strings.HasSuffix(e.Name(), swapSuffix), "left over: %s", e.Name())
			}
			assert.Equal(t, model, latestPerKey(readAll(t, l2)), "every key's latest value after the restart")

			l2.UpdateHighWatermark(l2.LogEndOffset())
			n, err := m2.CleanOnce(context.Background())
			require.NoError(t, err)
			assert.Equal(t, 1, n, "the cleaner resumes")
			after := readAll(t, l2)
			assert.Equal(t, model, latestPerKey(after))
			assert.Len(t, after, len(model))
			require.NoError(t, m2.Shutdown(1))
		})
	}
}

func TestRecoverSwapsCompletesAnInterruptedSwap(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, data []byte) {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), data, 0o644))
	}
	b := BuildBatch([]Record{{Key: []byte("k"), Value: []byte("v")}}, BatchOptions{BaseOffset: 25})
	write("00000000000000000000.log", []byte("old-0"))
	write("00000000000000000000.index", nil)
	write("00000000000000000010.log", []byte("old-10"))
	write("00000000000000000010.index", nil)
	write("00000000000000000030.log", nil)
	write("00000000000000000000.log.swap", b)
	write("00000000000000000000.index.swap", nil)
	write("00000000000000000040.log.cleaned", nil)
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	changed, err := recoverSwaps(OS, dir, names)
	require.NoError(t, err)
	assert.True(t, changed)
	ents, err = os.ReadDir(dir)
	require.NoError(t, err)
	names = names[:0]
	for _, e := range ents {
		names = append(names, e.Name())
	}
	assert.Equal(t, []string{"00000000000000000000.log", "00000000000000000030.log"}, names,
		"the swap replaced the segments it covers [0, 26), its index is rebuilt at load, the .cleaned file is gone")
	got, err := os.ReadFile(filepath.Join(dir, "00000000000000000000.log"))
	require.NoError(t, err)
	assert.Equal(t, b, got)
}

// TestFollowerReplicatesACompactedLeader copies a compacted leader's log to
// a follower as replication does (reads from the leader, follower
// appends), and checks both hold the same records at the same offsets.
func TestFollowerReplicatesACompactedLeader(t *testing.T) {
	clock := &fakeClock{}
	clock.ms.Store(1_700_000_000_000)
	m, leader := newCompactManager(t, OS, t.TempDir(), clock)
	rng := rand.New(rand.NewSource(3))
	model := kvModel{}
	writeUpserts(t, leader, rng, model, 2000, 30, clock.ms.Load())
	_, err := m.CleanOnce(context.Background())
	require.NoError(t, err)
	writeUpserts(t, leader, rng, model, 200, 30, clock.ms.Load())

	follower := openTestLog(t, OS, t.TempDir(), compactConfig(), true)
	for i := 0; follower.LogEndOffset() < leader.LogEndOffset(); i++ {
		require.Less(t, i, 10000)
		b, err := leader.Read(follower.LogEndOffset(), 700, leader.LogEndOffset(), true)
		require.NoError(t, err)
		require.NoError(t, follower.AppendAsFollower(b))
	}
	assert.Equal(t, readAll(t, leader), readAll(t, follower))
	assert.Equal(t, model, latestPerKey(readAll(t, follower)))
}

// TestBlockedLogDoesNotStarveOthers: a log the cleaner cannot clean yet
// (an undecided transaction at its first dirty offset) is passed over for
// the next filthiest.
func TestBlockedLogDoesNotStarveOthers(t *testing.T) {
	clock := &fakeClock{}
	clock.ms.Store(1_700_000_000_000)
	m, blocked := newCompactManager(t, OS, t.TempDir(), clock)
	now := clock.ms.Load()
	for i := 0; i < 200; i++ {
		b := BuildBatch([]Record{{TimestampMs: now, Key: []byte("k"), Value: []byte(fmt.Sprint(i))}},
			BatchOptions{BaseOffset: blocked.LogEndOffset(), Transactional: true, Producer: &BatchProducer{ID: 9, BaseSequence: int32(i)}})
		require.NoError(t, blocked.AppendAsFollower(b))
	}
	require.NoError(t, blocked.Roll())
	blocked.UpdateHighWatermark(blocked.LogEndOffset())
	other, err := m.GetOrCreateLog(TopicPartition{Topic: "kv", Partition: 1}, compactConfig())
	require.NoError(t, err)
	model := kvModel{}
	writeUpserts(t, other, rand.New(rand.NewSource(5)), model, 500, 10, now)
	size := other.Size()
	n, err := m.CleanOnce(context.Background())
	require.NoError(t, err)
	assert.Equal(t, 1, n, "the cleanable log is cleaned, whichever comes first")
	assert.Less(t, other.Size(), size)
	assert.Equal(t, model, latestPerKey(readAll(t, other)))
	assert.Len(t, readAll(t, blocked), 200, "nothing of the undecided transaction is cleaned")
}

// TestCleanKeepsTheAbortedIndexOfMergedSegments: a clean that merges
// segments keeps, in the merged segment's .txnindex, the aborted
// transactions whose markers lay in the segments merged into it, so that
// after a restart read_committed fetches still list them (the aborted
// records above the pass's end, here behind an undecided transaction,
// stay in the log). A clean stopped after writing that index and before
// its swap leaves an entry in two indexes, loaded once.
func TestCleanKeepsTheAbortedIndexOfMergedSegments(t *testing.T) {
	clock := &fakeClock{}
	clock.ms.Store(1_700_000_000_000)
	dir := t.TempDir()
	m, l := newCompactManager(t, OS, dir, clock)
	now := clock.ms.Load()
	appendB := func(recs []Record, opts BatchOptions) {
		opts.BaseOffset = l.LogEndOffset()
		require.NoError(t, l.AppendAsFollower(BuildBatch(recs, opts)))
	}
	rec := func(k, v string) []Record { return []Record{{TimestampMs: now, Key: []byte(k), Value: []byte(v)}} }
	abort := []Record{{TimestampMs: now, Key: []byte{0, 0, 0, byte(controlTypeAbort)}, Value: []byte{0, 0, 0, 0, 0, 0}}}
	appendB(rec("a", "1"), BatchOptions{})
	appendB(rec("a", "2"), BatchOptions{})
	require.NoError(t, l.Roll())
	appendB(rec("b", "1"), BatchOptions{})
	appendB(rec("b", "2"), BatchOptions{})
	appendB(rec("c", "undecided"), BatchOptions{Transactional: true, Producer: &BatchProducer{ID: 7, Epoch: 0, BaseSequence: 0}})
	appendB(rec("d", "aborted"), BatchOptions{Transactional: true, Producer: &BatchProducer{ID: 8, Epoch: 0, BaseSequence: 0}})
	appendB(abort, BatchOptions{Control: true, Transactional: true, Producer: &BatchProducer{ID: 8, Epoch: 0, BaseSequence: -1}})
	require.NoError(t, l.Roll())
	end := l.LogEndOffset()
	l.UpdateHighWatermark(end)
	want := l.AbortedTxns(0, end)
	require.Len(t, want, 1)
	assert.Equal(t, int64(8), want[0].ProducerID)

	restart := func() {
		t.Helper()
		m, l = restartCompactManager(t, m, dir, clock)
		l.UpdateHighWatermark(end)
	}

	// Stopped before the swap: segment 0's index already covers both.
	l.mu.Lock()
	require.NoError(t, l.writeTxnIndexFile(0, end))
	l.mu.Unlock()
	restart()
	assert.Equal(t, want, l.AbortedTxns(0, end), "one entry, not two")
	l.mu.Lock()
	require.NoError(t, l.writeTxnIndexFile(0, l.segments[0].nextOffset)) // back to its own entries
	l.mu.Unlock()

	_, err := m.CleanOnce(context.Background())
	require.NoError(t, err)
	l.mu.RLock()
	segs := len(l.segments)
	l.mu.RUnlock()
	require.Equal(t, 2, segs, "the two closed segments were merged")
	restart()
	assert.Equal(t, want, l.AbortedTxns(0, end), "the aborted transaction is listed after the restart")
	require.NoError(t, m.Shutdown(1))
}

// TestStoppedCleanLeavesNoAbortAfterATruncation: the merged index a
// stopped clean left on the first segment holds a later segment's abort;
// after that abort is truncated away and the offsets hold a committed
// transaction instead, a restart lists no aborted transaction (each
// segment's index is read for its own offsets only).
func TestStoppedCleanLeavesNoAbortAfterATruncation(t *testing.T) {
	clock := &fakeClock{}
	clock.ms.Store(1_700_000_000_000)
	dir := t.TempDir()
	m, l := newCompactManager(t, OS, dir, clock)
	now := clock.ms.Load()
	appendB := func(recs []Record, opts BatchOptions) {
		opts.BaseOffset = l.LogEndOffset()
		require.NoError(t, l.AppendAsFollower(BuildBatch(recs, opts)))
	}
	rec := func(k, v string) []Record { return []Record{{TimestampMs: now, Key: []byte(k), Value: []byte(v)}} }
	marker := func(typ int16) []Record {
		return []Record{{TimestampMs: now, Key: []byte{0, 0, 0, byte(typ)}, Value: []byte{0, 0, 0, 0, 0, 0}}}
	}
	pid8 := func(epoch int16, seq int32) BatchOptions {
		return BatchOptions{Transactional: true, Producer: &BatchProducer{ID: 8, Epoch: epoch, BaseSequence: seq}}
	}
	ctrl := func(epoch int16) BatchOptions {
		return BatchOptions{Control: true, Transactional: true, Producer: &BatchProducer{ID: 8, Epoch: epoch, BaseSequence: -1}}
	}
	appendB(rec("a", "1"), BatchOptions{})
	appendB(rec("a", "2"), BatchOptions{})
	require.NoError(t, l.Roll())
	appendB(rec("b", "1"), BatchOptions{})
	appendB(rec("d", "aborted"), pid8(0, 0))
	appendB(marker(controlTypeAbort), ctrl(0))
	require.NoError(t, l.Roll())
	end := l.LogEndOffset()
	l.UpdateHighWatermark(end)
	require.Len(t, l.AbortedTxns(0, end), 1)

	restart := func() {
		t.Helper()
		m, l = restartCompactManager(t, m, dir, clock)
	}
	l.mu.Lock()
	require.NoError(t, l.writeTxnIndexFile(0, end)) // a clean stopped before its swap
	l.mu.Unlock()
	restart()
	require.Len(t, l.AbortedTxns(0, end), 1)

	require.NoError(t, l.TruncateTo(3))
	appendB(rec("d", "committed"), pid8(1, 0))
	appendB(marker(controlTypeCommit), ctrl(1))
	require.NoError(t, l.Roll())
	l.UpdateHighWatermark(l.LogEndOffset())
	assert.Empty(t, l.AbortedTxns(0, l.LogEndOffset()))
	restart()
	assert.Empty(t, l.AbortedTxns(0, l.LogEndOffset()), "the truncated abort does not come back from the first segment's index")
	require.NoError(t, m.Shutdown(1))
}
