package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/faultline/faultline/broker/metadata"
	"github.com/faultline/faultline/broker/storage"
)

// Cluster timings of the tests: failover within a few seconds.
const (
	testHeartbeatMs = 200
	testSessionMs   = 1500
)

// handedOut are the ports freePorts returned in this test binary: a port
// is closed again before its node binds it, so without this a later call
// (a broker's listener after its controllers') could get a port an
// earlier call handed out and its node has not bound yet.
var handedOut sync.Map

// freePorts reserves n distinct loopback ports, never one an earlier call
// returned (closed again, so a later bind may race with another process;
// good enough for tests).
func freePorts(t testing.TB, n int) []int {
	t.Helper()
	var lns []net.Listener
	var ports []int
	for attempts := 0; len(ports) < n; attempts++ {
		require.Less(t, attempts, 100*n, "no fresh loopback port")
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		lns = append(lns, ln)
		port := ln.Addr().(*net.TCPAddr).Port
		if _, dup := handedOut.LoadOrStore(port, true); !dup {
			ports = append(ports, port)
		}
	}
	for _, ln := range lns {
		require.NoError(t, ln.Close())
	}
	return ports
}

// clusterProps returns the configurations of a cluster of size combined
// nodes (ids 1..size) on loopback, data under base.
func clusterProps(t testing.TB, size int, extra map[string]string) []map[string]string {
	t.Helper()
	ports := freePorts(t, size)
	var voters []string
	for i, p := range ports {
		voters = append(voters, fmt.Sprintf("%d@127.0.0.1:%d", i+1, p))
	}
	out := make([]map[string]string, size)
	for i := range size {
		dir := t.TempDir()
		props := map[string]string{
			"process.roles":                    "broker,controller",
			"node.id":                          strconv.Itoa(i + 1),
			"listeners":                        fmt.Sprintf("PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:%d", ports[i]),
			"controller.listener.names":        "CONTROLLER",
			"controller.quorum.voters":         strings.Join(voters, ","),
			"log.dirs":                         filepath.Join(dir, "data"),
			"offsets.topic.replication.factor": "3",
			"offsets.topic.num.partitions":     "3",
			"group.initial.rebalance.delay.ms": "0",
			"broker.heartbeat.interval.ms":     strconv.Itoa(testHeartbeatMs),
			"broker.session.timeout.ms":        strconv.Itoa(testSessionMs),
			"replica.lag.time.max.ms":          "3000",
			"replica.fetch.wait.max.ms":        "100",
			"replica.fetch.backoff.ms":         "100",
		}
		maps.Copy(props, extra)
		out[i] = props
	}
	return out
}

// withBrokers appends count broker-only nodes (ids after the voters) to
// the configurations of a cluster of voters.
func withBrokers(t testing.TB, voters []map[string]string, count int) []map[string]string {
	out := voters
	for i := range count {
		props := maps.Clone(voters[0])
		props["process.roles"] = "broker"
		props["node.id"] = strconv.Itoa(len(voters) + i + 1)
		props["listeners"] = "PLAINTEXT://127.0.0.1:0"
		props["log.dirs"] = filepath.Join(t.TempDir(), "data")
		out = append(out, props)
	}
	return out
}

// clusterNode is one node of an in-process cluster, restartable on its
// data.
type clusterNode struct {
	id    int32
	props map[string]string
	logs  *syncBuffer
	node  *Node
	// dial, when set, carries the node's connections to its peers (a
	// fault switch's dialer).
	dial DialFunc
	// fs, when set, carries the node's file operations on log.dirs (an
	// error FS to fail its disk).
	fs storage.FS
}

func (c *clusterNode) start(t testing.TB) error {
	cfg := testConfig(t, c.props)
	if _, err := Format(cfg, FormatOptions{ClusterID: testClusterID, IgnoreFormatted: true}); err != nil {
		return err
	}
	c.logs = &syncBuffer{}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	n, err := StartWith(ctx, cfg, slog.New(NewKafkaHandler(c.logs, slog.LevelInfo)), Options{Dial: c.dial, FS: c.fs})
	if err != nil {
		return fmt.Errorf("node %d: %w\n%s", c.id, err, c.logs)
	}
	c.node = n
	return nil
}

// startCluster starts size combined nodes at once (each waits for a
// quorum) and stops them when the test ends.
func startCluster(t testing.TB, size int, extra map[string]string) []*clusterNode {
	t.Helper()
	return startClusterProps(t, clusterProps(t, size, extra))
}

// startClusterProps starts a node per configuration at once.
func startClusterProps(t testing.TB, props []map[string]string) []*clusterNode {
	t.Helper()
	return startClusterDial(t, props, nil)
}

// startClusterDial starts a node per configuration at once, each dialing
// its peers through dial(id) when dial is set.
// A controller port freePorts handed out can be taken before its node
// binds it (as the source port of any connection on the machine): such a
// start is tried again, on fresh ports and data directories.
func startClusterDial(t testing.TB, props []map[string]string, dial func(id int32) DialFunc) []*clusterNode {
	t.Helper()
	nodes, errs := launchCluster(t, props, dial)
	for attempt := 0; attempt < 3 && slices.ContainsFunc(errs, controllerPortTaken); attempt++ {
		t.Logf("a controller port was taken before its node bound it: starting the cluster again on fresh ports")
		stopCluster(t, nodes)
		freshPorts(t, props)
		nodes, errs = launchCluster(t, props, dial)
	}
	t.Cleanup(func() { stopCluster(t, nodes) })
	for _, err := range errs {
		require.NoError(t, err)
	}
	return nodes
}

func controllerPortTaken(err error) bool {
	return errors.Is(err, syscall.EADDRINUSE) && strings.Contains(err.Error(), "controller listener")
}

// freshPorts moves every controller port of props to a fresh one (in every
// node's listeners, voters and bootstrap servers) and every node to a
// fresh data directory, in place: callers that keep props (to start a
// node later) and dial functions that read them see the new ports.
func freshPorts(t testing.TB, props []map[string]string) {
	t.Helper()
	var old []string
	for _, p := range props {
		old = append(old, controllerListeners(p)...)
	}
	ports := freePorts(t, len(old))
	var pairs []string
	for i, addr := range old {
		pairs = append(pairs, addr, fmt.Sprintf("127.0.0.1:%d", ports[i]))
	}
	swap := strings.NewReplacer(pairs...)
	for _, p := range props {
		for _, k := range []string{"listeners", "controller.quorum.voters", "controller.quorum.bootstrap.servers"} {
			if v, ok := p[k]; ok {
				p[k] = swap.Replace(v)
			}
		}
		p["log.dirs"] = filepath.Join(t.TempDir(), "data")
	}
}

// controllerListeners are the addresses of a node's CONTROLLER listeners.
func controllerListeners(props map[string]string) []string {
	var addrs []string
	for _, l := range strings.Split(props["listeners"], ",") {
		if addr, ok := strings.CutPrefix(l, "CONTROLLER://"); ok {
			addrs = append(addrs, addr)
		}
	}
	return addrs
}

// launchCluster starts a node per configuration at once and returns them
// with the error of each start; stopCluster stops them.
func launchCluster(t testing.TB, props []map[string]string, dial func(id int32) DialFunc) ([]*clusterNode, []error) {
	size := len(props)
	nodes := make([]*clusterNode, size)
	errs := make([]error, size)
	var wg sync.WaitGroup
	for i := range size {
		nodes[i] = &clusterNode{id: int32(i + 1), props: props[i]}
		if dial != nil {
			nodes[i].dial = dial(int32(i + 1))
		}
		wg.Go(func() { errs[i] = nodes[i].start(t) })
	}
	wg.Wait()
	return nodes, errs
}

// stopCluster stops every running node at once, and logs each node's
// output when t failed.
func stopCluster(t testing.TB, nodes []*clusterNode) {
	var wg sync.WaitGroup
	for _, c := range nodes {
		if c != nil && c.node != nil {
			wg.Go(func() { stopNode(t, c.node) })
		}
	}
	wg.Wait()
	if t.Failed() {
		for _, c := range nodes {
			if c != nil && c.logs != nil {
				t.Logf("node %d log:\n%s", c.id, c.logs)
			}
		}
	}
}

func seeds(nodes []*clusterNode) []string {
	var out []string
	for _, c := range nodes {
		if c.node != nil && c.node.State() == StateRunning {
			out = append(out, c.node.Addr().String())
		}
	}
	return out
}

// partitionState is partition p of topic as node c's image has it.
func partitionState(c *clusterNode, topic string, p int32) (metadata.Partition, bool) {
	t := c.node.publisher.Image().Topic(topic)
	if t == nil || int(p) >= len(t.Partitions) {
		return metadata.Partition{}, false
	}
	return t.Partitions[p], true
}

// TestClusterLeaderCrash runs three combined nodes: a topic with RF=3 and
// min.insync.replicas=2 takes acks=all writes, the partition leader is
// killed without a controlled shutdown, a replica of the ISR takes over
// with a bumped leader epoch within the session timeout plus a heartbeat,
// every acknowledged record is readable from the survivors, writes go on,
// and the killed node restarts on its data and rejoins the ISR.
func TestClusterLeaderCrash(t *testing.T) {
	nodes := startCluster(t, 3, nil)
	for _, c := range nodes {
		assert.Contains(t, c.logs.String(), fmt.Sprintf("Registered broker %d with controller quorum", c.id))
		assert.Contains(t, c.logs.String(), fmt.Sprintf("Kafka broker %d is ready to serve requests", c.id))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	admin, err := kgo.NewClient(kgo.SeedBrokers(seeds(nodes)...))
	require.NoError(t, err)
	defer admin.Close()
	resp, err := kadm.NewClient(admin).CreateTopic(ctx, 1, 3, map[string]*string{"min.insync.replicas": new("2")}, "orders")
	require.NoError(t, err)
	require.NoError(t, resp.Err)
	require.Eventually(t, func() bool {
		for _, c := range nodes {
			p, ok := partitionState(c, "orders", 0)
			if !ok || len(p.ISR) != 3 || p.Leader < 0 {
				return false
			}
		}
		return true
	}, 30*time.Second, 10*time.Millisecond, "every node sees orders-0 with a full ISR")

	producer, err := kgo.NewClient(kgo.SeedBrokers(seeds(nodes)...), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.DefaultProduceTopic("orders"), kgo.RecordRetries(1000), kgo.MetadataMinAge(50*time.Millisecond), kgo.RetryBackoffFn(func(int) time.Duration { return 20 * time.Millisecond }))
	require.NoError(t, err)
	defer producer.Close()
	acked := map[string]bool{}
	produce := func(from, to int) {
		for i := from; i < to; i++ {
			v := fmt.Sprintf("record-%04d", i)
			r := producer.ProduceSync(ctx, &kgo.Record{Value: []byte(v)})
			require.NoError(t, r.FirstErr(), v)
			acked[v] = true
		}
	}
	produce(0, 100)

	before, _ := partitionState(nodes[0], "orders", 0)
	old := nodes[before.Leader-1]
	var survivors []*clusterNode
	for _, c := range nodes {
		if c != old {
			survivors = append(survivors, c)
		}
	}
	killedAt := time.Now()
	old.node.kill()
	var after metadata.Partition
	require.Eventually(t, func() bool {
		p, ok := partitionState(survivors[0], "orders", 0)
		after = p
		return ok && p.Leader >= 0 && p.Leader != old.id
	}, testSessionMs*time.Millisecond+testHeartbeatMs*time.Millisecond+5*time.Second, 5*time.Millisecond, "a new leader")
	elected := time.Since(killedAt)
	t.Logf("new leader %d at epoch %d after %v (session %d ms + heartbeat %d ms)", after.Leader, after.LeaderEpoch, elected, testSessionMs, testHeartbeatMs)
	assert.Contains(t, before.ISR, after.Leader, "the new leader comes from the ISR")
	assert.Greater(t, after.LeaderEpoch, before.LeaderEpoch)
	assert.NotContains(t, after.ISR, old.id)

	produce(100, 150)
	firstWrite := time.Since(killedAt)
	t.Logf("first acks=all write on the successor %v after the kill", firstWrite)

	got := readAllFrom(t, seeds(survivors), "orders")
	for v := range acked {
		assert.True(t, got[v], "acked record %s readable after the failover", v)
	}

	// The old leader comes back on its data and rejoins the ISR.
	require.NoError(t, old.start(t))
	require.Eventually(t, func() bool {
		p, ok := partitionState(survivors[0], "orders", 0)
		return ok && slices.Contains(p.ISR, old.id) && len(p.ISR) == 3
	}, 30*time.Second, 10*time.Millisecond, "the restarted node rejoins the ISR")
	produce(150, 160)
	got = readAllFrom(t, []string{old.node.Addr().String()}, "orders")
	assert.Len(t, got, 160)
}

// readAllFrom consumes topic partition 0 through seeds from the start to
// its end offset and returns the values read.
func readAllFrom(t *testing.T, seeds []string, topic string) map[string]bool {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	require.NoError(t, err)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// Right after a failover or a restart the partition may have no
	// leader for a moment: ask until one answers.
	var end kadm.ListedOffset
	require.Eventually(t, func() bool {
		ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
		if err != nil {
			return false
		}
		var ok bool
		end, ok = ends.Lookup(topic, 0)
		return ok && end.Err == nil
	}, 30*time.Second, 20*time.Millisecond, "the end offset of %s-0", topic)
	return readFirst(ctx, t, cl, topic, end.Offset)
}

// readFirst consumes topic partition 0 through cl from its start up to
// offset end and returns the values read.
func readFirst(ctx context.Context, t *testing.T, cl *kgo.Client, topic string, end int64) map[string]bool {
	t.Helper()
	cl.AddConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}})
	out := map[string]bool{}
	var n int64
	for n < end {
		fs := cl.PollFetches(ctx)
		require.NoError(t, fs.Err0(), "after %d of %d records", n, end)
		fs.EachRecord(func(r *kgo.Record) {
			out[string(r.Value)] = true
			n = r.Offset + 1
		})
	}
	return out
}

// TestClusterVotersAndBrokers runs the harness's five-node topology: three
// combined voters and two broker-only nodes that follow the metadata log as
// observers. Topics place replicas on all five; the brokers register,
// lead partitions, replicate; a broker-only leader that dies is replaced
// from the ISR, and acks=all records survive.
func TestClusterVotersAndBrokers(t *testing.T) {
	nodes := startClusterProps(t, withBrokers(t, clusterProps(t, 3, nil), 2))
	for _, c := range nodes[3:] {
		assert.Contains(t, c.logs.String(), fmt.Sprintf("Registered broker %d with controller quorum", c.id))
		assert.Contains(t, c.logs.String(), "as an observer")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(nodes[3].node.Addr().String()), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordRetries(1000), kgo.MetadataMinAge(50*time.Millisecond), kgo.RetryBackoffFn(func(int) time.Duration { return 20 * time.Millisecond }))
	require.NoError(t, err)
	defer cl.Close()
	adm := kadm.NewClient(cl)
	resp, err := adm.CreateTopic(ctx, 5, 3, map[string]*string{"min.insync.replicas": new("2")}, "events")
	require.NoError(t, err, "CreateTopics forwarded by a broker-only node")
	require.NoError(t, resp.Err)
	require.Eventually(t, func() bool {
		for _, c := range nodes {
			t := c.node.publisher.Image().Topic("events")
			if t == nil {
				return false
			}
			for _, p := range t.Partitions {
				if len(p.ISR) != 3 || p.Leader < 0 {
					return false
				}
			}
		}
		return true
	}, 30*time.Second, 10*time.Millisecond, "every node, observers included, sees events with full ISRs")
	placed := map[int32]bool{}
	for _, p := range nodes[0].node.publisher.Image().Topic("events").Partitions {
		for _, r := range p.Replicas {
			placed[r] = true
		}
	}
	assert.Len(t, placed, 5, "replicas on all five brokers")
	require.Eventually(t, func() bool {
		for _, c := range nodes[:3] {
			if c.node.controller.Active() {
				var ids []int32
				for _, o := range c.node.raft.Describe().Observers {
					ids = append(ids, o.ReplicaID)
				}
				slices.Sort(ids)
				return slices.Equal(ids, []int32{4, 5})
			}
		}
		return false
	}, 10*time.Second, 10*time.Millisecond, "the quorum leader lists the brokers as observers")

	acked := map[string]bool{}
	for i := range 200 {
		v := fmt.Sprintf("e-%03d", i)
		r := cl.ProduceSync(ctx, &kgo.Record{Topic: "events", Partition: int32(i % 5), Value: []byte(v)})
		require.NoError(t, r.FirstErr(), v)
		acked[v] = true
	}

	// Broker 5 dies; its leaderships move within the ISRs.
	victim := nodes[4]
	var led []int32
	for _, p := range nodes[0].node.publisher.Image().Topic("events").Partitions {
		if p.Leader == victim.id {
			led = append(led, p.Partition)
		}
	}
	victim.node.kill()
	require.Eventually(t, func() bool {
		for _, p := range nodes[0].node.publisher.Image().Topic("events").Partitions {
			if p.Leader == victim.id || p.Leader < 0 {
				return false
			}
		}
		return true
	}, testSessionMs*time.Millisecond+testHeartbeatMs*time.Millisecond+5*time.Second, 5*time.Millisecond, "partitions led by broker 5 (%v) move", led)
	for i := 200; i < 250; i++ {
		v := fmt.Sprintf("e-%03d", i)
		r := cl.ProduceSync(ctx, &kgo.Record{Topic: "events", Partition: int32(i % 5), Value: []byte(v)})
		require.NoError(t, r.FirstErr(), v)
		acked[v] = true
	}
	consumer, err := kgo.NewClient(kgo.SeedBrokers(nodes[3].node.Addr().String()), kgo.ConsumeTopics("events"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.MetadataMinAge(50*time.Millisecond))
	require.NoError(t, err)
	defer consumer.Close()
	got := map[string]bool{}
	for len(got) < len(acked) && ctx.Err() == nil {
		fs := consumer.PollFetches(ctx)
		fs.EachRecord(func(r *kgo.Record) { got[string(r.Value)] = true })
	}
	for v := range acked {
		assert.True(t, got[v], "acked record %s readable", v)
	}
}

// TestClusterSeparateRoles runs three controller-only voters and three
// broker-only nodes, as broker/config/testdata/cluster does: the brokers
// register with the quorum and replicate; when the active controller dies
// another voter takes over, and admin requests and acks=all writes go on.
func TestClusterSeparateRoles(t *testing.T) {
	props := clusterProps(t, 3, nil)
	for _, p := range props {
		p["process.roles"] = "controller"
		p["listeners"] = strings.Split(p["listeners"], ",")[1]
	}
	all := withBrokers(t, props, 3)
	// Broker 6 knows the controllers by address only, as with
	// controller.quorum.bootstrap.servers.
	var bootstrap []string
	for _, v := range strings.Split(all[5]["controller.quorum.voters"], ",") {
		_, addr, _ := strings.Cut(v, "@")
		bootstrap = append(bootstrap, addr)
	}
	delete(all[5], "controller.quorum.voters")
	all[5]["controller.quorum.bootstrap.servers"] = strings.Join(bootstrap, ",")
	nodes := startClusterProps(t, all)
	for _, c := range nodes[:3] {
		assert.Contains(t, c.logs.String(), fmt.Sprintf("Kafka controller %d is ready to serve requests", c.id))
		assert.Nil(t, c.node.replicas, "a controller-only node has no partitions")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var brokerAddrs []string
	for _, c := range nodes[3:] {
		brokerAddrs = append(brokerAddrs, c.node.Addr().String())
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokerAddrs...), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DefaultProduceTopic("orders"),
		kgo.RecordRetries(1000), kgo.MetadataMinAge(50*time.Millisecond), kgo.RetryBackoffFn(func(int) time.Duration { return 20 * time.Millisecond }))
	require.NoError(t, err)
	defer cl.Close()
	adm := kadm.NewClient(cl)
	resp, err := adm.CreateTopic(ctx, 1, 3, map[string]*string{"min.insync.replicas": new("2")}, "orders")
	require.NoError(t, err)
	require.NoError(t, resp.Err)
	for i := range 50 {
		require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Value: []byte(strconv.Itoa(i))}).FirstErr())
	}
	var active *clusterNode
	for _, c := range nodes[:3] {
		if c.node.controller.Active() {
			active = c
		}
	}
	require.NotNil(t, active)
	active.node.kill()
	resp, err = adm.CreateTopic(ctx, 1, 3, nil, "after-failover")
	require.NoError(t, err)
	require.NoError(t, resp.Err, "a new active controller creates topics")
	for i := 50; i < 100; i++ {
		require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Value: []byte(strconv.Itoa(i))}).FirstErr())
	}
	assert.Len(t, readAllFrom(t, brokerAddrs, "orders"), 100)
	for _, c := range nodes[3:] {
		assert.Equal(t, StateRunning, c.node.State(), "broker %d kept running", c.id)
	}
}

// TestClusterControlledShutdown: SIGTERM's path on a partition leader. The
// controller moves its leadership to another ISR member before the broker
// stops, so acks=all writes go on with no session timeout to wait for, and
// the broker comes back on its clean data into the ISR.
func TestClusterControlledShutdown(t *testing.T) {
	nodes := startCluster(t, 3, map[string]string{"broker.session.timeout.ms": "10000"})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds(nodes)...), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DefaultProduceTopic("orders"),
		kgo.RecordRetries(1000), kgo.MetadataMinAge(50*time.Millisecond), kgo.RetryBackoffFn(func(int) time.Duration { return 20 * time.Millisecond }))
	require.NoError(t, err)
	defer cl.Close()
	resp, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 3, map[string]*string{"min.insync.replicas": new("2")}, "orders")
	require.NoError(t, err)
	require.NoError(t, resp.Err)
	for i := range 50 {
		require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Value: []byte(strconv.Itoa(i))}).FirstErr())
	}
	before, _ := partitionState(nodes[0], "orders", 0)
	leader := nodes[before.Leader-1]
	var other *clusterNode
	for _, c := range nodes {
		if c != leader {
			other = c
		}
	}
	stopped := time.Now()
	stopNode(t, leader.node)
	assert.Less(t, time.Since(stopped), 10*time.Second, "no session timeout (10 s) to wait for")
	assert.Contains(t, leader.logs.String(), "Controlled shutdown request returned successfully")
	after, _ := partitionState(other, "orders", 0)
	assert.NotEqual(t, leader.id, after.Leader, "leadership moved before the broker stopped")
	assert.Greater(t, after.LeaderEpoch, before.LeaderEpoch)
	for i := 50; i < 100; i++ {
		require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Value: []byte(strconv.Itoa(i))}).FirstErr())
	}
	require.NoError(t, leader.start(t))
	assert.NotContains(t, leader.logs.String(), "Found unclean shutdown file marker", "the controlled shutdown left the clean marker")
	require.Eventually(t, func() bool {
		p, ok := partitionState(other, "orders", 0)
		return ok && len(p.ISR) == 3
	}, 30*time.Second, 10*time.Millisecond, "the restarted broker rejoins the ISR")
	assert.Len(t, readAllFrom(t, []string{leader.node.Addr().String()}, "orders"), 100)
}

// TestClusterElectLeaders: after the preferred replica's controlled
// shutdown and restart, another replica leads its partition; ElectLeaders
// (preferred, sent to a broker that is not the controller and forwarded)
// hands leadership back with a new leader epoch, and nothing written
// before or after is lost. A second election finds nothing to do.
func TestClusterElectLeaders(t *testing.T) {
	nodes := startCluster(t, 3, map[string]string{"broker.session.timeout.ms": "10000"})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds(nodes)...), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DefaultProduceTopic("prefs"),
		kgo.RecordRetries(1000), kgo.MetadataMinAge(50*time.Millisecond), kgo.RetryBackoffFn(func(int) time.Duration { return 20 * time.Millisecond }))
	require.NoError(t, err)
	defer cl.Close()
	adm := kadm.NewClient(cl)
	preferred := restartPreferred(ctx, t, nodes, cl, adm, "prefs")
	require.Eventually(t, func() bool {
		p, ok := partitionState(nodes[0], "prefs", 0)
		return ok && len(p.ISR) == 3 && p.Leader != preferred.id
	}, 30*time.Second, 10*time.Millisecond, "the restarted replica rejoins the ISR, not as leader")
	moved, _ := partitionState(nodes[0], "prefs", 0)

	via := notController(t, nodes)
	vcl, err := kgo.NewClient(kgo.SeedBrokers(via.node.Addr().String()))
	require.NoError(t, err)
	defer vcl.Close()
	req := kmsg.NewPtrElectLeadersRequest()
	req.ElectionType = 0
	req.Topics = []kmsg.ElectLeadersRequestTopic{{Topic: "prefs", Partitions: []int32{0}}}
	kresp, err := vcl.Broker(int(via.id)).Request(ctx, req)
	require.NoError(t, err)
	eresp := kresp.(*kmsg.ElectLeadersResponse)
	require.Len(t, eresp.Topics, 1)
	require.Len(t, eresp.Topics[0].Partitions, 1)
	assert.Equal(t, int16(0), eresp.Topics[0].Partitions[0].ErrorCode)
	require.Eventually(t, func() bool {
		for _, c := range nodes {
			if p, ok := partitionState(c, "prefs", 0); !ok || p.Leader != preferred.id {
				return false
			}
		}
		return true
	}, 30*time.Second, 10*time.Millisecond, "every node sees the preferred replica lead")
	after, _ := partitionState(nodes[0], "prefs", 0)
	assert.Greater(t, after.LeaderEpoch, moved.LeaderEpoch)
	assert.Equal(t, moved.ISR, after.ISR)

	for i := 50; i < 100; i++ {
		require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Value: []byte(strconv.Itoa(i))}).FirstErr())
	}
	assert.Len(t, readAllFrom(t, seeds(nodes), "prefs"), 100)

	again, err := adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, nil)
	require.NoError(t, err)
	require.Contains(t, again, "prefs", "every topic is answered")
	assert.Empty(t, again["prefs"], "nothing left to elect")
}

// notController is a node of nodes that is not the active controller.
func notController(t *testing.T, nodes []*clusterNode) *clusterNode {
	t.Helper()
	for _, c := range nodes {
		if c.node.publisher.Image().ControllerID != c.id {
			return c
		}
	}
	require.FailNow(t, "every node is the active controller")
	return nil
}

// restartPreferred creates topic (one partition, RF 3), writes 50 records
// to it through cl, and stops and restarts the partition's preferred
// replica (its first), which the partition's leadership leaves. It returns
// that replica's node.
func restartPreferred(ctx context.Context, t *testing.T, nodes []*clusterNode, cl *kgo.Client, adm *kadm.Client, topic string) *clusterNode {
	t.Helper()
	resp, err := adm.CreateTopic(ctx, 1, 3, nil, topic)
	require.NoError(t, err)
	require.NoError(t, resp.Err)
	for i := range 50 {
		require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte(strconv.Itoa(i))}).FirstErr())
	}
	before, _ := partitionState(nodes[0], topic, 0)
	preferred := nodes[before.Replicas[0]-1]
	require.Equal(t, preferred.id, before.Leader, "a new partition is led by its preferred replica")
	stopNode(t, preferred.node)
	require.Eventually(t, func() bool {
		p, ok := partitionState(nodes[(int(preferred.id)%3)], topic, 0)
		return ok && p.Leader != preferred.id && p.Leader != -1
	}, 30*time.Second, 10*time.Millisecond, "another replica leads while the preferred one is down")
	require.NoError(t, preferred.start(t))
	return preferred
}

// TestClusterAutoLeaderRebalance: with auto.leader.rebalance.enable (on by
// default) the active controller gives a partition back to its preferred
// replica once that replica has restarted and rejoined the ISR, with no
// admin request, and nothing written is lost by the move.
func TestClusterAutoLeaderRebalance(t *testing.T) {
	nodes := startCluster(t, 3, map[string]string{"broker.session.timeout.ms": "10000", "leader.imbalance.check.interval.seconds": "1"})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds(nodes)...), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DefaultProduceTopic("balanced"),
		kgo.RecordRetries(1000), kgo.MetadataMinAge(50*time.Millisecond), kgo.RetryBackoffFn(func(int) time.Duration { return 20 * time.Millisecond }))
	require.NoError(t, err)
	defer cl.Close()
	preferred := restartPreferred(ctx, t, nodes, cl, kadm.NewClient(cl), "balanced")
	require.Eventually(t, func() bool {
		for _, c := range nodes {
			if p, ok := partitionState(c, "balanced", 0); !ok || p.Leader != preferred.id || len(p.ISR) != 3 {
				return false
			}
		}
		return true
	}, 30*time.Second, 10*time.Millisecond, "the restarted preferred replica leads again, by itself")
	for i := 50; i < 100; i++ {
		require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Value: []byte(strconv.Itoa(i))}).FirstErr())
	}
	assert.Len(t, readAllFrom(t, seeds(nodes), "balanced"), 100)
}

// TestClusterDeleteRecords: DeleteRecords advances the log start offset
// of a replicated partition and answers once the ISR's followers have
// followed; consumers start there; after the leader is stopped, the new
// leader still starts there, so the deleted records do not come back.
func TestClusterDeleteRecords(t *testing.T) {
	nodes := startCluster(t, 3, map[string]string{"broker.session.timeout.ms": "10000"})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds(nodes)...), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DefaultProduceTopic("trim"),
		kgo.RecordRetries(1000), kgo.MetadataMinAge(50*time.Millisecond), kgo.RetryBackoffFn(func(int) time.Duration { return 20 * time.Millisecond }))
	require.NoError(t, err)
	defer cl.Close()
	adm := kadm.NewClient(cl)
	resp, err := adm.CreateTopic(ctx, 1, 3, nil, "trim")
	require.NoError(t, err)
	require.NoError(t, resp.Err)
	for i := range 100 {
		require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Value: []byte(strconv.Itoa(i))}).FirstErr())
	}
	to := kadm.Offsets{}
	to.AddOffset("trim", 0, 60, -1)
	deleted, err := adm.DeleteRecords(ctx, to)
	require.NoError(t, err)
	d, ok := deleted.Lookup("trim", 0)
	require.True(t, ok)
	require.NoError(t, d.Err)
	assert.Equal(t, int64(60), d.LowWatermark)
	for _, c := range nodes {
		l, ok := c.node.logs.GetLog(storage.TopicPartition{Topic: "trim", Partition: 0})
		require.True(t, ok)
		assert.Equal(t, int64(60), l.LogStartOffset(), "node %d's replica followed before the answer", c.id)
	}

	beyond := kadm.Offsets{}
	beyond.AddOffset("trim", 0, 1000, -1)
	deleted, err = adm.DeleteRecords(ctx, beyond)
	require.NoError(t, err)
	d, _ = deleted.Lookup("trim", 0)
	assert.ErrorIs(t, d.Err, kerr.OffsetOutOfRange)

	before, _ := partitionState(nodes[0], "trim", 0)
	stopNode(t, nodes[before.Leader-1].node)
	require.Eventually(t, func() bool {
		starts, err := adm.ListStartOffsets(ctx, "trim")
		if err != nil {
			return false
		}
		o, ok := starts.Lookup("trim", 0)
		return ok && o.Err == nil && o.Offset == 60
	}, 30*time.Second, 50*time.Millisecond, "the new leader starts at 60 too")
	for i := 100; i < 110; i++ {
		require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Value: []byte(strconv.Itoa(i))}).FirstErr())
	}
	got := readAllFrom(t, seeds(nodes), "trim")
	assert.Len(t, got, 50, "offsets 60 to 109")
	assert.False(t, got["59"], "a deleted record")
	assert.True(t, got["60"])
}

// TestBrokerWithoutControllers: a broker whose voters do not answer gives up
// after initial.broker.registration.timeout.ms with a message naming them.
func TestBrokerWithoutControllers(t *testing.T) {
	props := withBrokers(t, clusterProps(t, 3, nil), 1)[3]
	props["initial.broker.registration.timeout.ms"] = "300"
	c := &clusterNode{id: 4, props: props}
	err := c.start(t)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "initial.broker.registration.timeout.ms: no controller of 1@127.0.0.1:")
	assert.Contains(t, err.Error(), "served the metadata log")
}

// TestClusterFullRestart stops every node of a cluster and starts them all
// again on their data: the quorum, the topics and the records are back.
func TestClusterFullRestart(t *testing.T) {
	nodes := startCluster(t, 3, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds(nodes)...), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DefaultProduceTopic("orders"))
	require.NoError(t, err)
	resp, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 3, nil, "orders")
	require.NoError(t, err)
	require.NoError(t, resp.Err)
	for i := range 50 {
		require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Value: []byte(strconv.Itoa(i))}).FirstErr())
	}
	cl.Close()
	var wg sync.WaitGroup
	for _, c := range nodes {
		wg.Go(func() { stopNode(t, c.node) })
	}
	wg.Wait()
	errs := make([]error, len(nodes))
	for i, c := range nodes {
		wg.Go(func() { errs[i] = c.start(t) })
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	for _, c := range nodes {
		assert.NotContains(t, c.logs.String(), "Found unclean shutdown file marker", "node %d stopped cleanly", c.id)
	}
	assert.Len(t, readAllFrom(t, seeds(nodes), "orders"), 50)
}

// TestObserverCatchesUpFromSnapshot: a broker that starts after the
// controllers took a metadata snapshot (and moved their log start past
// it) loads the snapshot from the controller listener, then follows the
// log.
func TestObserverCatchesUpFromSnapshot(t *testing.T) {
	all := withBrokers(t, clusterProps(t, 3, map[string]string{"metadata.log.max.record.bytes.between.snapshots": "512"}), 1)
	voters := startClusterProps(t, all[:3])
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds(voters)...))
	require.NoError(t, err)
	defer cl.Close()
	adm := kadm.NewClient(cl)
	for i := range 10 {
		resp, err := adm.CreateTopic(ctx, 1, 1, nil, fmt.Sprintf("t%d", i))
		require.NoError(t, err)
		require.NoError(t, resp.Err)
	}
	require.Eventually(t, func() bool {
		for _, c := range voters {
			l, ok := c.node.logs.GetLog(storage.TopicPartition{Topic: "__cluster_metadata", Partition: 0})
			if !ok || l.LogStartOffset() == 0 {
				return false
			}
		}
		return true
	}, 30*time.Second, 10*time.Millisecond, "every voter's metadata log starts after a snapshot")

	broker := &clusterNode{id: 4, props: all[3]}
	require.NoError(t, broker.start(t))
	t.Cleanup(func() { stopNode(t, broker.node) })
	assert.Contains(t, broker.logs.String(), "Loaded the metadata snapshot ending at offset")
	im := broker.node.publisher.Image()
	for i := range 10 {
		assert.NotNil(t, im.Topic(fmt.Sprintf("t%d", i)), "topic t%d from the snapshot", i)
	}
	resp, err := adm.CreateTopic(ctx, 1, 1, nil, "after")
	require.NoError(t, err)
	require.NoError(t, resp.Err)
	require.Eventually(t, func() bool { return broker.node.publisher.Image().Topic("after") != nil }, 10*time.Second, 10*time.Millisecond,
		"the broker follows the log after the snapshot")
}

// TestClusterStartMovesOffATakenControllerPort: a cluster whose controller
// port was taken before its node bound it starts on a fresh one.
func TestClusterStartMovesOffATakenControllerPort(t *testing.T) {
	props := clusterProps(t, 1, nil)
	addrs := controllerListeners(props[0])
	require.Len(t, addrs, 1)
	taken := addrs[0]
	ln, err := net.Listen("tcp", taken)
	require.NoError(t, err)
	defer ln.Close()
	nodes := startClusterProps(t, props)
	require.Len(t, nodes, 1)
	assert.NotContains(t, nodes[0].props["listeners"], taken)
	assert.NotContains(t, nodes[0].props["controller.quorum.voters"], taken)
}
