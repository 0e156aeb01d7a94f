package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faultline/faultline/broker/storage"
)

// writeSegment writes batches through the broker's own log (index every
// batch) and returns the paths of its first segment's .log, .index and
// .timeindex, after a clean shutdown.
func writeSegment(t *testing.T, batches int) (string, string, string) {
	t.Helper()
	dir := t.TempDir()
	lm, err := storage.NewLogManager(storage.OS, []string{dir}, storage.ManagerOptions{})
	require.NoError(t, err)
	_, err = lm.Load()
	require.NoError(t, err)
	cfg := storage.DefaultLogConfig()
	cfg.IndexIntervalBytes = 1
	l, err := lm.GetOrCreateLog(storage.TopicPartition{Topic: "orders", Partition: 0}, cfg)
	require.NoError(t, err)
	for i := range batches {
		b := storage.BuildBatch([]storage.Record{
			{Key: []byte("k"), Value: []byte("value-" + string(rune('a'+i))), TimestampMs: int64(1000 + i)},
			{Value: []byte{0, 1, 2}, TimestampMs: int64(1000 + i), Headers: []storage.RecordHeader{{Key: "h", Value: []byte("v")}}},
		}, storage.BatchOptions{Producer: &storage.BatchProducer{ID: 7, Epoch: 0, BaseSequence: int32(2 * i)}})
		_, err := l.AppendAsLeader(b, 3, 5000)
		require.NoError(t, err)
	}
	require.NoError(t, lm.Shutdown(1))
	base := filepath.Join(dir, "orders-0", "00000000000000000000")
	return base + ".log", base + ".index", base + ".timeindex"
}

func TestDumpLogPrintsBatchesAndRecords(t *testing.T) {
	log, index, timeindex := writeSegment(t, 3)
	code, out, errOut := runCmd("dump-log", "--files", log, "--deep-iteration", "--print-data-log")
	require.Equal(t, exitOK, code, errOut)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 2+3*3, out)
	assert.Equal(t, "Dumping "+log, lines[0])
	assert.Equal(t, "Log starting offset: 0", lines[1])
	assert.Regexp(t, `^baseOffset: 0 lastOffset: 1 count: 2 baseSequence: 0 lastSequence: 1 producerId: 7 producerEpoch: 0 partitionLeaderEpoch: 3 isTransactional: false isControl: false deleteHorizonMs: OptionalLong.empty position: 0 CreateTime: 1000 size: [0-9]+ magic: 2 compresscodec: none crc: [0-9]+ isvalid: true$`, lines[2])
	assert.Equal(t, "| offset: 0 CreateTime: 1000 keySize: 1 valueSize: 7 sequence: 0 headerKeys: [] key: k payload: value-a", lines[3])
	assert.Equal(t, "| offset: 1 CreateTime: 1000 keySize: -1 valueSize: 3 sequence: 1 headerKeys: [h] key: null payload: 0x000102", lines[4])
	assert.Regexp(t, `^baseOffset: 4 lastOffset: 5 count: 2 .* position: [1-9][0-9]* `, lines[8])

	code, out, errOut = runCmd("dump-log", "--files", index+","+timeindex)
	require.Equal(t, exitOK, code, errOut)
	// As Kafka's, the index gets an entry once index.interval.bytes were
	// appended since the last, so the first batch (found at position 0) has none.
	assert.Regexp(t, `Dumping .*\.index\noffset: 3 position: [1-9][0-9]*\noffset: 5 position: [1-9][0-9]*\n`, out)
	assert.Contains(t, out, "00000000000000000000.index: 2 entries, no problems")
	assert.Contains(t, out, "timestamp: 1001 offset: 3\n")
	assert.Contains(t, out, "00000000000000000000.timeindex: 2 entries, no problems")
}

func TestDumpLogNamesCorruption(t *testing.T) {
	cases := []struct {
		name    string
		damage  func(b []byte) []byte
		stderr  string
		stdout  string
		batches int // batch lines printed
	}{
		{"torn tail", func(b []byte) []byte { return b[:len(b)-10] }, "first unreadable byte at position", "isvalid: true", 2},
		{"bit flip in the second batch", func(b []byte) []byte {
			h, _ := storage.ParseBatchHeader(b)
			b[h.Size()+storage.BatchHeaderSize+3] ^= 0x10
			return b
		}, "corrupt batch at byte", "isvalid: false", 3},
		{"garbage header", func(b []byte) []byte {
			h, _ := storage.ParseBatchHeader(b)
			copy(b[h.Size()+8:], []byte{0xff, 0xff, 0xff, 0xff})
			return b
		}, "first unreadable byte at position", "isvalid: true", 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			log, _, _ := writeSegment(t, 3)
			b, err := os.ReadFile(log)
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(log, c.damage(b), 0o644))
			code, out, errOut := runCmd("dump-log", "--files", log, "--deep-iteration")
			assert.Equal(t, exitError, code)
			assert.Contains(t, errOut, c.stderr)
			assert.Contains(t, out, c.stdout)
			assert.Equal(t, c.batches, strings.Count(out, "baseOffset: "), out)
			assert.Equal(t, 1, strings.Count(strings.TrimSpace(errOut), "\n")+1, errOut)
		})
	}
}

func TestDumpLogChecksIndexAgainstLog(t *testing.T) {
	_, index, timeindex := writeSegment(t, 3)
	b, err := os.ReadFile(index)
	require.NoError(t, err)
	b[len(b)-1] ^= 0x01 // the last entry now points inside a batch
	require.NoError(t, os.WriteFile(index, append(b, 0, 0, 0), 0o644))
	code, out, errOut := runCmd("dump-log", "--files", index, "--verify-index-only")
	assert.Equal(t, exitError, code)
	assert.Contains(t, out, "Mismatches in "+index)
	assert.Contains(t, out, "where no batch of the log starts")
	assert.Contains(t, out, "3 bytes after the last whole entry")
	assert.NotContains(t, out, "offset: 3 position:", "--verify-index-only prints no entries")
	assert.Contains(t, errOut, "2 problems")

	tb, err := os.ReadFile(timeindex)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(timeindex, tb[:12], 0o644))
	code, out, _ = runCmd("dump-log", "--files", timeindex)
	assert.Equal(t, exitOK, code, "a shorter time index is still consistent")
	assert.Contains(t, out, "1 entries, no problems")

	code, _, errOut = runCmd("dump-log", "--files", filepath.Join(t.TempDir(), "nope.log"))
	assert.Equal(t, exitError, code)
	assert.Contains(t, errOut, "no such file")
	junk := filepath.Join(t.TempDir(), "notes.txt")
	require.NoError(t, os.WriteFile(junk, []byte("x"), 0o644))
	code, _, errOut = runCmd("dump-log", "--files", junk)
	assert.Equal(t, exitError, code)
	assert.Contains(t, errOut, "not a .log, .index or .timeindex")
}
