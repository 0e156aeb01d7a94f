package group

import (
	"context"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/faultline/faultline/broker/metadata"
)

// kfakeWithCoordinator starts a one-broker kfake cluster with topic "t" (3
// partitions) whose group requests are all answered by a real Coordinator,
// so that franz-go's consumer-group client runs against our state machine.
// kfake serves produce, fetch and metadata.
func kfakeWithCoordinator(t *testing.T) (*kfake.Cluster, *Coordinator, []string) {
	t.Helper()
	kc, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, "t"))
	require.NoError(t, err)
	t.Cleanup(kc.Close)
	addrs := kc.ListenAddrs()
	host, portStr, err := net.SplitHostPort(addrs[0])
	require.NoError(t, err)
	port, err := strconv.Atoi(portStr)
	require.NoError(t, err)

	admin, err := kgo.NewClient(kgo.SeedBrokers(addrs...))
	require.NoError(t, err)
	defer admin.Close()
	topics, err := kadm.NewClient(admin).ListTopics(context.Background(), "t")
	require.NoError(t, err)
	td := topics["t"]
	require.NoError(t, td.Err)

	const node = 0
	im := &metadata.Image{
		Brokers:    map[int32]metadata.Broker{node: {ID: node, Host: host, Port: int32(port)}},
		Topics:     map[string]*metadata.Topic{},
		TopicsByID: map[metadata.Uuid]*metadata.Topic{},
	}
	addTopic(im, OffsetsTopic, metadata.Uuid{0xff}, 50, node)
	addTopic(im, "t", metadata.Uuid(td.ID), 3, node)
	src := &fakeSource{}
	src.im.Store(im)
	cfg := DefaultConfig()
	cfg.NodeID = node
	cfg.GroupInitialRebalanceDelayMs = 0
	cfg.Logger = quietLogger()
	c, err := New(cfg, newMemLog(), src)
	require.NoError(t, err)
	t.Cleanup(c.Close)
	c.ApplyImage(nil, im)

	ctx := context.Background()
	handle := func(req kmsg.Request) kmsg.Response {
		switch r := req.(type) {
		case *kmsg.FindCoordinatorRequest:
			return c.FindCoordinator(ctx, r)
		case *kmsg.JoinGroupRequest:
			return c.JoinGroup(WithClient(ctx, "kgo", "127.0.0.1"), r)
		case *kmsg.SyncGroupRequest:
			return c.SyncGroup(ctx, r)
		case *kmsg.HeartbeatRequest:
			return c.Heartbeat(ctx, r)
		case *kmsg.LeaveGroupRequest:
			return c.LeaveGroup(ctx, r)
		case *kmsg.OffsetCommitRequest:
			return c.OffsetCommit(ctx, r)
		case *kmsg.OffsetFetchRequest:
			return c.OffsetFetch(ctx, r)
		case *kmsg.DescribeGroupsRequest:
			return c.DescribeGroups(ctx, r)
		case *kmsg.ListGroupsRequest:
			return c.ListGroups(ctx, r)
		}
		return nil
	}
	for _, key := range []int16{8, 9, 10, 11, 12, 13, 14, 15, 16} {
		kc.ControlKey(key, func(req kmsg.Request) (kmsg.Response, error, bool) {
			kc.KeepControl()
			var resp kmsg.Response
			// JoinGroup and SyncGroup park: let kfake serve other
			// connections meanwhile.
			kc.SleepControl(func() { resp = handle(req) })
			return resp, nil, true
		})
	}
	return kc, c, addrs
}

func produce(t *testing.T, addrs []string, n int) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.DefaultProduceTopic("t"))
	require.NoError(t, err)
	defer cl.Close()
	for i := range n {
		r := kgo.StringRecord(strconv.Itoa(i))
		r.Key = []byte(strconv.Itoa(i))
		require.NoError(t, cl.ProduceSync(context.Background(), r).FirstErr())
	}
}

func consumer(t *testing.T, addrs []string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	opts = append([]kgo.Opt{
		kgo.SeedBrokers(addrs...),
		kgo.ConsumerGroup("cg"),
		kgo.ConsumeTopics("t"),
		kgo.DisableAutoCommit(),
		kgo.FetchMaxWait(100 * time.Millisecond),
	}, opts...)
	cl, err := kgo.NewClient(opts...)
	require.NoError(t, err)
	return cl
}

// pollN polls until it has n records and commits them.
func pollN(t *testing.T, cl *kgo.Client, n int) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var got []string
	for len(got) < n {
		fs := cl.PollRecords(ctx, n-len(got))
		require.NoError(t, ctx.Err(), "polled %d of %d records", len(got), n)
		fs.EachError(func(topic string, p int32, err error) { require.NoError(t, err, "%s-%d", topic, p) })
		var recs []*kgo.Record
		fs.EachRecord(func(r *kgo.Record) {
			got = append(got, string(r.Value))
			recs = append(recs, r)
		})
		require.NoError(t, cl.CommitRecords(ctx, recs...))
	}
	return got
}

func TestKgoConsumerResumesAtCommittedOffset(t *testing.T) {
	_, c, addrs := kfakeWithCoordinator(t)
	produce(t, addrs, 90)

	first := consumer(t, addrs)
	got1 := pollN(t, first, 40)
	first.Close() // leaves the group

	d := kmsg.NewPtrDescribeGroupsRequest()
	d.Groups = []string{"cg"}
	assert.Equal(t, "Empty", c.DescribeGroups(context.Background(), d).Groups[0].State)

	second := consumer(t, addrs)
	defer second.Close()
	got2 := pollN(t, second, 90-len(got1))

	seen := map[string]int{}
	for _, v := range append(got1, got2...) {
		seen[v]++
	}
	assert.Len(t, seen, 90, "every record consumed")
	for v, n := range seen {
		assert.Equal(t, 1, n, "record %s consumed twice: the second consumer did not resume at the commit", v)
	}
}

func TestKgoTwoConsumersSplitPartitions(t *testing.T) {
	_, c, addrs := kfakeWithCoordinator(t)
	produce(t, addrs, 30)

	var mu sync.Mutex
	assigned := map[string][]int32{}
	track := func(name string) kgo.Opt {
		return kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
			mu.Lock()
			defer mu.Unlock()
			assigned[name] = append(assigned[name], m["t"]...)
		})
	}
	a := consumer(t, addrs, track("a"), kgo.Balancers(kgo.RangeBalancer()))
	defer a.Close()
	pollN(t, a, 1)
	b := consumer(t, addrs, track("b"), kgo.Balancers(kgo.RangeBalancer()))
	defer b.Close()

	require.Eventually(t, func() bool {
		d := kmsg.NewPtrDescribeGroupsRequest()
		d.Groups = []string{"cg"}
		g := c.DescribeGroups(context.Background(), d).Groups[0]
		return g.State == "Stable" && len(g.Members) == 2
	}, 20*time.Second, 10*time.Millisecond, "both consumers in one stable generation")
	// b keeps polling so that it takes part in the rebalance.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.Eventually(t, func() bool {
		b.PollRecords(ctx, 1)
		mu.Lock()
		defer mu.Unlock()
		return len(assigned["b"]) > 0
	}, 10*time.Second, 10*time.Millisecond)
	d := kmsg.NewPtrDescribeGroupsRequest()
	d.Groups = []string{"cg"}
	g := c.DescribeGroups(context.Background(), d).Groups[0]
	assert.Equal(t, "range", g.Protocol)
	for _, m := range g.Members {
		assert.NotEmpty(t, m.MemberAssignment)
		assert.Equal(t, "kgo", m.ClientID)
	}
}
