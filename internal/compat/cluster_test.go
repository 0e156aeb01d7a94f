package compat

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/faultline/faultline/internal/testutil"
)

// The cluster tests check the broker as a new user would: nodes started by
// hand from properties files written as README.md's "Run a cluster by
// hand" shows, leaders and controllers killed with SIGKILL and brought
// back on their data, while kcat (librdkafka: a client faultline did not
// write) produces a numbered stream with acks=all and idempotence. Every
// message kcat reported delivered must then be read back by kcat at its
// reported offset, in order, once.

// clusterNodeProperties is one node's file as README.md's "Run a cluster
// by hand" writes it (%[1]s roles, %[2]d node id, %[3]s voters, %[4]s
// listeners, %[5]s log dir), plus the durable topic settings of
// broker/config/testdata/cluster/ and a faster failover.
const clusterNodeProperties = `# node-%[2]d.properties, written by hand as README.md "Run a cluster by hand" shows
process.roles=%[1]s
node.id=%[2]d
controller.quorum.voters=%[3]s
controller.listener.names=CONTROLLER
listeners=%[4]s
log.dirs=%[5]s

# Durable settings (as broker/config/testdata/cluster/): auto-created topics
# get three replicas, an acks=all write is on two of them, and only an
# in-sync replica can lead.
default.replication.factor=3
min.insync.replicas=2
unclean.leader.election.enable=false
offsets.topic.replication.factor=3
num.partitions=1

# Faster failover for a test: a dead broker is fenced (and loses its
# leaderships) after 2 s instead of the default broker.session.timeout.ms
# of 9000, with heartbeats every 250 ms instead of the default 2000.
broker.session.timeout.ms=2000
broker.heartbeat.interval.ms=250
# A follower that stopped fetching leaves the ISR after 3 s (default 30000).
replica.lag.time.max.ms=3000
`

// clusterNode is one broker process of a hand-started cluster, restartable
// on its data dir.
type clusterNode struct {
	id     int32
	voter  bool
	config string
	addr   string // client listener, host:port
	proc   *testutil.Process
}

// kcatCluster is a cluster of real broker processes.
type kcatCluster struct {
	bin   string
	nodes []*clusterNode // nodes[i].id == i+1
}

// startKcatCluster writes the properties of voters combined nodes
// (process.roles=broker,controller) and brokers broker-only nodes, formats
// each with one cluster id (bin/broker random-uuid, then bin/broker format)
// and serves them all.
func startKcatCluster(t *testing.T, voters, brokers int) *kcatCluster {
	t.Helper()
	c := &kcatCluster{bin: buildBroker(t)}
	ctrlPorts := make([]int, voters)
	var quorum []string
	for i := range voters {
		ctrlPorts[i] = freePort(t)
		quorum = append(quorum, fmt.Sprintf("%d@127.0.0.1:%d", i+1, ctrlPorts[i]))
	}
	code, id, stderr := testutil.Run(t, c.bin, "random-uuid")
	require.Equal(t, 0, code, "random-uuid: %s", stderr)
	clusterID := strings.TrimSpace(id)
	dir := t.TempDir()
	for i := range voters + brokers {
		n := &clusterNode{id: int32(i + 1), voter: i < voters}
		port := freePort(t)
		n.addr = fmt.Sprintf("127.0.0.1:%d", port)
		roles, listeners := "broker", fmt.Sprintf("PLAINTEXT://127.0.0.1:%d", port)
		if n.voter {
			roles = "broker,controller"
			listeners += fmt.Sprintf(",CONTROLLER://127.0.0.1:%d", ctrlPorts[i])
		}
		props := fmt.Sprintf(clusterNodeProperties, roles, n.id, strings.Join(quorum, ","), listeners,
			filepath.Join(dir, fmt.Sprintf("node-%d", n.id)))
		n.config = filepath.Join(dir, fmt.Sprintf("node-%d.properties", n.id))
		require.NoError(t, os.WriteFile(n.config, []byte(props), 0o644))
		code, _, stderr := testutil.Run(t, c.bin, "format", "-t", clusterID, "-c", n.config)
		require.Equal(t, 0, code, "format node %d: %s", n.id, stderr)
		c.nodes = append(c.nodes, n)
	}
	for _, n := range c.nodes {
		n.proc = testutil.StartProcess(t, c.bin, "serve", "-c", n.config)
	}
	for _, n := range c.nodes {
		n.waitReady(t)
	}
	return c
}

func (n *clusterNode) waitReady(t *testing.T) {
	t.Helper()
	n.proc.WaitForLine(t, regexp.MustCompile(fmt.Sprintf(`Kafka broker %d is ready to serve requests`, n.id)), startTimeout)
}

// kill9 SIGKILLs node id and waits for it to be gone.
func (c *kcatCluster) kill9(t *testing.T, id int32) {
	t.Helper()
	n := c.nodes[id-1]
	require.NoError(t, n.proc.Cmd.Process.Kill())
	n.proc.Wait(t, 10*time.Second)
}

// restart serves node id again on its data dir and waits until it is
// ready.
func (c *kcatCluster) restart(t *testing.T, id int32) {
	t.Helper()
	n := c.nodes[id-1]
	n.proc = testutil.StartProcess(t, c.bin, "serve", "-c", n.config)
	n.waitReady(t)
}

// bootstrap is every node's client listener, as kcat's -b takes them.
func (c *kcatCluster) bootstrap() string {
	var addrs []string
	for _, n := range c.nodes {
		addrs = append(addrs, n.addr)
	}
	return strings.Join(addrs, ",")
}

// admin is a franz-go admin client on every node (setup and watching only:
// the produce and the read-back are kcat's).
func (c *kcatCluster) admin(t *testing.T) *kadm.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(c.bootstrap(), ",")...),
		kgo.MetadataMinAge(50*time.Millisecond), kgo.RetryTimeout(5*time.Second))
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	return kadm.NewClient(cl)
}

var quorumLeaderLine = regexp.MustCompile(`(?m)^LeaderId:\s+(\d+)$`)

// activeController asks `broker quorum describe --status` for the quorum
// leader, as a user would: every node's file names the same voters.
func (c *kcatCluster) activeController(t *testing.T) int32 {
	t.Helper()
	var leader int32
	require.Eventually(t, func() bool {
		code, out, _ := testutil.Run(t, c.bin, "quorum", "describe", "--status", "--timeout", "5s", "-c", c.nodes[0].config)
		m := quorumLeaderLine.FindStringSubmatch(out)
		if code != 0 || m == nil {
			return false
		}
		id, _ := strconv.Atoi(m[1])
		leader = int32(id)
		return leader > 0
	}, 20*time.Second, 200*time.Millisecond, "quorum describe --status names no leader")
	return leader
}

// partitionState is partition 0 of topic as metadata shows it.
func partitionState(t *testing.T, adm *kadm.Client, topic string) (leader int32, replicas, isr []int32) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	md, err := adm.Metadata(ctx, topic)
	if err != nil {
		return -1, nil, nil
	}
	td, ok := md.Topics[topic]
	if !ok || td.Err != nil {
		return -1, nil, nil
	}
	p, ok := td.Partitions[0]
	if !ok || p.Err != nil {
		return -1, nil, nil
	}
	return p.Leader, p.Replicas, p.ISR
}

// waitLeader waits for partition 0 of topic to have a leader other than
// not, and returns it.
func waitLeader(t *testing.T, adm *kadm.Client, topic string, not int32) int32 {
	t.Helper()
	var leader int32
	require.Eventually(t, func() bool {
		leader, _, _ = partitionState(t, adm, topic)
		return leader > 0 && leader != not
	}, 20*time.Second, 50*time.Millisecond, "partition %s-0 has no leader (other than %d)", topic, not)
	return leader
}

// waitFullISR waits until all replicas of partition 0 of topic are in sync
// again (a restarted node caught up).
func waitFullISR(t *testing.T, adm *kadm.Client, topic string) {
	t.Helper()
	var replicas, isr []int32
	require.Eventually(t, func() bool {
		_, replicas, isr = partitionState(t, adm, topic)
		return len(replicas) > 0 && len(isr) == len(replicas)
	}, 30*time.Second, 100*time.Millisecond, "%s-0 never had its full ISR back: replicas %v, isr %v", topic, replicas, isr)
}

// storedEnd is the end offset of partition 0 of topic, -1 when unknown.
func storedEnd(adm *kadm.Client, topic string) int64 {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return -1
	}
	o, ok := ends.Lookup(topic, 0)
	if !ok || o.Err != nil {
		return -1
	}
	return o.Offset
}

// waitGrowth waits until partition 0 of topic holds at least n more
// records than from, proving writes go on; it returns the end offset.
func waitGrowth(t *testing.T, adm *kadm.Client, topic string, from, n int64, why string) int64 {
	t.Helper()
	var end int64
	require.Eventually(t, func() bool {
		end = storedEnd(adm, topic)
		return end >= from+n
	}, 30*time.Second, 50*time.Millisecond, "%s: %s-0 stays at %d (want %d)", why, topic, end, from+n)
	return end
}

// streamValue is message i of the stream, ~100 bytes.
func streamValue(i int) string { return fmt.Sprintf("stream-%06d-%s", i, strings.Repeat("y", 86)) }

// streamProducer is a kcat -P process fed a numbered stream at a steady
// pace by a goroutine, so that it is producing while nodes die.
type streamProducer struct {
	*producer

	wmu      sync.Mutex
	written  int
	writeErr error

	stop  chan struct{}
	wrote chan struct{}
}

// startStream runs kcat -P on partition 0 of topic with acks=all and
// idempotence, writing up to max messages, perTick every tick.
func startStream(t *testing.T, c *kcatCluster, topic string, max, perTick int, tick time.Duration) *streamProducer {
	t.Helper()
	args := []string{"-t", topic, "-p", "0",
		"-X", "acks=all", "-X", "enable.idempotence=true",
		"-X", "message.timeout.ms=60000", "-X", "retries=1000000", "-X", "retry.backoff.ms=50",
		"-X", "reconnect.backoff.max.ms=200", "-X", "topic.metadata.refresh.interval.ms=1000",
		"-X", "linger.ms=5",
		// kcat reads its input in chunks of message.max.bytes and
		// produces a chunk once it is full: small chunks keep the stream
		// flowing at the pace it is written.
		"-X", "message.max.bytes=8192"}
	p := &streamProducer{producer: startKcatProducer(t, c.bootstrap(), args...), stop: make(chan struct{}), wrote: make(chan struct{})}
	go func() {
		defer close(p.wrote)
		tk := time.NewTicker(tick)
		defer tk.Stop()
		var buf strings.Builder
		for i := 0; i < max; {
			select {
			case <-p.stop:
				return
			case <-p.exited:
				return
			case <-tk.C:
			}
			buf.Reset()
			n := min(perTick, max-i)
			for j := range n {
				buf.WriteString(streamValue(i+j) + "\n")
			}
			if _, err := io.WriteString(p.stdin, buf.String()); err != nil {
				p.wmu.Lock()
				p.writeErr = err
				p.wmu.Unlock()
				return
			}
			i += n
			p.wmu.Lock()
			p.written = i
			p.wmu.Unlock()
		}
	}()
	return p
}

// finish stops writing, closes kcat's input and waits for it to report
// every delivery (or failure) and exit. It returns how many messages were
// written.
func (p *streamProducer) finish(t *testing.T, timeout time.Duration) int {
	t.Helper()
	close(p.stop)
	<-p.wrote
	p.producer.finish(t, timeout)
	p.wmu.Lock()
	defer p.wmu.Unlock()
	require.NoError(t, p.writeErr, "kcat stopped reading its input:\n%s", clip(p.log()))
	return p.written
}

// readPartition reads partition 0 of topic from the beginning to its end
// with kcat -C; it returns the value at each offset.
func readPartition(t *testing.T, c *kcatCluster, topic string) map[int64]string {
	t.Helper()
	out := run(t, "", requireKcat(t), "-b", c.bootstrap(), "-C", "-t", topic, "-p", "0", "-o", "beginning", "-e", "-q",
		"-f", `%o %s\n`)
	assertParsed(t, out)
	require.NoError(t, out.err, out)
	at := make(map[int64]string)
	for _, l := range lines(out.stdout) {
		off, v, ok := strings.Cut(l, " ")
		require.True(t, ok, "kcat -C line %q", l)
		o, err := strconv.ParseInt(off, 10, 64)
		require.NoError(t, err, "kcat -C line %q", l)
		at[o] = v
	}
	return at
}

// verifyStream checks the log against kcat's delivery reports: each
// delivered message at its reported offset, the stream's messages in
// order and each once, and (with generous timeouts and retries) every
// written message delivered.
func verifyStream(t *testing.T, c *kcatCluster, topic string, p *streamProducer, written int) {
	t.Helper()
	p.mu.Lock()
	reports := append([]deliveryReport(nil), p.reports...)
	var fatal []string // failed deliveries are counted below
	for _, e := range p.errors {
		if strings.Contains(strings.ToLower(e), "fatal") {
			fatal = append(fatal, e)
		}
	}
	p.mu.Unlock()
	assert.Empty(t, fatal, "kcat fatal errors")
	defer func() {
		if t.Failed() {
			t.Logf("kcat -P stderr (delivery reports left out):\n%s", clip(p.log()))
		}
	}()
	failed := 0
	for i, r := range reports {
		if !r.ok {
			failed++
			if failed <= 5 {
				t.Errorf("message %d not delivered: %s", i, r.line)
			}
		}
	}
	assert.Zero(t, failed, "messages kcat failed to deliver (of %d written)", written)
	assert.Len(t, reports, written, "one delivery report per written message")

	at := readPartition(t, c, topic)
	missing := 0
	for i, r := range reports {
		if !r.ok {
			continue
		}
		if got, want := at[r.offset], streamValue(i); got != want {
			missing++
			if missing <= 5 {
				t.Errorf("message %d, reported delivered at offset %d, is not there (offset holds %.20q)", i, r.offset, got)
			}
		}
	}
	assert.Zero(t, missing, "delivered messages missing from the log after the kills")

	// The whole log, in offset order: the stream's messages in increasing
	// order, none twice.
	offsets := make([]int64, 0, len(at))
	for o := range at {
		offsets = append(offsets, o)
	}
	slices.Sort(offsets)
	seen := make(map[string]int64, len(at))
	prev, dups, disorder := -1, 0, 0
	for _, o := range offsets {
		v := at[o]
		if first, ok := seen[v]; ok {
			dups++
			if dups <= 5 {
				t.Errorf("%.13s stored twice: offsets %d and %d", v, first, o)
			}
			continue
		}
		seen[v] = o
		var i int
		if _, err := fmt.Sscanf(v, "stream-%06d-", &i); err != nil {
			t.Errorf("offset %d holds a message not from the stream: %.40q", o, v)
			continue
		}
		if i <= prev {
			disorder++
			if disorder <= 5 {
				t.Errorf("offset %d holds message %d after message %d", o, i, prev)
			}
		}
		prev = i
	}
	assert.Zero(t, dups, "an idempotent producer's messages must be stored once")
	assert.Zero(t, disorder, "the stream must be stored in production order")
	t.Logf("%d messages written, %d reported delivered, %d records read back", written, len(reports)-failed, len(at))
}

// createAssigned creates topic with one partition on replicas (the first
// is the preferred leader) and min.insync.replicas=2.
func createAssigned(t *testing.T, cl *kgo.Client, topic string, replicas ...int32) {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 10000
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic = topic
	rt.NumPartitions = -1
	rt.ReplicationFactor = -1
	a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
	a.Partition = 0
	a.Replicas = replicas
	rt.ReplicaAssignment = append(rt.ReplicaAssignment, a)
	cfg := kmsg.NewCreateTopicsRequestTopicConfig()
	cfg.Name = "min.insync.replicas"
	cfg.Value = new("2")
	rt.Configs = append(rt.Configs, cfg)
	req.Topics = append(req.Topics, rt)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, cl)
	require.NoError(t, err)
	require.Len(t, resp.Topics, 1)
	require.Zero(t, resp.Topics[0].ErrorCode, "create %s: %v", topic, resp.Topics[0].ErrorMessage)
}

// topicMinISR is the min.insync.replicas DescribeConfigs reports for topic.
func topicMinISR(t *testing.T, adm *kadm.Client, topic string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	rcs, err := adm.DescribeTopicConfigs(ctx, topic)
	require.NoError(t, err)
	rc, err := rcs.On(topic, nil)
	require.NoError(t, err)
	require.NoError(t, rc.Err)
	for _, c := range rc.Configs {
		if c.Key == "min.insync.replicas" && c.Value != nil {
			return *c.Value
		}
	}
	return ""
}

// TestKcatClusterThreeNodes: three combined nodes started by hand. kcat
// auto-creates the topic (three replicas, min.insync.replicas=2 from the
// properties) and produces a numbered stream with acks=all and idempotence
// while the partition leader is SIGKILLed and restarted on its data a few
// seconds later, then the active controller (quorum describe's LeaderId)
// likewise. kcat reads back every delivered message at its offset, in
// order, once.
func TestKcatClusterThreeNodes(t *testing.T) {
	requireKcat(t)
	start := time.Now()
	c := startKcatCluster(t, 3, 0)
	adm := c.admin(t)
	t.Logf("3 combined nodes ready in %v", time.Since(start).Round(time.Millisecond))
	const topic = "three"
	p := startStream(t, c, topic, 200000, 40, 10*time.Millisecond)

	end := waitGrowth(t, adm, topic, 0, 300, "first writes")
	leader, replicas, _ := partitionState(t, adm, topic)
	require.Positive(t, leader, "%s-0 has a leader", topic)
	require.Len(t, replicas, 3, "auto-created with default.replication.factor=3")
	assert.Equal(t, "2", topicMinISR(t, adm, topic), "min.insync.replicas from the properties")
	killAndReturn(t, c, adm, p, topic, leader, "partition leader", end)

	ctrl := c.activeController(t)
	end = storedEnd(adm, topic)
	killAndReturn(t, c, adm, p, topic, ctrl, "active controller", end)

	written := p.finish(t, 90*time.Second)
	verifyStream(t, c, topic, p, written)
	t.Logf("total %v", time.Since(start).Round(time.Millisecond))
}

// TestKcatClusterFiveNodes: the harness's five-node topology, three
// combined voters and two broker-only nodes, started by hand. The topic's
// replicas are nodes 4, 5 and 1, so its first leader is broker-only; the
// stream goes on while that leader is SIGKILLed and restarted, then the
// active controller likewise.
func TestKcatClusterFiveNodes(t *testing.T) {
	requireKcat(t)
	start := time.Now()
	c := startKcatCluster(t, 3, 2)
	adm := c.admin(t)
	t.Logf("3 voters and 2 brokers ready in %v", time.Since(start).Round(time.Millisecond))
	const topic = "five"
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(c.bootstrap(), ",")...))
	require.NoError(t, err)
	defer cl.Close()
	createAssigned(t, cl, topic, 4, 5, 1)
	leader := waitLeader(t, adm, topic, -1)
	require.Equal(t, int32(4), leader, "the preferred (first) replica leads")
	p := startStream(t, c, topic, 200000, 40, 10*time.Millisecond)

	end := waitGrowth(t, adm, topic, 0, 300, "first writes")
	leader = waitLeader(t, adm, topic, -1)
	require.False(t, c.nodes[leader-1].voter, "leader %d is broker-only", leader)
	killAndReturn(t, c, adm, p, topic, leader, "broker-only partition leader", end)

	ctrl := c.activeController(t)
	end = storedEnd(adm, topic)
	killAndReturn(t, c, adm, p, topic, ctrl, "active controller", end)

	written := p.finish(t, 90*time.Second)
	verifyStream(t, c, topic, p, written)
	t.Logf("total %v", time.Since(start).Round(time.Millisecond))
}

// killAndReturn SIGKILLs node id while the stream runs, checks that
// writes go on without it, restarts it on its data after a few seconds,
// and waits until it is back in the ISR and writes go on.
func killAndReturn(t *testing.T, c *kcatCluster, adm *kadm.Client, p *streamProducer, topic string, id int32, what string, end int64) {
	t.Helper()
	killed := time.Now()
	c.kill9(t, id)
	p.mu.Lock()
	written := p.written
	p.mu.Unlock()
	t.Logf("kill -9 %s (node %d) with %d records stored of %d written to kcat", what, id, end, written)
	end = waitGrowth(t, adm, topic, end, 300, fmt.Sprintf("writes after the %s's kill", what))
	newLeader, _, isr := partitionState(t, adm, topic)
	t.Logf("writes went on %v after the kill (leader %d, isr %v, %d stored)", time.Since(killed).Round(time.Millisecond), newLeader, isr, end)
	if d := 3*time.Second - time.Since(killed); d > 0 {
		time.Sleep(d) // down for a few seconds
	}
	c.restart(t, id)
	t.Logf("node %d restarted on its data, ready %v after the kill", id, time.Since(killed).Round(time.Millisecond))
	waitFullISR(t, adm, topic)
	end = waitGrowth(t, adm, topic, storedEnd(adm, topic), 300, fmt.Sprintf("writes after the %s's return", what))
	t.Logf("node %d ready and %s-0 fully in sync %v after the kill (%d stored)", id, topic, time.Since(killed).Round(time.Millisecond), end)
}
