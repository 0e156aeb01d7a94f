package harness

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/faultline/faultline/harness/profile"
)

// Ports every node uses; on the process runtime each node has its own
// 127.0.0.x address, so the ports do not collide.
const (
	ClientPort     = 9092
	ControllerPort = 9093
	MetricsPort    = 9100
)

// Cluster describes the cluster a test runs against.
type Cluster struct {
	// Nodes is how many nodes to start (n1..nK).
	Nodes int
	// Topology is "combined" (the first min(3, K) nodes run
	// process.roles=broker,controller, the rest are brokers) or "split"
	// (n1..n3 are controllers only, the rest brokers; needs K >= 4).
	Topology string
	// ClusterID is the id every node is formatted with.
	ClusterID string
	// BrokerConfig overrides or adds server.properties keys on every node.
	BrokerConfig map[string]string
	// BrokerBinary is the broker executable (a static binary for Docker).
	BrokerBinary string
	// AgentBinary is the faultline executable put into node images as the
	// in-node fault agent (Docker runtime only).
	AgentBinary string
	// NetworkFaults grants the nodes what network partitions need
	// (CAP_NET_ADMIN in Docker); without it nodes get no added capability
	// and partitions are refused.
	NetworkFaults bool
	// DiskFaults puts each node's data dir on the fault filesystem (the
	// node's agent mounts it before the broker starts) and grants the
	// nodes what it needs (CAP_SYS_ADMIN and /dev/fuse in Docker); without
	// it nothing is mounted and power and disk faults are refused.
	DiskFaults bool
	// Profile is the broker under test (nil: the built-in faultline
	// profile, the reference broker).
	Profile *profile.Profile
}

// profile is the broker profile, the reference broker's by default.
func (c Cluster) profile() *profile.Profile {
	if c.Profile != nil {
		return c.Profile
	}
	return profile.Default()
}

// binaryEnv are the variables profiles' binaries may use:
// FAULTLINE_BROKER_BINARY is --broker-binary, FAULTLINE_KFAKE_BINARY is
// bin/kfake next to the agent binary.
func (c Cluster) binaryEnv() map[string]string {
	env := map[string]string{"FAULTLINE_BROKER_BINARY": c.BrokerBinary}
	if c.AgentBinary != "" {
		env["FAULTLINE_KFAKE_BINARY"] = filepath.Join(filepath.Dir(c.AgentBinary), "kfake")
	}
	if v := os.Getenv("FAULTLINE_KFAKE_BINARY"); v != "" {
		env["FAULTLINE_KFAKE_BINARY"] = v
	}
	return env
}

// Validate checks the shape of the cluster.
func (c Cluster) Validate() error {
	if c.Nodes < 1 || c.Nodes > 9 {
		return fmt.Errorf("--nodes must be between 1 and 9, got %d", c.Nodes)
	}
	switch c.Topology {
	case "combined", "":
	case "split":
		if c.Nodes < 4 {
			return fmt.Errorf("--topology split needs at least 4 nodes (3 controllers and a broker), got %d", c.Nodes)
		}
	default:
		return fmt.Errorf("--topology must be combined or split, got %q", c.Topology)
	}
	if c.ClusterID == "" {
		return fmt.Errorf("cluster id is empty")
	}
	p := c.profile()
	if c.Nodes > p.MaxNodes {
		return fmt.Errorf("--nodes %d: the %s profile runs at most %d", c.Nodes, p.Name, p.MaxNodes)
	}
	if !p.SupportsTopology(c.Topology) {
		return fmt.Errorf("--topology %s: the %s profile supports %s", c.Topology, p.Name, strings.Join(p.Topologies, ", "))
	}
	return nil
}

func (c Cluster) controllers() int {
	if c.Nodes < 3 {
		return 1
	}
	return 3
}

// Roles returns node i's (1-based) process.roles.
func (c Cluster) Roles(i int) string {
	if i > c.controllers() {
		return "broker"
	}
	if c.Topology == "split" {
		return "controller"
	}
	return "broker,controller"
}

// Names returns n1..nK.
func (c Cluster) Names() []string {
	names := make([]string, c.Nodes)
	for i := range names {
		names[i] = "n" + strconv.Itoa(i+1)
	}
	return names
}

// Properties renders node i's server.properties (the faultline
// profile's; see NodeData). host(j) is the address under which node j is
// reachable by the others and by clients; bind is the address node i
// listens on; dataDir holds its logs.
func (c Cluster) Properties(i int, host func(j int) string, bind, dataDir string) string {
	d, err := c.NodeData(i, host, bind, dataDir, "")
	if err != nil {
		return "# " + err.Error() + "\n"
	}
	return d.PropertiesText()
}

// NodeData is what the profile's templates see for node i: its place in
// the cluster, and the merged broker properties — the harness's settings
// for a Kafka-style cluster, under the profile's properties, under the
// test's --broker-config.
func (c Cluster) NodeData(i int, host func(j int) string, bind, dataDir, configDir string) (profile.NodeData, error) {
	roles := c.Roles(i)
	d := profile.NodeData{
		NodeID: i, Name: "n" + strconv.Itoa(i), Roles: roles,
		Broker: strings.Contains(roles, "broker"), Controller: strings.Contains(roles, "controller"),
		Host: host(i), Bind: bind, ClientPort: ClientPort, ControllerPort: ControllerPort,
		Voters: c.voters(host), Bootstrap: c.bootstrap(host), DataDir: dataDir, ConfigDir: configDir,
		ClusterID: c.ClusterID, Nodes: c.Nodes,
	}
	props := map[string]string{
		"process.roles":                                 roles,
		"node.id":                                       strconv.Itoa(i),
		"controller.listener.names":                     "CONTROLLER",
		"listener.security.protocol.map":                "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
		"log.dirs":                                      dataDir + "/kafka",
		"default.replication.factor":                    strconv.Itoa(min(3, c.brokers())),
		"offsets.topic.replication.factor":              strconv.Itoa(min(3, c.brokers())),
		"min.insync.replicas":                           strconv.Itoa(min(2, c.brokers())),
		"unclean.leader.election.enable":                "false",
		"group.initial.rebalance.delay.ms":              "0",
		"broker.heartbeat.interval.ms":                  "500",
		"broker.session.timeout.ms":                     "3000",
		"replica.lag.time.max.ms":                       "5000",
		"controller.quorum.voters":                      d.Voters,
		"auto.create.topics.enable":                     "false",
		"log.flush.interval.messages":                   strconv.FormatInt(1<<62, 10),
		"replica.high.watermark.checkpoint.interval.ms": "1000",
	}
	var listeners []string
	if d.Broker {
		listeners = append(listeners, fmt.Sprintf("PLAINTEXT://%s:%d", bind, ClientPort))
		props["advertised.listeners"] = fmt.Sprintf("PLAINTEXT://%s:%d", host(i), ClientPort)
		props["inter.broker.listener.name"] = "PLAINTEXT"
	}
	if d.Controller {
		listeners = append(listeners, fmt.Sprintf("CONTROLLER://%s:%d", bind, ControllerPort))
	}
	props["listeners"] = strings.Join(listeners, ",")
	d.Properties = props
	merged, err := c.profile().MergeProperties(props, d)
	if err != nil {
		return d, err
	}
	for k, v := range c.BrokerConfig {
		merged[k] = v
	}
	d.Properties = merged
	return d, nil
}

func (c Cluster) brokers() int {
	n := 0
	for i := 1; i <= c.Nodes; i++ {
		if strings.Contains(c.Roles(i), "broker") {
			n++
		}
	}
	return n
}

func (c Cluster) bootstrap(host func(j int) string) string {
	var vs []string
	for j := 1; j <= c.controllers(); j++ {
		vs = append(vs, fmt.Sprintf("%s:%d", host(j), ControllerPort))
	}
	return strings.Join(vs, ",")
}

func (c Cluster) voters(host func(j int) string) string {
	var vs []string
	for j := 1; j <= c.controllers(); j++ {
		vs = append(vs, fmt.Sprintf("%d@%s:%d", j, host(j), ControllerPort))
	}
	return strings.Join(vs, ",")
}
