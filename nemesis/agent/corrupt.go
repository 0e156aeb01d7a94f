package agent

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"math/rand/v2"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// The corruptions a stopped node's data can be given.
const (
	CorruptTornTail      = "torn-tail"      // the active segment's tail cut off
	CorruptBitFlip       = "bit-flip"       // one bit of one batch of a segment
	CorruptIndexTruncate = "index-truncate" // an .index or .timeindex cut short
	CorruptIndexGarbage  = "index-garbage"  // random bytes over part of an .index or .timeindex
	CorruptCheckpoint    = "checkpoint-delete"
	// CorruptDiskReplaced empties the data dir as a new disk would be:
	// every partition's data and every checkpoint gone, meta.properties,
	// bootstrap.checkpoint and the controller quorum's log kept (as on a
	// disk of their own).
	// Never drawn: only when named.
	CorruptDiskReplaced = "disk-replaced"
)

// File is one regular file of a data dir: its slash-separated path
// relative to the dir and its size.
type File struct {
	Path string
	Size int64
}

// Corruption is what to do to one file; the numbers are drawn from the
// seed, and those that depend on the file's content (which batch, which
// bit) are taken modulo what the content offers when it is applied.
type Corruption struct {
	Kind string `json:"kind"`
	File string `json:"file"`
	// Size is what a torn tail or a truncated index leaves.
	Size int64 `json:"size,omitempty"`
	// Batch and Bit choose the flipped bit: batch Batch mod the number of
	// batches, bit Bit mod the number of bits the batch's CRC covers.
	Batch uint64 `json:"-"`
	Bit   uint64 `json:"-"`
	// Offset, Length and Seed say where garbage goes and what it is.
	Offset int64  `json:"offset,omitempty"`
	Length int64  `json:"length,omitempty"`
	Seed   uint64 `json:"-"`
}

// String says what the corruption does, in words.
func (c Corruption) String() string {
	switch c.Kind {
	case CorruptTornTail:
		return fmt.Sprintf("tore the tail of %s at %d bytes", c.File, c.Size)
	case CorruptBitFlip:
		return "flipped a bit in a batch of " + c.File
	case CorruptIndexTruncate:
		return fmt.Sprintf("truncated %s to %d bytes", c.File, c.Size)
	case CorruptIndexGarbage:
		return fmt.Sprintf("wrote %d garbage bytes at %d into %s", c.Length, c.Offset, c.File)
	case CorruptCheckpoint:
		return "deleted " + c.File
	case CorruptDiskReplaced:
		return "replaced the disk: deleted every partition's data and every checkpoint, kept meta.properties and " + metadataDir
	}
	return c.Kind + " " + c.File
}

// metadataDir is the controller quorum's log: corrupting it is another
// fault class (a voter's log), not a partition replica's data.
const metadataDir = "__cluster_metadata-0"

// PlanCorruption decides from seed what to corrupt among files (a data
// dir's listing): one of the kinds the listing offers, chosen uniformly,
// on a file chosen uniformly among those it applies to. Segments and
// indexes of the metadata log, meta.properties and the files of
// directories marked for deletion are never chosen.
func PlanCorruption(seed uint64, files []File) (Corruption, error) {
	return PlanCorruptionOf(seed, files, "")
}

// PlanCorruptionOf is PlanCorruption restricted to one kind (any when kind
// is empty); a listing that does not offer the kind is an error.
func PlanCorruptionOf(seed uint64, files []File, kind string) (Corruption, error) {
	if kind == CorruptDiskReplaced {
		return Corruption{Kind: kind}, nil
	}
	sorted := append([]File(nil), files...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Path < sorted[j].Path })
	var segments, active, indexes, checkpoints []File
	newest := map[string]File{}
	for _, f := range sorted {
		dir, base := path.Split(f.Path)
		dir = strings.TrimSuffix(dir, "/")
		if strings.HasSuffix(dir, "-delete") {
			continue
		}
		if strings.Contains(base, "checkpoint") && !strings.HasSuffix(base, ".tmp") {
			checkpoints = append(checkpoints, f)
			continue
		}
		if path.Base(dir) == metadataDir {
			continue
		}
		switch {
		case strings.HasSuffix(base, ".log") && f.Size > 0:
			segments = append(segments, f)
			if cur, ok := newest[dir]; !ok || f.Path > cur.Path {
				newest[dir] = f
			}
		case strings.HasSuffix(base, ".index") || strings.HasSuffix(base, ".timeindex"):
			indexes = append(indexes, f)
		}
	}
	for _, dir := range slices.Sorted(maps.Keys(newest)) {
		active = append(active, newest[dir])
	}
	var kinds []string
	if len(active) > 0 {
		kinds = append(kinds, CorruptTornTail)
	}
	if len(segments) > 0 {
		kinds = append(kinds, CorruptBitFlip)
	}
	if len(indexes) > 0 {
		kinds = append(kinds, CorruptIndexTruncate, CorruptIndexGarbage)
	}
	if len(checkpoints) > 0 {
		kinds = append(kinds, CorruptCheckpoint)
	}
	if len(kinds) == 0 {
		return Corruption{}, errors.New("corrupt: the data dir has no segment, index or checkpoint file")
	}
	if kind != "" {
		if !slices.Contains(kinds, kind) {
			return Corruption{}, fmt.Errorf("corrupt: the data dir offers no %s corruption (it offers %s)", kind, strings.Join(kinds, ", "))
		}
		kinds = []string{kind}
	}
	rng := rand.New(rand.NewPCG(seed, 0x636f7272757074))
	c := Corruption{Kind: kinds[rng.IntN(len(kinds))]}
	switch c.Kind {
	case CorruptTornTail:
		f := active[rng.IntN(len(active))]
		c.File = f.Path
		c.Size = f.Size - 1 - rng.Int64N(min(f.Size, 4096))
	case CorruptBitFlip:
		c.File = segments[rng.IntN(len(segments))].Path
		c.Batch, c.Bit = rng.Uint64(), rng.Uint64()
	case CorruptIndexTruncate:
		f := indexes[rng.IntN(len(indexes))]
		c.File = f.Path
		if f.Size > 0 {
			c.Size = rng.Int64N(f.Size)
		}
	case CorruptIndexGarbage:
		f := indexes[rng.IntN(len(indexes))]
		c.File = f.Path
		c.Length = 1 + rng.Int64N(64)
		if f.Size > c.Length {
			c.Offset = rng.Int64N(f.Size - c.Length)
		}
		c.Seed = rng.Uint64()
	case CorruptCheckpoint:
		c.File = checkpoints[rng.IntN(len(checkpoints))].Path
	}
	return c, nil
}

// Kafka's record batch framing: base offset (8 bytes), batch length (4,
// the bytes after it), partition leader epoch (4), magic (1), CRC (4);
// the CRC covers everything from the attributes on.
const (
	batchLengthAt   = 8
	batchHeaderSize = 12
	crcCoveredFrom  = 21
)

// FlipPosition finds the bit a bit flip changes in a segment's bytes:
// byte offset and bit mask in batch number batch (mod the number of
// well-framed batches), at bit number bit (mod the bits the batch's CRC
// covers). ok is false when the segment holds no well-framed batch.
func FlipPosition(data []byte, batch, bit uint64) (offset int64, mask byte, ok bool) {
	type span struct{ from, to int64 }
	var batches []span
	for pos := int64(0); pos+crcCoveredFrom < int64(len(data)); {
		length := int64(binary.BigEndian.Uint32(data[pos+batchLengthAt:]))
		end := pos + batchHeaderSize + length
		if length < crcCoveredFrom-batchHeaderSize+1 || end > int64(len(data)) {
			break
		}
		batches = append(batches, span{pos + crcCoveredFrom, end})
		pos = end
	}
	if len(batches) == 0 {
		return 0, 0, false
	}
	b := batches[batch%uint64(len(batches))]
	n := bit % uint64((b.to-b.from)*8)
	return b.from + int64(n/8), 1 << (n % 8), true
}

// ListFiles lists the regular files under dir for PlanCorruption.
func ListFiles(dir string) ([]File, error) {
	var files []File
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		files = append(files, File{Path: filepath.ToSlash(rel), Size: info.Size()})
		return nil
	})
	return files, err
}

// keptOnDiskReplacement are the entries of a data dir a replaced disk
// keeps: the node's identity and the controller quorum's log.
// (bootstrap.checkpoint is the metadata log dir's too: Apache Kafka's
// storage tool writes it there at format). The directory id in
// meta.properties survives, where a new disk would get a new one.
var keptOnDiskReplacement = []string{"meta.properties", "bootstrap.checkpoint", metadataDir}

// ApplyCorruption does c to the data under dir (the node must be down).
func ApplyCorruption(dir string, c Corruption) error {
	name := filepath.Join(dir, filepath.FromSlash(c.File))
	switch c.Kind {
	case CorruptDiskReplaced:
		entries, err := os.ReadDir(dir)
		if err != nil {
			return err
		}
		for _, e := range entries {
			if slices.Contains(keptOnDiskReplacement, e.Name()) {
				continue
			}
			if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
				return err
			}
		}
		return syncDir(dir)
	case CorruptTornTail, CorruptIndexTruncate:
		return os.Truncate(name, c.Size)
	case CorruptCheckpoint:
		return os.Remove(name)
	case CorruptBitFlip:
		data, err := os.ReadFile(name)
		if err != nil {
			return err
		}
		off, mask, ok := FlipPosition(data, c.Batch, c.Bit)
		if !ok {
			return fmt.Errorf("corrupt %s: no record batch to flip a bit in", c.File)
		}
		return writeAt(name, off, []byte{data[off] ^ mask})
	case CorruptIndexGarbage:
		garbage := make([]byte, c.Length)
		rng := rand.New(rand.NewPCG(c.Seed, 0))
		for i := range garbage {
			garbage[i] = byte(rng.Uint32())
		}
		return writeAt(name, c.Offset, garbage)
	}
	return fmt.Errorf("corrupt: unknown kind %q", c.Kind)
}

func writeAt(name string, off int64, b []byte) error {
	f, err := os.OpenFile(name, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	if _, err := f.WriteAt(b, off); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// syncDir makes dir's entries durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	if err := d.Sync(); err != nil {
		d.Close()
		return err
	}
	return d.Close()
}
