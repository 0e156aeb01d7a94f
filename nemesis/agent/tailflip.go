package agent

import (
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// A live leader's disk flipping a bit in a batch no follower has fetched
// yet (corrupt:unreplicated-tail): the only way a leader serves a batch
// that fails its CRC, and so the only way to tell a follower that checks
// what it appends from one that does not. With the leader cut off from its
// followers, each follower's agent reads its log end (LogEnds), and the
// leader's agent flips one bit in the records of the last batch it has at
// or above the greatest of them (FlipTails).

// recordsFrom is where a v2 batch's records start: after its 61-byte
// header, past every field a follower reads without the CRC (offsets,
// epoch, producer id and sequences, record count).
const recordsFrom = 61

// lastOffsetDeltaAt is where a v2 batch's lastOffsetDelta is: after the
// base offset, length, leader epoch, magic, CRC and attributes.
const lastOffsetDeltaAt = 23

// validPartitionDir reports whether p can name a partition directory of a
// log dir ("topic-N") and nothing outside it.
func validPartitionDir(p string) error {
	if p == "" || strings.ContainsAny(p, `/\`) || p == "." || p == ".." {
		return fmt.Errorf("%q is no partition directory name (topic-N)", p)
	}
	return nil
}

// activeSegment returns the name (relative to dir) of the .log file of
// the highest base offset in partition directory p, and that base offset.
func activeSegment(dir, p string) (string, int64, error) {
	if err := validPartitionDir(p); err != nil {
		return "", 0, err
	}
	entries, err := os.ReadDir(filepath.Join(dir, p))
	if err != nil {
		return "", 0, err
	}
	var logs []string
	for _, e := range entries {
		if e.Type().IsRegular() && strings.HasSuffix(e.Name(), ".log") {
			logs = append(logs, e.Name())
		}
	}
	if len(logs) == 0 {
		return "", 0, fmt.Errorf("%s has no segment", p)
	}
	// Segment names are zero-padded base offsets: the greatest name is
	// the active segment.
	active := slices.Max(logs)
	base, err := strconv.ParseInt(strings.TrimSuffix(active, ".log"), 10, 64)
	if err != nil {
		return "", 0, fmt.Errorf("%s/%s: not named by its base offset", p, active)
	}
	return p + "/" + active, base, nil
}

// batchSpan is one well-framed batch of a segment: where it starts and
// ends in the file.
type batchSpan struct{ from, to int64 }

// frameBatches lists the well-framed batches of a segment's bytes, from
// the start, stopping at the first that is cut short or malformed.
func frameBatches(data []byte) []batchSpan {
	var spans []batchSpan
	for pos := int64(0); pos+batchHeaderSize <= int64(len(data)); {
		length := int64(binary.BigEndian.Uint32(data[pos+batchLengthAt:]))
		end := pos + batchHeaderSize + length
		if length < recordsFrom-batchHeaderSize || end > int64(len(data)) {
			break
		}
		spans = append(spans, batchSpan{pos, end})
		pos = end
	}
	return spans
}

func baseOffsetOf(data []byte, s batchSpan) int64 {
	return int64(binary.BigEndian.Uint64(data[s.from:]))
}

// SegmentEnd is the offset after the last whole batch of a segment's
// bytes, base when it holds none.
func SegmentEnd(data []byte, base int64) int64 {
	spans := frameBatches(data)
	if len(spans) == 0 {
		return base
	}
	last := spans[len(spans)-1]
	return baseOffsetOf(data, last) + int64(int32(binary.BigEndian.Uint32(data[last.from+lastOffsetDeltaAt:]))) + 1
}

// LogEnds reads, for each partition directory under dir, the log end
// offset its active segment holds.
func LogEnds(dir string, partitions []string) (map[string]int64, error) {
	out := map[string]int64{}
	for _, p := range partitions {
		file, base, err := activeSegment(dir, p)
		if err != nil {
			return nil, fmt.Errorf("log end: %w", err)
		}
		data, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(file)))
		if err != nil {
			return nil, fmt.Errorf("log end: %w", err)
		}
		out[p] = SegmentEnd(data, base)
	}
	return out, nil
}

// TailFlip is what FlipTail did to one partition.
type TailFlip struct {
	Partition string `json:"partition"`
	File      string `json:"file,omitempty"`
	// After is the offset the flipped batch had to start at or above (the
	// greatest of the followers' log ends); Above is how many whole
	// batches did.
	After int64 `json:"after"`
	Above int   `json:"above"`
	// BaseOffset and Position say which batch was flipped and the byte
	// changed in the file; Skipped says why none was.
	BaseOffset int64  `json:"base-offset,omitempty"`
	Position   int64  `json:"position,omitempty"`
	Skipped    string `json:"skipped,omitempty"`
}

// PlanTailFlip decides, from an active segment's bytes, which byte of
// which batch a tail flip changes: a bit (drawn from seed) of the records
// of the last whole batch whose base offset is at or above after, the
// greatest log end of the partition's followers, so that no follower has
// it. pos and mask are zero when it skips.
func PlanTailFlip(data []byte, partition, file string, after int64, seed uint64) (plan TailFlip, pos int64, mask byte) {
	plan = TailFlip{Partition: partition, File: file, After: after}
	var above []batchSpan
	for _, s := range frameBatches(data) {
		if baseOffsetOf(data, s) >= after {
			above = append(above, s)
		}
	}
	plan.Above = len(above)
	if len(above) == 0 {
		plan.Skipped = fmt.Sprintf("no batch at or above offset %d (every batch the leader has, some follower has too)", after)
		return plan, 0, 0
	}
	last := above[len(above)-1]
	if last.to-last.from <= recordsFrom {
		plan.Skipped = "the last batch has no records"
		return plan, 0, 0
	}
	rng := rand.New(rand.NewPCG(seed, 0x7461696c))
	plan.BaseOffset = baseOffsetOf(data, last)
	plan.Position = last.from + recordsFrom + rng.Int64N(last.to-last.from-recordsFrom)
	return plan, plan.Position, 1 << rng.IntN(8)
}

// FlipTail flips, in partition p's active segment under dir, one bit of
// the last batch at or above after (PlanTailFlip), with the node live:
// the leader serves the damaged batch from then on.
func FlipTail(dir, p string, after int64, seed uint64) (TailFlip, error) {
	file, _, err := activeSegment(dir, p)
	if err != nil {
		return TailFlip{Partition: p, After: after, Skipped: err.Error()}, err
	}
	name := filepath.Join(dir, filepath.FromSlash(file))
	data, err := os.ReadFile(name)
	if err != nil {
		return TailFlip{Partition: p, File: file, After: after, Skipped: err.Error()}, err
	}
	plan, pos, mask := PlanTailFlip(data, p, file, after, seed)
	if plan.Skipped != "" {
		return plan, nil
	}
	return plan, writeAt(name, pos, []byte{data[pos] ^ mask})
}

// FlipTails is FlipTail on each partition of after (in name order), each
// with a seed of its own drawn from seed.
func FlipTails(dir string, after map[string]int64, seed uint64) ([]TailFlip, error) {
	rng := rand.New(rand.NewPCG(seed, 0))
	var out []TailFlip
	var errs []error
	for _, p := range slices.Sorted(maps.Keys(after)) {
		f, err := FlipTail(dir, p, after[p], rng.Uint64())
		if err != nil {
			errs = append(errs, fmt.Errorf("flip %s: %w", p, err))
		}
		out = append(out, f)
	}
	return out, errors.Join(errs...)
}
