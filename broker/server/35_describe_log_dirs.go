package server

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/faultline/faultline/broker/storage"
)

// DescribeLogDirs: v0-v4
//
// Behaviour:
//   - Every log dir of this broker (LogDirs.DescribeDirs), with the size and
//     offset lag (max(HW - LEO, 0)) of each partition it holds; with
//     Topics set, only those partitions (nil: all).
//   - An offline dir (a disk failure took it offline) is listed with
//     KAFKA_STORAGE_ERROR and no partitions, as Kafka's: this is how an
//     operator (`broker log-dirs --describe`) sees a failed disk.
//
// Version notes: v3 adds the top-level error code; v4 the volume's total
// and usable bytes.

func init() {
	register(api{key: 35, min: 0, max: 4, needs: needLogDirs, handle: handleDescribeLogDirs, fail: failDescribeLogDirs})
}

func handleDescribeLogDirs(s *Server, r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.DescribeLogDirsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeLogDirsResponse)
	var want map[storage.TopicPartition]bool
	if req.Topics != nil {
		want = map[storage.TopicPartition]bool{}
		for _, t := range req.Topics {
			for _, p := range t.Partitions {
				want[storage.TopicPartition{Topic: t.Topic, Partition: p}] = true
			}
		}
	}
	for _, d := range s.backend.LogDirs.DescribeDirs() {
		dir := kmsg.NewDescribeLogDirsResponseDir()
		dir.Dir, dir.TotalBytes, dir.UsableBytes = d.Dir, d.TotalBytes, d.UsableBytes
		if d.Offline {
			dir.ErrorCode = kerr.KafkaStorageError.Code
		}
		byTopic := map[string]int{}
		for _, p := range d.Partitions {
			if want != nil && !want[p.TopicPartition] {
				continue
			}
			i, ok := byTopic[p.Topic]
			if !ok {
				t := kmsg.NewDescribeLogDirsResponseDirTopic()
				t.Topic = p.Topic
				dir.Topics = append(dir.Topics, t)
				i = len(dir.Topics) - 1
				byTopic[p.Topic] = i
			}
			rp := kmsg.NewDescribeLogDirsResponseDirTopicPartition()
			rp.Partition, rp.Size, rp.OffsetLag = p.Partition, p.Size, p.OffsetLag
			dir.Topics[i].Partitions = append(dir.Topics[i].Partitions, rp)
		}
		resp.Dirs = append(resp.Dirs, dir)
	}
	return resp, nil
}

func failDescribeLogDirs(req kmsg.Request, code int16) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.DescribeLogDirsResponse)
	resp.ErrorCode = code
	return resp
}
