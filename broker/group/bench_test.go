package group

import (
	"context"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// BenchmarkOffsetCommit measures a simple commit of 3 partitions against an
// in-memory log: the coordinator's own cost per request.
func BenchmarkOffsetCommit(b *testing.B) {
	h := newHarness(b, 0)
	h.log.discard = true
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version = 8
	req.Group = "bench"
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = "t"
	for p := range int32(3) {
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition = p
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = []kmsg.OffsetCommitRequestTopic{rt}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		for j := range req.Topics[0].Partitions {
			req.Topics[0].Partitions[j].Offset = int64(i)
		}
		resp := h.c.OffsetCommit(context.Background(), req)
		if resp.Topics[0].Partitions[0].ErrorCode != codeNone {
			b.Fatalf("commit failed: %d", resp.Topics[0].Partitions[0].ErrorCode)
		}
	}
}

// BenchmarkReplay measures loading an offsets partition of 100 000 commit
// records (1 000 groups x 100 partitions), in records per second.
func BenchmarkReplay(b *testing.B) {
	var recs []Record
	for g := range 1000 {
		for p := range int32(100) {
			recs = append(recs, offsetCommitRecord(fmt.Sprintf("group-%d", g), topicPartition{topic: "t", partition: p}, committedOffset{offset: int64(p)}))
		}
	}
	logger := quietLogger()
	b.ReportAllocs()
	for b.Loop() {
		l := newLoadedPartition(0, logger)
		for _, r := range recs {
			_ = l.apply(r.Key, r.Value)
		}
		if len(l.offsets) != 1000 {
			b.Fatalf("loaded %d groups", len(l.offsets))
		}
	}
	b.ReportMetric(float64(len(recs))*float64(b.N)/b.Elapsed().Seconds(), "records/s")
}
