package harness

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faultline/faultline/nemesis"
	"github.com/faultline/faultline/workloads"
)

func props(s string) map[string]string {
	m := map[string]string{}
	for _, line := range strings.Split(s, "\n") {
		if k, v, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(line, "#") {
			m[k] = v
		}
	}
	return m
}

func TestClusterRolesAndProperties(t *testing.T) {
	c := Cluster{Nodes: 5, Topology: "combined", ClusterID: "x", BrokerConfig: map[string]string{"min.insync.replicas": "3", "unsafe.x": "true"}}
	require.NoError(t, c.Validate())
	assert.Equal(t, "broker,controller", c.Roles(1))
	assert.Equal(t, "broker,controller", c.Roles(3))
	assert.Equal(t, "broker", c.Roles(4))
	host := func(j int) string { return "127.0.0." + strconv.Itoa(10+j) }
	p := props(c.Properties(2, host, "0.0.0.0", "/data"))
	assert.Equal(t, "2", p["node.id"])
	assert.Equal(t, "1@127.0.0.11:9093,2@127.0.0.12:9093,3@127.0.0.13:9093", p["controller.quorum.voters"])
	assert.Equal(t, "PLAINTEXT://0.0.0.0:9092,CONTROLLER://0.0.0.0:9093", p["listeners"])
	assert.Equal(t, "PLAINTEXT://127.0.0.12:9092", p["advertised.listeners"])
	assert.Equal(t, "3", p["min.insync.replicas"], "overrides win")
	assert.Equal(t, "true", p["unsafe.x"])
	assert.Equal(t, "/data/kafka", p["log.dirs"])

	p = props(c.Properties(5, host, "0.0.0.0", "/data"))
	assert.Equal(t, "PLAINTEXT://0.0.0.0:9092", p["listeners"], "a broker-only node has no controller listener")

	split := Cluster{Nodes: 4, Topology: "split", ClusterID: "x"}
	require.NoError(t, split.Validate())
	p = props(split.Properties(1, host, "0.0.0.0", "/d"))
	assert.Equal(t, "controller", p["process.roles"])
	assert.NotContains(t, p, "advertised.listeners")
	assert.Equal(t, "CONTROLLER://0.0.0.0:9093", p["listeners"])

	single := Cluster{Nodes: 1, ClusterID: "x"}
	p = props(single.Properties(1, host, "127.0.0.11", "/d"))
	assert.Equal(t, "1@127.0.0.11:9093", p["controller.quorum.voters"])
	assert.Equal(t, "1", p["min.insync.replicas"])
	assert.Equal(t, "1", p["default.replication.factor"])
}

func TestClusterValidate(t *testing.T) {
	assert.ErrorContains(t, Cluster{Nodes: 0, ClusterID: "x"}.Validate(), "--nodes")
	assert.ErrorContains(t, Cluster{Nodes: 3, Topology: "split", ClusterID: "x"}.Validate(), "at least 4")
	assert.ErrorContains(t, Cluster{Nodes: 3, Topology: "ring", ClusterID: "x"}.Validate(), "combined or split")
}

func TestSubnetForIsStableAndMoves(t *testing.T) {
	assert.Equal(t, subnetFor("a", 0), subnetFor("a", 0))
	assert.NotEqual(t, subnetFor("a", 0), subnetFor("a", 1))
	assert.Equal(t, 24, subnetFor("a", 0).Bits())
}

func TestValidateNamesTheNemesis(t *testing.T) {
	tt := DefaultTest()
	require.NoError(t, tt.Validate(testWorkloads))
	tt.Nemesis = nemesis.Spec{{Kind: nemesis.KindKill}, {Kind: "chaos"}}
	assert.ErrorContains(t, tt.Validate(testWorkloads), `--nemesis: unknown nemesis "chaos"`)
	tt.Nemesis = nemesis.Spec{{Kind: nemesis.KindPartition, Mode: "everything"}}
	assert.ErrorContains(t, tt.Validate(testWorkloads), `unknown mode "everything"`)
	tt.Nemesis = nil
	assert.ErrorContains(t, tt.Validate(testWorkloads), "--nemesis")
	tt.Nemesis = parseNemesis(t, "partition:clients-coordinator")
	assert.ErrorContains(t, tt.Validate(testWorkloads), "needs --txn")
	tt.Nemesis = parseNemesis(t, "kill:leaders,pause,none")
	assert.NoError(t, tt.Validate(testWorkloads))
	tt.Topology = "split"
	tt.Nodes, tt.ReplicationFactor = 3, 3
	assert.ErrorContains(t, tt.Validate(testWorkloads), "--topology split needs at least 4 nodes")
	tt.Topology = "ring"
	assert.ErrorContains(t, tt.Validate(testWorkloads), "--topology must be combined or split")
	tt.Topology, tt.Rate, tt.PartitionsPerTopic = "combined", -1, 0
	err := tt.Validate(testWorkloads)
	assert.ErrorContains(t, err, "--rate")
	assert.ErrorContains(t, err, "--partitions-per-topic")
}

// TestValidateWantsExplicitAcksAndAKnownWorkload: a Test built without
// DefaultTest has no acks setting, and its workload must be registered.
func TestValidateWantsExplicitAcksAndAKnownWorkload(t *testing.T) {
	tt := DefaultTest()
	tt.Acks = workloads.Acks{}
	assert.ErrorContains(t, tt.Validate(testWorkloads), "--acks: must be -1 (all), 0 or 1, got none")
	tt.Acks, tt.Workload = workloads.AcksNone, "bank"
	assert.ErrorContains(t, tt.Validate(testWorkloads), `--workload: unknown workload "bank" (known: compact, queue)`)
	tt.Workload = "queue"
	assert.NoError(t, tt.Validate(testWorkloads))
}

func TestNetworkFaultsOnlyWithPartitions(t *testing.T) {
	tt := DefaultTest()
	for _, c := range []struct {
		nemesis string
		want    bool
	}{
		{"none", false},
		{"kill,pause:leaders", false},
		{"kill,partition", true},
		{"partition:one", true},
		{"kill,partition:halves", true},
	} {
		tt.Nemesis = parseNemesis(t, c.nemesis)
		assert.Equal(t, c.want, tt.networkFaults(), "%v", c.nemesis)
	}
}

// TestDockerIsolateNeedsNetworkFaults: nodes started without CAP_NET_ADMIN
// refuse partitions and heal as a no-op (no Docker needed: nothing is
// executed).
func TestDockerIsolateNeedsNetworkFaults(t *testing.T) {
	r := &DockerRuntime{}
	assert.NoError(t, r.Isolate(context.Background(), "n1", nil))
	assert.ErrorIs(t, r.Isolate(context.Background(), "n1", []string{"n2"}), ErrUnsupported)
}

func TestProcessHostsDifferPerRun(t *testing.T) {
	a, b := ProcessHost("/store/x/run1", 1), ProcessHost("/store/x/run2", 1)
	assert.NotEqual(t, a, b, "two runs must not share broker addresses")
	assert.Equal(t, a, ProcessHost("/store/x/run1", 1))
	assert.True(t, strings.HasPrefix(a, "127."))
	assert.True(t, strings.HasSuffix(ProcessHost("/d", 3), ".13"))
}
