package harness

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/faultline/faultline/harness/profile"
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
)

// DockerRuntime runs each node in its own container on a private bridge
// network with a pinned subnet, so node i has the fixed address .(10+i)
// that both the other nodes and the harness on the host reach. Partitions
// are made by the fault agent inside each node (`/faultline agent`).
//
// When LogDir is set, each node's output is streamed into
// LogDir/<node>/broker.log while the node runs, one follower per container
// incarnation, so the logs are in the store even if the harness dies.
type DockerRuntime struct {
	// LogDir receives the nodes' logs (optional).
	LogDir string

	d       *Docker
	cluster Cluster
	profile *profile.Profile
	image   string // the node image's tag
	network string
	subnet  netip.Prefix
	nodes   []string

	corruptions atomic.Int64 // names the one-shot containers of Corrupt

	logMu     sync.Mutex
	followers map[string]chan struct{} // node -> closed when its latest follower ends
	followWG  sync.WaitGroup
}

// NewDockerRuntime connects to the daemon; runID names and labels the run's
// containers, network and volumes.
func NewDockerRuntime(ctx context.Context, runID string) (*DockerRuntime, error) {
	d, err := NewDocker(ctx, runID)
	if err != nil {
		return nil, err
	}
	return &DockerRuntime{d: d}, nil
}

// subnetFor picks a /24 in 10.213.0.0/16 from the run id; attempt moves to
// another one when the first is taken.
func subnetFor(runID string, attempt int) netip.Prefix {
	h := fnv.New32a()
	h.Write([]byte(runID))
	third := byte((h.Sum32() + uint32(attempt)*37) % 250)
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 213, third, 0}), 24)
}

func (r *DockerRuntime) nodeIP(i int) netip.Addr {
	a := r.subnet.Addr().As4()
	a[3] = byte(10 + i)
	return netip.AddrFrom4(a)
}

// Setup builds the node image (cached by content), removes leftovers of
// crashed runs, creates the network, formats each node's volume in a
// one-shot container and starts the nodes.
func (r *DockerRuntime) Setup(ctx context.Context, c Cluster) ([]Node, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	r.cluster = c
	r.profile = c.profile()
	files, err := imageContext(c)
	if err != nil {
		return nil, err
	}
	if err := r.d.RemoveLeftovers(ctx); err != nil {
		return nil, fmt.Errorf("remove leftovers of earlier runs: %w", err)
	}
	tag, _, err := r.d.BuildImage(ctx, files)
	if err != nil {
		return nil, err
	}
	r.image = tag
	for attempt := 0; ; attempt++ {
		r.subnet = subnetFor(r.d.runID, attempt)
		r.network, err = r.d.CreateNetwork(ctx, r.d.runID+"-net", r.subnet)
		if err == nil {
			break
		}
		if attempt == 5 || !strings.Contains(err.Error(), "overlap") {
			return nil, err
		}
	}
	host := func(j int) string { return r.nodeIP(j).String() }
	var nodes []Node
	for i, name := range c.Names() {
		id := i + 1
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
			Volume: r.d.runID + "-" + name + "-data",
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
			if out, err := r.d.RunOnce(ctx, format); err != nil {
				return nil, fmt.Errorf("format %s: %w\n%s", name, err, out)
			}
		}
		if err := r.d.CreateNode(ctx, spec); err != nil {
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
		if err := r.d.FollowIncarnation(context.Background(), node, f); err != nil {
			fmt.Fprintf(f, "faultline: log stream of %s: %v\n", node, err)
		}
	}()
}

// Kill sends SIGKILL and waits until the container has stopped.
func (r *DockerRuntime) Kill(ctx context.Context, node string) error {
	if err := r.d.Signal(ctx, node, profile.SignalName(r.profile.Signals.Kill)); err != nil {
		return err
	}
	return r.d.Wait(ctx, node)
}

// Stop sends SIGTERM (controlled shutdown) and waits for the exit.
func (r *DockerRuntime) Stop(ctx context.Context, node string) error {
	_ = r.d.Signal(ctx, node, profile.SignalName(r.profile.Signals.Resume))
	if err := r.d.Signal(ctx, node, profile.SignalName(r.profile.Signals.Stop)); err != nil {
		return err
	}
	return r.d.Wait(ctx, node)
}

// Start starts (or restarts) the node's container on its data volume and
// streams the new incarnation's output into the store.
func (r *DockerRuntime) Start(ctx context.Context, node string) error {
	if err := r.d.Start(ctx, node); err != nil {
		return err
	}
	r.follow(node)
	return nil
}

// Pause sends SIGSTOP to the broker; a node on the fault filesystem is
// frozen whole (its broker runs under the agent, which serves the mount).
func (r *DockerRuntime) Pause(ctx context.Context, node string) error {
	if r.cluster.DiskFaults {
		return r.d.Freeze(ctx, node)
	}
	return r.d.Signal(ctx, node, profile.SignalName(r.profile.Signals.Pause))
}

// Resume sends SIGCONT to the broker (or thaws a frozen node).
func (r *DockerRuntime) Resume(ctx context.Context, node string) error {
	if r.cluster.DiskFaults {
		return r.d.Thaw(ctx, node)
	}
	return r.d.Signal(ctx, node, profile.SignalName(r.profile.Signals.Resume))
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
	return r.d.Exec(ctx, node, append([]string{agentPath, "agent", "disk"}, strings.Fields(line)...))
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
	return r.d.Wait(ctx, node)
}

func (r *DockerRuntime) stopped(ctx context.Context, node string) bool {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return r.d.Wait(ctx, node) == nil
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
	running, err := r.d.Running(ctx, node)
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
	if running, _ := r.d.Running(ctx, node); !running {
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
		DataDir: nodeDiskDir, Volume: r.d.runID + "-" + node + "-data", Entrypoint: []string{agentPath},
		Cmd: []string{"agent", "corrupt", "--dir", logDir, "--seed", strconv.FormatUint(seed, 10)},
	}
	if kind != "" {
		spec.Cmd = append(spec.Cmd, "--kind", kind)
	}
	out, err := r.d.RunOnce(ctx, spec)
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
	_, err := r.d.Exec(ctx, node, cmd)
	return err
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
	_, err := r.d.Exec(ctx, node, cmd)
	if err != nil && line == "" {
		if up, rerr := r.d.Running(ctx, node); rerr == nil && !up {
			return nil
		}
	}
	return err
}

// Running reports whether the node's container runs.
func (r *DockerRuntime) Running(ctx context.Context, node string) (bool, error) {
	return r.d.Running(ctx, node)
}

// Teardown removes the run's containers, network and volumes, once the log
// streams (which end with their containers) have written their last line.
func (r *DockerRuntime) Teardown(ctx context.Context) error {
	err := r.d.Teardown(ctx)
	streamsDone := make(chan struct{})
	go func() { r.followWG.Wait(); close(streamsDone) }()
	select {
	case <-streamsDone:
	case <-ctx.Done():
		err = errors.Join(err, fmt.Errorf("node log streams did not end: %w", ctx.Err()))
	}
	return errors.Join(err, r.d.Close())
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
	files["Dockerfile"] = []byte(df.String())
	return files, nil
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
