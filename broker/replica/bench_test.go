package replica

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/faultline/faultline/broker/storage"
)

// BenchmarkProduce measures the partition layer's produce path on one node
// (validation, append, HW advance, acks) with batches of 10 records of 100
// bytes, without fsync per append (Kafka's default flush policy).
func BenchmarkProduce(b *testing.B) {
	for _, acks := range []int16{1, -1} {
		name := map[int16]string{1: "acks=1", -1: "acks=all"}[acks]
		b.Run(name, func(b *testing.B) {
			br := startBroker(b, b.TempDir(), 1)
			defer br.stop(b)
			br.createTopic(b, "bench", 1, nil)
			recs := make([]storage.Record, 10)
			for i := range recs {
				recs[i] = storage.Record{TimestampMs: 1, Value: make([]byte, 100)}
			}
			template := storage.BuildBatch(recs, storage.BatchOptions{})
			buf := make([]byte, len(template))
			ctx := context.Background()
			b.SetBytes(int64(len(template)))
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				copy(buf, template)
				res := br.m.Produce(ctx, "bench", 0, buf, acks)
				if res.ErrorCode != 0 {
					b.Fatalf("produce: %d %s", res.ErrorCode, res.ErrorMessage)
				}
			}
		})
	}
}

// BenchmarkFetch measures consumer reads of 1 MiB from a populated log.
func BenchmarkFetch(b *testing.B) {
	br := startBroker(b, b.TempDir(), 1)
	defer br.stop(b)
	br.createTopic(b, "bench", 1, nil)
	recs := make([]storage.Record, 100)
	for i := range recs {
		recs[i] = storage.Record{TimestampMs: 1, Value: make([]byte, 100)}
	}
	ctx := context.Background()
	for range 200 {
		res := br.m.Produce(ctx, "bench", 0, storage.BuildBatch(recs, storage.BatchOptions{}), 1)
		require.Equal(b, int16(0), res.ErrorCode)
	}
	req := consumer(0)
	var n int
	b.ResetTimer()
	for range b.N {
		f := br.m.Fetch(ctx, "bench", 0, req)
		if f.ErrorCode != 0 || len(f.Records) == 0 {
			b.Fatalf("fetch: %d", f.ErrorCode)
		}
		n = len(f.Records)
	}
	b.SetBytes(int64(n))
}
