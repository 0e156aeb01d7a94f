package storage

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func testConfig() LogConfig {
	c := DefaultLogConfig()
	c.IndexIntervalBytes = 256
	return c
}

func openTestLog(t testing.TB, fs FS, dir string, cfg LogConfig, clean bool) *Log {
	t.Helper()
	l, _, err := openLog(fs, dir, TopicPartition{Topic: "t", Partition: 0}, cfg, loadParams{
		cleanShutdown: clean, recoveryPoint: -1, logStartOffset: -1, highWatermark: -1,
	})
	require.NoError(t, err)
	return l
}

func records(n int, prefix string, ts int64) []Record {
	out := make([]Record, n)
	for i := range out {
		out[i] = Record{TimestampMs: ts + int64(i), Key: []byte(fmt.Sprintf("k%d", i)), Value: []byte(fmt.Sprintf("%s-%d", prefix, i))}
	}
	return out
}

func TestBuildAndDecodeRoundTrip(t *testing.T) {
	recs := records(3, "v", 1000)
	recs[1].Key = nil
	recs[2].Headers = []RecordHeader{{Key: "h", Value: []byte("x")}, {Key: "n", Value: nil}}
	b := BuildBatch(recs, BatchOptions{BaseOffset: 10, Producer: &BatchProducer{ID: 7, Epoch: 1, BaseSequence: 4}})
	h, err := ValidateBatch(b)
	require.NoError(t, err)
	assert.Equal(t, int64(10), h.BaseOffset)
	assert.Equal(t, int64(12), h.LastOffset())
	assert.Equal(t, int32(3), h.RecordCount)
	assert.Equal(t, int64(1000), h.BaseTimestamp)
	assert.Equal(t, int64(1002), h.MaxTimestamp)
	assert.Equal(t, int64(7), h.ProducerID)
	assert.Equal(t, int32(6), h.LastSequence())
	got, err := DecodeRecords(b)
	require.NoError(t, err)
	require.Len(t, got, 3)
	for i, r := range got {
		assert.Equal(t, int64(10+i), r.Offset)
		assert.Equal(t, recs[i].TimestampMs, r.TimestampMs)
		assert.Equal(t, recs[i].Key, r.Key)
		assert.Equal(t, recs[i].Value, r.Value)
		assert.Equal(t, recs[i].Headers, r.Headers)
	}
	b[len(b)-1] ^= 1
	_, err = ValidateBatch(b)
	assert.ErrorIs(t, err, ErrCorruptBatch)
}

func TestAppendReadRoundTrip(t *testing.T) {
	l := openTestLog(t, OS, t.TempDir(), testConfig(), true)
	defer l.Close()
	for i := 0; i < 50; i++ {
		info, err := l.AppendAsLeader(BuildBatch(records(4, fmt.Sprint(i), int64(i*10)), BatchOptions{}), 3, 1)
		require.NoError(t, err)
		assert.Equal(t, int64(i*4), info.FirstOffset)
		assert.Equal(t, int64(i*4+3), info.LastOffset)
	}
	assert.Equal(t, int64(200), l.LogEndOffset())
	assert.NotEmpty(t, l.active().idx.offsets, "index entries every 256 bytes")
	for _, off := range []int64{0, 1, 77, 199} {
		b, err := l.Read(off, 1<<20, 200, true)
		require.NoError(t, err)
		var first BatchHeader
		require.NoError(t, ForEachBatch(b, func(h BatchHeader, _ []byte) error {
			if first.Magic == 0 {
				first = h
			}
			return nil
		}))
		assert.LessOrEqual(t, first.BaseOffset, off)
		assert.GreaterOrEqual(t, first.LastOffset(), off)
		assert.Equal(t, int32(3), first.PartitionLeaderEpoch)
	}
	b, err := l.Read(0, 1<<20, 8, true)
	require.NoError(t, err)
	n := 0
	require.NoError(t, ForEachBatch(b, func(h BatchHeader, _ []byte) error { n++; assert.Less(t, h.BaseOffset, int64(8)); return nil }))
	assert.Equal(t, 2, n)
	_, err = l.Read(201, 100, 300, true)
	assert.ErrorIs(t, err, ErrOffsetOutOfRange)
	b, err = l.Read(200, 100, 300, true)
	require.NoError(t, err)
	assert.Empty(t, b)
	ep, ok := l.LatestEpoch()
	assert.True(t, ok)
	assert.Equal(t, int32(3), ep)
}

// TestTimestampLimits: CreateTime batches too far in the future or past are
// refused (KIP-937) and nothing is appended; LogAppendTime logs take any.
func TestTimestampLimits(t *testing.T) {
	cfg := DefaultLogConfig()
	cfg.MessageTimestampBeforeMaxMs, cfg.MessageTimestampAfterMaxMs = 60_000, 3_600_000
	l := openTestLog(t, OS, t.TempDir(), cfg, true)
	defer l.Close()
	now := int64(1_800_000_000_000)

	_, err := l.AppendAsLeader(BuildBatch(records(2, "future", now+2*3_600_000), BatchOptions{}), 0, now)
	require.ErrorIs(t, err, ErrInvalidTimestamp)
	_, err = l.AppendAsLeader(BuildBatch(records(2, "past", now-3_600_000), BatchOptions{}), 0, now)
	require.ErrorIs(t, err, ErrInvalidTimestamp)
	assert.Equal(t, int64(0), l.LogEndOffset(), "a refused batch appends nothing")

	info, err := l.AppendAsLeader(BuildBatch(records(2, "now", now-30_000), BatchOptions{}), 0, now)
	require.NoError(t, err)
	assert.Equal(t, int64(1), info.LastOffset)

	def := DefaultLogConfig()
	assert.Equal(t, int64(3_600_000), def.MessageTimestampAfterMaxMs, "Kafka's default")
	l2 := openTestLog(t, OS, t.TempDir(), def, true)
	defer l2.Close()
	_, err = l2.AppendAsLeader(BuildBatch(records(1, "old", 1000), BatchOptions{}), 0, now)
	require.NoError(t, err, "by default any past timestamp is accepted")

	cfg.MessageTimestampType = TimestampLogAppendTime
	l3 := openTestLog(t, OS, t.TempDir(), cfg, true)
	defer l3.Close()
	_, err = l3.AppendAsLeader(BuildBatch(records(1, "x", now+10*3_600_000), BatchOptions{}), 0, now)
	require.NoError(t, err, "LogAppendTime replaces the client's timestamps")
}

// TestTopicCompressionTypeReencodes: a topic's compression.type other than
// producer re-encodes appended batches, keeping producer state and
// offsets; "producer" keeps the producer's codec.
func TestTopicCompressionTypeReencodes(t *testing.T) {
	for _, tc := range []struct {
		topic string
		in    Compression
		want  Compression
	}{
		{"gzip", CompressionNone, CompressionGzip},
		{"zstd", CompressionGzip, CompressionZstd},
		{"uncompressed", CompressionLZ4, CompressionNone},
		{"producer", CompressionSnappy, CompressionSnappy},
		{"", CompressionNone, CompressionNone},
	} {
		cfg := DefaultLogConfig()
		cfg.CompressionType = tc.topic
		l := openTestLog(t, OS, t.TempDir(), cfg, true)
		in := BuildBatch(records(5, "v", 1000), BatchOptions{Compression: tc.in, Producer: &BatchProducer{ID: 9, Epoch: 0, BaseSequence: 0}})
		info, err := l.AppendAsLeader(in, 2, 2000)
		require.NoError(t, err, tc.topic)
		assert.Equal(t, int64(4), info.LastOffset)
		got, err := l.Read(0, 1<<20, l.LogEndOffset(), true)
		require.NoError(t, err)
		h, err := ValidateBatch(got)
		require.NoError(t, err, "the stored batch is valid (CRC)")
		assert.Equal(t, tc.want, h.Compression(), "topic compression.type %q", tc.topic)
		assert.Equal(t, int64(9), h.ProducerID)
		assert.Equal(t, int32(2), h.PartitionLeaderEpoch)
		recs, err := DecodeRecords(got)
		require.NoError(t, err)
		require.Len(t, recs, 5)
		assert.Equal(t, []byte("v-4"), recs[4].Value)
		assert.Equal(t, int64(4), recs[4].Offset)
		assert.Equal(t, int64(1004), recs[4].TimestampMs)

		// A retry of the same batch is still recognised as a duplicate.
		again := BuildBatch(records(5, "v", 1000), BatchOptions{Compression: tc.in, Producer: &BatchProducer{ID: 9, Epoch: 0, BaseSequence: 0}})
		dup, err := l.AppendAsLeader(again, 2, 2000)
		require.NoError(t, err)
		assert.True(t, dup.Duplicate)
		assert.Equal(t, int64(5), l.LogEndOffset())
		require.NoError(t, l.Close())
	}
}

// TestLogStartKeepsProducers: advancing the log start over a producer's
// every batch (DeleteRecords, a follower following its leader, retention)
// keeps its state, as Kafka does since KIP-360: a retry of its last batch
// is still a duplicate and its next batch still in sequence.
func TestLogStartKeepsProducers(t *testing.T) {
	cfg := testConfig()
	l := openTestLog(t, OS, t.TempDir(), cfg, true)
	defer l.Close()
	batch := func(seq int32, prefix string) []byte {
		return BuildBatch(records(2, prefix, 1000), BatchOptions{Producer: &BatchProducer{ID: 9, Epoch: 0, BaseSequence: seq}})
	}
	_, err := l.AppendAsLeader(batch(0, "a"), 0, 2000)
	require.NoError(t, err)
	_, err = l.AppendAsLeader(BuildBatch(records(2, "other", 1000), BatchOptions{}), 0, 2000)
	require.NoError(t, err)
	l.UpdateHighWatermark(l.LogEndOffset())
	require.NoError(t, l.IncrementLogStartOffset(l.HighWatermark()))

	dup, err := l.AppendAsLeader(batch(0, "a"), 0, 2000)
	require.NoError(t, err)
	assert.True(t, dup.Duplicate, "the retry is not written again")
	assert.Equal(t, int64(4), l.LogEndOffset())
	next, err := l.AppendAsLeader(batch(2, "b"), 0, 2000)
	require.NoError(t, err, "the next batch is in sequence")
	assert.Equal(t, int64(4), next.FirstOffset)
}
