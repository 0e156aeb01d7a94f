package main

import (
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/faultline/faultline/broker/storage"
)

// runDumpLog is `broker dump-log --files F1,F2`, kafka-dump-log.sh: it reads
// segment (.log), offset index (.index) and time index (.timeindex) files
// offline and prints every batch (offsets, epoch, producer, position, CRC
// validity) or index entry. It names the first corrupt byte of a log and
// checks index entries against the segment's log. It never writes.
func runDumpLog(args []string, stdout, stderr io.Writer) int {
	fs := flagSet("dump-log", "dump-log --files SEGMENT.log|.index|.timeindex[,...] [--deep-iteration] [--print-data-log]", stderr)
	var files string
	var deep, data, verifyOnly bool
	fs.stringVar(&files, "F1,F2", "the files to read, comma-separated (required)", "files")
	fs.boolVar(&deep, "print every record of each batch, not only the batch headers", "deep-iteration")
	fs.boolVar(&data, "print each record's key and value (implies --deep-iteration)", "print-data-log", "print-data")
	fs.boolVar(&verifyOnly, "for index files: print only the problems found, not the entries", "verify-index-only")
	if code := parse(fs, args, stdout); code >= 0 {
		return code
	}
	if strings.TrimSpace(files) == "" {
		fmt.Fprintln(stderr, "broker dump-log: missing --files SEGMENT.log")
		return exitUsage
	}
	deep = deep || data
	code := exitOK
	for _, f := range strings.Split(files, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		if c := dumpFile(f, deep, data, verifyOnly, stdout, stderr); c != exitOK {
			code = c
		}
	}
	return code
}

// dumpFile prints one file; it returns exitError when the file cannot be
// read or is damaged (after printing what it could).
func dumpFile(path string, deep, data, verifyOnly bool, stdout, stderr io.Writer) int {
	b, err := os.ReadFile(path)
	if err != nil {
		fmt.Fprintf(stderr, "broker dump-log: %v\n", err)
		return exitError
	}
	ext := filepath.Ext(path)
	base, baseErr := segmentBase(path)
	fmt.Fprintf(stdout, "Dumping %s\n", path)
	switch ext {
	case ".log":
		if baseErr == nil {
			fmt.Fprintf(stdout, "Log starting offset: %d\n", base)
		}
		d := storage.DumpSegment(b, deep)
		printSegment(stdout, d, deep, data)
		return segmentVerdict(path, d, stderr)
	case ".index", ".timeindex":
		if baseErr != nil {
			fmt.Fprintf(stderr, "broker dump-log: %s: %v\n", path, baseErr)
			return exitError
		}
		var log *storage.SegmentDump
		logPath := strings.TrimSuffix(path, ext) + ".log"
		if lb, err := os.ReadFile(logPath); err == nil {
			d := storage.DumpSegment(lb, false)
			log = &d
		} else {
			fmt.Fprintf(stdout, "(no %s next to it: entries not checked against the log)\n", filepath.Base(logPath))
		}
		var d storage.IndexDump
		if ext == ".index" {
			d = storage.DumpOffsetIndex(b, base, log)
		} else {
			d = storage.DumpTimeIndex(b, base, log)
		}
		if !verifyOnly {
			for _, e := range d.Entries {
				if ext == ".index" {
					fmt.Fprintf(stdout, "offset: %d position: %d\n", e.Offset, e.Position)
				} else {
					fmt.Fprintf(stdout, "timestamp: %d offset: %d\n", e.Timestamp, e.Offset)
				}
			}
		}
		if len(d.Problems) == 0 {
			fmt.Fprintf(stdout, "%s: %d entries, no problems\n", filepath.Base(path), len(d.Entries))
			return exitOK
		}
		fmt.Fprintf(stdout, "Mismatches in %s:\n", path)
		for _, p := range d.Problems {
			fmt.Fprintf(stdout, "  %s\n", p)
		}
		fmt.Fprintf(stderr, "broker dump-log: %s: %d problems, the first: %s\n", path, len(d.Problems), d.Problems[0])
		return exitError
	default:
		fmt.Fprintf(stderr, "broker dump-log: %s: not a .log, .index or .timeindex file\n", path)
		return exitError
	}
}

// segmentBase is the base offset a segment file's name gives
// (00000000000000000042.log → 42).
func segmentBase(path string) (int64, error) {
	name := strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
	n, err := strconv.ParseInt(name, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("file name %q is not a segment's base offset (20 digits)", filepath.Base(path))
	}
	return n, nil
}

func printSegment(w io.Writer, d storage.SegmentDump, deep, data bool) {
	for _, b := range d.Batches {
		h := b.Header
		tsType := "CreateTime"
		if h.HasLogAppendTime() {
			tsType = "LogAppendTime"
		}
		horizon := "OptionalLong.empty"
		if h.Attributes&0x40 != 0 {
			horizon = fmt.Sprintf("OptionalLong[%d]", h.BaseTimestamp)
		}
		fmt.Fprintf(w, "baseOffset: %d lastOffset: %d count: %d baseSequence: %d lastSequence: %d producerId: %d producerEpoch: %d partitionLeaderEpoch: %d isTransactional: %t isControl: %t deleteHorizonMs: %s position: %d %s: %d size: %d magic: %d compresscodec: %s crc: %d isvalid: %t\n",
			h.BaseOffset, h.LastOffset(), h.RecordCount, h.BaseSequence, h.LastSequence(), h.ProducerID, h.ProducerEpoch, h.PartitionLeaderEpoch,
			h.IsTransactional(), h.IsControl(), horizon, b.Position, tsType, h.MaxTimestamp, h.Size(), h.Magic, codecName(h.Compression()), h.CRC, b.Err == nil)
		if b.Err != nil {
			fmt.Fprintf(w, "| invalid batch at position %d: %v\n", b.Position, b.Err)
			continue
		}
		if !deep {
			continue
		}
		if b.RecordsError != nil {
			fmt.Fprintf(w, "| records cannot be read: %v\n", b.RecordsError)
			continue
		}
		for i, r := range b.Records {
			seq := int32(-1)
			if h.BaseSequence >= 0 {
				seq = h.BaseSequence + int32(i)
			}
			keys := make([]string, len(r.Headers))
			for j, rh := range r.Headers {
				keys[j] = rh.Key
			}
			line := fmt.Sprintf("| offset: %d %s: %d keySize: %d valueSize: %d sequence: %d headerKeys: [%s]", r.Offset, tsType, r.TimestampMs, size(r.Key), size(r.Value), seq, strings.Join(keys, ","))
			if h.IsControl() {
				line += " " + controlRecord(r)
			} else if data {
				line += fmt.Sprintf(" key: %s payload: %s", printable(r.Key), printable(r.Value))
			}
			fmt.Fprintln(w, line)
		}
	}
}

func segmentVerdict(path string, d storage.SegmentDump, stderr io.Writer) int {
	bad := 0
	for _, b := range d.Batches {
		if b.Err != nil {
			if bad == 0 {
				fmt.Fprintf(stderr, "broker dump-log: %s: corrupt batch at byte %d (offsets %d-%d): %v\n", path, b.Position, b.Header.BaseOffset, b.Header.LastOffset(), b.Err)
			}
			bad++
		}
	}
	if d.CorruptAt >= 0 {
		fmt.Fprintf(stderr, "broker dump-log: %s: first unreadable byte at position %d of %d (%d bytes not in any batch): %v\n", path, d.CorruptAt, d.Size, d.Size-d.CorruptAt, d.Corrupt)
		return exitError
	}
	if bad > 0 {
		return exitError
	}
	return exitOK
}

func codecName(c storage.Compression) string {
	switch c {
	case 0:
		return "none"
	case 1:
		return "gzip"
	case 2:
		return "snappy"
	case 3:
		return "lz4"
	case 4:
		return "zstd"
	}
	return fmt.Sprintf("unknown(%d)", int(c))
}

func size(b []byte) int {
	if b == nil {
		return -1
	}
	return len(b)
}

// printable shows a key or value as text when it is, else as hex.
func printable(b []byte) string {
	if b == nil {
		return "null"
	}
	for _, c := range b {
		if c < 0x20 || c > 0x7e {
			return "0x" + fmt.Sprintf("%x", b)
		}
	}
	return string(b)
}

// controlRecord describes a transaction marker (key: version, type; value:
// version, coordinator epoch).
func controlRecord(r storage.Record) string {
	if len(r.Key) < 4 {
		return "controlRecord: unreadable key"
	}
	kind := binary.BigEndian.Uint16(r.Key[2:])
	name := fmt.Sprintf("type %d", kind)
	switch kind {
	case 0:
		name = "ABORT"
	case 1:
		name = "COMMIT"
	}
	epoch := int32(-1)
	if len(r.Value) >= 6 {
		epoch = int32(binary.BigEndian.Uint32(r.Value[2:]))
	}
	return fmt.Sprintf("endTxnMarker: %s coordinatorEpoch: %d", name, epoch)
}
