package storage

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// The offline inspection of Kafka's on-disk files that `broker dump-log`
// prints (like kafka-dump-log.sh). Every function here only reads the bytes
// it is given; none fails on bad input: what it cannot read is described in
// the result, with the byte position where it starts.

// DumpedBatch is one batch found in a segment file.
type DumpedBatch struct {
	Header   BatchHeader
	Position int64
	// CRCValid is false when the stored CRC-32C does not match the bytes.
	CRCValid     bool
	ComputedCRC  uint32
	Err          error    // why the batch is invalid (CRC, header), nil when valid
	Records      []Record // with deep iteration, when the batch is valid
	RecordsError error    // the records could not be decoded
}

// SegmentDump is what a .log file holds.
type SegmentDump struct {
	Batches []DumpedBatch
	// CorruptAt is the position of the first byte that is not part of a
	// readable batch (-1 when the file ends on a batch boundary); Corrupt
	// says why (a torn tail, a bad header).
	CorruptAt int64
	Corrupt   error
	Size      int64
}

// DumpSegment walks a segment's batches. A batch whose CRC does not match
// is reported and skipped by its declared length (the length is what the
// header says; when it runs past the file, the rest is a torn tail); a
// header that cannot be read ends the walk at its position.
func DumpSegment(b []byte, deep bool) SegmentDump {
	d := SegmentDump{CorruptAt: -1, Size: int64(len(b))}
	for pos := 0; pos < len(b); {
		h, err := ParseBatchHeader(b[pos:])
		if err != nil {
			d.CorruptAt, d.Corrupt = int64(pos), err
			return d
		}
		end := pos + h.Size()
		if end > len(b) || end < pos {
			d.CorruptAt = int64(pos)
			d.Corrupt = fmt.Errorf("%w: batch at byte %d declares %d bytes, %d left (a torn tail)", ErrIncompleteBatch, pos, h.Size(), len(b)-pos)
			return d
		}
		raw := b[pos:end]
		db := DumpedBatch{Header: h, Position: int64(pos)}
		db.ComputedCRC = crc32.Checksum(raw[offAttributes:], castagnoli)
		db.CRCValid = db.ComputedCRC == h.CRC
		if _, err := ValidateBatch(raw); err != nil {
			db.Err = err
		} else if deep {
			db.Records, db.RecordsError = DecodeRecords(raw)
		}
		d.Batches = append(d.Batches, db)
		pos = end
	}
	return d
}

// IndexEntry is one entry of an .index (Offset, Position) or .timeindex
// (Timestamp, Offset) file, with the absolute offset.
type IndexEntry struct {
	Offset    int64
	Position  int64
	Timestamp int64
}

// IndexDump is an index file's entries and what is wrong with them.
type IndexDump struct {
	Entries []IndexEntry
	// TrailingBytes is the number of bytes after the last whole entry.
	TrailingBytes int
	// Problems name the entries that are out of order or do not match the
	// log, one line each.
	Problems []string
}

// DumpOffsetIndex reads an .index file of the segment starting at base and,
// when the log's dump is given, checks each entry against it: an entry must
// point at the start of a batch that holds its offset.
func DumpOffsetIndex(b []byte, base int64, log *SegmentDump) IndexDump {
	var d IndexDump
	n := len(b) / offsetIndexEntrySize
	d.TrailingBytes = len(b) % offsetIndexEntrySize
	byPos := batchesByPosition(log)
	for i := 0; i < n; i++ {
		rel := int32(binary.BigEndian.Uint32(b[i*8:]))
		pos := int32(binary.BigEndian.Uint32(b[i*8+4:]))
		e := IndexEntry{Offset: base + int64(rel), Position: int64(pos)}
		if rel < 0 || pos < 0 {
			d.Problems = append(d.Problems, fmt.Sprintf("entry %d: negative offset %d or position %d", i, rel, pos))
		} else if len(d.Entries) > 0 {
			p := d.Entries[len(d.Entries)-1]
			if e.Offset <= p.Offset || e.Position <= p.Position {
				d.Problems = append(d.Problems, fmt.Sprintf("entry %d: offset %d position %d does not follow offset %d position %d", i, e.Offset, e.Position, p.Offset, p.Position))
			}
		}
		if log != nil && pos >= 0 {
			bt, ok := byPos[e.Position]
			switch {
			case !ok:
				d.Problems = append(d.Problems, fmt.Sprintf("entry %d: offset %d points at position %d, where no batch of the log starts", i, e.Offset, e.Position))
			case e.Offset < bt.Header.BaseOffset || e.Offset > bt.Header.LastOffset():
				d.Problems = append(d.Problems, fmt.Sprintf("entry %d: offset %d, but the batch at position %d holds offsets %d-%d", i, e.Offset, e.Position, bt.Header.BaseOffset, bt.Header.LastOffset()))
			}
		}
		d.Entries = append(d.Entries, e)
	}
	if d.TrailingBytes > 0 {
		d.Problems = append(d.Problems, fmt.Sprintf("%d bytes after the last whole entry (the file is not a multiple of %d bytes)", d.TrailingBytes, offsetIndexEntrySize))
	}
	return d
}

// DumpTimeIndex reads a .timeindex file and, with the log's dump, checks that
// each entry names an offset of a batch whose max timestamp is the entry's.
func DumpTimeIndex(b []byte, base int64, log *SegmentDump) IndexDump {
	var d IndexDump
	n := len(b) / timeIndexEntrySize
	d.TrailingBytes = len(b) % timeIndexEntrySize
	for i := 0; i < n; i++ {
		ts := int64(binary.BigEndian.Uint64(b[i*12:]))
		rel := int32(binary.BigEndian.Uint32(b[i*12+8:]))
		e := IndexEntry{Offset: base + int64(rel), Timestamp: ts}
		if rel < 0 {
			d.Problems = append(d.Problems, fmt.Sprintf("entry %d: negative offset %d", i, rel))
		} else if len(d.Entries) > 0 {
			p := d.Entries[len(d.Entries)-1]
			if e.Timestamp <= p.Timestamp || e.Offset < p.Offset {
				d.Problems = append(d.Problems, fmt.Sprintf("entry %d: timestamp %d offset %d does not follow timestamp %d offset %d", i, e.Timestamp, e.Offset, p.Timestamp, p.Offset))
			}
		}
		if log != nil && rel >= 0 {
			bt := batchHolding(log, e.Offset)
			switch {
			case bt == nil:
				d.Problems = append(d.Problems, fmt.Sprintf("entry %d: offset %d is in no batch of the log", i, e.Offset))
			case bt.Header.MaxTimestamp > ts:
				d.Problems = append(d.Problems, fmt.Sprintf("entry %d: timestamp %d, but the batch holding offset %d has max timestamp %d", i, ts, e.Offset, bt.Header.MaxTimestamp))
			}
		}
		d.Entries = append(d.Entries, e)
	}
	if d.TrailingBytes > 0 {
		d.Problems = append(d.Problems, fmt.Sprintf("%d bytes after the last whole entry (the file is not a multiple of %d bytes)", d.TrailingBytes, timeIndexEntrySize))
	}
	return d
}

func batchesByPosition(log *SegmentDump) map[int64]*DumpedBatch {
	if log == nil {
		return nil
	}
	m := make(map[int64]*DumpedBatch, len(log.Batches))
	for i := range log.Batches {
		m[log.Batches[i].Position] = &log.Batches[i]
	}
	return m
}

func batchHolding(log *SegmentDump, off int64) *DumpedBatch {
	for i := range log.Batches {
		h := log.Batches[i].Header
		if off >= h.BaseOffset && off <= h.LastOffset() {
			return &log.Batches[i]
		}
	}
	return nil
}
