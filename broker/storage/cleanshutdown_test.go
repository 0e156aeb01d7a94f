package storage

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPreviousBrokerEpochNeedsEveryDirClean: a restart is clean (it offers
// its last broker epoch) only when every log dir holds a marker naming the
// same epoch; one dir that crashed makes the whole broker unclean.
func TestPreviousBrokerEpochNeedsEveryDirClean(t *testing.T) {
	marker := func(epoch string) string { return `{"version":0,"brokerEpoch":` + epoch + `}` }
	cases := []struct {
		name    string
		markers []string // per dir, "" for no marker
		want    int64
	}{
		{"one clean dir", []string{marker("7")}, 7},
		{"every dir clean at one epoch", []string{marker("7"), marker("7")}, 7},
		{"first dir clean, second crashed", []string{marker("7"), ""}, -1},
		{"first dir crashed, second clean", []string{"", marker("7")}, -1},
		{"dirs at different epochs", []string{marker("7"), marker("9")}, -1},
		{"an unreadable marker", []string{marker("7"), "{garbage"}, -1},
		{"no marker", []string{""}, -1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			root := t.TempDir()
			var dirs []string
			for i, m := range c.markers {
				dir := filepath.Join(root, string(rune('a'+i)))
				require.NoError(t, os.MkdirAll(dir, 0o755))
				if m != "" {
					require.NoError(t, os.WriteFile(filepath.Join(dir, CleanShutdownFile), []byte(m), 0o644))
				}
				dirs = append(dirs, dir)
			}
			assert.Equal(t, c.want, PreviousBrokerEpoch(OS, dirs))
		})
	}
}

// TestLogDirFailureTakesTheWholeDirOffline: an I/O error in one log takes
// its whole dir offline (Kafka's LogDirFailureChannel): every log of the
// dir refuses reads and writes, the manager reports the dir once, new logs
// go to the dirs still online, and the failed dir gets no clean-shutdown
// marker while the healthy one does.
func TestLogDirFailureTakesTheWholeDirOffline(t *testing.T) {
	root := t.TempDir()
	bad, good := filepath.Join(root, "bad"), filepath.Join(root, "good")
	efs := NewErrorFS(OS)
	reported := make(chan string, 4)
	m, err := NewLogManager(efs, []string{bad, good}, ManagerOptions{
		DefaultLogConfig: testConfig(),
		OnDirOffline:     func(dir string, _ error) { reported <- dir },
	})
	require.NoError(t, err)
	_, err = m.Load()
	require.NoError(t, err)
	var logs []*Log
	for p := range int32(4) {
		l, err := m.GetOrCreateLog(TopicPartition{Topic: "t", Partition: p}, testConfig())
		require.NoError(t, err)
		appendN(t, l, 2, 2, 0)
		logs = append(logs, l)
	}
	var inBad []*Log
	for _, l := range logs {
		if filepath.Dir(l.Dir()) == bad {
			inBad = append(inBad, l)
		}
	}
	require.Len(t, inBad, 2, "logs spread over both dirs")

	efs.Inject(Rule{Op: OpWrite, Path: inBad[0].Dir(), Count: 1})
	_, err = inBad[0].AppendAsLeader(BuildBatch(records(1, "x", 1), BatchOptions{}), 0, 1)
	require.ErrorIs(t, err, ErrLogDirOffline)
	select {
	case dir := <-reported:
		assert.Equal(t, bad, dir)
	case <-time.After(5 * time.Second):
		require.FailNow(t, "the failed dir was not reported")
	}
	assert.Equal(t, []string{bad}, m.OfflineDirs())
	for _, l := range inBad {
		assert.True(t, l.Offline(), "%s is in the failed dir", l.TopicPartition())
		_, err := l.Read(0, 1<<20, 100, true)
		assert.ErrorIs(t, err, ErrLogDirOffline)
	}
	for _, l := range logs {
		if filepath.Dir(l.Dir()) == good {
			assert.False(t, l.Offline())
			_, err := l.AppendAsLeader(BuildBatch(records(1, "y", 1), BatchOptions{}), 0, 1)
			assert.NoError(t, err, "the healthy dir serves on")
		}
	}
	l, err := m.GetOrCreateLog(TopicPartition{Topic: "t", Partition: 9}, testConfig())
	require.NoError(t, err)
	assert.Equal(t, good, filepath.Dir(l.Dir()), "new logs go to a dir still online")

	assert.Error(t, m.Shutdown(3))
	_, err = os.Stat(filepath.Join(bad, CleanShutdownFile))
	assert.True(t, os.IsNotExist(err), "no marker for the failed dir")
	_, err = os.Stat(filepath.Join(good, CleanShutdownFile))
	assert.NoError(t, err, "the healthy dir shut down cleanly")
	assert.Equal(t, int64(-1), PreviousBrokerEpoch(OS, []string{bad, good}), "the next start is unclean")
	assert.Len(t, reported, 0, "the dir is reported once")
}
