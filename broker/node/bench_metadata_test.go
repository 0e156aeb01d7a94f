package node

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/faultline/faultline/broker/controller"
	"github.com/faultline/faultline/broker/metadata"
)

// propTopic is the topic whose partition 0 the propagation benchmark keeps
// changing.
const propTopic = "propagation"

// BenchmarkMetadataPropagation measures how long a committed
// PartitionChangeRecord takes to reach every broker's metadata image, on
// three combined voters (the brokers learn commits through raft) and on
// three voters plus two broker-only observers (they learn them by
// long-polling the metadata log at the controllers). One cluster per
// sub-benchmark; run it with -benchtime=200x.
//
// Each iteration is one real PartitionChange through the active controller:
// its AlterPartition entry point, called as the partition leader, shrinks
// the ISR of a RF=3 partition by one follower or expands it back, in turn.
// Every node's metadata publisher has a subscriber that stamps the first
// image holding each new partition epoch. The commit moment is the stamp on
// the active controller's own node: the node's publisher feed is the raft
// quorum's first subscriber there, so that stamp is the committed batch
// handed over by the raft loop plus one image apply, the same work every
// other node's stamp includes. A broker's figure is its stamp minus that
// one, so the active node itself is not reported.
//
// Reported: per node nN-p50-ms and nN-p99-ms; all-brokers-p50-ms and
// all-brokers-p99-ms over the time until the last broker had the change
// (the "every broker" figure); max-all-brokers-p99-ms, the worst broker's
// p99; commit-p50-ms from the AlterPartition call to the commit stamp;
// op-p50-ms, op-p99-ms and ns/op, one change from the call until every
// image holds it; and retries, the calls that lost a race with the
// leader's own ISR expansion after a shrink (that expansion is a
// PartitionChange too, not sampled) and were made again.
func BenchmarkMetadataPropagation(b *testing.B) {
	for _, topo := range []struct {
		name      string
		observers int
	}{{"voters=3", 0}, {"voters=3+observers=2", 2}} {
		// Data dirs and ports belong to the parent, the cluster lives
		// across the sub-benchmark's runs (N=1, then N) and stops when
		// its last run returns.
		props := withBrokers(b, clusterProps(b, 3, nil), topo.observers)
		var pc *propCluster
		b.Run(topo.name, func(b *testing.B) {
			if pc == nil {
				pc = &propCluster{}
				pc.start(b, props)
			}
			pc.bench(b)
		})
		if pc != nil {
			pc.stop(b)
		}
	}
}

// propCluster is a cluster with a RF=3 topic and a propRecorder on every
// node's publisher.
type propCluster struct {
	// retries counts the AlterPartition calls of the current run that
	// committed nothing (a race with the leader's own ISR change).
	retries int
	nodes   []*clusterNode
	recs    []*propRecorder
	cancels []func()
}

func (pc *propCluster) start(b *testing.B, props []map[string]string) {
	nodes, errs := launchCluster(b, props, nil)
	pc.nodes = nodes
	for _, err := range errs {
		require.NoError(b, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds(pc.nodes)...))
	require.NoError(b, err)
	defer cl.Close()
	resp, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 3, nil, propTopic)
	require.NoError(b, err)
	require.NoError(b, resp.Err)
	require.Eventually(b, func() bool {
		for _, c := range pc.nodes {
			p, ok := partitionState(c, propTopic, 0)
			if !ok || p.Leader < 0 || len(p.ISR) != len(p.Replicas) {
				return false
			}
		}
		return true
	}, 30*time.Second, 10*time.Millisecond, "every node sees %s-0 with a leader and a full ISR", propTopic)
	for _, c := range pc.nodes {
		r := &propRecorder{changed: make(chan struct{})}
		pc.recs = append(pc.recs, r)
		pc.cancels = append(pc.cancels, c.node.publisher.Subscribe(r.observe))
	}
}

func (pc *propCluster) stop(b *testing.B) {
	for _, cancel := range pc.cancels {
		cancel()
	}
	stopCluster(b, pc.nodes)
}

func (pc *propCluster) bench(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	perNode := map[int32][]time.Duration{}
	var everyBroker, commits, ops []time.Duration
	pc.retries = 0
	b.ResetTimer()
	for i := range b.N {
		start := time.Now()
		active, proposed, epoch := pc.change(b, ctx, i)
		committed := pc.recs[active].wait(b, ctx, epoch)
		var last time.Duration
		for j, r := range pc.recs {
			at := r.wait(b, ctx, epoch)
			if j == active {
				continue
			}
			d := at.Sub(committed)
			perNode[pc.nodes[j].id] = append(perNode[pc.nodes[j].id], d)
			last = max(last, d)
		}
		everyBroker = append(everyBroker, last)
		commits = append(commits, committed.Sub(proposed))
		ops = append(ops, time.Since(start))
	}
	b.StopTimer()

	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	var worstP99 time.Duration
	for _, id := range slices.Sorted(maps.Keys(perNode)) {
		ds := perNode[id]
		b.ReportMetric(ms(propQuantile(ds, 0.5)), fmt.Sprintf("n%d-p50-ms", id))
		b.ReportMetric(ms(propQuantile(ds, 0.99)), fmt.Sprintf("n%d-p99-ms", id))
		worstP99 = max(worstP99, propQuantile(ds, 0.99))
	}
	b.ReportMetric(ms(propQuantile(everyBroker, 0.5)), "all-brokers-p50-ms")
	b.ReportMetric(ms(propQuantile(everyBroker, 0.99)), "all-brokers-p99-ms")
	b.ReportMetric(ms(worstP99), "max-all-brokers-p99-ms")
	b.ReportMetric(ms(propQuantile(commits, 0.5)), "commit-p50-ms")
	b.ReportMetric(ms(propQuantile(ops, 0.5)), "op-p50-ms")
	b.ReportMetric(ms(propQuantile(ops, 0.99)), "op-p99-ms")
	b.ReportMetric(float64(pc.retries), "retries")
}

// change commits one PartitionChange of propTopic-0 through the active
// controller: iteration i shrinks a full ISR by one follower (a different
// one each time) or expands a shrunk ISR back to the replicas. It returns
// the active controller's index, when the change was proposed and the
// partition epoch it committed. A change that races with the leader's own
// ISR expansion (INVALID_UPDATE_VERSION, or nothing left to do) or with a
// quorum election is tried again on the newer state.
func (pc *propCluster) change(b *testing.B, ctx context.Context, i int) (int, time.Time, int32) {
	b.Helper()
	var lastErr error
	for range 100 {
		require.NoError(b, ctx.Err(), "last refusal: %v", lastErr)
		active := -1
		for j, c := range pc.nodes {
			if c.node.controller != nil && c.node.controller.Active() {
				active = j
			}
		}
		if active < 0 {
			lastErr = fmt.Errorf("no active controller")
			time.Sleep(10 * time.Millisecond)
			continue
		}
		ctrl := pc.nodes[active].node.controller
		im := ctrl.Image()
		t := im.Topic(propTopic)
		require.NotNil(b, t)
		p := t.Partitions[0]
		require.GreaterOrEqual(b, p.Leader, int32(0), "%s-0 has a leader", propTopic)
		isr := slices.Clone(p.Replicas)
		if len(p.ISR) == len(p.Replicas) {
			var followers []int32
			for _, r := range p.Replicas {
				if r != p.Leader {
					followers = append(followers, r)
				}
			}
			drop := followers[(i/2)%len(followers)]
			isr = slices.DeleteFunc(isr, func(r int32) bool { return r == drop })
		}
		proposed := time.Now()
		code, after, err := ctrl.AlterPartition(ctx, controller.AlterPartition{
			BrokerID: p.Leader, BrokerEpoch: im.Brokers[p.Leader].Epoch, TopicID: t.ID, Partition: 0,
			LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch, NewISR: isr,
		})
		if err != nil || code != 0 || after.PartitionEpoch <= p.PartitionEpoch {
			pc.retries++
		}
		switch {
		case err != nil:
			lastErr = err
			time.Sleep(10 * time.Millisecond)
		case code != 0:
			lastErr = fmt.Errorf("AlterPartition error code %d", code)
		case after.PartitionEpoch <= p.PartitionEpoch:
			lastErr = fmt.Errorf("AlterPartition to %v changed nothing", isr)
		default:
			return active, proposed, after.PartitionEpoch
		}
	}
	b.Fatalf("no PartitionChange committed in 100 attempts; last: %v", lastErr)
	return 0, time.Time{}, 0
}

// propRecorder stamps, as a subscriber of one node's publisher, the first
// image holding each new partition epoch of propTopic-0.
type propRecorder struct {
	mu      sync.Mutex
	epochs  []int32 // increasing
	times   []time.Time
	changed chan struct{} // closed at the next stamp
}

func (r *propRecorder) observe(_, im *metadata.Image) {
	now := time.Now()
	t := im.Topic(propTopic)
	if t == nil || len(t.Partitions) == 0 {
		return
	}
	e := t.Partitions[0].PartitionEpoch
	r.mu.Lock()
	defer r.mu.Unlock()
	if n := len(r.epochs); n > 0 && r.epochs[n-1] >= e {
		return
	}
	r.epochs = append(r.epochs, e)
	r.times = append(r.times, now)
	close(r.changed)
	r.changed = make(chan struct{})
}

// wait returns when the node's image first held partition epoch e or a
// later one, waiting at most 10 s for it.
func (r *propRecorder) wait(b *testing.B, ctx context.Context, e int32) time.Time {
	b.Helper()
	timeout := time.NewTimer(10 * time.Second)
	defer timeout.Stop()
	for {
		r.mu.Lock()
		i, _ := slices.BinarySearch(r.epochs, e)
		var at time.Time
		if i < len(r.epochs) {
			at = r.times[i]
		}
		ch := r.changed
		r.mu.Unlock()
		if !at.IsZero() {
			return at
		}
		select {
		case <-ch:
		case <-timeout.C:
			b.Fatalf("partition epoch %d of %s-0 not applied within 10 s", e, propTopic)
		case <-ctx.Done():
			b.Fatalf("partition epoch %d of %s-0: %v", e, propTopic, ctx.Err())
		}
	}
}

// propQuantile is the p quantile of ds (sorted in place).
func propQuantile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	return ds[min(int(p*float64(len(ds))), len(ds)-1)]
}
