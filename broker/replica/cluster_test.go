package replica_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/faultline/faultline/broker/metadata"
	"github.com/faultline/faultline/broker/replica"
	"github.com/faultline/faultline/broker/server"
	"github.com/faultline/faultline/broker/storage"
)

// This file is an in-process cluster for the replication layer: every node
// is a Manager on a real LogManager behind a real server listener on
// loopback, with a Fetcher and an ISRLoop. The test plays the controller:
// it builds the metadata images, publishes them to the nodes, and answers
// their AlterPartition proposals. A fault switch sits on every fetcher's
// dialer.

// faultNet cuts or delays the links between nodes.
type faultNet struct {
	mu    sync.Mutex
	cut   map[[2]int32]bool
	delay map[[2]int32]time.Duration
}

func newFaultNet() *faultNet {
	return &faultNet{cut: map[[2]int32]bool{}, delay: map[[2]int32]time.Duration{}}
}

// Cut drops every request between a and b, both ways.
func (n *faultNet) Cut(a, b int32) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.cut[[2]int32{a, b}], n.cut[[2]int32{b, a}] = true, true
}

// Heal restores the link between a and b.
func (n *faultNet) Heal(a, b int32) {
	n.mu.Lock()
	defer n.mu.Unlock()
	delete(n.cut, [2]int32{a, b})
	delete(n.cut, [2]int32{b, a})
}

// Delay slows every request from a to b by d.
func (n *faultNet) Delay(a, b int32, d time.Duration) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.delay[[2]int32{a, b}] = d
}

func (n *faultNet) link(from, to int32) (bool, time.Duration) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.cut[[2]int32{from, to}], n.delay[[2]int32{from, to}]
}

var errLinkCut = errors.New("link cut by the test")

// faultDialer is the Dialer of node from, going through the switch.
type faultDialer struct {
	net   *faultNet
	from  int32
	inner replica.Dialer
}

func (d faultDialer) Dial(ctx context.Context, id int32, addr string) (replica.BrokerClient, error) {
	if cut, _ := d.net.link(d.from, id); cut {
		return nil, errLinkCut
	}
	cl, err := d.inner.Dial(ctx, id, addr)
	if err != nil {
		return nil, err
	}
	return &faultClient{net: d.net, from: d.from, to: id, inner: cl}, nil
}

type faultClient struct {
	net      *faultNet
	from, to int32
	inner    replica.BrokerClient
}

func (c *faultClient) Request(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	cut, delay := c.net.link(c.from, c.to)
	if cut {
		return nil, errLinkCut
	}
	if delay > 0 {
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		}
	}
	resp, err := c.inner.Request(ctx, req)
	// A link cut while the request was in flight loses the answer.
	if cut, _ := c.net.link(c.from, c.to); cut {
		return nil, errLinkCut
	}
	return resp, err
}

func (c *faultClient) Close() { c.inner.Close() }

// syncBuffer collects a node's log lines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// testNode is one broker of the test cluster.
type testNode struct {
	id      int32
	dir     string
	lm      *storage.LogManager
	m       *replica.Manager
	pub     *metadata.Publisher
	srv     *server.Server
	port    int
	fetcher *replica.Fetcher
	isr     *replica.ISRLoop
	reg     *prometheus.Registry
	logs    *syncBuffer
	unsub   []func()
}

// testCluster plays the controller for its nodes.
type testCluster struct {
	t     testing.TB
	net   *faultNet
	lagMs int64

	mu     sync.Mutex
	img    *metadata.Image
	nodes  map[int32]*testNode
	alters []replica.ISRChange // AlterPartition proposals received, in order
	epochs map[int32]int64
}

func newTestCluster(t testing.TB, lagMs int64) *testCluster {
	c := &testCluster{t: t, net: newFaultNet(), lagMs: lagMs, img: metadata.NewImage("cluster"), nodes: map[int32]*testNode{}, epochs: map[int32]int64{}}
	c.img.ControllerID = 0
	// Cleanups run last-registered first: make the test's temp dir (its
	// removal is registered at the first TempDir) before the stop below, so
	// the nodes stop before their dirs go.
	_ = t.TempDir()
	t.Cleanup(func() {
		c.mu.Lock()
		ids := make([]int32, 0, len(c.nodes))
		for id := range c.nodes {
			ids = append(ids, id)
		}
		c.mu.Unlock()
		for _, id := range ids {
			c.stop(id)
		}
	})
	return c
}

// cloneImage copies an image deeply enough to change brokers and
// partitions.
func cloneImage(im *metadata.Image) *metadata.Image {
	out := metadata.NewImage(im.ClusterID)
	out.ControllerID, out.Offset = im.ControllerID, im.Offset+1
	for id, b := range im.Brokers {
		out.Brokers[id] = b
	}
	for name, t := range im.Topics {
		nt := &metadata.Topic{Name: t.Name, ID: t.ID, Configs: t.Configs}
		for _, p := range t.Partitions {
			p.Replicas, p.ISR = slices.Clone(p.Replicas), slices.Clone(p.ISR)
			nt.Partitions = append(nt.Partitions, p)
		}
		out.Topics[name], out.TopicsByID[t.ID] = nt, nt
	}
	return out
}

// update changes the cluster image and publishes it to every running node.
func (c *testCluster) update(fn func(im *metadata.Image)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.updateLocked(fn)
}

func (c *testCluster) updateLocked(fn func(im *metadata.Image)) {
	next := cloneImage(c.img)
	fn(next)
	c.img = next
	for _, n := range c.sortedNodes() {
		n.pub.Publish(next)
	}
}

func (c *testCluster) sortedNodes() []*testNode {
	out := make([]*testNode, 0, len(c.nodes))
	for _, n := range c.nodes {
		out = append(out, n)
	}
	slices.SortFunc(out, func(a, b *testNode) int { return int(a.id - b.id) })
	return out
}

func (c *testCluster) image() *metadata.Image {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.img
}

func (c *testCluster) node(id int32) *testNode {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.nodes[id]
	require.NotNil(c.t, n, "node %d is not running", id)
	return n
}

// clusterSender is a node's path to the test's controller.
type clusterSender struct {
	c    *testCluster
	from int32
}

// AlterPartition applies Kafka's checks (KAFKA-INTERNALS §3) and
// publishes the new ISR with a bumped partition epoch.
func (s clusterSender) AlterPartition(_ context.Context, ch replica.ISRChange) (replica.ISRResult, error) {
	if cut, _ := s.c.net.link(s.from, 0); cut {
		return replica.ISRResult{}, errLinkCut
	}
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	s.c.alters = append(s.c.alters, ch)
	p := s.c.img.Partition(ch.TopicPartition.Topic, ch.TopicPartition.Partition)
	switch {
	case p == nil:
		return replica.ISRResult{}, kerr.UnknownTopicOrPartition
	case p.Leader != s.from || ch.LeaderEpoch < p.LeaderEpoch:
		return replica.ISRResult{}, kerr.FencedLeaderEpoch
	case ch.PartitionEpoch != p.PartitionEpoch:
		return replica.ISRResult{}, kerr.InvalidUpdateVersion
	}
	var res replica.ISRResult
	s.c.updateLocked(func(im *metadata.Image) {
		np := im.Partition(ch.TopicPartition.Topic, ch.TopicPartition.Partition)
		np.ISR = slices.Clone(ch.NewISR)
		np.PartitionEpoch++
		res = replica.ISRResult{LeaderEpoch: np.LeaderEpoch, PartitionEpoch: np.PartitionEpoch, ISR: slices.Clone(np.ISR)}
	})
	return res, nil
}

// proposals returns the ISRs proposed so far for a partition.
func (c *testCluster) proposals(topic string) [][]int32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out [][]int32
	for _, a := range c.alters {
		if a.TopicPartition.Topic == topic {
			out = append(out, a.NewISR)
		}
	}
	return out
}

// start runs node id on dir and registers it (a new broker epoch, its
// listener) in the image.
func (c *testCluster) start(id int32, dir string) *testNode {
	t := c.t
	t.Helper()
	logs := &syncBuffer{}
	logger := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	lm, err := storage.NewLogManager(storage.OS, []string{dir}, storage.ManagerOptions{})
	require.NoError(t, err)
	_, err = lm.Load()
	require.NoError(t, err)
	reg := prometheus.NewRegistry()
	m, err := replica.New(replica.Config{NodeID: id, Logs: lm, TopicSettings: replica.SettingsFromConfigs, ReplicaLagTimeMaxMs: c.lagMs, Registerer: reg, Logger: logger})
	require.NoError(t, err)
	pub := metadata.NewPublisher(metadata.NewImage("cluster"))
	srv, err := server.New(server.Options{}, server.Backend{NodeID: id, ClusterID: "cluster", Metadata: pub, Replicas: m}, logger, nil)
	require.NoError(t, err)
	addrs, err := srv.ListenAndServe("127.0.0.1:0")
	require.NoError(t, err)
	f, err := replica.NewFetcher(replica.FetcherConfig{Manager: m, Dialer: faultDialer{net: c.net, from: id, inner: replica.KgoDialer{}}, MaxWaitMs: 100, BackoffMs: 50, Registerer: reg, Logger: logger})
	require.NoError(t, err)
	isr, err := replica.NewISRLoop(replica.ISRLoopConfig{Manager: m, Sender: clusterSender{c: c, from: id}, Logger: logger})
	require.NoError(t, err)
	n := &testNode{id: id, dir: dir, lm: lm, m: m, pub: pub, srv: srv, port: addrs[0].(*net.TCPAddr).Port, fetcher: f, isr: isr, reg: reg, logs: logs}
	n.unsub = append(n.unsub, pub.Subscribe(m.ApplyImage), pub.Subscribe(f.ApplyImage))
	isr.Start()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.nodes[id] = n
	c.epochs[id]++
	c.updateLocked(func(im *metadata.Image) {
		im.Brokers[id] = metadata.Broker{ID: id, Epoch: c.epochs[id], Host: "127.0.0.1", Port: int32(n.port),
			Endpoints: []metadata.Endpoint{{Name: "PLAINTEXT", Host: "127.0.0.1", Port: uint16(n.port)}}}
	})
	return n
}

// stop shuts node id down cleanly, keeping its data dir.
func (c *testCluster) stop(id int32) {
	c.mu.Lock()
	n := c.nodes[id]
	delete(c.nodes, id)
	c.mu.Unlock()
	if n == nil {
		return
	}
	n.isr.Stop()
	n.fetcher.Stop()
	for _, u := range n.unsub {
		u()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.NoError(c.t, n.srv.Shutdown(ctx))
	require.NoError(c.t, n.lm.Shutdown(0))
}

// createTopic adds topic with one partition on replicas, led by the first.
func (c *testCluster) createTopic(topic string, replicas []int32, configs map[string]string) {
	c.update(func(im *metadata.Image) {
		id := metadata.Uuid{byte(len(im.Topics) + 1), 0xfa}
		t := &metadata.Topic{Name: topic, ID: id, Configs: configs,
			Partitions: []metadata.Partition{{Partition: 0, Replicas: slices.Clone(replicas), ISR: slices.Clone(replicas), Leader: replicas[0]}}}
		im.Topics[topic], im.TopicsByID[id] = t, t
	})
}

// elect makes leader lead topic-0 at the next leader epoch with isr.
func (c *testCluster) elect(topic string, leader int32, isr []int32) {
	c.update(func(im *metadata.Image) {
		p := im.Partition(topic, 0)
		p.Leader, p.ISR = leader, slices.Clone(isr)
		p.LeaderEpoch++
		p.PartitionEpoch++
	})
}

func (c *testCluster) isr(topic string) []int32 {
	return c.image().Partition(topic, 0).ISR
}

// partitionLog is node id's log of topic-0.
func (c *testCluster) partitionLog(id int32, topic string) *storage.Log {
	l, ok := c.node(id).lm.GetLog(storage.TopicPartition{Topic: topic, Partition: 0})
	require.True(c.t, ok, "node %d has no log of %s", id, topic)
	return l
}

func (c *testCluster) leo(id int32, topic string) int64 {
	return c.partitionLog(id, topic).LogEndOffset()
}

// contents reads node id's whole log of topic-0: offset -> value.
func (c *testCluster) contents(id int32, topic string) map[int64]string {
	l := c.partitionLog(id, topic)
	out := map[int64]string{}
	for off := l.LogStartOffset(); off < l.LogEndOffset(); {
		data, err := l.Read(off, 1<<20, l.LogEndOffset(), true)
		require.NoError(c.t, err)
		require.NotEmpty(c.t, data)
		require.NoError(c.t, storage.ForEachBatch(data, func(h storage.BatchHeader, b []byte) error {
			recs, err := storage.DecodeRecords(b)
			for _, r := range recs {
				out[r.Offset] = string(r.Value)
			}
			off = h.NextOffset()
			return err
		}))
	}
	return out
}

// produce appends values to topic-0 on node id.
func (c *testCluster) produce(ctx context.Context, id int32, topic string, acks int16, vs ...string) replica.ProduceResult {
	return c.node(id).m.Produce(ctx, topic, 0, replica.Batch(vs...), acks)
}

// seq is n values prefix-0 ... prefix-(n-1).
func seq(prefix string, from, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%d", prefix, from+i)
	}
	return out
}

const (
	waitFor = replica.WaitFor
	tick    = replica.Tick
)

func threeNodes(t *testing.T, lagMs int64) *testCluster {
	c := newTestCluster(t, lagMs)
	for id := int32(1); id <= 3; id++ {
		c.start(id, t.TempDir())
	}
	return c
}
