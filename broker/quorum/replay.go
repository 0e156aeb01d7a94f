package quorum

import (
	"fmt"

	"github.com/faultline/faultline/broker/storage"
)

// readBytesMax bounds one read of the metadata log.
const readBytesMax = 1 << 20

// ForEachStoredBatch calls fn with every stored batch of the metadata log l
// from offset from up to end, in order: the one read loop of the metadata
// log, for a replay and for a voter rebuilding its raft log.
func ForEachStoredBatch(l *storage.Log, from, end int64, fn func(h storage.BatchHeader, raw []byte) error) error {
	for off := from; off < end; {
		data, err := l.Read(off, readBytesMax, end, true)
		if err != nil {
			return fmt.Errorf("read metadata log at %d: %w", off, err)
		}
		if len(data) == 0 {
			return fmt.Errorf("read metadata log at %d: no batch below offset %d", off, end)
		}
		err = storage.ForEachBatch(data, func(h storage.BatchHeader, raw []byte) error {
			if h.NextOffset() <= off {
				return nil
			}
			if err := fn(h, raw); err != nil {
				return err
			}
			off = h.NextOffset()
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// ReplayRecordsMax bounds how many records a replay hands over at once.
// A replay merges consecutive stored batches into one Batch so that a
// subscriber applying them to a copy-on-write image copies its maps once
// per merged batch instead of once per stored batch.
const ReplayRecordsMax = 8192

// Merger gathers the consecutive batches of a replay into merged ones of
// up to ReplayRecordsMax records, handed to its subscriber.
type Merger struct {
	fn      func(Batch) error
	pending *Batch
}

// NewMerger returns a Merger handing merged batches to fn.
func NewMerger(fn func(Batch) error) *Merger { return &Merger{fn: fn} }

// Add merges b, the batch after the last one added, and hands the merged
// batch over once it is full.
func (m *Merger) Add(b Batch) error {
	if m.pending == nil {
		m.pending = &b
	} else {
		m.pending.Merge(b)
	}
	if len(m.pending.Records) >= ReplayRecordsMax {
		return m.Flush()
	}
	return nil
}

// Flush hands over what was added since the last batch handed over.
func (m *Merger) Flush() error {
	if m.pending == nil {
		return nil
	}
	b := *m.pending
	m.pending = nil
	if err := m.fn(b); err != nil {
		return fmt.Errorf("apply metadata batch ending at offset %d: %w", b.LastOffset, err)
	}
	return nil
}
