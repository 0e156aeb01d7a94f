package raftq

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/faultline/faultline/broker/metadata"
)

// BenchmarkAppend measures Append on the leader of three in-process voters
// (fsync per Ready on every voter): "serial" is the commit latency of one
// append at a time (ns/op), "parallel" the throughput of 64 concurrent
// appenders (appends/s), on the in-memory and the TCP transport.
func BenchmarkAppend(b *testing.B) {
	for _, tr := range []struct {
		name string
		tcp  bool
	}{{"mem", false}, {"tcp", true}} {
		b.Run(tr.name+"/serial", func(b *testing.B) {
			c := newCluster(b, 3, tr.tcp, benchConfig)
			q := c.nodes[c.leaderAmong(c.ids...)]
			ctx := context.Background()
			rec := []metadata.Record{&metadata.NoOpRecord{}}
			b.ResetTimer()
			for b.Loop() {
				_, err := q.Append(ctx, rec)
				require.NoError(b, err)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "appends/s")
		})
		b.Run(tr.name+"/parallel", func(b *testing.B) {
			c := newCluster(b, 3, tr.tcp, benchConfig)
			q := c.nodes[c.leaderAmong(c.ids...)]
			ctx := context.Background()
			var failed atomic.Int64
			b.SetParallelism(64)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				rec := []metadata.Record{&metadata.NoOpRecord{}}
				for pb.Next() {
					if _, err := q.Append(ctx, rec); err != nil {
						failed.Add(1)
					}
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "appends/s")
			require.Zero(b, failed.Load())
		})
	}
}

// benchConfig keeps the cluster quiet: Kafka-like timeouts so that no
// election interrupts the measurement, and no logging.
func benchConfig(cfg *Config) {
	cfg.Logger = nil
	cfg.TickInterval = 0
	cfg.ElectionTicks = 0
	cfg.HeartbeatTicks = 0
}

// BenchmarkLeaderFailover measures, with the default timing (100 ms ticks,
// election after 10 to 20 ticks, as Kafka's 1 s election timeout), the
// time from closing the leader of three voters to the first append
// committed by its successor (ms/failover).
func BenchmarkLeaderFailover(b *testing.B) {
	c := newCluster(b, 3, false, benchConfig)
	ctx := context.Background()
	rec := []metadata.Record{&metadata.NoOpRecord{}}
	var total float64
	for b.Loop() {
		old := c.leaderAmong(c.ids...)
		_, err := c.nodes[old].Append(ctx, rec)
		require.NoError(b, err)
		start := time.Now()
		c.stop(old)
		for {
			le := c.nodes[c.live()[0]].Leader()
			if le.LeaderID >= 0 && le.LeaderID != old {
				if _, err := c.nodes[le.LeaderID].Append(ctx, rec); err == nil {
					break
				}
			}
			time.Sleep(time.Millisecond)
		}
		total += float64(time.Since(start).Milliseconds())
		c.start(old)
	}
	b.ReportMetric(total/float64(b.N), "ms/failover")
}
