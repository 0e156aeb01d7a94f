package storage

import (
	"encoding/binary"
	"fmt"
	"sort"
	"sync/atomic"
)

const (
	offsetIndexEntrySize = 8
	timeIndexEntrySize   = 12
)

// offsetEntry maps a relative offset to the byte position of the batch that
// holds it (Kafka's OffsetIndex entry: the batch's last offset and its start
// position).
type offsetEntry struct {
	relOffset int32
	position  int32
}

// timeEntry is a TimeIndex entry: the largest timestamp so far in the segment
// and the offset of the batch that holds it, relative to the segment base.
type timeEntry struct {
	timestamp int64
	relOffset int32
}

// segmentIndex holds a segment's offset and time index in memory and
// mirrors every entry to its file. Unlike Kafka it neither preallocates nor
// mmaps the files: a file is always exactly its entries, which is the format
// Kafka leaves after trimming an inactive index.
type segmentIndex struct {
	fs         FS
	offPath    string
	timePath   string
	offFile    File
	timeFile   File
	offsets    []offsetEntry
	times      []timeEntry
	maxEntries int
	// dirty: entries written since the last fsync (read by background
	// flushes without the log's lock).
	dirty atomic.Bool
	buf   [timeIndexEntrySize]byte
}

// parseOffsetIndex parses an offset index file. It fails with
// ErrCorruptCheckpoint when the file fails the sanity check (size a multiple
// of 8, relative offsets and positions non-negative and increasing).
func parseOffsetIndex(b []byte) ([]offsetEntry, error) {
	if len(b)%offsetIndexEntrySize != 0 {
		return nil, fmt.Errorf("%w: offset index size %d not a multiple of %d", ErrCorruptCheckpoint, len(b), offsetIndexEntrySize)
	}
	entries := make([]offsetEntry, 0, len(b)/offsetIndexEntrySize)
	for i := 0; i < len(b); i += offsetIndexEntrySize {
		e := offsetEntry{
			relOffset: int32(binary.BigEndian.Uint32(b[i:])),
			position:  int32(binary.BigEndian.Uint32(b[i+4:])),
		}
		if e.relOffset < 0 || e.position < 0 {
			return nil, fmt.Errorf("%w: negative offset index entry", ErrCorruptCheckpoint)
		}
		if n := len(entries); n > 0 && (e.relOffset <= entries[n-1].relOffset || e.position <= entries[n-1].position) {
			return nil, fmt.Errorf("%w: offset index entries not increasing", ErrCorruptCheckpoint)
		}
		entries = append(entries, e)
	}
	return entries, nil
}

func parseTimeIndex(b []byte) ([]timeEntry, error) {
	if len(b)%timeIndexEntrySize != 0 {
		return nil, fmt.Errorf("%w: time index size %d not a multiple of %d", ErrCorruptCheckpoint, len(b), timeIndexEntrySize)
	}
	entries := make([]timeEntry, 0, len(b)/timeIndexEntrySize)
	for i := 0; i < len(b); i += timeIndexEntrySize {
		e := timeEntry{
			timestamp: int64(binary.BigEndian.Uint64(b[i:])),
			relOffset: int32(binary.BigEndian.Uint32(b[i+8:])),
		}
		if e.relOffset < 0 {
			return nil, fmt.Errorf("%w: negative time index offset", ErrCorruptCheckpoint)
		}
		if n := len(entries); n > 0 && (e.timestamp <= entries[n-1].timestamp || e.relOffset < entries[n-1].relOffset) {
			return nil, fmt.Errorf("%w: time index entries not increasing", ErrCorruptCheckpoint)
		}
		entries = append(entries, e)
	}
	return entries, nil
}

// lookupOffset returns the position of the last indexed batch whose last
// offset is <= rel, or 0.
func (x *segmentIndex) lookupOffset(rel int32) int32 {
	i := sort.Search(len(x.offsets), func(i int) bool { return x.offsets[i].relOffset > rel })
	if i == 0 {
		return 0
	}
	return x.offsets[i-1].position
}

// lookupTime returns the relative offset of the last entry whose timestamp
// is <= ts, and false when every entry is later.
func (x *segmentIndex) lookupTime(ts int64) (int32, bool) {
	i := sort.Search(len(x.times), func(i int) bool { return x.times[i].timestamp > ts })
	if i == 0 {
		return 0, false
	}
	return x.times[i-1].relOffset, true
}

func (x *segmentIndex) full() bool {
	return x.maxEntries > 0 && len(x.offsets) >= x.maxEntries
}

func (x *segmentIndex) appendOffset(rel, position int32) error {
	if n := len(x.offsets); n > 0 && (rel <= x.offsets[n-1].relOffset || position <= x.offsets[n-1].position) {
		return nil
	}
	binary.BigEndian.PutUint32(x.buf[0:], uint32(rel))
	binary.BigEndian.PutUint32(x.buf[4:], uint32(position))
	if _, err := x.offFile.Write(x.buf[:offsetIndexEntrySize]); err != nil {
		return fmt.Errorf("append to %s: %w", x.offPath, err)
	}
	x.offsets = append(x.offsets, offsetEntry{relOffset: rel, position: position})
	x.dirty.Store(true)
	return nil
}

// maybeAppendTime appends a time entry when ts is larger than the last one.
func (x *segmentIndex) maybeAppendTime(ts int64, rel int32) error {
	if n := len(x.times); n > 0 && ts <= x.times[n-1].timestamp {
		return nil
	}
	if n := len(x.times); n > 0 && rel < x.times[n-1].relOffset {
		return nil
	}
	binary.BigEndian.PutUint64(x.buf[0:], uint64(ts))
	binary.BigEndian.PutUint32(x.buf[8:], uint32(rel))
	if _, err := x.timeFile.Write(x.buf[:timeIndexEntrySize]); err != nil {
		return fmt.Errorf("append to %s: %w", x.timePath, err)
	}
	x.times = append(x.times, timeEntry{timestamp: ts, relOffset: rel})
	x.dirty.Store(true)
	return nil
}

// truncateTo drops entries for relative offsets >= rel and positions >=
// position, in memory and on disk.
func (x *segmentIndex) truncateTo(rel int32, position int32) error {
	n := sort.Search(len(x.offsets), func(i int) bool {
		return x.offsets[i].relOffset >= rel || x.offsets[i].position >= position
	})
	x.offsets = x.offsets[:n]
	m := sort.Search(len(x.times), func(i int) bool { return x.times[i].relOffset >= rel })
	x.times = x.times[:m]
	return x.syncLengths()
}

// syncLengths truncates the files to the in-memory entries and positions
// their write offsets at the end.
func (x *segmentIndex) syncLengths() error {
	x.dirty.Store(true)
	offSize := int64(len(x.offsets) * offsetIndexEntrySize)
	if err := x.offFile.Truncate(offSize); err != nil {
		return fmt.Errorf("truncate %s: %w", x.offPath, err)
	}
	if _, err := x.offFile.Seek(offSize, 0); err != nil {
		return fmt.Errorf("seek %s: %w", x.offPath, err)
	}
	timeSize := int64(len(x.times) * timeIndexEntrySize)
	if err := x.timeFile.Truncate(timeSize); err != nil {
		return fmt.Errorf("truncate %s: %w", x.timePath, err)
	}
	if _, err := x.timeFile.Seek(timeSize, 0); err != nil {
		return fmt.Errorf("seek %s: %w", x.timePath, err)
	}
	return nil
}

// rewrite writes every in-memory entry to fresh files (after a rebuild).
func (x *segmentIndex) rewrite() error {
	ob := make([]byte, 0, len(x.offsets)*offsetIndexEntrySize)
	for _, e := range x.offsets {
		ob = binary.BigEndian.AppendUint32(ob, uint32(e.relOffset))
		ob = binary.BigEndian.AppendUint32(ob, uint32(e.position))
	}
	tb := make([]byte, 0, len(x.times)*timeIndexEntrySize)
	for _, e := range x.times {
		tb = binary.BigEndian.AppendUint64(tb, uint64(e.timestamp))
		tb = binary.BigEndian.AppendUint32(tb, uint32(e.relOffset))
	}
	x.dirty.Store(true)
	if err := rewriteFile(x.offFile, x.offPath, ob); err != nil {
		return err
	}
	return rewriteFile(x.timeFile, x.timePath, tb)
}

func rewriteFile(f File, path string, b []byte) error {
	if err := f.Truncate(0); err != nil {
		return fmt.Errorf("truncate %s: %w", path, err)
	}
	if _, err := f.Seek(0, 0); err != nil {
		return fmt.Errorf("seek %s: %w", path, err)
	}
	if _, err := f.Write(b); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// sync fsyncs both files when entries changed since the last sync.
func (x *segmentIndex) sync() error {
	if !x.dirty.Swap(false) {
		return nil
	}
	if err := x.offFile.Sync(); err != nil {
		x.dirty.Store(true)
		return fmt.Errorf("fsync %s: %w", x.offPath, err)
	}
	if err := x.timeFile.Sync(); err != nil {
		x.dirty.Store(true)
		return fmt.Errorf("fsync %s: %w", x.timePath, err)
	}
	return nil
}

func (x *segmentIndex) close() error {
	err1 := x.offFile.Close()
	err2 := x.timeFile.Close()
	if err1 != nil {
		return fmt.Errorf("close %s: %w", x.offPath, err1)
	}
	if err2 != nil {
		return fmt.Errorf("close %s: %w", x.timePath, err2)
	}
	return nil
}
