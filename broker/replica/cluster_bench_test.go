package replica_test

import (
	"context"
	"fmt"
	"net"
	"runtime"
	"strconv"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/faultline/faultline/broker/storage"
)

// BenchmarkClusterProduce compares acks=all on a partition replicated to
// three in-process brokers (followers fetching over loopback TCP through
// the real server) with acks=1 on a single broker, for one producer and
// for 16 concurrent ones (as a pipelining client would keep several
// batches in flight). Batches hold 10 records of 100 bytes; no fsync per
// append.
func BenchmarkClusterProduce(b *testing.B) {
	cases := []struct {
		name     string
		replicas []int32
		acks     int16
	}{
		{"acks=1,RF=1", []int32{1}, 1},
		{"acks=all,RF=3", []int32{1, 2, 3}, -1},
	}
	for _, tc := range cases {
		for _, producers := range []int{1, 16} {
			b.Run(fmt.Sprintf("%s,producers=%d", tc.name, producers), func(b *testing.B) {
				// RunParallel runs parallelism x GOMAXPROCS goroutines.
				parallelism := max(producers/runtime.GOMAXPROCS(0), 1)
				c := newTestCluster(b, 30000)
				for _, id := range tc.replicas {
					c.start(id, b.TempDir())
				}
				c.createTopic("bench", tc.replicas, nil)
				m := c.node(1).m
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
				if producers == 1 {
					for range b.N {
						copy(buf, template)
						if res := m.Produce(ctx, "bench", 0, buf, tc.acks); res.ErrorCode != 0 {
							b.Fatalf("produce: %d %s", res.ErrorCode, res.ErrorMessage)
						}
					}
					return
				}
				b.SetParallelism(parallelism)
				b.RunParallel(func(pb *testing.PB) {
					buf := make([]byte, len(template))
					for pb.Next() {
						copy(buf, template)
						if res := m.Produce(ctx, "bench", 0, buf, tc.acks); res.ErrorCode != 0 {
							b.Errorf("produce: %d %s", res.ErrorCode, res.ErrorMessage)
							return
						}
					}
				})
			})
		}
	}
}

// BenchmarkClusterClientProduce is the same comparison as a client sees
// it: a franz-go producer (no idempotence, no linger, up to 5 requests in
// flight) writing 100-byte records over loopback to the leader, acks=1 on
// one broker against acks=all on three.
func BenchmarkClusterClientProduce(b *testing.B) {
	cases := []struct {
		name     string
		replicas []int32
		acks     kgo.Acks
	}{
		{"acks=1,RF=1", []int32{1}, kgo.LeaderAck()},
		{"acks=all,RF=3", []int32{1, 2, 3}, kgo.AllISRAcks()},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			c := newTestCluster(b, 30000)
			for _, id := range tc.replicas {
				c.start(id, b.TempDir())
			}
			c.createTopic("bench", tc.replicas, nil)
			addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(c.node(1).port))
			cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic("bench"), kgo.RequiredAcks(tc.acks),
				kgo.DisableIdempotentWrite(), kgo.ProducerLinger(0), kgo.MaxProduceRequestsInflightPerBroker(5))
			if err != nil {
				b.Fatal(err)
			}
			defer cl.Close()
			ctx := context.Background()
			if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("warm-up")}).FirstErr(); err != nil {
				b.Fatal(err)
			}
			value := make([]byte, 100)
			var (
				mu      sync.Mutex
				failure error
				wg      sync.WaitGroup
			)
			b.SetBytes(int64(len(value)))
			b.ResetTimer()
			for range b.N {
				wg.Add(1)
				cl.Produce(ctx, &kgo.Record{Value: value}, func(_ *kgo.Record, err error) {
					if err != nil {
						mu.Lock()
						failure = err
						mu.Unlock()
					}
					wg.Done()
				})
			}
			wg.Wait()
			b.StopTimer()
			if failure != nil {
				b.Fatal(failure)
			}
		})
	}
}
