package storage

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// RecordHeader is one header of a record.
type RecordHeader struct {
	Key   string
	Value []byte
}

// Record is one record of a batch. DecodeRecords fills Offset with the
// absolute offset; BuildBatch ignores it and numbers records in order.
type Record struct {
	Offset      int64
	TimestampMs int64
	Key         []byte // nil = null key
	Value       []byte // nil = null value
	Headers     []RecordHeader
}

// BatchProducer identifies an idempotent producer in a batch.
type BatchProducer struct {
	ID           int64
	Epoch        int16
	BaseSequence int32
}

// BatchOptions shape a batch built by BuildBatch. The zero value builds a
// plain batch at offset 0 without producer id (-1), epoch -1 and sequence -1.
type BatchOptions struct {
	BaseOffset           int64
	PartitionLeaderEpoch int32 // stamped by the log on append
	// Producer, when set, makes the batch idempotent.
	Producer      *BatchProducer
	Transactional bool
	Control       bool
	LogAppendTime bool
	// Compression of the records (default none).
	Compression Compression
}

// maxRecordsInBatch bounds how many records a decoder will accept in one
// batch, so that a hostile count cannot make it allocate without bound.
const maxRecordsInBatch = 1 << 24

// BuildBatch encodes records into an uncompressed v2 batch. Timestamps of
// records with TimestampMs < 0 are taken as 0 relative to the first record.
func BuildBatch(records []Record, opts BatchOptions) []byte {
	var baseTs, maxTs int64 = NoTimestamp, NoTimestamp
	if len(records) > 0 {
		baseTs = records[0].TimestampMs
		maxTs = baseTs
		for _, r := range records[1:] {
			if r.TimestampMs < baseTs {
				baseTs = r.TimestampMs
			}
			if r.TimestampMs > maxTs {
				maxTs = r.TimestampMs
			}
		}
	}
	b := make([]byte, BatchHeaderSize, BatchHeaderSize+estimateRecordsSize(records))
	for i, r := range records {
		b = appendRecord(b, r, r.TimestampMs-baseTs, int32(i))
	}
	codec := CompressionNone
	if opts.Compression != CompressionNone {
		if z, err := compress(opts.Compression, b[BatchHeaderSize:]); err == nil {
			b = append(b[:BatchHeaderSize], z...)
			codec = opts.Compression
		}
	}
	binary.BigEndian.PutUint64(b[offBaseOffset:], uint64(opts.BaseOffset))
	binary.BigEndian.PutUint32(b[offBatchLength:], uint32(len(b)-LogOverhead))
	binary.BigEndian.PutUint32(b[offLeaderEpoch:], uint32(opts.PartitionLeaderEpoch))
	b[offMagic] = Magic
	attrs := uint16(codec)
	if opts.LogAppendTime {
		attrs |= attrLogAppendTime
	}
	if opts.Transactional {
		attrs |= attrTransactional
	}
	if opts.Control {
		attrs |= attrControl
	}
	binary.BigEndian.PutUint16(b[offAttributes:], attrs)
	lastDelta := int32(len(records) - 1)
	if lastDelta < 0 {
		lastDelta = 0
	}
	binary.BigEndian.PutUint32(b[offLastOffsetDelta:], uint32(lastDelta))
	binary.BigEndian.PutUint64(b[offBaseTimestamp:], uint64(baseTs))
	binary.BigEndian.PutUint64(b[offMaxTimestamp:], uint64(maxTs))
	pid, epoch, seq := int64(-1), int16(-1), int32(-1)
	if opts.Producer != nil {
		pid, epoch, seq = opts.Producer.ID, opts.Producer.Epoch, opts.Producer.BaseSequence
	}
	binary.BigEndian.PutUint64(b[offProducerID:], uint64(pid))
	binary.BigEndian.PutUint16(b[offProducerEpoch:], uint16(epoch))
	binary.BigEndian.PutUint32(b[offBaseSequence:], uint32(seq))
	binary.BigEndian.PutUint32(b[offRecordCount:], uint32(len(records)))
	binary.BigEndian.PutUint32(b[offCRC:], crc32.Checksum(b[offAttributes:], castagnoli))
	return b
}

func estimateRecordsSize(records []Record) int {
	n := 0
	for _, r := range records {
		n += 24 + len(r.Key) + len(r.Value)
		for _, h := range r.Headers {
			n += 10 + len(h.Key) + len(h.Value)
		}
	}
	return n
}

func appendRecord(b []byte, r Record, tsDelta int64, offsetDelta int32) []byte {
	var body [binary.MaxVarintLen64 * 3]byte
	n := 0
	body[n] = 0 // attributes
	n++
	n += binary.PutVarint(body[n:], tsDelta)
	n += binary.PutVarint(body[n:], int64(offsetDelta))
	size := n + bytesFieldSize(r.Key) + bytesFieldSize(r.Value) + varintSize(int64(len(r.Headers)))
	for _, h := range r.Headers {
		size += varintSize(int64(len(h.Key))) + len(h.Key) + bytesFieldSize(h.Value)
	}
	b = binary.AppendVarint(b, int64(size))
	b = append(b, body[:n]...)
	b = appendBytesField(b, r.Key)
	b = appendBytesField(b, r.Value)
	b = binary.AppendVarint(b, int64(len(r.Headers)))
	for _, h := range r.Headers {
		b = binary.AppendVarint(b, int64(len(h.Key)))
		b = append(b, h.Key...)
		b = appendBytesField(b, h.Value)
	}
	return b
}

func varintSize(v int64) int {
	var tmp [binary.MaxVarintLen64]byte
	return binary.PutVarint(tmp[:], v)
}

func bytesFieldSize(v []byte) int {
	if v == nil {
		return 1
	}
	return varintSize(int64(len(v))) + len(v)
}

func appendBytesField(b, v []byte) []byte {
	if v == nil {
		return binary.AppendVarint(b, -1)
	}
	b = binary.AppendVarint(b, int64(len(v)))
	return append(b, v...)
}

// DecodeRecords validates a whole batch (see ValidateBatch), decompresses it
// if needed and returns its records with absolute offsets and timestamps
// (the batch's max timestamp for LogAppendTime batches).
func DecodeRecords(batch []byte) ([]Record, error) {
	h, err := ValidateBatch(batch)
	if err != nil {
		return nil, err
	}
	body, err := batchBody(h, batch)
	if err != nil {
		return nil, err
	}
	if h.RecordCount > maxRecordsInBatch || int(h.RecordCount) > len(body) {
		return nil, fmt.Errorf("%w: %d records in %d bytes", ErrInvalidRecord, h.RecordCount, len(body))
	}
	records := make([]Record, 0, h.RecordCount)
	d := recordDecoder{b: body}
	for i := int32(0); i < h.RecordCount; i++ {
		r, err := d.next(h)
		if err != nil {
			return nil, fmt.Errorf("record %d of batch at offset %d: %w", i, h.BaseOffset, err)
		}
		records = append(records, r)
	}
	if len(d.b) != 0 {
		return nil, fmt.Errorf("%w: %d trailing bytes after %d records", ErrInvalidRecord, len(d.b), h.RecordCount)
	}
	return records, nil
}

// batchBody returns the record bytes of a batch, decompressed.
func batchBody(h BatchHeader, batch []byte) ([]byte, error) {
	raw := batch[BatchHeaderSize:]
	if h.Compression() == CompressionNone {
		return raw, nil
	}
	out, err := decompress(h.Compression(), raw)
	if err != nil {
		return nil, fmt.Errorf("decompress batch at offset %d: %w", h.BaseOffset, err)
	}
	return out, nil
}

// maxDecompressedBytes bounds decompression output so that a small hostile
// batch cannot expand without limit.
const maxDecompressedBytes = 256 << 20

func decompress(c Compression, raw []byte) ([]byte, error) {
	var r io.Reader
	switch c {
	case CompressionGzip:
		zr, err := gzip.NewReader(bytes.NewReader(raw))
		if err != nil {
			return nil, fmt.Errorf("%w: gzip: %v", ErrCorruptBatch, err)
		}
		defer zr.Close()
		r = zr
	case CompressionSnappy:
		return decodeSnappy(raw)
	case CompressionLZ4:
		r = lz4.NewReader(bytes.NewReader(raw))
	case CompressionZstd:
		zr, err := zstd.NewReader(bytes.NewReader(raw), zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(maxDecompressedBytes))
		if err != nil {
			return nil, fmt.Errorf("%w: zstd: %v", ErrCorruptBatch, err)
		}
		defer zr.Close()
		r = zr
	default:
		return nil, fmt.Errorf("%w: codec %d", ErrUnsupportedCompression, c)
	}
	out, err := io.ReadAll(io.LimitReader(r, maxDecompressedBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCorruptBatch, err)
	}
	if len(out) > maxDecompressedBytes {
		return nil, fmt.Errorf("%w: decompresses beyond %d bytes", ErrRecordTooLarge, maxDecompressedBytes)
	}
	return out, nil
}

// compress encodes a batch body with codec; an unknown codec is an error
// and BuildBatch then leaves the batch uncompressed.
func compress(c Compression, body []byte) ([]byte, error) {
	var buf bytes.Buffer
	switch c {
	case CompressionGzip:
		w := gzip.NewWriter(&buf)
		if _, err := w.Write(body); err != nil {
			return nil, err
		}
		if err := w.Close(); err != nil {
			return nil, err
		}
	case CompressionSnappy:
		return s2.EncodeSnappy(nil, body), nil
	case CompressionLZ4:
		w := lz4.NewWriter(&buf)
		if _, err := w.Write(body); err != nil {
			return nil, err
		}
		if err := w.Close(); err != nil {
			return nil, err
		}
	case CompressionZstd:
		w, err := zstd.NewWriter(&buf, zstd.WithEncoderConcurrency(1))
		if err != nil {
			return nil, err
		}
		if _, err := w.Write(body); err != nil {
			return nil, err
		}
		if err := w.Close(); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("%w: codec %d", ErrUnsupportedCompression, c)
	}
	return buf.Bytes(), nil
}

// xerialHeader starts snappy data framed the way the Java client writes it.
var xerialHeader = []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0}

// decodeSnappy decodes raw snappy blocks and xerial-framed snappy.
func decodeSnappy(raw []byte) ([]byte, error) {
	if !bytes.HasPrefix(raw, xerialHeader) {
		return decodeSnappyBlock(nil, raw)
	}
	if len(raw) < 16 {
		return nil, fmt.Errorf("%w: short xerial snappy header", ErrCorruptBatch)
	}
	var out []byte
	for rest := raw[16:]; len(rest) > 0; {
		if len(rest) < 4 {
			return nil, fmt.Errorf("%w: torn xerial snappy chunk", ErrCorruptBatch)
		}
		n := binary.BigEndian.Uint32(rest)
		rest = rest[4:]
		if uint64(n) > uint64(len(rest)) {
			return nil, fmt.Errorf("%w: xerial snappy chunk of %d bytes, %d left", ErrCorruptBatch, n, len(rest))
		}
		var err error
		if out, err = decodeSnappyBlock(out, rest[:n]); err != nil {
			return nil, err
		}
		rest = rest[n:]
	}
	return out, nil
}

func decodeSnappyBlock(dst, block []byte) ([]byte, error) {
	n, err := s2.DecodedLen(block)
	if err != nil {
		return nil, fmt.Errorf("%w: snappy: %v", ErrCorruptBatch, err)
	}
	if n > maxDecompressedBytes-len(dst) {
		return nil, fmt.Errorf("%w: decompresses beyond %d bytes", ErrRecordTooLarge, maxDecompressedBytes)
	}
	buf := make([]byte, n)
	out, err := s2.Decode(buf, block)
	if err != nil {
		return nil, fmt.Errorf("%w: snappy: %v", ErrCorruptBatch, err)
	}
	return append(dst, out...), nil
}

// recordDecoder walks the records of a decompressed batch body.
type recordDecoder struct {
	b []byte
}

func (d *recordDecoder) varint() (int64, error) {
	v, n := binary.Varint(d.b)
	if n <= 0 {
		return 0, fmt.Errorf("%w: bad varint", ErrInvalidRecord)
	}
	d.b = d.b[n:]
	return v, nil
}

func (d *recordDecoder) bytesField() ([]byte, error) {
	n, err := d.varint()
	if err != nil {
		return nil, err
	}
	if n < 0 {
		return nil, nil
	}
	if n > int64(len(d.b)) {
		return nil, fmt.Errorf("%w: field of %d bytes, %d left", ErrInvalidRecord, n, len(d.b))
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v, nil
}

// next decodes one record; keys and values alias the batch body.
func (d *recordDecoder) next(h BatchHeader) (Record, error) {
	var r Record
	size, err := d.varint()
	if err != nil {
		return r, err
	}
	if size < 1 || size > int64(len(d.b)) {
		return r, fmt.Errorf("%w: record of %d bytes, %d left", ErrInvalidRecord, size, len(d.b))
	}
	outer := d.b[size:]
	d.b = d.b[:size]
	d.b = d.b[1:] // attributes, unused in v2
	tsDelta, err := d.varint()
	if err != nil {
		return r, err
	}
	offDelta, err := d.varint()
	if err != nil {
		return r, err
	}
	if offDelta < 0 || offDelta > int64(h.LastOffsetDelta) {
		return r, fmt.Errorf("%w: offset delta %d outside [0, %d]", ErrInvalidRecord, offDelta, h.LastOffsetDelta)
	}
	r.Offset = h.BaseOffset + offDelta
	if h.HasLogAppendTime() {
		r.TimestampMs = h.MaxTimestamp
	} else {
		r.TimestampMs = h.BaseTimestamp + tsDelta
	}
	if r.Key, err = d.bytesField(); err != nil {
		return r, err
	}
	if r.Value, err = d.bytesField(); err != nil {
		return r, err
	}
	nh, err := d.varint()
	if err != nil {
		return r, err
	}
	if nh < 0 || nh > int64(len(d.b)) {
		return r, fmt.Errorf("%w: %d headers in %d bytes", ErrInvalidRecord, nh, len(d.b))
	}
	if nh > 0 {
		r.Headers = make([]RecordHeader, 0, nh)
	}
	for i := int64(0); i < nh; i++ {
		k, err := d.bytesField()
		if err != nil {
			return r, err
		}
		if k == nil {
			return r, fmt.Errorf("%w: null header key", ErrInvalidRecord)
		}
		v, err := d.bytesField()
		if err != nil {
			return r, err
		}
		r.Headers = append(r.Headers, RecordHeader{Key: string(k), Value: v})
	}
	if len(d.b) != 0 {
		return r, fmt.Errorf("%w: %d bytes left inside record", ErrInvalidRecord, len(d.b))
	}
	d.b = outer
	return r, nil
}

// checkUncompressedRecords walks the records of an uncompressed batch
// without allocating and checks that they are RecordCount well-formed
// records whose offset deltas are 0, 1, 2, ... as a producer must send them.
func checkUncompressedRecords(h BatchHeader, batch []byte) error {
	body := batch[BatchHeaderSize:]
	if int64(h.RecordCount) != int64(h.LastOffsetDelta)+1 {
		return fmt.Errorf("%w: %d records, lastOffsetDelta %d", ErrInvalidRecord, h.RecordCount, h.LastOffsetDelta)
	}
	for i := int32(0); i < h.RecordCount; i++ {
		size, n := binary.Varint(body)
		if n <= 0 || size < 1 || size > int64(len(body)-n) {
			return fmt.Errorf("%w: record %d: bad size", ErrInvalidRecord, i)
		}
		rec := body[n : n+int(size)]
		body = body[n+int(size):]
		if len(rec) < 1 {
			return fmt.Errorf("%w: record %d: empty", ErrInvalidRecord, i)
		}
		rec = rec[1:]
		_, n = binary.Varint(rec)
		if n <= 0 {
			return fmt.Errorf("%w: record %d: bad timestamp delta", ErrInvalidRecord, i)
		}
		rec = rec[n:]
		off, n := binary.Varint(rec)
		if n <= 0 || off != int64(i) {
			return fmt.Errorf("%w: record %d: offset delta %d", ErrInvalidRecord, i, off)
		}
	}
	if len(body) != 0 {
		return fmt.Errorf("%w: %d trailing bytes", ErrInvalidRecord, len(body))
	}
	return nil
}
