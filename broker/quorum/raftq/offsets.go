package raftq

import "fmt"

// entryOffsets maps raft indexes to metadata-log offsets. Every raft entry
// is stored as exactly one record batch, so entry first+i occupies the
// offsets [end(first+i-1), ends[i]). The offset after the entry before
// first (the snapshot's end offset, or 0) is startOffset.
type entryOffsets struct {
	first       uint64  // raft index of ends[0]
	startOffset int64   // first offset of entry first
	ends        []int64 // ends[i]: offset after the last record of entry first+i
}

// reset starts the mapping after a snapshot that covers raft indexes up to
// index and offsets below endOffset.
func (m *entryOffsets) reset(index uint64, endOffset int64) {
	m.first = index + 1
	m.startOffset = endOffset
	m.ends = m.ends[:0]
}

// lastIndex is the raft index of the newest entry (first-1 when empty).
func (m *entryOffsets) lastIndex() uint64 { return m.first + uint64(len(m.ends)) - 1 }

// endOffset is the offset after entry index: its log end offset. The entry
// just before first maps to startOffset; ok is false outside the mapping.
func (m *entryOffsets) endOffset(index uint64) (int64, bool) {
	switch {
	case index+1 == m.first:
		return m.startOffset, true
	case index < m.first || index > m.lastIndex():
		return 0, false
	default:
		return m.ends[index-m.first], true
	}
}

// logEndOffset is the offset after the newest entry.
func (m *entryOffsets) logEndOffset() int64 {
	if len(m.ends) == 0 {
		return m.startOffset
	}
	return m.ends[len(m.ends)-1]
}

// add records that the next entry ends before end.
func (m *entryOffsets) add(end int64) error {
	if end <= m.logEndOffset() {
		return fmt.Errorf("entry %d would end at offset %d, not after %d", m.lastIndex()+1, end, m.logEndOffset())
	}
	m.ends = append(m.ends, end)
	return nil
}

// truncateFrom drops entry index and every later one.
func (m *entryOffsets) truncateFrom(index uint64) {
	if index < m.first {
		m.ends = m.ends[:0]
		return
	}
	if index <= m.lastIndex() {
		m.ends = m.ends[:index-m.first]
	}
}

// compactTo drops every entry up to and including index.
func (m *entryOffsets) compactTo(index uint64) {
	if index < m.first || index > m.lastIndex() {
		return
	}
	end := m.ends[index-m.first]
	m.ends = append(m.ends[:0:0], m.ends[index-m.first+1:]...)
	m.first = index + 1
	m.startOffset = end
}
