package storage

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// syncBuffer is a goroutine-safe log sink.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func newTestManager(t *testing.T, fs FS, dirs []string, logs *syncBuffer) *LogManager {
	t.Helper()
	opts := ManagerOptions{RecoveryThreadsPerDataDir: 2, DefaultLogConfig: testConfig()}
	if logs != nil {
		opts.Logger = slog.New(slog.NewTextHandler(logs, nil))
	}
	m, err := NewLogManager(fs, dirs, opts)
	require.NoError(t, err)
	return m
}

func appendN(t *testing.T, l *Log, batches, perBatch int, epoch int32) {
	t.Helper()
	for i := 0; i < batches; i++ {
		_, err := l.AppendAsLeader(BuildBatch(records(perBatch, fmt.Sprint(i), int64(1000+i)), BatchOptions{}), epoch, 1)
		require.NoError(t, err)
	}
}

func TestManagerCleanShutdownAndReload(t *testing.T) {
	dir := t.TempDir()
	m := newTestManager(t, OS, []string{dir}, nil)
	_, err := m.Load()
	require.NoError(t, err)
	tp := TopicPartition{Topic: "orders", Partition: 3}
	l, err := m.GetOrCreateLog(tp, testConfig())
	require.NoError(t, err)
	appendN(t, l, 20, 5, 2)
	assert.Equal(t, int64(50), l.UpdateHighWatermark(50))
	require.NoError(t, m.Shutdown(42))

	marker, err := os.ReadFile(filepath.Join(dir, CleanShutdownFile))
	require.NoError(t, err)
	assert.JSONEq(t, `{"version":0,"brokerEpoch":42}`, string(marker))
	hw, err := os.ReadFile(filepath.Join(dir, HighWatermarkCheckpointFile))
	require.NoError(t, err)
	assert.Equal(t, "0\n1\norders 3 50\n", string(hw))
	rp, err := os.ReadFile(filepath.Join(dir, RecoveryPointCheckpointFile))
	require.NoError(t, err)
	assert.Equal(t, "0\n1\norders 3 100\n", string(rp))
	ep, err := os.ReadFile(filepath.Join(dir, "orders-3", LeaderEpochCheckpointFile))
	require.NoError(t, err)
	assert.Equal(t, "0\n1\n2 0\n", string(ep))
	_, err = os.Stat(filepath.Join(dir, "orders-3", "00000000000000000100.snapshot"))
	assert.NoError(t, err, "producer snapshot at the LEO")

	var logs syncBuffer
	m2 := newTestManager(t, OS, []string{dir}, &logs)
	stats, err := m2.Load()
	require.NoError(t, err)
	assert.Equal(t, 1, stats.Logs)
	assert.Equal(t, 0, stats.RecoveredLogs)
	assert.Empty(t, stats.UncleanDirs)
	_, err = os.Stat(filepath.Join(dir, CleanShutdownFile))
	assert.True(t, os.IsNotExist(err), "marker deleted at load")
	l2, ok := m2.GetLog(tp)
	require.True(t, ok)
	assert.Equal(t, int64(100), l2.LogEndOffset())
	assert.Equal(t, int64(50), l2.HighWatermark())
	assert.Equal(t, int64(100), l2.RecoveryPoint())
	assert.Contains(t, logs.String(), "Loading logs from log dirs")
	assert.Contains(t, logs.String(), "Skipping recovery of 1 logs")
	assert.Contains(t, logs.String(), "Completed load of log orders-3 with 1 segments, log start offset 0 and log end offset 100")
	assert.Contains(t, logs.String(), "Loaded 1 logs in")
	assert.NotContains(t, logs.String(), "Recovering log")
	require.NoError(t, m2.Shutdown(43))
}

func TestManagerUncleanLoadRecovers(t *testing.T) {
	dirs := []string{t.TempDir(), t.TempDir()}
	m := newTestManager(t, OS, dirs, nil)
	_, err := m.Load()
	require.NoError(t, err)
	for p := int32(0); p < 4; p++ {
		l, err := m.GetOrCreateLog(TopicPartition{Topic: "a-b", Partition: p}, testConfig())
		require.NoError(t, err)
		appendN(t, l, 10, 3, 1)
	}
	require.NoError(t, m.CheckpointHighWatermarks())
	for _, l := range m.Logs() {
		require.NoError(t, l.Close()) // a crash: no flush, no marker
	}

	var logs syncBuffer
	m2 := newTestManager(t, OS, dirs, &logs)
	stats, err := m2.Load()
	require.NoError(t, err)
	assert.Equal(t, 4, stats.Logs)
	assert.Equal(t, 4, stats.RecoveredLogs)
	assert.ElementsMatch(t, dirs, stats.UncleanDirs)
	out := logs.String()
	assert.Contains(t, out, "Found unclean shutdown file marker for directory "+dirs[0])
	assert.Contains(t, out, "Recovering log a-b-0")
	assert.Contains(t, out, "Recovering unflushed segment 0 of a-b-0")
	assert.Contains(t, out, "Completed recovery of a-b-0. New Log End Offset is 30")
	for p := int32(0); p < 4; p++ {
		l, ok := m2.GetLog(TopicPartition{Topic: "a-b", Partition: p})
		require.True(t, ok)
		assert.Equal(t, int64(30), l.LogEndOffset())
		e, ok := l.LatestEpoch()
		assert.True(t, ok)
		assert.Equal(t, int32(1), e)
	}
	require.NoError(t, m2.Shutdown(1))
}

func TestParseTopicPartitionDir(t *testing.T) {
	for name, want := range map[string]TopicPartition{
		"orders-0":              {Topic: "orders", Partition: 0},
		"a-b-c-12":              {Topic: "a-b-c", Partition: 12},
		"__consumer_offsets-49": {Topic: "__consumer_offsets", Partition: 49},
	} {
		got, ok := ParseTopicPartitionDir(name)
		assert.True(t, ok, name)
		assert.Equal(t, want, got, name)
	}
	for _, name := range []string{"orders", "orders-", "-1", "orders-x", "orders-01", "orders-0.abc-delete", "orders-0.abc-future"} {
		_, ok := ParseTopicPartitionDir(name)
		assert.False(t, ok, name)
	}
}

func TestMetaPropertiesRoundTripAndFormat(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	require.NoError(t, FormatLogDir(OS, dir, "MkU3OEVBNTcwNTJENDM2Qk", 1, false))
	mp, err := ReadMetaProperties(OS, dir)
	require.NoError(t, err)
	assert.Equal(t, 1, mp.Version)
	assert.Equal(t, "MkU3OEVBNTcwNTJENDM2Qk", mp.ClusterID)
	assert.Equal(t, int32(1), mp.NodeID)
	assert.Len(t, mp.DirectoryID, 22)
	err = FormatLogDir(OS, dir, "MkU3OEVBNTcwNTJENDM2Qk", 1, false)
	assert.ErrorContains(t, err, "already formatted")
	assert.NoError(t, FormatLogDir(OS, dir, "MkU3OEVBNTcwNTJENDM2Qk", 1, true))
	assert.Error(t, FormatLogDir(OS, dir, "other", 1, true))

	_, err = ParseMetaProperties([]byte("version=0\nbroker.id=1\ncluster.id=x\n"))
	assert.ErrorIs(t, err, ErrCorruptCheckpoint)
	mp, err = ParseMetaProperties([]byte("#\n#Tue\ncluster.id=abc\nnode.id=3\nversion=1\n"))
	require.NoError(t, err)
	assert.Equal(t, MetaProperties{Version: 1, ClusterID: "abc", NodeID: 3}, mp)
	_, err = ReadMetaProperties(OS, t.TempDir())
	assert.ErrorIs(t, err, os.ErrNotExist)
}

func TestCheckpointParsing(t *testing.T) {
	m, err := ParseOffsetCheckpoint([]byte("0\n2\na 0 5\nb-c 1 7\n"))
	require.NoError(t, err)
	assert.Equal(t, map[TopicPartition]int64{{Topic: "a", Partition: 0}: 5, {Topic: "b-c", Partition: 1}: 7}, m)
	m, err = ParseOffsetCheckpoint(nil)
	require.NoError(t, err)
	assert.Empty(t, m)
	for _, bad := range []string{"1\n0\n", "0\n2\na 0 5\n", "0\n1\na 0\n", "0\nx\n", "0\n1\na b 5\n", "0\n0\na 0 1\n"} {
		_, err := ParseOffsetCheckpoint([]byte(bad))
		assert.ErrorIs(t, err, ErrCorruptCheckpoint, bad)
	}
	e, err := ParseLeaderEpochCheckpoint([]byte("0\n2\n0 0\n3 17\n"))
	require.NoError(t, err)
	assert.Equal(t, []EpochEntry{{0, 0}, {3, 17}}, e)
	_, err = ParseLeaderEpochCheckpoint([]byte("0\n2\n3 0\n1 17\n"))
	assert.ErrorIs(t, err, ErrCorruptCheckpoint)
}

func TestGetOrCreateLogRejectsIllegalTopics(t *testing.T) {
	m := newTestManager(t, OS, []string{t.TempDir()}, nil)
	_, err := m.Load()
	require.NoError(t, err)
	for _, topic := range []string{"", ".", "..", "a/b", "../x", "spa ce"} {
		_, err := m.GetOrCreateLog(TopicPartition{Topic: topic, Partition: 0}, testConfig())
		assert.Error(t, err, topic)
	}
	_, err = m.GetOrCreateLog(TopicPartition{Topic: "ok", Partition: -1}, testConfig())
	assert.Error(t, err)
	l, err := m.GetOrCreateLog(TopicPartition{Topic: "Ok.name_1-x", Partition: 2}, testConfig())
	require.NoError(t, err)
	assert.Equal(t, "Ok.name_1-x-2", filepath.Base(l.Dir()))
	require.NoError(t, m.DeleteLog(TopicPartition{Topic: "Ok.name_1-x", Partition: 2}))
	_, err = os.Stat(l.Dir())
	assert.True(t, os.IsNotExist(err))
	require.NoError(t, m.Shutdown(1))
}

// A truncation through the LogManager checkpoints the recovery point at
// once: a crash right after it must not find a recovery point above the
// new log end, or the records written after the truncation up to the old
// recovery point would be taken as flushed and skip validation.
func TestManagerTruncationCheckpointsRecoveryPoint(t *testing.T) {
	dir := t.TempDir()
	m := newTestManager(t, OS, []string{dir}, nil)
	_, err := m.Load()
	require.NoError(t, err)
	defer func() { require.NoError(t, m.Shutdown(0)) }()
	tp := TopicPartition{Topic: "t", Partition: 0}
	l, err := m.GetOrCreateLog(tp, testConfig())
	require.NoError(t, err)
	appendN(t, l, 10, 1, 0)
	require.NoError(t, l.Flush())
	require.NoError(t, m.CheckpointRecoveryPoints())
	checkpointed := func() int64 {
		cp, err := ReadOffsetCheckpoint(OS, filepath.Join(dir, RecoveryPointCheckpointFile))
		require.NoError(t, err)
		return cp[tp]
	}
	require.Equal(t, int64(10), checkpointed())

	require.NoError(t, m.TruncateTo(tp, 4))
	assert.Equal(t, int64(4), l.LogEndOffset())
	assert.LessOrEqual(t, checkpointed(), int64(4))

	require.NoError(t, m.TruncateFullyAndStartAt(tp, 2))
	assert.LessOrEqual(t, checkpointed(), int64(2))
	assert.ErrorIs(t, m.TruncateTo(TopicPartition{Topic: "none", Partition: 0}, 0), ErrLogClosed, "no such log")
}
