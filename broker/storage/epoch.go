package storage

import (
	"fmt"
	"os"
	"sort"
)

// epochCache is Kafka's LeaderEpochFileCache: the start offset of every
// leader epoch of a partition, mirrored to leader-epoch-checkpoint on every
// change. The owning Log serializes access.
type epochCache struct {
	fs      FS
	path    string
	entries []EpochEntry
	// dirty: changed in memory since the last flush.
	dirty bool
}

func loadEpochCache(fs FS, dir string) (*epochCache, error) {
	c := &epochCache{fs: fs, path: dir + string(os.PathSeparator) + LeaderEpochCheckpointFile}
	data, err := readFile(fs, c.path)
	if err != nil {
		if os.IsNotExist(err) {
			return c, nil
		}
		return c, fmt.Errorf("read %s: %w", c.path, err)
	}
	if c.entries, err = ParseLeaderEpochCheckpoint(data); err != nil {
		return c, fmt.Errorf("%s: %w", c.path, err)
	}
	return c, nil
}

func (c *epochCache) flush() error {
	if err := writeFileAtomic(c.fs, c.path, formatLeaderEpochCheckpoint(c.entries)); err != nil {
		return err
	}
	c.dirty = false
	return nil
}

// persistOrMark flushes now when persist is set, or remembers to.
func (c *epochCache) persistOrMark(persist bool) error {
	if !persist {
		c.dirty = true
		return nil
	}
	return c.flush()
}

func (c *epochCache) latest() (EpochEntry, bool) {
	if len(c.entries) == 0 {
		return EpochEntry{}, false
	}
	return c.entries[len(c.entries)-1], true
}

// assign records that epoch starts at startOffset, dropping later entries
// that would make the cache non-monotonic. It reports whether the cache
// changed (and was written).
func (c *epochCache) assign(epoch int32, startOffset int64, persist bool) (bool, error) {
	if epoch < 0 || startOffset < 0 {
		return false, fmt.Errorf("%w: epoch %d start offset %d", ErrInvalidOffset, epoch, startOffset)
	}
	if l, ok := c.latest(); ok && l.Epoch == epoch && startOffset >= l.StartOffset {
		return false, nil
	}
	n := 0
	for _, e := range c.entries {
		if e.Epoch < epoch && e.StartOffset < startOffset {
			c.entries[n] = e
			n++
		}
	}
	c.entries = append(c.entries[:n], EpochEntry{Epoch: epoch, StartOffset: startOffset})
	return true, c.persistOrMark(persist)
}

// truncateFromEnd drops entries starting at or after endOffset.
func (c *epochCache) truncateFromEnd(endOffset int64, persist bool) error {
	l, ok := c.latest()
	if !ok || l.StartOffset < endOffset {
		return nil
	}
	n := sort.Search(len(c.entries), func(i int) bool { return c.entries[i].StartOffset >= endOffset })
	c.entries = c.entries[:n]
	return c.persistOrMark(persist)
}

// truncateFromStart drops entries that start at or before startOffset and
// keeps the last of them, moved to startOffset.
func (c *epochCache) truncateFromStart(startOffset int64, persist bool) error {
	n := sort.Search(len(c.entries), func(i int) bool { return c.entries[i].StartOffset > startOffset })
	if n == 0 {
		return nil
	}
	last := c.entries[n-1]
	if n == 1 && last.StartOffset == startOffset {
		return nil
	}
	last.StartOffset = startOffset
	c.entries = append([]EpochEntry{last}, c.entries[n:]...)
	return c.persistOrMark(persist)
}

func (c *epochCache) clear(persist bool) error {
	c.entries = nil
	return c.persistOrMark(persist)
}

// endOffsetFor is Kafka's endOffsetFor: where epoch ended given the log end
// offset leo. (-1, -1) when epoch is undefined or above every known epoch.
func (c *epochCache) endOffsetFor(epoch int32, leo int64) (int32, int64) {
	if epoch < 0 {
		return -1, -1
	}
	l, ok := c.latest()
	if !ok {
		return -1, -1
	}
	if l.Epoch == epoch {
		return epoch, leo
	}
	hi := sort.Search(len(c.entries), func(i int) bool { return c.entries[i].Epoch > epoch })
	if hi == len(c.entries) {
		return -1, -1
	}
	if hi == 0 {
		return epoch, c.entries[0].StartOffset
	}
	return c.entries[hi-1].Epoch, c.entries[hi].StartOffset
}

func (c *epochCache) snapshot() []EpochEntry {
	return append([]EpochEntry(nil), c.entries...)
}
