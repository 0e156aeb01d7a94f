package raftq

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/faultline/faultline/broker/metadata"
	"github.com/faultline/faultline/broker/storage"
)

// Snapshot files: <20-digit end offset>-<10-digit epoch>.checkpoint in the
// metadata partition dir, written as <name>.part first.
const (
	snapshotSuffix     = ".checkpoint"
	snapshotPartSuffix = ".checkpoint.part"
)

// Kafka's control record types used in the metadata log and its snapshots.
const (
	controlLeaderChange   int16 = 2
	controlSnapshotHeader int16 = 3
	controlSnapshotFooter int16 = 4
)

// snapshotRecordsPerBatch bounds the records of one batch in a snapshot.
const snapshotRecordsPerBatch = 4096

// snapshotBytesMax bounds the size of a snapshot, read from disk or
// received by an observer.
const snapshotBytesMax = 1 << 30

// snapshotVersion is the version of the header this package writes.
const snapshotVersion = 0

// ErrBadSnapshot: a snapshot that does not parse (torn, corrupt, or not one
// of ours).
var ErrBadSnapshot = errors.New("bad metadata snapshot")

// SnapshotHeader describes a snapshot: it holds the metadata image after
// raft entry RaftIndex (of term RaftTerm), that is, after every record
// below EndOffset.
type SnapshotHeader struct {
	Version   int     `json:"version"`
	RaftIndex uint64  `json:"raftIndex"`
	RaftTerm  uint64  `json:"raftTerm"`
	EndOffset int64   `json:"endOffset"`
	Voters    []int32 `json:"voters"`
	// LastContainedLogTimestampMs: the append time of the last entry it
	// covers, as Kafka's SnapshotHeaderRecord.
	LastContainedLogTimestampMs int64 `json:"lastContainedLogTimestamp"`
}

// Epoch is the leader epoch of the snapshot id (raft's term).
func (h SnapshotHeader) Epoch() int32 { return termEpoch(h.RaftTerm) }

type snapshotFooter struct {
	Version int `json:"version"`
	Records int `json:"records"`
}

// SnapshotFileName names the snapshot ending at endOffset in epoch.
func SnapshotFileName(endOffset int64, epoch int32) string {
	return fmt.Sprintf("%020d-%010d%s", endOffset, epoch, snapshotSuffix)
}

// parseSnapshotName parses <20 digits>-<10 digits><suffix>.
func parseSnapshotName(name, suffix string) (endOffset int64, epoch int32, ok bool) {
	s, found := strings.CutSuffix(name, suffix)
	if !found || len(s) != 31 || s[20] != '-' {
		return 0, 0, false
	}
	off, err := strconv.ParseInt(s[:20], 10, 64)
	if err != nil || off < 0 {
		return 0, 0, false
	}
	ep, err := strconv.ParseInt(s[21:], 10, 32)
	if err != nil || ep < 0 {
		return 0, 0, false
	}
	return off, int32(ep), true
}

// controlKey is a control record's key: version 0 and the type.
func controlKey(typ int16) []byte {
	k := make([]byte, 4)
	binary.BigEndian.PutUint16(k[2:], uint16(typ))
	return k
}

func controlType(key []byte) (int16, bool) {
	if len(key) < 4 {
		return 0, false
	}
	return int16(binary.BigEndian.Uint16(key[2:])), true
}

// EncodeSnapshot writes a snapshot: a control batch with the header, the
// records in batches, and a control batch with the footer, numbered from
// offset 0, every batch v2 with its CRC (Kafka frames its snapshots the same
// way, with SnapshotHeader and SnapshotFooter control records).
func EncodeSnapshot(h SnapshotHeader, recs []metadata.Record, nowMs int64) []byte {
	h.Version = snapshotVersion
	hv, _ := json.Marshal(h)
	out := storage.BuildBatch([]storage.Record{{TimestampMs: nowMs, Key: controlKey(controlSnapshotHeader), Value: hv}},
		storage.BatchOptions{Control: true, PartitionLeaderEpoch: h.Epoch()})
	next := int64(1)
	for i := 0; i < len(recs); i += snapshotRecordsPerBatch {
		chunk := recs[i:min(i+snapshotRecordsPerBatch, len(recs))]
		srecs := make([]storage.Record, len(chunk))
		for j, r := range chunk {
			srecs[j] = storage.Record{TimestampMs: nowMs, Value: metadata.Encode(r)}
		}
		out = append(out, storage.BuildBatch(srecs, storage.BatchOptions{BaseOffset: next, PartitionLeaderEpoch: h.Epoch()})...)
		next += int64(len(chunk))
	}
	fv, _ := json.Marshal(snapshotFooter{Version: snapshotVersion, Records: len(recs)})
	out = append(out, storage.BuildBatch([]storage.Record{{TimestampMs: nowMs, Key: controlKey(controlSnapshotFooter), Value: fv}},
		storage.BatchOptions{BaseOffset: next, Control: true, PartitionLeaderEpoch: h.Epoch()})...)
	return out
}

// DecodeSnapshot parses a snapshot written by EncodeSnapshot, checking
// every batch's CRC, the header and the footer. It never panics on any
// input: snapshots come from disk and from the leader.
func DecodeSnapshot(b []byte) (SnapshotHeader, []metadata.Record, error) {
	var (
		h         SnapshotHeader
		recs      []metadata.Record
		sawHeader bool
		footer    *snapshotFooter
	)
	err := storage.ForEachBatch(b, func(_ storage.BatchHeader, raw []byte) error {
		if footer != nil {
			return errors.New("data after the footer")
		}
		bh, err := storage.ValidateBatch(raw)
		if err != nil {
			return err
		}
		srecs, err := storage.DecodeRecords(raw)
		if err != nil {
			return err
		}
		if bh.IsControl() {
			if len(srecs) != 1 {
				return fmt.Errorf("control batch with %d records", len(srecs))
			}
			typ, ok := controlType(srecs[0].Key)
			switch {
			case !ok:
				return errors.New("control record without a type")
			case typ == controlSnapshotHeader && !sawHeader:
				if err := json.Unmarshal(srecs[0].Value, &h); err != nil {
					return fmt.Errorf("header: %w", err)
				}
				sawHeader = true
			case typ == controlSnapshotFooter && sawHeader:
				footer = &snapshotFooter{}
				if err := json.Unmarshal(srecs[0].Value, footer); err != nil {
					return fmt.Errorf("footer: %w", err)
				}
			default:
				return fmt.Errorf("unexpected control record type %d", typ)
			}
			return nil
		}
		if !sawHeader {
			return errors.New("records before the header")
		}
		for _, r := range srecs {
			m, err := metadata.Decode(r.Value)
			if err != nil {
				return fmt.Errorf("record %d: %w", r.Offset, err)
			}
			recs = append(recs, m)
		}
		return nil
	})
	switch {
	case err != nil:
		return SnapshotHeader{}, nil, fmt.Errorf("%w: %w", ErrBadSnapshot, err)
	case !sawHeader:
		return SnapshotHeader{}, nil, fmt.Errorf("%w: no header", ErrBadSnapshot)
	case footer == nil:
		return SnapshotHeader{}, nil, fmt.Errorf("%w: no footer (torn)", ErrBadSnapshot)
	case footer.Records != len(recs):
		return SnapshotHeader{}, nil, fmt.Errorf("%w: footer counts %d records, found %d", ErrBadSnapshot, footer.Records, len(recs))
	case h.Version != snapshotVersion:
		return SnapshotHeader{}, nil, fmt.Errorf("%w: version %d", ErrBadSnapshot, h.Version)
	case h.EndOffset < 0 || (h.RaftIndex == 0) != (h.EndOffset == 0) || h.RaftTerm > maxTerm:
		return SnapshotHeader{}, nil, fmt.Errorf("%w: index %d, term %d, end offset %d", ErrBadSnapshot, h.RaftIndex, h.RaftTerm, h.EndOffset)
	}
	return h, recs, nil
}

// snapshotFile is one snapshot file found in the partition dir.
type snapshotFile struct {
	name      string
	endOffset int64
	epoch     int32
}

// listSnapshots lists the complete snapshots of dir, newest first.
func listSnapshots(fs storage.FS, dir string, suffix string) ([]snapshotFile, error) {
	ents, err := fs.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", dir, err)
	}
	var out []snapshotFile
	for _, e := range ents {
		if e.IsDir() {
			continue
		}
		if off, ep, ok := parseSnapshotName(e.Name(), suffix); ok {
			out = append(out, snapshotFile{name: e.Name(), endOffset: off, epoch: ep})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].endOffset != out[j].endOffset {
			return out[i].endOffset > out[j].endOffset
		}
		return out[i].epoch > out[j].epoch
	})
	return out, nil
}

// readSnapshotFile reads and decodes one snapshot file.
func readSnapshotFile(fs storage.FS, path string) ([]byte, SnapshotHeader, []metadata.Record, error) {
	f, err := fs.OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		return nil, SnapshotHeader{}, nil, fmt.Errorf("open %s: %w", path, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, SnapshotHeader{}, nil, fmt.Errorf("stat %s: %w", path, err)
	}
	if st.Size() > snapshotBytesMax {
		return nil, SnapshotHeader{}, nil, fmt.Errorf("%s: %w: %d bytes, at most %d", path, ErrBadSnapshot, st.Size(), int64(snapshotBytesMax))
	}
	data := make([]byte, st.Size())
	if _, err := f.ReadAt(data, 0); err != nil {
		return nil, SnapshotHeader{}, nil, fmt.Errorf("read %s: %w", path, err)
	}
	h, recs, err := DecodeSnapshot(data)
	if err != nil {
		return nil, SnapshotHeader{}, nil, fmt.Errorf("%s: %w", path, err)
	}
	if name := filepath.Base(path); !strings.HasSuffix(name, snapshotPartSuffix) && name != SnapshotFileName(h.EndOffset, h.Epoch()) {
		return nil, SnapshotHeader{}, nil, fmt.Errorf("%s: %w: header names offset %d epoch %d", path, ErrBadSnapshot, h.EndOffset, h.Epoch())
	}
	return data, h, recs, nil
}
