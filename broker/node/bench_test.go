package node

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Benchmarks compare this broker with franz-go's kfake, an in-memory fake
// that neither writes to disk nor replicates: it bounds from above what a
// broker can reach through the same client. Each benchmark has a
// broker=faultline and a broker=kfake sub-benchmark; compare them with
//
//	go test -run '^$' -bench . -count 6 ./broker/node/ | tee bench.txt
//	go run golang.org/x/perf/cmd/benchstat@latest -col /broker bench.txt

const (
	benchValueBytes = 100
	benchPartitions = 3
	benchTopic      = "bench"
)

// benchPeer is a broker under benchmark: its seed addresses.
type benchPeer struct {
	name  string
	start func(b *testing.B) []string
}

func benchPeers() []benchPeer {
	return []benchPeer{
		{"faultline", func(b *testing.B) []string {
			n := startNode(b, nil)
			return []string{n.Addr().String()}
		}},
		{"kfake", func(b *testing.B) []string {
			c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.Ports(0))
			if err != nil {
				b.Fatalf("kfake: %v", err)
			}
			b.Cleanup(c.Close)
			return c.ListenAddrs()
		}},
	}
}

func benchCreateTopic(b testing.TB, seeds []string) {
	b.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := kadm.NewClient(cl).CreateTopic(ctx, benchPartitions, 1, nil, benchTopic)
	if err != nil || resp.Err != nil {
		b.Fatalf("create topic: %v %v", err, resp.Err)
	}
}

// benchProduceAll produces n records of benchValueBytes asynchronously with
// acks=1 and waits for every acknowledgement.
func benchProduceAll(b *testing.B, cl *kgo.Client, n int) {
	b.Helper()
	value := make([]byte, benchValueBytes)
	errs := make(chan error, 1)
	ctx := context.Background()
	for range n {
		cl.Produce(ctx, &kgo.Record{Topic: benchTopic, Value: value}, func(_ *kgo.Record, err error) {
			if err != nil {
				select {
				case errs <- err:
				default:
				}
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	select {
	case err := <-errs:
		b.Fatalf("produce: %v", err)
	default:
	}
}

func newBenchProducer(b *testing.B, seeds []string) *kgo.Client {
	b.Helper()
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(seeds...),
		kgo.RequiredAcks(kgo.LeaderAck()),
		kgo.DisableIdempotentWrite(),
		kgo.ProducerLinger(time.Millisecond),
		kgo.MaxBufferedRecords(1<<20),
	)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(cl.Close)
	return cl
}

// BenchmarkProduce measures end-to-end produce throughput: 100-byte values,
// acks=1, async kgo producer, 3 partitions, one broker.
func BenchmarkProduce(b *testing.B) {
	for _, peer := range benchPeers() {
		b.Run("broker="+peer.name, func(b *testing.B) {
			seeds := peer.start(b)
			benchCreateTopic(b, seeds)
			cl := newBenchProducer(b, seeds)
			benchProduceAll(b, cl, 1000) // warm up connections and metadata
			b.SetBytes(benchValueBytes)
			b.ReportAllocs()
			b.ResetTimer()
			benchProduceAll(b, cl, b.N)
		})
	}
}

// BenchmarkConsume measures end-to-end consume throughput: b.N records of
// 100 bytes produced beforehand are read back with a direct (group-less)
// kgo consumer from the start of every partition.
func BenchmarkConsume(b *testing.B) {
	for _, peer := range benchPeers() {
		b.Run("broker="+peer.name, func(b *testing.B) {
			seeds := peer.start(b)
			benchCreateTopic(b, seeds)
			benchProduceAll(b, newBenchProducer(b, seeds), b.N)
			cl, err := kgo.NewClient(
				kgo.SeedBrokers(seeds...),
				kgo.ConsumeTopics(benchTopic),
				kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			)
			if err != nil {
				b.Fatal(err)
			}
			defer cl.Close()
			b.SetBytes(benchValueBytes)
			b.ReportAllocs()
			b.ResetTimer()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			for got := 0; got < b.N; {
				fetches := cl.PollFetches(ctx)
				if err := fetches.Err0(); err != nil {
					b.Fatalf("poll after %d of %d records: %v", got, b.N, err)
				}
				got += fetches.NumRecords()
			}
		})
	}
}

// BenchmarkStart1000Partitions measures a clean start (clean-shutdown marker
// present) of a node holding 1000 partitions; the target is under 2 s.
func BenchmarkStart1000Partitions(b *testing.B) {
	const partitions = 1000
	props := map[string]string{}
	dir := b.TempDir()
	props["log.dirs"] = filepath.Join(dir, "data")
	n := startNode(b, props)
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.Addr().String()))
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for i := range 10 {
		resp, err := kadm.NewClient(cl).CreateTopic(ctx, partitions/10, 1, nil, fmt.Sprintf("t%d", i))
		if err != nil || resp.Err != nil {
			b.Fatalf("create topic: %v %v", err, resp.Err)
		}
	}
	cl.Close()
	stopNode(b, n)
	b.ResetTimer()
	var logLoadMs int64
	for range b.N {
		n := startNode(b, props)
		b.StopTimer()
		logLoadMs += n.metrics.logLoadTimeMs.Load()
		stopNode(b, n)
		b.StartTimer()
	}
	// How much of a start is loading the logs (the rest is mostly electing
	// the 1000 leaders again after registration).
	b.ReportMetric(float64(logLoadMs)/float64(b.N), "logload-ms/op")
}
