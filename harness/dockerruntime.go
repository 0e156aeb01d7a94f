package harness

import (
	"bytes"
	"context"
	"debug/elf"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"maps"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/moby/moby/client"

	"github.com/faultline/faultline/harness/profile"
	"github.com/faultline/faultline/nemesis"
)

const (
	nodeDataDir = "/data"
	// nodeConfigDir holds the files the profile renders per node.
	nodeConfigDir = "/etc/faultline"
	// With disk faults the node's volume is mounted at nodeDiskDir and
	// the fault filesystem at nodeDataDir serves nodeBackingDir, on the
	// volume (the filesystem's stage dir must be on the same filesystem
	// as its backing dir): the broker's log dirs are on the mount.
	nodeDiskDir    = "/disk"
	nodeBackingDir = nodeDiskDir + "/data"
	agentPath      = "/faultline"
	// nodeLogDir is the broker's log dir inside a running node (on the
	// fault filesystem's mount when there is one).
	nodeLogDir = nodeDataDir + "/kafka"
)

// DockerRuntime runs each node in its own container on a private bridge
// network with a pinned subnet, so node i has the fixed address .(10+i)
// that both the other nodes and the harness on the host reach. Partitions
// are made by the fault agent inside each node (`/faultline agent`).
//
// The nodes may be placed on several Docker Engines (NewDockerRuntimeOn):
// each node's container is then created, started, signalled, inspected,
// exec'd into and its logs read through the client of its own endpoint;
// the image is built and the network created once per Engine (two
// endpoints that reach one daemon share them). The network between
// Engines is the user's: each Engine's nodes get a /24 of their own
// (dockerEngine.subnet) that the other Engines and the harness must route
// to.
//
// When LogDir is set, each node's output is streamed into
// LogDir/<node>/broker.log while the node runs, one follower per container
// incarnation, so the logs are in the store even if the harness dies.
type DockerRuntime struct {
	// LogDir receives the nodes' logs (optional).
	LogDir string

	runID string
	// placement is node -> endpoint (nil: every node on the one Engine
	// of NewDockerRuntime); clients holds one client per endpoint.
	placement map[string]string
	clients   map[string]*Docker
	engines   []*dockerEngine
	// node is each node's client and engine its Engine, set by Setup.
	node    map[string]*Docker
	engine  map[string]*dockerEngine
	cluster Cluster
	profile *profile.Profile
	image   string // the node image's tag
	network string
	nodes   []string

	corruptions atomic.Int64 // names the one-shot containers of Corrupt

	logMu     sync.Mutex
	followers map[string]chan struct{} // node -> closed when its latest follower ends
	followWG  sync.WaitGroup
}

// dockerEngine is one Docker daemon the run uses, reached by one or more
// endpoints.
type dockerEngine struct {
	id, name string // the daemon's id and host name (empty for the unplaced runtime)
	// d is the first client that reached it: it removes leftovers, builds
	// the image, creates the network and tears down.
	d         *Docker
	endpoints []string
	subnet    netip.Prefix
}

// multiHostSubnet is where the subnets of a run over several Engines
// start: the k-th Engine (in the order of the first node placed on it)
// gets 10.213.(240+k).0/24, fixed, so that the user can route each
// Engine's nodes to it before the run.
const multiHostSubnet = 240

// multiHostSubnetOf is the subnet of the k-th Engine of a run over
// several.
func multiHostSubnetOf(k int) netip.Prefix {
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 213, byte(multiHostSubnet + k), 0}), 24)
}

// NewDockerRuntime connects to the daemon of the environment (DOCKER_HOST,
// default the local socket) and runs every node there; runID names and
// labels the run's containers, network and volumes.
func NewDockerRuntime(ctx context.Context, runID string) (*DockerRuntime, error) {
	d, err := NewDocker(ctx, runID)
	if err != nil {
		return nil, err
	}
	return &DockerRuntime{runID: runID, engines: []*dockerEngine{{d: d}}}, nil
}

// NewDockerRuntimeOn connects to the Engine of every endpoint of the
// placement (node -> endpoint, every node of the cluster; see
// ParseDockerHosts) and runs each node on its own. extra, when not nil,
// adds client options per endpoint (tests count the calls through each).
func NewDockerRuntimeOn(ctx context.Context, runID string, placement map[string]string, extra func(endpoint string) []client.Opt) (*DockerRuntime, error) {
	if len(placement) == 0 {
		return nil, errors.New("docker runtime: empty placement")
	}
	r := &DockerRuntime{runID: runID, placement: placement, clients: map[string]*Docker{}}
	byID := map[string]*dockerEngine{}
	for _, node := range sortedKeys(placement) {
		ep := placement[node]
		if r.clients[ep] != nil {
			continue
		}
		var opts []client.Opt
		if extra != nil {
			opts = extra(ep)
		}
		d, err := NewDockerAt(ctx, runID, ep, opts...)
		if err != nil {
			r.closeClients()
			return nil, fmt.Errorf("%s: %w", node, err)
		}
		r.clients[ep] = d
		id, name, err := d.Engine(ctx)
		if err != nil {
			r.closeClients()
			return nil, err
		}
		key := id
		if key == "" {
			key = ep // an Engine that does not say who it is stands alone
		}
		e := byID[key]
		if e == nil {
			e = &dockerEngine{id: id, name: name, d: d}
			byID[key] = e
			r.engines = append(r.engines, e)
		}
		e.endpoints = append(e.endpoints, ep)
	}
	return r, nil
}

func (r *DockerRuntime) closeClients() error {
	var errs []error
	if r.placement == nil {
		for _, e := range r.engines {
			errs = append(errs, e.d.Close())
		}
	}
	for _, d := range r.clients {
		errs = append(errs, d.Close())
	}
	return errors.Join(errs...)
}

// place gives every node its client and Engine.
func (r *DockerRuntime) place(names []string) error {
	r.node, r.engine = map[string]*Docker{}, map[string]*dockerEngine{}
	for _, name := range names {
		if r.placement == nil {
			r.node[name], r.engine[name] = r.engines[0].d, r.engines[0]
			continue
		}
		ep, ok := r.placement[name]
		if !ok {
			return fmt.Errorf("node %s has no Docker host in the placement %s", name, PlacementText(r.placement))
		}
		r.node[name] = r.clients[ep]
		for _, e := range r.engines {
			if slices.Contains(e.endpoints, ep) {
				r.engine[name] = e
			}
		}
	}
	return nil
}

// on is the client of the node's Engine; an unknown node gets the first
// Engine's, whose daemon then answers that there is no such container.
func (r *DockerRuntime) on(node string) *Docker {
	if d, ok := r.node[node]; ok {
		return d
	}
	return r.engines[0].d
}

// Placement describes where each node runs, one line a node:
// "n2 tcp://b:2375 (Engine b, 10.213.241.12)"; nil before Setup.
func (r *DockerRuntime) Placement() []string {
	var out []string
	for i, name := range r.nodes {
		e := r.engine[name]
		where := r.node[name].endpoint
		if where == "" {
			where = DefaultDockerHost()
		}
		engine := ""
		if e.name != "" {
			engine = "Engine " + e.name + ", "
		}
		out = append(out, fmt.Sprintf("%s %s (%s%s)", name, where, engine, r.nodeIP(i+1)))
	}
	return out
}

// subnetFor picks a /24 in 10.213.0.0/16 from the run id; attempt moves to
// another one when the first is taken.
func subnetFor(runID string, attempt int) netip.Prefix {
	h := fnv.New32a()
	h.Write([]byte(runID))
	third := byte((h.Sum32() + uint32(attempt)*37) % 240)
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 213, third, 0}), 24)
}

// nodeIP is node i's address: .(10+i) in its Engine's subnet (the first
// Engine's for a node outside the cluster).
func (r *DockerRuntime) nodeIP(i int) netip.Addr {
	e, ok := r.engine["n"+strconv.Itoa(i)]
	if !ok {
		e = r.engines[0]
	}
	a := e.subnet.Addr().As4()
	a[3] = byte(10 + i)
	return netip.AddrFrom4(a)
}

// prepare readies one Engine: removes the leftovers of crashed runs,
// builds the node image (cached by content) and creates the run's
// network. k is the Engine's place in the run.
func (r *DockerRuntime) prepare(ctx context.Context, k int, e *dockerEngine, files map[string][]byte) error {
	if err := e.d.RemoveLeftovers(ctx); err != nil {
		return fmt.Errorf("remove leftovers of earlier runs%s: %w", e.d.where(), err)
	}
	if _, _, err := e.d.BuildImage(ctx, files); err != nil {
		return err
	}
	name := r.runID + "-net"
	if len(r.engines) > 1 {
		// Fixed, so the user can route it; no NAT, so a node's packets
		// reach the other Engines' nodes from its own address, which
		// the agents' partition rules name.
		e.subnet = multiHostSubnetOf(k)
		_, err := e.d.CreateNetwork(ctx, name, e.subnet, map[string]string{"com.docker.network.bridge.enable_ip_masquerade": "false"})
		return err
	}
	for attempt := 0; ; attempt++ {
		e.subnet = subnetFor(r.runID, attempt)
		_, err := e.d.CreateNetwork(ctx, name, e.subnet, nil)
		if err == nil || attempt == 5 || !strings.Contains(err.Error(), "overlap") {
			return err
		}
	}
}

// Setup readies every Engine (in parallel), formats each node's volume in
// a one-shot container and starts the nodes, each through its own
// Engine's client.
func (r *DockerRuntime) Setup(ctx context.Context, c Cluster) ([]Node, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	r.cluster = c
	r.profile = c.profile()
	if err := r.place(c.Names()); err != nil {
		return nil, err
	}
	files, err := imageContext(c)
	if err != nil {
		return nil, err
	}
	r.image, r.network = ImageTag(files), r.runID+"-net"
	errs := make([]error, len(r.engines))
	var wg sync.WaitGroup
	for k, e := range r.engines {
		wg.Go(func() { errs[k] = r.prepare(ctx, k, e, files) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	tag := r.image
	host := func(j int) string { return r.nodeIP(j).String() }
	var nodes []Node
	for i, name := range c.Names() {
		id := i + 1
		d := r.node[name]
		// A broker must not advertise 0.0.0.0; it listens on every
		// address and advertises its pinned one.
		nd, err := c.NodeData(id, host, "0.0.0.0", nodeDataDir, nodeConfigDir)
		if err != nil {
			return nil, err
		}
		rendered, err := r.profile.Render(nd, nil)
		if err != nil {
			return nil, err
		}
		spec := NodeSpec{
			Name: name, Image: tag, Network: r.network, IP: r.nodeIP(id), DataDir: nodeDataDir,
			NetAdmin: c.NetworkFaults, Files: inDir(nodeConfigDir, rendered.Files),
			Volume: r.runID + "-" + name + "-data",
		}
		format := spec
		format.Name, format.IP = name+"-format", netip.Addr{}
		format.Entrypoint, format.Cmd = head(rendered.Format)
		spec.Entrypoint, spec.Cmd = head(rendered.Start)
		if c.DiskFaults {
			// The volume holds the backing dir; the format container
			// writes there directly, the node through its agent's mount.
			spec.DataDir, spec.Fuse = nodeDiskDir, true
			format.DataDir, format.Fuse = nodeDiskDir, false
			fd, err := c.NodeData(id, host, "0.0.0.0", nodeBackingDir, nodeConfigDir)
			if err != nil {
				return nil, err
			}
			fr, err := r.profile.Render(fd, nil)
			if err != nil {
				return nil, err
			}
			format.Files = inDir(nodeConfigDir, fr.Files)
			format.Entrypoint, format.Cmd = head(fr.Format)
			spec.Entrypoint = []string{agentPath}
			spec.Cmd = append([]string{"agent", "run", "--backing", nodeBackingDir, "--mount", nodeDataDir, "--"}, rendered.Start...)
		}
		if len(format.Entrypoint) > 0 {
			if out, err := d.RunOnce(ctx, format); err != nil {
				return nil, fmt.Errorf("format %s: %w\n%s", name, err, out)
			}
		}
		if err := d.CreateNode(ctx, spec); err != nil {
			return nil, err
		}
		r.nodes = append(r.nodes, name)
		nodes = append(nodes, Node{Name: name, ID: int32(id), Addr: fmt.Sprintf("%s:%d", r.nodeIP(id), ClientPort),
			Controller: nd.Controller, Broker: nd.Broker})
	}
	for _, n := range nodes {
		if err := r.Start(ctx, n.Name); err != nil {
			return nil, err
		}
	}
	return nodes, nil
}

// follow starts streaming the node's current incarnation into its
// broker.log, after the previous incarnation's follower has written its
// last line.
func (r *DockerRuntime) follow(node string) {
	if r.LogDir == "" {
		return
	}
	r.logMu.Lock()
	defer r.logMu.Unlock()
	if r.followers == nil {
		r.followers = map[string]chan struct{}{}
	}
	prev, done := r.followers[node], make(chan struct{})
	r.followers[node] = done
	r.followWG.Add(1)
	go func() {
		defer r.followWG.Done()
		defer close(done)
		if prev != nil {
			<-prev
		}
		path := filepath.Join(r.LogDir, node, "broker.log")
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return
		}
		f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return
		}
		defer f.Close()
		// The stream ends when the container stops (kill, teardown).
		if err := r.on(node).FollowIncarnation(context.Background(), node, f); err != nil {
			fmt.Fprintf(f, "faultline: log stream of %s: %v\n", node, err)
		}
	}()
}

// Kill sends SIGKILL and waits until the container has stopped.
func (r *DockerRuntime) Kill(ctx context.Context, node string) error {
	if err := r.on(node).Signal(ctx, node, profile.SignalName(r.profile.Signals.Kill)); err != nil {
		return err
	}
	return r.on(node).Wait(ctx, node)
}

// Stop sends SIGTERM (controlled shutdown) and waits for the exit.
func (r *DockerRuntime) Stop(ctx context.Context, node string) error {
	_ = r.on(node).Signal(ctx, node, profile.SignalName(r.profile.Signals.Resume))
	if err := r.on(node).Signal(ctx, node, profile.SignalName(r.profile.Signals.Stop)); err != nil {
		return err
	}
	return r.on(node).Wait(ctx, node)
}

// Start starts (or restarts) the node's container on its data volume and
// streams the new incarnation's output into the store.
func (r *DockerRuntime) Start(ctx context.Context, node string) error {
	if err := r.on(node).Start(ctx, node); err != nil {
		return err
	}
	r.follow(node)
	return nil
}

// Pause sends SIGSTOP to the broker; a node on the fault filesystem is
// frozen whole (its broker runs under the agent, which serves the mount).
func (r *DockerRuntime) Pause(ctx context.Context, node string) error {
	if r.cluster.DiskFaults {
		return r.on(node).Freeze(ctx, node)
	}
	return r.on(node).Signal(ctx, node, profile.SignalName(r.profile.Signals.Pause))
}

// Resume sends SIGCONT to the broker (or thaws a frozen node).
func (r *DockerRuntime) Resume(ctx context.Context, node string) error {
	if r.cluster.DiskFaults {
		return r.on(node).Thaw(ctx, node)
	}
	return r.on(node).Signal(ctx, node, profile.SignalName(r.profile.Signals.Resume))
}

// errNoFaultFS refuses a disk command to nodes started without the fault
// filesystem.
func (r *DockerRuntime) errNoFaultFS(node string) error {
	return fmt.Errorf("disk fault on %s: %w: the nodes were started without the fault filesystem (name a power or disk fault in --nemesis)", node, ErrUnsupported)
}

// agentDisk passes a fault filesystem command to the node's agent.
func (r *DockerRuntime) agentDisk(ctx context.Context, node, line string) (string, error) {
	if !r.cluster.DiskFaults {
		return "", r.errNoFaultFS(node)
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return r.on(node).Exec(ctx, node, append([]string{agentPath, "agent", "disk"}, strings.Fields(line)...))
}

// PowerLoss has the node's agent kill the broker and drop what its fault
// filesystem holds unsynced (line: a faultfs power command), and waits
// until the node is down. The agent ends the container after it answered,
// so an exec cut short by the container's end still counts when the node
// is down.
func (r *DockerRuntime) PowerLoss(ctx context.Context, node, line string) error {
	_, err := r.agentDisk(ctx, node, line)
	if err != nil && !r.stopped(ctx, node) {
		return err
	}
	return r.on(node).Wait(ctx, node)
}

func (r *DockerRuntime) stopped(ctx context.Context, node string) bool {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return r.on(node).Wait(ctx, node) == nil
}

// DiskFault passes an eio, enospc or slow command to the node's fault
// filesystem.
func (r *DockerRuntime) DiskFault(ctx context.Context, node, line string) error {
	_, err := r.agentDisk(ctx, node, line)
	return err
}

// HealDisk ends the node's disk faults, or starts the node when it went
// down meanwhile (a broker that stops when its log dir fails): a new
// mount starts with no fault.
func (r *DockerRuntime) HealDisk(ctx context.Context, node string) error {
	running, err := r.on(node).Running(ctx, node)
	if err != nil {
		return err
	}
	if !running {
		return r.Start(ctx, node)
	}
	_, err = r.agentDisk(ctx, node, "heal")
	if err != nil && !r.stopped(ctx, node) {
		return err
	}
	if running, _ := r.on(node).Running(ctx, node); !running {
		return r.Start(ctx, node)
	}
	return nil
}

// Corrupt damages a stopped node's log dir in a one-shot container on its
// volume (`faultline agent corrupt`), with the one corruption kind names
// (any when empty), and returns what it did.
func (r *DockerRuntime) Corrupt(ctx context.Context, node string, seed uint64, kind string) (string, error) {
	var id int
	if _, err := fmt.Sscanf(node, "n%d", &id); err != nil {
		return "", fmt.Errorf("corrupt %s: unknown node", node)
	}
	logDir := nodeDiskDir + "/kafka"
	if r.cluster.DiskFaults {
		logDir = nodeBackingDir + "/kafka"
	}
	spec := NodeSpec{
		Name: fmt.Sprintf("%s-corrupt-%d", node, r.corruptions.Add(1)), Image: r.image, Network: r.network,
		DataDir: nodeDiskDir, Volume: r.runID + "-" + node + "-data", Entrypoint: []string{agentPath},
		Cmd: []string{"agent", "corrupt", "--dir", logDir, "--seed", strconv.FormatUint(seed, 10)},
	}
	if kind != "" {
		spec.Cmd = append(spec.Cmd, "--kind", kind)
	}
	out, err := r.on(node).RunOnce(ctx, spec)
	return strings.TrimSpace(out), err
}

// LogEnds has the live node's agent read the log end offset of each of
// the partitions (directories "topic-N" of its log dir) from its active
// segment (nemesis.CorruptUnreplicatedTail).
func (r *DockerRuntime) LogEnds(ctx context.Context, node string, partitions []string) (map[string]int64, error) {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	out, err := r.on(node).Exec(ctx, node, []string{agentPath, "agent", "log-end", "--dir", nodeLogDir, "--partitions", strings.Join(partitions, ",")})
	if err != nil {
		return nil, err
	}
	var ends map[string]int64
	if err := json.Unmarshal([]byte(strings.TrimSpace(out)), &ends); err != nil {
		return nil, fmt.Errorf("log ends of %s: the agent said %q: %w", node, strings.TrimSpace(out), err)
	}
	return ends, nil
}

// FlipTail has the live node's agent flip one bit in the last batch of
// each partition of after at or above its offset
// (nemesis.CorruptUnreplicatedTail), and returns its account (JSON).
func (r *DockerRuntime) FlipTail(ctx context.Context, node string, after map[string]int64, seed uint64) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	var list []string
	for _, p := range slices.Sorted(maps.Keys(after)) {
		list = append(list, fmt.Sprintf("%s=%d", p, after[p]))
	}
	out, err := r.on(node).Exec(ctx, node, []string{agentPath, "agent", "flip-tail", "--dir", nodeLogDir,
		"--after", strings.Join(list, ","), "--seed", strconv.FormatUint(seed, 10)})
	return strings.TrimSpace(out), err
}

// Isolate asks the node's fault agent to drop packets from the named nodes
// (or to heal, for an empty list).
func (r *DockerRuntime) Isolate(ctx context.Context, node string, from []string) error {
	if !r.cluster.NetworkFaults {
		if len(from) == 0 {
			return nil // nothing can have been cut
		}
		return fmt.Errorf("partition %s: %w: the nodes were started without CAP_NET_ADMIN (name partition in --nemesis)", node, ErrUnsupported)
	}
	cmd := []string{"/faultline", "agent", "heal"}
	if len(from) > 0 {
		var ips []string
		for _, f := range from {
			if f == nemesis.ClientsNode {
				ip, err := r.clientsIP(node)
				if err != nil {
					return fmt.Errorf("isolate %s from the clients: %w", node, err)
				}
				ips = append(ips, ip.String())
				continue
			}
			var id int
			if _, err := fmt.Sscanf(f, "n%d", &id); err != nil {
				return fmt.Errorf("isolate %s: unknown node %q", node, f)
			}
			ips = append(ips, r.nodeIP(id).String())
		}
		cmd = []string{"/faultline", "agent", "drop", strings.Join(ips, ",")}
	}
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	_, err := r.on(node).Exec(ctx, node, cmd)
	return err
}

// clientsIP is the address the harness's clients reach node from: the
// gateway of the node's Docker network (its subnet's first address, where
// Docker puts the host's end of the bridge). Over several Engines the
// clients come from other hosts' routes and cannot be told apart from
// them, so the cut is refused.
func (r *DockerRuntime) clientsIP(node string) (netip.Addr, error) {
	if len(r.engines) > 1 {
		return netip.Addr{}, fmt.Errorf("%w: over several Docker daemons the clients' address is not one gateway", ErrUnsupported)
	}
	e, ok := r.engine[node]
	if !ok {
		e = r.engines[0]
	}
	return e.subnet.Addr().Next(), nil
}

// Netem asks the node's fault agent to make line (netem fields, see
// `faultline agent netem`) the packet fault of its interface; an empty line
// heals. A container that stops loses its network namespace and the qdisc
// with it (it starts again on a fresh interface), so a node that is down
// has no packet fault to heal.
func (r *DockerRuntime) Netem(ctx context.Context, node, line string) error {
	if !r.cluster.NetworkFaults {
		if line == "" {
			return nil
		}
		return fmt.Errorf("packet fault on %s: %w: the nodes were started without CAP_NET_ADMIN (name packet in --nemesis)", node, ErrUnsupported)
	}
	cmd := []string{agentPath, "agent", "netem", "heal"}
	if line != "" {
		cmd = append([]string{agentPath, "agent", "netem"}, strings.Fields(line)...)
	}
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	_, err := r.on(node).Exec(ctx, node, cmd)
	if err != nil && line == "" {
		if up, rerr := r.on(node).Running(ctx, node); rerr == nil && !up {
			return nil
		}
	}
	return err
}

// Running reports whether the node's container runs.
func (r *DockerRuntime) Running(ctx context.Context, node string) (bool, error) {
	return r.on(node).Running(ctx, node)
}

// Teardown removes the run's containers, network and volumes, once the log
// streams (which end with their containers) have written their last line.
func (r *DockerRuntime) Teardown(ctx context.Context) error {
	var errs []error
	for _, e := range r.engines {
		errs = append(errs, e.d.Teardown(ctx))
	}
	streamsDone := make(chan struct{})
	go func() { r.followWG.Wait(); close(streamsDone) }()
	select {
	case <-streamsDone:
	case <-ctx.Done():
		errs = append(errs, fmt.Errorf("node log streams did not end: %w", ctx.Err()))
	}
	return errors.Join(append(errs, r.closeClients())...)
}

// imageContext is the node image's build context: the agent, the profile's
// binaries (a directory is copied whole) and a Dockerfile that puts each
// at /<name>, FROM scratch.
func imageContext(c Cluster) (map[string][]byte, error) {
	p := c.profile()
	paths, err := p.BinaryPaths(c.binaryEnv())
	if err != nil {
		return nil, err
	}
	files := map[string][]byte{}
	agent, err := os.ReadFile(c.AgentBinary)
	if err != nil {
		return nil, fmt.Errorf("node image needs the faultline binary (the in-node agent): %w (run make build)", err)
	}
	files["faultline"] = agent
	var df strings.Builder
	df.WriteString("# The faultline node image for the " + p.Name + " profile, FROM scratch (no registry).\nFROM scratch\nCOPY faultline /faultline\n")
	names := make([]string, 0, len(paths))
	for n := range paths {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		if err := addToContext(files, name, paths[name]); err != nil {
			return nil, fmt.Errorf("profile %s: binaries.%s: %w (run make build, or set the path)", p.Name, name, err)
		}
		fmt.Fprintf(&df, "COPY %s /%s\n", name, name)
	}
	df.WriteString("VOLUME [\"/data\"]\n")
	// An image FROM scratch holds no dynamic loader but what the
	// profile copies in: a dynamically linked executable without its
	// loader fails in the node with "no such file or directory" (the
	// agent's fault starts then all fail, and the run tests nothing).
	for _, name := range append([]string{"faultline"}, names...) {
		b, ok := files[name]
		if !ok {
			continue // a directory
		}
		if interp, dynamic := elfInterpreter(b); dynamic {
			if _, shipped := files[strings.TrimPrefix(interp, "/")]; !shipped {
				path := c.AgentBinary
				if name != "faultline" {
					path = paths[name]
				}
				return nil, fmt.Errorf("node image: %s (%s) is dynamically linked (it needs %s) and the image, FROM scratch, has no such file: build it static, with CGO_ENABLED=0 (make build)", name, path, interp)
			}
		}
	}
	files["Dockerfile"] = []byte(df.String())
	return files, nil
}

// elfInterpreter is the program interpreter (the dynamic loader) an ELF
// executable names, and whether it names one; a static executable, or a
// file that is no ELF, names none.
func elfInterpreter(b []byte) (string, bool) {
	f, err := elf.NewFile(bytes.NewReader(b))
	if err != nil {
		return "", false
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			// A loader's path is short; a corrupt size is not trusted.
			data, _ := io.ReadAll(io.LimitReader(p.Open(), 4096))
			return strings.TrimRight(string(data), "\x00"), true
		}
	}
	return "", false
}

// addToContext adds the file at path as name, or the directory's files
// under name/.
func addToContext(files map[string][]byte, name, path string) error {
	st, err := os.Stat(path)
	if err != nil {
		return err
	}
	if !st.IsDir() {
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		files[name] = b
		return nil
	}
	return filepath.WalkDir(path, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(path, p)
		files[name+"/"+filepath.ToSlash(rel)] = b
		return nil
	})
}

// inDir places a profile's rendered files in dir.
func inDir(dir string, files map[string][]byte) map[string][]byte {
	out := make(map[string][]byte, len(files))
	for n, b := range files {
		out[dir+"/"+n] = b
	}
	return out
}

// head splits a command into its executable and arguments.
func head(cmd []string) ([]string, []string) {
	if len(cmd) == 0 {
		return nil, nil
	}
	return cmd[:1], cmd[1:]
}
