package harness

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestDockerThreeNodeClusterKillAndPartition brings up a three-node
// cluster in containers, kills the leader of a replicated partition (a new
// leader from the ISR takes over and every acknowledged acks=all write
// survives), restarts it on its own data until it is back in the ISR, then
// isolates the active controller from the other nodes (a new controller
// is elected) and heals (all three replicas back in the ISR).
func TestDockerThreeNodeClusterKillAndPartition(t *testing.T) {
	if testing.Short() {
		t.Skip("skipping: -short")
	}
	dockerOrSkip(t, "probe")
	broker, agent := buildBinaries(t)
	runID := fmt.Sprintf("fl3n%d", time.Now().UnixNano()%1_000_000_000)
	rt, err := NewDockerRuntime(context.Background(), runID)
	require.NoError(t, err)
	rt.LogDir = t.TempDir()
	t.Cleanup(func() { _ = rt.Teardown(context.Background()) })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	c := Cluster{Nodes: 3, Topology: "combined", ClusterID: newClusterID(), BrokerBinary: broker, AgentBinary: agent, NetworkFaults: true}
	nodes, err := rt.Setup(ctx, c)
	require.NoError(t, err)
	var seeds []string
	byID := map[int32]string{}
	for _, n := range nodes {
		seeds = append(seeds, n.Addr)
		byID[n.ID] = n.Name
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RetryTimeout(30*time.Second))
	require.NoError(t, err)
	defer cl.Close()
	r := &run{nodes: nodes, adm: cl}
	require.NoError(t, r.waitServing(ctx, time.Minute))

	two := "2"
	_, err = kadm.NewClient(cl).CreateTopic(ctx, 1, 3, map[string]*string{"min.insync.replicas": &two}, "replicated")
	require.NoError(t, err)
	partition := func() (leader int32, epoch int32, isr []int32) {
		req := kmsg.NewPtrMetadataRequest()
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr("replicated")
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			return -1, -1, nil
		}
		p := resp.Topics[0].Partitions[0]
		return p.Leader, p.LeaderEpoch, p.ISR
	}
	require.Eventually(t, func() bool { _, _, isr := partition(); return len(isr) == 3 }, time.Minute, 200*time.Millisecond,
		"all three replicas join the ISR")

	acked := map[int64]string{}
	produce := func(from, n int) {
		for i := from; i < from+n; i++ {
			v := strconv.Itoa(i)
			rec := &kgo.Record{Topic: "replicated", Partition: 0, Value: []byte(v)}
			require.NoError(t, cl.ProduceSync(ctx, rec).FirstErr(), "acks=all write %d", i)
			acked[rec.Offset] = v
		}
	}
	produce(0, 50)

	// Kill the leader: a new leader from the ISR, with a bumped epoch.
	leader, epoch, _ := partition()
	require.GreaterOrEqual(t, leader, int32(1))
	victim := byID[leader]
	require.NoError(t, rt.Kill(ctx, victim))
	require.Eventually(t, func() bool { l, e, _ := partition(); return l >= 1 && l != leader && e > epoch },
		time.Minute, 200*time.Millisecond, "a new leader is elected after %s was killed", victim)
	produce(50, 50)

	// Restart it on its own data: it catches up and rejoins the ISR.
	require.NoError(t, rt.Start(ctx, victim))
	require.Eventually(t, func() bool { _, _, isr := partition(); return len(isr) == 3 }, 2*time.Minute, 500*time.Millisecond,
		"%s rejoins the ISR after its restart", victim)

	// Isolate the active controller from the other nodes: a new one is
	// elected; heal, and every replica is back in the ISR.
	md, err := r.metadata(ctx, false)
	require.NoError(t, err)
	ctl := byID[md.ControllerID]
	require.NotEmpty(t, ctl, "the active controller %d is a node", md.ControllerID)
	var others []string
	for _, n := range nodes {
		if n.Name != ctl {
			others = append(others, n.Name)
			require.NoError(t, rt.Isolate(ctx, n.Name, []string{ctl}))
		}
	}
	require.NoError(t, rt.Isolate(ctx, ctl, others))
	require.Eventually(t, func() bool {
		md, err := r.metadata(ctx, false)
		return err == nil && md.ControllerID >= 0 && byID[md.ControllerID] != ctl
	}, time.Minute, 250*time.Millisecond, "a new controller replaces the isolated %s", ctl)
	for _, n := range nodes {
		require.NoError(t, rt.Isolate(ctx, n.Name, nil))
	}
	produce(100, 20)
	require.Eventually(t, func() bool { _, _, isr := partition(); return len(isr) == 3 }, 2*time.Minute, 500*time.Millisecond,
		"every replica is back in the ISR after healing")

	// Every acknowledged write is there, at its offset.
	read, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{
		"replicated": {0: kgo.NewOffset().AtStart()}}))
	require.NoError(t, err)
	defer read.Close()
	got := map[int64]string{}
	for len(got) < len(acked) && ctx.Err() == nil {
		read.PollFetches(ctx).EachRecord(func(r *kgo.Record) { got[r.Offset] = string(r.Value) })
	}
	assert.Equal(t, acked, got, "every acknowledged acks=all write survives, at its offset")
}
