package harness

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestDockerKillAndPartitionRoundTrip brings up a cluster in Docker, kills
// its node and restarts it on its own data, and makes and heals a network
// partition through the in-node agent.
//
// The partition's other side is a second broker container (a one-node
// cluster of its own) at n2's address: the runtime maps the name n2 to
// that address exactly as it would for a cluster member, the agent
// installs its netfilter rules in n1's namespace, and probes from both
// containers prove that the cut holds in both directions while the
// harness (a client) still reaches n1, and that healing restores both.
func TestDockerKillAndPartitionRoundTrip(t *testing.T) {
	if testing.Short() {
		t.Skip("skipping: -short")
	}
	dockerOrSkip(t, "probe")
	broker, agent := buildBinaries(t)
	runID := fmt.Sprintf("flpart%d", time.Now().UnixNano()%1_000_000_000)
	rt, err := NewDockerRuntime(context.Background(), runID)
	require.NoError(t, err)
	rt.LogDir = t.TempDir()
	t.Cleanup(func() { _ = rt.Teardown(context.Background()) })
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	c := Cluster{Nodes: 1, Topology: "combined", ClusterID: newClusterID(), BrokerBinary: broker, AgentBinary: agent,
		BrokerConfig: map[string]string{"log.flush.interval.messages": "1"}, NetworkFaults: true}
	nodes, err := rt.Setup(ctx, c)
	require.NoError(t, err)
	require.Len(t, nodes, 1)

	// The other side: a broker of its own at n2's address.
	n2IP := rt.nodeIP(2)
	other := Cluster{Nodes: 1, Topology: "combined", ClusterID: newClusterID()}
	props := other.Properties(1, func(int) string { return n2IP.String() }, "0.0.0.0", nodeDataDir)
	spec := NodeSpec{Name: "n2", Image: rt.image, Network: rt.network, IP: n2IP, DataDir: nodeDataDir, NetAdmin: true,
		Files: map[string][]byte{nodeConfigDir + "/server.properties": []byte(props)}, Volume: runID + "-n2-data",
		Entrypoint: []string{"/broker"}}
	format := spec
	format.Name, format.IP = "n2-format", netip.Addr{}
	format.Cmd = []string{"format", "-t", other.ClusterID, "-c", nodeConfigDir + "/server.properties"}
	out, err := rt.on("n2").RunOnce(ctx, format)
	require.NoError(t, err, out)
	spec.Cmd = []string{"serve", "-c", nodeConfigDir + "/server.properties"}
	require.NoError(t, rt.on("n2").CreateNode(ctx, spec))
	require.NoError(t, rt.on("n2").Start(ctx, "n2"))

	n1Addr := nodes[0].Addr
	n2Addr := net.JoinHostPort(n2IP.String(), fmt.Sprint(ClientPort))
	dial := func(from, to string) bool {
		_, err := rt.on(from).Exec(ctx, from, []string{"/faultline", "agent", "dial", to})
		return err == nil
	}
	require.Eventually(t, func() bool { return dial("n1", n2Addr) && dial("n2", n1Addr) }, time.Minute, 200*time.Millisecond,
		"both brokers listen and reach each other before the partition")

	adm, err := kgo.NewClient(kgo.SeedBrokers(n1Addr))
	require.NoError(t, err)
	_, err = kadm.NewClient(adm).CreateTopic(ctx, 1, 1, nil, "probe")
	adm.Close()
	require.NoError(t, err)
	produce := func() error {
		cl, err := kgo.NewClient(kgo.SeedBrokers(n1Addr), kgo.DefaultProduceTopic("probe"),
			kgo.RecordDeliveryTimeout(20*time.Second))
		if err != nil {
			return err
		}
		defer cl.Close()
		pctx, pcancel := context.WithTimeout(ctx, 30*time.Second)
		defer pcancel()
		return cl.ProduceSync(pctx, &kgo.Record{Value: []byte("x")}).FirstErr()
	}
	require.NoError(t, produce())

	// Kill -9 n1 and restart it on its own data.
	require.NoError(t, rt.Kill(ctx, "n1"))
	up, err := rt.Running(ctx, "n1")
	require.NoError(t, err)
	assert.False(t, up)
	require.NoError(t, rt.Start(ctx, "n1"))
	require.Eventually(t, func() bool { return produce() == nil }, time.Minute, 500*time.Millisecond, "n1 serves again after the restart")

	// Partition: n1 drops everything from n2.
	require.NoError(t, rt.Isolate(ctx, "n1", []string{"n2"}))
	status, err := rt.on("n1").Exec(ctx, "n1", []string{"/faultline", "agent", "status"})
	require.NoError(t, err)
	assert.Equal(t, n2IP.String(), strings.TrimSpace(status))
	assert.False(t, dial("n2", n1Addr), "n2 must not reach n1 across the partition")
	assert.False(t, dial("n1", n2Addr), "n1 must not reach n2 either: the replies are dropped")
	assert.NoError(t, produce(), "clients are not cut by a partition between nodes")

	// Heal.
	require.NoError(t, rt.Isolate(ctx, "n1", nil))
	status, err = rt.on("n1").Exec(ctx, "n1", []string{"/faultline", "agent", "status"})
	require.NoError(t, err)
	assert.Empty(t, strings.TrimSpace(status))
	assert.True(t, dial("n2", n1Addr), "healed: n2 reaches n1")
	assert.True(t, dial("n1", n2Addr), "healed: n1 reaches n2")

	require.NoError(t, rt.Teardown(ctx))
	logs, err := os.ReadFile(filepath.Join(rt.LogDir, "n1", "broker.log"))
	require.NoError(t, err)
	assert.Equal(t, 2, strings.Count(string(logs), "is ready to serve requests"), "both incarnations of n1 are in its streamed log")
	assert.Contains(t, string(logs), "Found unclean shutdown file marker")
}
