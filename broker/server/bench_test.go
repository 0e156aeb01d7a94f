package server

import (
	"context"
	"encoding/binary"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/faultline/faultline/broker/replica"
)

// discardReplicas accepts every produce without keeping it and answers
// every fetch with the same records, so benchmarks measure the server.
type discardReplicas struct {
	*fakeCluster
	next    atomic.Int64
	records []byte
}

func (d *discardReplicas) Produce(_ context.Context, _ string, _ int32, records []byte, _ int16) replica.ProduceResult {
	n := int64(int32(binary.BigEndian.Uint32(records[23:]))) + 1
	return replica.ProduceResult{BaseOffset: d.next.Add(n) - n, LogAppendTime: -1}
}

func (d *discardReplicas) Fetch(context.Context, string, int32, replica.FetchPartition) replica.FetchResult {
	return replica.FetchResult{HighWatermark: 100, LastStableOffset: 100, Records: d.records, PreferredReplica: -1}
}

// BenchmarkDecodeDispatch measures what the server adds to each request
// with no sockets involved: header and body decoding, dispatch, the
// handler's own work around the backend, and response encoding.
func BenchmarkDecodeDispatch(b *testing.B) {
	fake := newFakeCluster(1, "127.0.0.1", 9092)
	for _, name := range []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "t"} {
		fake.addTopic(name, 3)
	}
	be := fake.backend()
	be.Replicas = &discardReplicas{fakeCluster: fake, records: recordBatch(10, 100)}
	srv, err := New(Options{}, be, slog.New(slog.DiscardHandler), nil)
	require.NoError(b, err)
	f := kmsg.NewRequestFormatter(kmsg.FormatterClientID("bench"))

	produce := kmsg.NewPtrProduceRequest()
	produce.Version, produce.Acks, produce.TimeoutMillis = 11, 1, 5000
	produce.Topics = []kmsg.ProduceRequestTopic{{Topic: "t", Partitions: []kmsg.ProduceRequestTopicPartition{{Records: recordBatch(10, 100)}}}}
	fetch := kmsg.NewPtrFetchRequest()
	fetch.Version, fetch.ReplicaID, fetch.MaxBytes, fetch.SessionEpoch = 12, -1, 1<<20, -1
	fetch.Topics = []kmsg.FetchRequestTopic{{Topic: "t", Partitions: []kmsg.FetchRequestTopicPartition{{PartitionMaxBytes: 1 << 20}}}}
	metadata := kmsg.NewPtrMetadataRequest()
	metadata.Version = 12
	apiVersions := kmsg.NewPtrApiVersionsRequest()
	apiVersions.Version, apiVersions.ClientSoftwareName, apiVersions.ClientSoftwareVersion = 4, "bench", "1"

	for _, bc := range []struct {
		name string
		req  kmsg.Request
	}{{"Produce10x100B", produce}, {"Fetch1KB", fetch}, {"Metadata10Topics", metadata}, {"ApiVersions", apiVersions}} {
		frame := f.AppendRequest(nil, bc.req, 1)[4:]
		b.Run(bc.name, func(b *testing.B) {
			ctx := context.Background()
			b.SetBytes(int64(len(frame)))
			b.ReportAllocs()
			var out []byte
			for b.Loop() {
				buf := append([]byte(nil), frame...) // each request owns its frame
				r, err := srv.decodeRequest(buf)
				if err != nil {
					b.Fatal(err)
				}
				r.ctx = ctx
				resp, err := srv.serveRequest(r)
				if err != nil || resp == nil {
					b.Fatal(err)
				}
				out = appendResponse(out[:0], 1, resp)
			}
		})
	}
}

// BenchmarkKgoProduce produces 100-byte values with kgo (acks=1, async,
// default batching) over loopback, against this server on a backend that
// discards the records and, in the same benchmark, against franz-go's
// kfake as a peer. One op is one record.
func BenchmarkKgoProduce(b *testing.B) {
	value := make([]byte, 100)
	run := func(b *testing.B, seed string) {
		cl, err := kgo.NewClient(kgo.SeedBrokers(seed), kgo.DefaultProduceTopic("t"), kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
		require.NoError(b, err)
		defer cl.Close()
		ctx := context.Background()
		require.NoError(b, cl.ProduceSync(ctx, &kgo.Record{Value: value}).FirstErr())
		b.SetBytes(int64(len(value)))
		b.ReportAllocs()
		var wg sync.WaitGroup
		var failed atomic.Int64
		for b.Loop() {
			wg.Add(1)
			cl.Produce(ctx, &kgo.Record{Value: value}, func(_ *kgo.Record, err error) {
				if err != nil {
					failed.Add(1)
				}
				wg.Done()
			})
		}
		wg.Wait()
		require.Zero(b, failed.Load())
	}
	b.Run("faultline", func(b *testing.B) {
		ts := startServer(b, Options{}, func(be *Backend) {
			be.Replicas = &discardReplicas{fakeCluster: be.Replicas.(*fakeCluster)}
		})
		ts.fake.addTopic("t", 3)
		run(b, ts.addr)
	})
	b.Run("kfake", func(b *testing.B) {
		c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, "t"))
		require.NoError(b, err)
		defer c.Close()
		run(b, c.ListenAddrs()[0])
	})
}

// BenchmarkConnPipelined sends produce requests (one batch of 10 x 100 B)
// back to back on one connection while reading the responses, as kgo's
// producer pipelines them: the server's whole per-request cost over a
// socket, without a client library. One op is one request.
func BenchmarkConnPipelined(b *testing.B) {
	ts := startServer(b, Options{}, func(be *Backend) {
		be.Replicas = &discardReplicas{fakeCluster: be.Replicas.(*fakeCluster)}
	})
	ts.fake.addTopic("t", 1)
	c := dial(b, ts.addr)
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks, req.TimeoutMillis = 11, 1, 5000
	req.Topics = []kmsg.ProduceRequestTopic{{Topic: "t", Partitions: []kmsg.ProduceRequestTopicPartition{{Records: recordBatch(10, 100)}}}}
	frame := kmsg.NewRequestFormatter(kmsg.FormatterClientID("bench")).AppendRequest(nil, req, 1)
	b.SetBytes(int64(len(frame)))
	b.ResetTimer()
	writeErr := make(chan error, 1)
	go func() {
		for range b.N {
			if _, err := c.Write(frame); err != nil {
				writeErr <- err
				return
			}
		}
		writeErr <- nil
	}()
	resp := &kmsg.ProduceResponse{Version: 11}
	for range b.N {
		if _, err := c.readResponse(resp); err != nil {
			b.Fatal(err)
		}
	}
	require.NoError(b, <-writeErr)
}
