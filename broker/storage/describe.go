package storage

import (
	"path/filepath"
	"sort"
	"syscall"
)

// DirDescription is one log dir as DescribeLogDirs reports it.
type DirDescription struct {
	Dir     string
	Offline bool
	// TotalBytes and UsableBytes of the volume holding the dir, -1 when
	// they cannot be read.
	TotalBytes, UsableBytes int64
	Partitions              []PartitionDescription
}

// PartitionDescription is one partition's log in a dir.
type PartitionDescription struct {
	TopicPartition
	Size int64
	// OffsetLag is how far the log end is behind the high watermark
	// (Kafka's max(HW - LEO, 0)).
	OffsetLag int64
}

// DescribeDirs lists every log dir, in configuration order, with the
// partitions it holds (sorted) and whether it went offline; an offline dir
// lists no partitions, as Kafka's does.
func (m *LogManager) DescribeDirs() []DirDescription {
	offline := map[string]bool{}
	for _, d := range m.OfflineDirs() {
		offline[d] = true
	}
	byDir := map[string][]PartitionDescription{}
	for tp, l := range m.Logs() {
		if l.Offline() {
			continue
		}
		dir := filepath.Dir(l.Dir()) // the log dir holding the partition's dir
		byDir[dir] = append(byDir[dir], PartitionDescription{TopicPartition: tp, Size: l.Size(), OffsetLag: max(l.HighWatermark()-l.LogEndOffset(), 0)})
	}
	var out []DirDescription
	for _, d := range m.Dirs() {
		desc := DirDescription{Dir: d, Offline: offline[d], TotalBytes: -1, UsableBytes: -1}
		var st syscall.Statfs_t
		if !desc.Offline && syscall.Statfs(d, &st) == nil {
			desc.TotalBytes = int64(st.Blocks) * st.Bsize
			desc.UsableBytes = int64(st.Bavail) * st.Bsize
		}
		if !desc.Offline {
			ps := byDir[d]
			sort.Slice(ps, func(i, j int) bool {
				if ps[i].Topic != ps[j].Topic {
					return ps[i].Topic < ps[j].Topic
				}
				return ps[i].Partition < ps[j].Partition
			})
			desc.Partitions = ps
		}
		out = append(out, desc)
	}
	return out
}
