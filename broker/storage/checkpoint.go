package storage

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Checkpoint file names in a log dir and in a partition dir.
const (
	RecoveryPointCheckpointFile  = "recovery-point-offset-checkpoint"
	HighWatermarkCheckpointFile  = "replication-offset-checkpoint"
	LogStartOffsetCheckpointFile = "log-start-offset-checkpoint"
	LeaderEpochCheckpointFile    = "leader-epoch-checkpoint"
	CleanShutdownFile            = ".kafka_cleanshutdown"
)

// maxCheckpointEntries bounds the entry count a checkpoint may declare.
const maxCheckpointEntries = 1 << 24

// parseCheckpoint parses Kafka's checkpoint text: version line, count line,
// then count entry lines of fields separated by single spaces. An empty file
// has no entries. A wrong version, a count that does not match, or a line
// with the wrong number of fields is an error wrapping ErrCorruptCheckpoint.
func parseCheckpoint(data []byte, version int, fields int) ([][]string, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, nil
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	line := func() (string, bool) {
		if !sc.Scan() {
			return "", false
		}
		return sc.Text(), true
	}
	vs, ok := line()
	if !ok {
		return nil, fmt.Errorf("%w: missing version", ErrCorruptCheckpoint)
	}
	v, err := strconv.Atoi(strings.TrimSpace(vs))
	if err != nil || v != version {
		return nil, fmt.Errorf("%w: version %q, want %d", ErrCorruptCheckpoint, vs, version)
	}
	cs, ok := line()
	if !ok {
		return nil, fmt.Errorf("%w: missing entry count", ErrCorruptCheckpoint)
	}
	count, err := strconv.Atoi(strings.TrimSpace(cs))
	if err != nil || count < 0 || count > maxCheckpointEntries {
		return nil, fmt.Errorf("%w: entry count %q", ErrCorruptCheckpoint, cs)
	}
	entries := make([][]string, 0, min(count, 1024))
	for {
		l, ok := line()
		if !ok {
			break
		}
		if strings.TrimSpace(l) == "" {
			continue
		}
		f := strings.Fields(l)
		if len(f) != fields {
			return nil, fmt.Errorf("%w: line %q has %d fields, want %d", ErrCorruptCheckpoint, l, len(f), fields)
		}
		entries = append(entries, f)
		if len(entries) > count {
			break
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCorruptCheckpoint, err)
	}
	if len(entries) != count {
		return nil, fmt.Errorf("%w: %d entries, header says %d", ErrCorruptCheckpoint, len(entries), count)
	}
	return entries, nil
}

func formatCheckpoint(version int, entries []string) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%d\n%d\n", version, len(entries))
	for _, e := range entries {
		b.WriteString(e)
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// ParseOffsetCheckpoint parses an offset checkpoint (version 0, entries
// "topic partition offset").
func ParseOffsetCheckpoint(data []byte) (map[TopicPartition]int64, error) {
	entries, err := parseCheckpoint(data, 0, 3)
	if err != nil {
		return nil, err
	}
	out := make(map[TopicPartition]int64, len(entries))
	for _, e := range entries {
		p, err := strconv.ParseInt(e[1], 10, 32)
		if err != nil || p < 0 {
			return nil, fmt.Errorf("%w: partition %q", ErrCorruptCheckpoint, e[1])
		}
		off, err := strconv.ParseInt(e[2], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%w: offset %q", ErrCorruptCheckpoint, e[2])
		}
		out[TopicPartition{Topic: e[0], Partition: int32(p)}] = off
	}
	return out, nil
}

// ReadOffsetCheckpoint reads an offset checkpoint file; a missing file has
// no entries.
func ReadOffsetCheckpoint(fs FS, path string) (map[TopicPartition]int64, error) {
	data, err := readFile(fs, path)
	if err != nil {
		if os.IsNotExist(err) {
			return map[TopicPartition]int64{}, nil
		}
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	m, err := ParseOffsetCheckpoint(data)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return m, nil
}

// WriteOffsetCheckpoint writes an offset checkpoint atomically, entries in
// topic and partition order.
func WriteOffsetCheckpoint(fs FS, path string, offsets map[TopicPartition]int64) error {
	tps := sortedPartitions(offsets)
	lines := make([]string, 0, len(tps))
	for _, tp := range tps {
		lines = append(lines, fmt.Sprintf("%s %d %d", tp.Topic, tp.Partition, offsets[tp]))
	}
	return writeFileAtomic(fs, path, formatCheckpoint(0, lines))
}

// EpochEntry is one leader epoch and the first offset written in it.
type EpochEntry struct {
	Epoch       int32
	StartOffset int64
}

// ParseLeaderEpochCheckpoint parses a leader-epoch-checkpoint (version 0,
// entries "epoch startOffset").
func ParseLeaderEpochCheckpoint(data []byte) ([]EpochEntry, error) {
	entries, err := parseCheckpoint(data, 0, 2)
	if err != nil {
		return nil, err
	}
	out := make([]EpochEntry, 0, len(entries))
	for _, e := range entries {
		ep, err := strconv.ParseInt(e[0], 10, 32)
		if err != nil || ep < 0 {
			return nil, fmt.Errorf("%w: epoch %q", ErrCorruptCheckpoint, e[0])
		}
		off, err := strconv.ParseInt(e[1], 10, 64)
		if err != nil || off < 0 {
			return nil, fmt.Errorf("%w: start offset %q", ErrCorruptCheckpoint, e[1])
		}
		if n := len(out); n > 0 && (int32(ep) <= out[n-1].Epoch || off < out[n-1].StartOffset) {
			return nil, fmt.Errorf("%w: epochs not increasing at %q", ErrCorruptCheckpoint, strings.Join(e, " "))
		}
		out = append(out, EpochEntry{Epoch: int32(ep), StartOffset: off})
	}
	return out, nil
}

func formatLeaderEpochCheckpoint(entries []EpochEntry) []byte {
	lines := make([]string, 0, len(entries))
	for _, e := range entries {
		lines = append(lines, fmt.Sprintf("%d %d", e.Epoch, e.StartOffset))
	}
	return formatCheckpoint(0, lines)
}
