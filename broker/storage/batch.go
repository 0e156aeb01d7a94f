package storage

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
)

// Record batch v2 layout (byte offsets, big-endian), as Kafka's
// DefaultRecordBatch defines it.
const (
	offBaseOffset      = 0
	offBatchLength     = 8
	offLeaderEpoch     = 12
	offMagic           = 16
	offCRC             = 17
	offAttributes      = 21
	offLastOffsetDelta = 23
	offBaseTimestamp   = 27
	offMaxTimestamp    = 35
	offProducerID      = 43
	offProducerEpoch   = 51
	offBaseSequence    = 53
	offRecordCount     = 57

	// BatchHeaderSize is the size of a v2 batch with no records.
	BatchHeaderSize = 61
	// LogOverhead is the part of a batch not counted in batchLength
	// (baseOffset and batchLength).
	LogOverhead = 12
	// minBatchPrefix is how many bytes are needed to know a batch's size and
	// magic.
	minBatchPrefix = 17
	// Magic is the only record batch format this engine reads and writes.
	Magic = 2
)

// Attribute bits of a v2 batch.
const (
	attrCompressionMask = 0x07
	attrLogAppendTime   = 0x08
	attrTransactional   = 0x10
	attrControl         = 0x20
	attrDeleteHorizon   = 0x40
)

// Compression is a batch's codec (attribute bits 0-2).
type Compression int8

const (
	CompressionNone   Compression = 0
	CompressionGzip   Compression = 1
	CompressionSnappy Compression = 2
	CompressionLZ4    Compression = 3
	CompressionZstd   Compression = 4
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// NoTimestamp marks an absent timestamp.
const NoTimestamp = -1

// BatchHeader is the fixed 61-byte head of a v2 record batch.
type BatchHeader struct {
	BaseOffset           int64
	BatchLength          int32
	PartitionLeaderEpoch int32
	Magic                int8
	CRC                  uint32
	Attributes           int16
	LastOffsetDelta      int32
	BaseTimestamp        int64
	MaxTimestamp         int64
	ProducerID           int64
	ProducerEpoch        int16
	BaseSequence         int32
	RecordCount          int32
}

// Size is the batch's size in bytes, LogOverhead included.
func (h BatchHeader) Size() int { return int(h.BatchLength) + LogOverhead }

// LastOffset is the offset of the batch's last record.
func (h BatchHeader) LastOffset() int64 { return h.BaseOffset + int64(h.LastOffsetDelta) }

// NextOffset is the offset after the batch.
func (h BatchHeader) NextOffset() int64 { return h.LastOffset() + 1 }

// Compression is the batch's codec.
func (h BatchHeader) Compression() Compression {
	return Compression(h.Attributes & attrCompressionMask)
}

// IsTransactional reports the transactional attribute.
func (h BatchHeader) IsTransactional() bool { return h.Attributes&attrTransactional != 0 }

// IsControl reports the control attribute.
func (h BatchHeader) IsControl() bool { return h.Attributes&attrControl != 0 }

// HasLogAppendTime reports whether the batch's timestamps are the broker's
// append time.
func (h BatchHeader) HasLogAppendTime() bool { return h.Attributes&attrLogAppendTime != 0 }

// HasProducerID reports whether the batch carries an idempotent producer id.
func (h BatchHeader) HasProducerID() bool { return h.ProducerID >= 0 }

// LastSequence is the sequence number of the batch's last record, wrapping
// from MaxInt32 to 0 as Kafka does; -1 without a producer.
func (h BatchHeader) LastSequence() int32 {
	if h.BaseSequence < 0 {
		return -1
	}
	return incrementSequence(h.BaseSequence, h.LastOffsetDelta)
}

func incrementSequence(seq, delta int32) int32 {
	if seq > math.MaxInt32-delta {
		return delta - (math.MaxInt32 - seq) - 1
	}
	return seq + delta
}

// ParseBatchHeader decodes the header at the start of b. It checks that b
// holds at least the whole header and that the magic is 2, and that the
// declared length is plausible; it does not check the CRC or that b holds the
// whole batch (see ValidateBatch).
func ParseBatchHeader(b []byte) (BatchHeader, error) {
	var h BatchHeader
	if len(b) < minBatchPrefix {
		return h, fmt.Errorf("%w: %d bytes, need %d", ErrIncompleteBatch, len(b), minBatchPrefix)
	}
	h.BaseOffset = int64(binary.BigEndian.Uint64(b[offBaseOffset:]))
	h.BatchLength = int32(binary.BigEndian.Uint32(b[offBatchLength:]))
	h.PartitionLeaderEpoch = int32(binary.BigEndian.Uint32(b[offLeaderEpoch:]))
	h.Magic = int8(b[offMagic])
	if h.BatchLength < BatchHeaderSize-LogOverhead {
		return h, fmt.Errorf("%w: batch length %d below minimum %d", ErrCorruptBatch, h.BatchLength, BatchHeaderSize-LogOverhead)
	}
	if h.Magic != Magic {
		return h, fmt.Errorf("%w: magic %d", ErrUnsupportedMagic, h.Magic)
	}
	if len(b) < BatchHeaderSize {
		return h, fmt.Errorf("%w: %d bytes, need %d", ErrIncompleteBatch, len(b), BatchHeaderSize)
	}
	h.CRC = binary.BigEndian.Uint32(b[offCRC:])
	h.Attributes = int16(binary.BigEndian.Uint16(b[offAttributes:]))
	h.LastOffsetDelta = int32(binary.BigEndian.Uint32(b[offLastOffsetDelta:]))
	h.BaseTimestamp = int64(binary.BigEndian.Uint64(b[offBaseTimestamp:]))
	h.MaxTimestamp = int64(binary.BigEndian.Uint64(b[offMaxTimestamp:]))
	h.ProducerID = int64(binary.BigEndian.Uint64(b[offProducerID:]))
	h.ProducerEpoch = int16(binary.BigEndian.Uint16(b[offProducerEpoch:]))
	h.BaseSequence = int32(binary.BigEndian.Uint32(b[offBaseSequence:]))
	h.RecordCount = int32(binary.BigEndian.Uint32(b[offRecordCount:]))
	return h, nil
}

// ValidateBatch checks one whole batch: b must be exactly the batch. It
// checks sizes, magic, CRC-32C and header consistency (non-negative offset
// delta and record count). It does not look at the base offset, which a
// client leaves to the broker.
func ValidateBatch(b []byte) (BatchHeader, error) {
	h, err := ParseBatchHeader(b)
	if err != nil {
		return h, err
	}
	if h.Size() != len(b) {
		if h.Size() > len(b) {
			return h, fmt.Errorf("%w: batch of %d bytes, have %d", ErrIncompleteBatch, h.Size(), len(b))
		}
		return h, fmt.Errorf("%w: batch of %d bytes in %d", ErrCorruptBatch, h.Size(), len(b))
	}
	if crc := crc32.Checksum(b[offAttributes:], castagnoli); crc != h.CRC {
		return h, fmt.Errorf("%w: crc %08x, computed %08x", ErrCorruptBatch, h.CRC, crc)
	}
	if h.LastOffsetDelta < 0 || h.RecordCount < 0 {
		return h, fmt.Errorf("%w: lastOffsetDelta %d, record count %d", ErrCorruptBatch, h.LastOffsetDelta, h.RecordCount)
	}
	return h, nil
}

// ForEachBatch calls fn for every whole batch in b, in order, with its
// parsed header and its bytes (a sub-slice of b). It does not check CRCs.
// Bytes that end inside a batch yield an error wrapping ErrIncompleteBatch
// after the whole batches were visited; a malformed header yields
// ErrCorruptBatch or ErrUnsupportedMagic. An error from fn stops the
// iteration and is returned.
func ForEachBatch(b []byte, fn func(h BatchHeader, batch []byte) error) error {
	for pos := 0; pos < len(b); {
		h, err := ParseBatchHeader(b[pos:])
		if err != nil {
			return fmt.Errorf("batch at byte %d: %w", pos, err)
		}
		end := pos + h.Size()
		if end > len(b) || end < pos {
			return fmt.Errorf("batch at byte %d: %w: %d bytes declared, %d left", pos, ErrIncompleteBatch, h.Size(), len(b)-pos)
		}
		if err := fn(h, b[pos:end]); err != nil {
			return err
		}
		pos = end
	}
	return nil
}

// setBaseOffset rewrites the base offset of the batch at b; the CRC does not
// cover it.
func setBaseOffset(b []byte, off int64) {
	binary.BigEndian.PutUint64(b[offBaseOffset:], uint64(off))
}

// setPartitionLeaderEpoch rewrites the partition leader epoch; the CRC does
// not cover it.
func setPartitionLeaderEpoch(b []byte, epoch int32) {
	binary.BigEndian.PutUint32(b[offLeaderEpoch:], uint32(epoch))
}

// setLogAppendTime sets the LogAppendTime attribute and the max timestamp and
// recomputes the CRC.
func setLogAppendTime(b []byte, ts int64) {
	attrs := binary.BigEndian.Uint16(b[offAttributes:])
	binary.BigEndian.PutUint16(b[offAttributes:], attrs|attrLogAppendTime)
	binary.BigEndian.PutUint64(b[offMaxTimestamp:], uint64(ts))
	binary.BigEndian.PutUint32(b[offCRC:], crc32.Checksum(b[offAttributes:], castagnoli))
}
