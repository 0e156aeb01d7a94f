package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/faultline/faultline/broker/node"
)

// testCluster is size combined nodes on loopback, formatted and started
// through the broker command's own code.
type testCluster struct {
	nodes       []*node.Node
	bootstrap   string // every broker listener, comma-separated
	controllers string // every controller listener
}

func startTestCluster(t *testing.T, size int) *testCluster {
	t.Helper()
	var ports []int
	var lns []net.Listener
	for range size {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
		lns = append(lns, ln)
	}
	for _, ln := range lns {
		require.NoError(t, ln.Close())
	}
	var voters, ctrls []string
	for i, p := range ports {
		voters = append(voters, fmt.Sprintf("%d@127.0.0.1:%d", i+1, p))
		ctrls = append(ctrls, fmt.Sprintf("127.0.0.1:%d", p))
	}
	var paths []string
	for i := range size {
		dir := t.TempDir()
		lines := []string{
			"process.roles=broker,controller",
			"node.id=" + strconv.Itoa(i+1),
			fmt.Sprintf("listeners=PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:%d", ports[i]),
			"controller.listener.names=CONTROLLER",
			"controller.quorum.voters=" + strings.Join(voters, ","),
			"log.dirs=" + filepath.Join(dir, "data"),
			"offsets.topic.replication.factor=" + strconv.Itoa(min(size, 3)),
			"offsets.topic.num.partitions=3",
			"group.initial.rebalance.delay.ms=0",
			"broker.heartbeat.interval.ms=200",
			"broker.session.timeout.ms=1500",
		}
		path := filepath.Join(dir, "server.properties")
		require.NoError(t, os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644))
		code, _, errOut := runCmd("format", "-t", "MkU3OEVBNTcwNTJENDM2Qg", "-c", path)
		require.Equal(t, exitOK, code, errOut)
		paths = append(paths, path)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := &testCluster{nodes: make([]*node.Node, size), controllers: strings.Join(ctrls, ",")}
	var wg sync.WaitGroup
	errs := make([]error, size)
	for i, path := range paths {
		cfg, _, err := loadConfig(path, nil)
		require.NoError(t, err)
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.nodes[i], errs[i] = node.Start(ctx, cfg, nil)
		}()
	}
	wg.Wait()
	var addrs []string
	for i, n := range c.nodes {
		require.NoError(t, errs[i])
		addrs = append(addrs, n.Addr().String())
	}
	c.bootstrap = strings.Join(addrs, ",")
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for _, n := range c.nodes {
			_ = n.Shutdown(ctx)
		}
	})
	return c
}

// clusterSizes are the topologies every verb is tried on.
var clusterSizes = []int{1, 3}

func TestToolsAgainstSingleNodeAndCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: starts in-process brokers")
	}
	for _, size := range clusterSizes {
		t.Run(fmt.Sprintf("%d-nodes", size), func(t *testing.T) {
			c := startTestCluster(t, size)
			rf := strconv.Itoa(min(size, 3))
			boot := strings.Split(c.bootstrap, ",")[0]

			// topics --create / --list / --describe / --delete
			code, out, errOut := runCmd("topics", "--bootstrap-server", boot, "--create", "--topic", "orders", "--partitions", "3", "--replication-factor", rf, "--config", "min.insync.replicas=1")
			require.Equal(t, exitOK, code, errOut)
			assert.Equal(t, "Created topic orders.\n", out)
			code, _, errOut = runCmd("topics", "--bootstrap-server", boot, "--create", "--topic", "orders", "--partitions", "3", "--replication-factor", rf)
			assert.Equal(t, exitError, code, "creating twice fails")
			assert.Contains(t, errOut, "orders")
			code, _, errOut = runCmd("topics", "--bootstrap-server", boot, "--create", "--topic", "orders", "--if-not-exists")
			assert.Equal(t, exitOK, code, errOut)

			produceAndCommit(t, c.bootstrap, "orders", "billing", 30, 10)

			code, out, errOut = runCmd("topics", "--bootstrap-server", boot, "--list")
			require.Equal(t, exitOK, code, errOut)
			names := strings.Fields(out)
			assert.Contains(t, names, "orders")
			assert.Contains(t, names, "__consumer_offsets", "internal topics are listed")
			assert.Contains(t, names, "__cluster_metadata", "the metadata log is listed, as seed 000 expects")
			code, out, _ = runCmd("topics", "--bootstrap-server", boot, "--list", "--exclude-internal")
			require.Equal(t, exitOK, code)
			assert.Equal(t, "orders\n", out)

			code, out, errOut = runCmd("topics", "--bootstrap-server", boot, "--describe", "--topic", "orders")
			require.Equal(t, exitOK, code, errOut)
			lines := strings.Split(strings.TrimSpace(out), "\n")
			require.Len(t, lines, 4, out)
			assert.Regexp(t, `^Topic: orders\tTopicId: [A-Za-z0-9_-]{22}\tPartitionCount: 3\tReplicationFactor: `+rf+`\tConfigs: min.insync.replicas=1$`, lines[0])
			for i, l := range lines[1:] {
				assert.Regexp(t, fmt.Sprintf(`^\tTopic: orders\tPartition: %d\tLeader: [1-3]\tReplicas: [0-9,]+\tIsr: [0-9,]+$`, i), l)
				assert.Len(t, strings.Split(field(l, "Replicas"), ","), min(size, 3))
			}
			code, out, errOut = runCmd("topics", "--bootstrap-server", boot, "--describe", "--topic", "__cluster_metadata")
			require.Equal(t, exitOK, code, errOut)
			assert.Contains(t, out, fmt.Sprintf("PartitionCount: 1\tReplicationFactor: %d", size))
			assert.Contains(t, out, "\tTopic: __cluster_metadata\tPartition: 0\tLeader: ")
			code, out, _ = runCmd("topics", "--bootstrap-server", boot, "--describe", "--topic", "__consumer_offsets")
			require.Equal(t, exitOK, code)
			assert.Contains(t, out, "PartitionCount: 3\tReplicationFactor: "+rf)
			code, out, _ = runCmd("topics", "--bootstrap-server", boot, "--describe", "--under-replicated-partitions")
			require.Equal(t, exitOK, code)
			assert.Empty(t, out, "a healthy cluster has no under-replicated partition")

			// consumer-groups --list / --describe with lag
			code, out, errOut = runCmd("consumer-groups", "--bootstrap-server", boot, "--list")
			require.Equal(t, exitOK, code, errOut)
			assert.Equal(t, "billing\n", out)
			code, out, errOut = runCmd("consumer-groups", "--bootstrap-server", boot, "--describe", "--group", "billing")
			require.Equal(t, exitOK, code, errOut)
			assert.Contains(t, out, "Consumer group 'billing' has no active members.")
			assert.Regexp(t, `GROUP +TOPIC +PARTITION +CURRENT-OFFSET +LOG-END-OFFSET +LAG +CONSUMER-ID +HOST +CLIENT-ID`, out)
			for p := range 3 {
				assert.Regexp(t, fmt.Sprintf(`(?m)^billing +orders +%d +10 +10 +0 +- +- +-$`, p), out, "10 records per partition, 10 committed: no lag")
			}
			code, out, _ = runCmd("consumer-groups", "--bootstrap-server", boot, "--describe", "--group", "billing", "--state")
			require.Equal(t, exitOK, code)
			assert.Regexp(t, `billing +127\.0\.0\.1:[0-9]+ \([1-3]\) +Empty +0`, out)

			// api-versions: every broker, Kafka's layout
			code, out, errOut = runCmd("api-versions", "--bootstrap-server", boot)
			require.Equal(t, exitOK, code, errOut)
			assert.Equal(t, size, strings.Count(out, ") -> (\n"), out)
			assert.Regexp(t, `(?m)^127\.0\.0\.1:[0-9]+ \(id: 1 rack: null\) -> \($`, out)
			assert.Regexp(t, `(?m)^\tProduce\(0\): [0-9]+ to [0-9]+ \[usable: [0-9]+\],$`, out)
			assert.Regexp(t, `(?m)^\tFetch\(1\): [0-9]+ to [0-9]+ \[usable: [0-9]+\],$`, out)

			// log-dirs --describe: the JSON of kafka-log-dirs.sh
			code, out, errOut = runCmd("log-dirs", "--bootstrap-server", boot, "--describe", "--topic-list", "orders")
			require.Equal(t, exitOK, code, errOut)
			assert.Contains(t, out, "Querying brokers for log directories information\n")
			assert.Regexp(t, `"partition":"orders-0","size":[1-9][0-9]*,"offsetLag":0,"isFuture":false`, out)
			assert.Equal(t, size, strings.Count(out, `"broker":`))
			assert.Contains(t, out, `"error":null`)

			// quorum describe through a broker and straight to a controller
			code, out, errOut = runCmd("quorum", "describe", "--status", "--bootstrap-server", boot)
			require.Equal(t, exitOK, code, errOut)
			assert.Regexp(t, `LeaderId: +[1-3]\n`, out)
			voters := make([]string, size)
			for i := range size {
				voters[i] = strconv.Itoa(i + 1)
			}
			assert.Contains(t, out, "CurrentVoters:          ["+strings.Join(voters, ",")+"]\n")
			// Ask a controller that does not lead (when there is one): its
			// answer names the leader's listener, which the tool asks next.
			leader, err := strconv.Atoi(regexp.MustCompile(`LeaderId: +([0-9]+)`).FindStringSubmatch(out)[1])
			require.NoError(t, err)
			ctrl := strings.Split(c.controllers, ",")[(leader)%size]
			code, out, errOut = runCmd("quorum", "describe", "--replication", "--bootstrap-controller", ctrl, "--command-config", "client.properties")
			require.Equal(t, exitOK, code, errOut)
			assert.Contains(t, errOut, "--command-config client.properties ignored")
			assert.Equal(t, 1, strings.Count(out, " Leader\n"), out)
			assert.Equal(t, size-1, strings.Count(out, " Follower\n"), out)

			code, _, errOut = runCmd("topics", "--bootstrap-server", boot, "--delete", "--topic", "orders")
			require.Equal(t, exitOK, code, errOut)
			require.Eventually(t, func() bool {
				_, out, _ := runCmd("topics", "--bootstrap-server", boot, "--list", "--exclude-internal")
				return out == ""
			}, 10*time.Second, 100*time.Millisecond)
			code, _, errOut = runCmd("topics", "--bootstrap-server", boot, "--describe", "--topic", "orders")
			assert.Equal(t, exitError, code)
			assert.Contains(t, errOut, "orders")
		})
	}
}

// field returns the value after "Name: " in a tab-separated describe line.
func field(line, name string) string {
	m := regexp.MustCompile(name + `: ([^\t]*)`).FindStringSubmatch(line)
	if m == nil {
		return ""
	}
	return m[1]
}

// produceAndCommit writes perPartition records to each of the topic's 3
// partitions and commits the group's offsets at commit on each.
func produceAndCommit(t *testing.T, bootstrap, topic, group string, total, commit int) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(bootstrap, ",")...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	require.NoError(t, err)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := range total {
		r := &kgo.Record{Topic: topic, Partition: int32(i % 3), Value: []byte(strconv.Itoa(i))}
		require.NoError(t, cl.ProduceSync(ctx, r).FirstErr())
	}
	adm := kadm.NewClient(cl)
	offsets := kadm.Offsets{}
	for p := range int32(3) {
		offsets.Add(kadm.Offset{Topic: topic, Partition: p, At: int64(commit), LeaderEpoch: -1})
	}
	resp, err := adm.CommitOffsets(ctx, group, offsets)
	require.NoError(t, err)
	require.NoError(t, resp.Error())
}

func TestToolsOnAnUnreachableBroker(t *testing.T) {
	for _, args := range [][]string{
		{"topics", "--list"},
		{"consumer-groups", "--list"},
		{"api-versions"},
		{"log-dirs", "--describe"},
		{"quorum", "describe", "--status"},
	} {
		t.Run(args[0], func(t *testing.T) {
			code, out, errOut := runCmd(append(args, "--bootstrap-server", "127.0.0.1:1", "--timeout", "500ms")...)
			assert.Equal(t, exitError, code)
			assert.Empty(t, out)
			assert.Equal(t, 1, strings.Count(strings.TrimSpace(errOut), "\n")+1, "one line: %q", errOut)
			assert.Contains(t, errOut, "cannot reach a broker at 127.0.0.1:1")
		})
	}
}

func TestToolsHelpAndUsage(t *testing.T) {
	for _, verb := range []string{"topics", "consumer-groups", "api-versions", "log-dirs", "dump-log"} {
		code, out, _ := runCmd(verb, "--help")
		assert.Equal(t, exitOK, code, verb)
		assert.Contains(t, out, "Usage: broker "+verb, verb)
	}
	code, _, errOut := runCmd("topics", "--bootstrap-server", "127.0.0.1:1")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, errOut, "exactly one of --list")
	code, _, errOut = runCmd("topics", "--list")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, errOut, "missing --bootstrap-server")
	code, _, errOut = runCmd("topics", "--bootstrap-server", "nohost", "--list")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, errOut, "want HOST:PORT")
	code, _, _ = runCmd("consumer-groups", "--bootstrap-server", "127.0.0.1:1", "--describe")
	assert.Equal(t, exitUsage, code)
	code, _, _ = runCmd("dump-log")
	assert.Equal(t, exitUsage, code)
}
