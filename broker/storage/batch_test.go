package storage

import (
	"encoding/binary"
	"hash/crc32"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCompressedBatchesDecode(t *testing.T) {
	recs := records(50, "compressible-value-compressible-value", 1_700_000_000_000)
	for _, c := range []Compression{CompressionGzip, CompressionSnappy, CompressionLZ4, CompressionZstd} {
		b := BuildBatch(recs, BatchOptions{BaseOffset: 5, Compression: c})
		h, err := ValidateBatch(b)
		require.NoError(t, err)
		assert.Equal(t, c, h.Compression())
		assert.Less(t, len(b), len(BuildBatch(recs, BatchOptions{})), "codec %d compresses", c)
		got, err := DecodeRecords(b)
		require.NoError(t, err, "codec %d", c)
		require.Len(t, got, len(recs))
		assert.Equal(t, int64(54), got[49].Offset)
		assert.Equal(t, recs[49].Value, got[49].Value)
	}
}

func TestXerialSnappyDecodes(t *testing.T) {
	body := []byte("hello hello hello hello")
	framed := append([]byte{}, xerialHeader...)
	framed = append(framed, 0, 0, 0, 1, 0, 0, 0, 1)
	raw, err := compress(CompressionSnappy, body)
	require.NoError(t, err)
	framed = binary.BigEndian.AppendUint32(framed, uint32(len(raw)))
	framed = append(framed, raw...)
	out, err := decodeSnappy(framed)
	require.NoError(t, err)
	assert.Equal(t, body, out)
}

func TestForEachBatchReportsTrailingPartialBatch(t *testing.T) {
	a := BuildBatch(records(2, "a", 1), BatchOptions{BaseOffset: 0})
	b := BuildBatch(records(2, "b", 1), BatchOptions{BaseOffset: 2})
	data := append(append([]byte{}, a...), b[:len(b)-3]...)
	n := 0
	err := ForEachBatch(data, func(BatchHeader, []byte) error { n++; return nil })
	assert.ErrorIs(t, err, ErrIncompleteBatch)
	assert.Equal(t, 1, n)
	bad := append([]byte{}, a...)
	bad[offMagic] = 1
	assert.ErrorIs(t, ForEachBatch(bad, func(BatchHeader, []byte) error { return nil }), ErrUnsupportedMagic)
}

func TestLeaderRejectsInconsistentBatches(t *testing.T) {
	l := openTestLog(t, OS, t.TempDir(), testConfig(), true)
	defer l.Close()
	b := BuildBatch(records(3, "x", 1), BatchOptions{})
	binary.BigEndian.PutUint32(b[offLastOffsetDelta:], 5)
	binary.BigEndian.PutUint32(b[offCRC:], crc32.Checksum(b[offAttributes:], castagnoli))
	_, err := l.AppendAsLeader(b, 0, 1)
	assert.ErrorIs(t, err, ErrInvalidRecord)
	_, err = l.AppendAsLeader(nil, 0, 1)
	assert.ErrorIs(t, err, ErrInvalidRecord)
	assert.Equal(t, int64(0), l.LogEndOffset())
}
