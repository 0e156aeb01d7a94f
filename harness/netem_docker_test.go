package harness

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDockerPacketLossAndDelay starts one node with CAP_NET_ADMIN,
// has its agent install a packet delay on its interface and measures it
// from the host: a TCP connect to the node waits for the node's SYN-ACK,
// which netem holds back (or, on a kernel without netem, for the SYN,
// which the agent's delay queue holds). Healing removes the delay.
func TestDockerPacketLossAndDelay(t *testing.T) {
	if testing.Short() {
		t.Skip("skipping: -short")
	}
	dockerOrSkip(t, "probe")
	broker, agentBin := buildBinaries(t)
	runID := fmt.Sprintf("flnetem%d", time.Now().UnixNano()%1_000_000_000)
	rt, err := NewDockerRuntime(context.Background(), runID)
	require.NoError(t, err)
	rt.LogDir = t.TempDir()
	t.Cleanup(func() { _ = rt.Teardown(context.Background()) })
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	c := Cluster{Nodes: 1, Topology: "combined", ClusterID: newClusterID(), BrokerBinary: broker, AgentBinary: agentBin, NetworkFaults: true}
	nodes, err := rt.Setup(ctx, c)
	require.NoError(t, err)
	addr := nodes[0].Addr

	// connect returns the shortest of a few TCP connects to the node.
	connect := func() time.Duration {
		best := time.Hour
		for range 5 {
			t0 := time.Now()
			conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
			if err != nil {
				continue
			}
			best = min(best, time.Since(t0))
			conn.Close()
		}
		return best
	}
	require.Eventually(t, func() bool { return connect() < time.Second }, time.Minute, 200*time.Millisecond, "the node listens")
	before := connect()

	status := func() string {
		out, err := rt.on("n1").Exec(ctx, "n1", []string{agentPath, "agent", "netem", "status"})
		require.NoError(t, err)
		return out
	}

	// Loss works on every kernel (netem, or the netfilter fallback): at
	// 100% no connection opens; healed, they open again.
	require.NoError(t, rt.Netem(ctx, "n1", "loss=100"))
	assert.Regexp(t, "netem|netfilter-loss", status())
	_, err = net.DialTimeout("tcp", addr, 2*time.Second)
	assert.Error(t, err, "every packet lost")
	require.NoError(t, rt.Netem(ctx, "n1", ""))
	assert.Less(t, connect(), time.Second, "healed")
	assert.NotRegexp(t, "netem|netfilter-loss", status())

	// Delay works on every kernel too (netem, or the agent's delay queue):
	// the node's SYN-ACK, or the SYN arriving at it, waits 300 ms.
	require.NoError(t, rt.Netem(ctx, "n1", "delay=300ms"))
	assert.Regexp(t, "netem|netfilter-delay", status())
	during := connect()
	assert.GreaterOrEqual(t, during-before, 250*time.Millisecond, "before %s, during %s", before, during)

	// A new fault replaces the one in force: a shorter delay, and the
	// delay queue (where it is one) restarted with it.
	require.NoError(t, rt.Netem(ctx, "n1", "delay=100ms loss=1"))
	shorter := connect()
	assert.Less(t, shorter, during, "replaced: 300 ms, then 100 ms")
	assert.GreaterOrEqual(t, shorter-before, 80*time.Millisecond, "before %s, with 100 ms %s", before, shorter)

	require.NoError(t, rt.Netem(ctx, "n1", ""))
	after := connect()
	assert.Less(t, after, before+150*time.Millisecond, "healed: before %s, after %s", before, after)
	assert.NotRegexp(t, "netem|netfilter", status())
	require.NoError(t, rt.Netem(ctx, "n1", ""), "healing twice is fine")
	t.Logf("connect: before %s, with delay=300ms %s, with 100ms %s, healed %s", before, during, shorter, after)
}
