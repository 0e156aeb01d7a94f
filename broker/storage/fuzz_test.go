package storage

import (
	"encoding/binary"
	"hash/crc32"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func seedBatches() [][]byte {
	recs := records(3, "seed", 1000)
	recs[0].Headers = []RecordHeader{{Key: "k", Value: []byte("v")}}
	return [][]byte{
		BuildBatch(recs, BatchOptions{}),
		BuildBatch(recs, BatchOptions{BaseOffset: 9, Producer: &BatchProducer{ID: 1, Epoch: 2, BaseSequence: 3}}),
		BuildBatch(recs, BatchOptions{Compression: CompressionGzip}),
		BuildBatch(recs, BatchOptions{Compression: CompressionLZ4}),
		BuildBatch(recs, BatchOptions{Compression: CompressionZstd}),
		BuildBatch(recs, BatchOptions{Compression: CompressionSnappy}),
		BuildBatch(nil, BatchOptions{}),
	}
}

// FuzzBatchDecoding: arbitrary bytes as a produce request's records or a
// fetched chunk never panic the batch parser or the record decoder.
func FuzzBatchDecoding(f *testing.F) {
	for _, b := range seedBatches() {
		f.Add(b)
	}
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		_ = ForEachBatch(data, func(h BatchHeader, batch []byte) error {
			if _, err := ValidateBatch(batch); err != nil {
				return nil
			}
			recs, err := DecodeRecords(batch)
			if err == nil && h.Compression() == CompressionNone {
				assert.LessOrEqual(t, len(recs), len(batch))
			}
			return nil
		})
	})
}

// FuzzRecordDecoding wraps fuzzed record bytes in a batch with a correct
// CRC, so the fuzzer reaches the record decoder and the decompressors.
func FuzzRecordDecoding(f *testing.F) {
	for _, b := range seedBatches() {
		h, _ := ParseBatchHeader(b)
		f.Add(b[BatchHeaderSize:], uint16(h.Attributes), h.RecordCount, h.LastOffsetDelta)
	}
	f.Fuzz(func(t *testing.T, body []byte, attrs uint16, count int32, lastDelta int32) {
		b := make([]byte, BatchHeaderSize, BatchHeaderSize+len(body))
		b = append(b, body...)
		binary.BigEndian.PutUint32(b[offBatchLength:], uint32(len(b)-LogOverhead))
		b[offMagic] = Magic
		binary.BigEndian.PutUint16(b[offAttributes:], attrs)
		binary.BigEndian.PutUint32(b[offLastOffsetDelta:], uint32(lastDelta))
		binary.BigEndian.PutUint32(b[offRecordCount:], uint32(count))
		binary.BigEndian.PutUint32(b[offCRC:], crc32.Checksum(b[offAttributes:], castagnoli))
		recs, err := DecodeRecords(b)
		if err == nil {
			assert.Len(t, recs, int(count))
		}
		if h, err := ParseBatchHeader(b); err == nil && h.Compression() == CompressionNone {
			_ = checkUncompressedRecords(h, b)
		}
	})
}

// FuzzCheckpointParsing: checkpoint, snapshot, marker and meta.properties
// parsers never panic, and what they accept round-trips.
func FuzzCheckpointParsing(f *testing.F) {
	f.Add([]byte("0\n2\na 0 5\nb 1 7\n"))
	f.Add([]byte("0\n1\n3 17\n"))
	f.Add([]byte(`{"version":0,"brokerEpoch":5}`))
	f.Add([]byte("version=1\ncluster.id=x\nnode.id=1\n"))
	f.Add(encodeProducerSnapshot(&producerState{producers: map[int64]*producerEntry{1: {batches: []batchMeta{{lastSeq: 4, lastOffset: 9}}}}}))
	f.Fuzz(func(t *testing.T, data []byte) {
		if m, err := ParseOffsetCheckpoint(data); err == nil {
			dir := t.TempDir()
			if err := WriteOffsetCheckpoint(OS, filepath.Join(dir, "cp"), m); err == nil {
				back, err := ReadOffsetCheckpoint(OS, filepath.Join(dir, "cp"))
				require.NoError(t, err)
				assert.Equal(t, len(m), len(back))
			}
		}
		if e, err := ParseLeaderEpochCheckpoint(data); err == nil {
			back, err := ParseLeaderEpochCheckpoint(formatLeaderEpochCheckpoint(e))
			require.NoError(t, err)
			assert.Equal(t, len(e), len(back))
		}
		_, _ = ReadCleanShutdownMarker(data)
		_, _ = ParseMetaProperties(data)
		if ps, err := decodeProducerSnapshot(data); err == nil {
			_, err := decodeProducerSnapshot(encodeProducerSnapshot(ps))
			assert.NoError(t, err)
		}
	})
}

// FuzzSegmentRecovery writes valid batches followed by fuzzed bytes (and a
// fuzzed index) as a segment, recovers it as after a crash, and checks that
// recovery never panics, keeps at least the valid prefix, and leaves a log
// that reads back as whole valid batches.
func FuzzSegmentRecovery(f *testing.F) {
	f.Add([]byte("garbage"), []byte{1, 2, 3}, uint8(2))
	f.Add(seedBatches()[2], []byte{}, uint8(0))
	f.Add(make([]byte, 200), make([]byte, 16), uint8(3))
	f.Fuzz(func(t *testing.T, tail []byte, index []byte, prefix uint8) {
		dir := t.TempDir()
		pdir := filepath.Join(dir, testTP.DirName())
		require.NoError(t, os.MkdirAll(pdir, 0o755))
		var data []byte
		var next int64
		for i := 0; i < int(prefix%4); i++ {
			b := BuildBatch(records(2, "p", 1), BatchOptions{BaseOffset: next})
			data = append(data, b...)
			next += 2
		}
		data = append(data, tail...)
		require.NoError(t, os.WriteFile(offsetFileName(pdir, 0, logSuffix), data, 0o644))
		require.NoError(t, os.WriteFile(offsetFileName(pdir, 0, indexSuffix), index, 0o644))
		m := newTestManager(t, OS, []string{dir}, nil)
		_, err := m.Load()
		require.NoError(t, err)
		l, ok := m.GetLog(testTP)
		require.True(t, ok)
		assert.GreaterOrEqual(t, l.LogEndOffset(), next)
		for off := int64(0); off < l.LogEndOffset(); {
			b, err := l.Read(off, 1<<20, l.LogEndOffset(), true)
			require.NoError(t, err)
			require.NotEmpty(t, b, "offset %d below LEO %d", off, l.LogEndOffset())
			require.NoError(t, ForEachBatch(b, func(h BatchHeader, batch []byte) error {
				_, err := ValidateBatch(batch)
				off = h.NextOffset()
				return err
			}))
		}
		require.NoError(t, m.Shutdown(1))
	})
}

// FuzzDumpSegment: the offline reader of `broker dump-log` never panics and
// accounts for every byte: batches end where the next starts, and either the
// walk reaches the end or names the first unreadable byte.
func FuzzDumpSegment(f *testing.F) {
	f.Add(BuildBatch([]Record{{Value: []byte("a")}}, BatchOptions{}))
	f.Add(append(BuildBatch([]Record{{Value: []byte("a")}}, BatchOptions{}), 1, 2, 3))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		d := DumpSegment(b, true)
		var pos int64
		for _, bt := range d.Batches {
			if bt.Position != pos {
				t.Fatalf("batch at %d, want %d", bt.Position, pos)
			}
			pos += int64(bt.Header.Size())
		}
		if d.CorruptAt >= 0 && d.CorruptAt != pos || d.CorruptAt < 0 && pos != int64(len(b)) {
			t.Fatalf("walk ended at %d, corrupt at %d, len %d", pos, d.CorruptAt, len(b))
		}
		_ = DumpOffsetIndex(b, 0, &d)
		_ = DumpTimeIndex(b, 0, &d)
	})
}
