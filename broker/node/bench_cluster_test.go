package node

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// BenchmarkClusterFailover measures, on three combined nodes, the time from
// the crash of a partition leader (in-process kill: connections cut, no
// controlled shutdown, no clean marker) to the first acks=all write that
// was sent after the crash and acknowledged by the successor. One cluster
// per iteration; run it with -benchtime=20x. It reports the median, p99
// and max against broker.session.timeout.ms + broker.heartbeat.interval.ms,
// and how many victims were also the active controller (their failover
// adds a quorum election, controller.quorum.election.timeout.ms to twice
// that, before the dead broker can be fenced).
func BenchmarkClusterFailover(b *testing.B) {
	for _, timing := range []struct{ heartbeatMs, sessionMs, electionMs int }{
		{testHeartbeatMs, testSessionMs, 1000}, {testHeartbeatMs, testSessionMs, 500}, {2000, 9000, 1000},
	} {
		b.Run(fmt.Sprintf("session=%dms/heartbeat=%dms/election=%dms", timing.sessionMs, timing.heartbeatMs, timing.electionMs), func(b *testing.B) {
			var durations []time.Duration
			controllers := 0
			for range b.N {
				d, wasController := failoverOnce(b, timing.heartbeatMs, timing.sessionMs, timing.electionMs)
				durations = append(durations, d)
				if wasController {
					controllers++
				}
			}
			slices.Sort(durations)
			q := func(p float64) time.Duration { return durations[min(int(p*float64(len(durations))), len(durations)-1)] }
			b.ReportMetric(float64(q(0.5).Milliseconds()), "median-ms")
			b.ReportMetric(float64(q(0.99).Milliseconds()), "p99-ms")
			b.ReportMetric(float64(durations[len(durations)-1].Milliseconds()), "max-ms")
			b.ReportMetric(float64(timing.sessionMs+timing.heartbeatMs), "target-ms")
			b.ReportMetric(float64(controllers), "victims-controller")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// failoverOnce starts a cluster, kills the leader of a RF=3 partition under
// an acks=all load and returns the failover time.
func failoverOnce(b *testing.B, heartbeatMs, sessionMs, electionMs int) (time.Duration, bool) {
	b.Helper()
	b.StopTimer()
	props := clusterProps(b, 3, map[string]string{
		"broker.heartbeat.interval.ms":          strconv.Itoa(heartbeatMs),
		"broker.session.timeout.ms":             strconv.Itoa(sessionMs),
		"controller.quorum.election.timeout.ms": strconv.Itoa(electionMs),
	})
	nodes, errs := launchCluster(b, props, nil)
	defer stopCluster(b, nodes)
	for _, err := range errs {
		require.NoError(b, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds(nodes)...), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DefaultProduceTopic("f"),
		kgo.RecordRetries(1000), kgo.MetadataMinAge(50*time.Millisecond), kgo.RetryBackoffFn(func(int) time.Duration { return 20 * time.Millisecond }))
	require.NoError(b, err)
	defer cl.Close()
	resp, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 3, map[string]*string{"min.insync.replicas": new("2")}, "f")
	require.NoError(b, err)
	require.NoError(b, resp.Err)
	for range 20 {
		require.NoError(b, cl.ProduceSync(ctx, &kgo.Record{Value: []byte("warm")}).FirstErr())
	}
	p, ok := partitionState(nodes[0], "f", 0)
	require.True(b, ok)
	victim := nodes[p.Leader-1]
	wasController := victim.node.controller.Active()

	b.StartTimer()
	killedAt := time.Now()
	victim.node.kill()
	for {
		start := time.Now()
		err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("after")}).FirstErr()
		if err == nil && start.After(killedAt) {
			d := time.Since(killedAt)
			b.StopTimer()
			return d, wasController
		}
		require.NoError(b, ctx.Err())
	}
}

// BenchmarkProduceCluster compares produce throughput with acks=all on
// three nodes (RF=3, min.insync.replicas=2) against acks=1 on one node:
// 100-byte values, async kgo producer, 3 partitions, same client settings.
// The target is a ratio of at least one half.
func BenchmarkProduceCluster(b *testing.B) {
	b.Run("acks=1/nodes=1", func(b *testing.B) {
		n := startNode(b, nil)
		benchProduceCluster(b, []string{n.Addr().String()}, kgo.LeaderAck(), 1)
	})
	b.Run("acks=all/nodes=3", func(b *testing.B) {
		nodes := startCluster(b, 3, nil)
		benchProduceCluster(b, seeds(nodes), kgo.AllISRAcks(), 3)
	})
}

func benchProduceCluster(b *testing.B, seeds []string, acks kgo.Acks, rf int16) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	require.NoError(b, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := kadm.NewClient(cl).CreateTopic(ctx, benchPartitions, rf, map[string]*string{"min.insync.replicas": new(strconv.Itoa(int(min(rf, 2))))}, benchTopic)
	cl.Close()
	require.NoError(b, err)
	require.NoError(b, resp.Err)
	producer, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.RequiredAcks(acks), kgo.DisableIdempotentWrite(),
		kgo.ProducerLinger(time.Millisecond), kgo.MaxBufferedRecords(1<<20))
	require.NoError(b, err)
	defer producer.Close()
	benchProduceAll(b, producer, 1000)
	b.SetBytes(benchValueBytes)
	b.ResetTimer()
	benchProduceAll(b, producer, b.N)
}
