package harness

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"
)

// Labels put on everything the harness creates in Docker, so that a run's
// leftovers (after a crash or Ctrl-C) can be found and removed.
const (
	LabelManaged = "io.faultline.managed" // always "true"
	LabelRun     = "io.faultline.run"     // the run id
	// LabelOwner is "<hostname>:<pid>" of the harness that created the
	// object, so the leftovers of a crashed run can be told from the
	// objects of a run still going on the same daemon.
	LabelOwner = "io.faultline.owner"
	imageRepo  = "faultline-node"
)

// ErrNoDocker is returned (wrapped) when no Docker daemon answers.
var ErrNoDocker = errors.New("no Docker daemon reachable")

// Docker runs nodes as containers through the Docker Engine API, on one
// Engine.
type Docker struct {
	cli   *client.Client
	runID string
	// endpoint is the Engine's endpoint as placed (empty: the
	// environment's), for errors.
	endpoint string
}

// NewDocker connects to the daemon named by the environment (DOCKER_HOST,
// default the local socket) and checks that it answers. runID labels every
// object this value creates.
func NewDocker(ctx context.Context, runID string) (*Docker, error) {
	return newDockerAt(ctx, runID, "", dockerEndpoint{})
}

// NewDockerAt connects to the Engine at endpoint (a placement's: unix://,
// tcp://, a Docker context; see ParseDockerHosts) and checks that it
// answers.
func NewDockerAt(ctx context.Context, runID, endpoint string, extra ...client.Opt) (*Docker, error) {
	ep, err := resolveEndpoint(endpoint)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrNoDocker, endpoint, err)
	}
	return newDockerAt(ctx, runID, endpoint, ep, extra...)
}

func newDockerAt(ctx context.Context, runID, endpoint string, ep dockerEndpoint, extra ...client.Opt) (*Docker, error) {
	where := ""
	if endpoint != "" {
		where = " at " + endpoint
	}
	cli, err := client.New(append(append(ep.opts(), client.WithAPIVersionNegotiation()), extra...)...)
	if err != nil {
		return nil, fmt.Errorf("%w%s: %v", ErrNoDocker, where, err)
	}
	pingCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := cli.Ping(pingCtx, client.PingOptions{NegotiateAPIVersion: true}); err != nil {
		_ = cli.Close()
		return nil, fmt.Errorf("%w%s: %v (start the daemon, or check DOCKER_HOST or --docker-host)", ErrNoDocker, where, err)
	}
	return &Docker{cli: cli, runID: runID, endpoint: endpoint}, nil
}

// Engine returns the daemon's id (the same for every endpoint that reaches
// one daemon) and name (its host's name).
func (d *Docker) Engine(ctx context.Context) (id, name string, err error) {
	res, err := d.cli.Info(ctx, client.InfoOptions{})
	if err != nil {
		return "", "", fmt.Errorf("info of the Engine%s: %w", d.where(), err)
	}
	return res.Info.ID, res.Info.Name, nil
}

// where names the Engine in errors: " at ENDPOINT" for a placed one.
func (d *Docker) where() string {
	if d.endpoint == "" {
		return ""
	}
	return " at " + d.endpoint
}

// Close releases the client connection.
func (d *Docker) Close() error { return d.cli.Close() }

func (d *Docker) labels() map[string]string {
	return map[string]string{LabelManaged: "true", LabelRun: d.runID, LabelOwner: owner()}
}

// owner is this process's LabelOwner value.
func owner() string {
	host, _ := os.Hostname()
	return host + ":" + strconv.Itoa(os.Getpid())
}

// ownerGone reports whether the harness that created an object with these
// labels is certainly gone: no owner label (an old run), or an owner on
// this host whose process no longer exists. An owner on another host (a
// shared remote daemon) is left alone: it may still be running.
func ownerGone(labels map[string]string) bool {
	o, ok := labels[LabelOwner]
	if !ok {
		return true
	}
	host, pidText, _ := strings.Cut(o, ":")
	me, _ := os.Hostname()
	pid, err := strconv.Atoi(pidText)
	if host != me || err != nil || pid <= 0 {
		return false
	}
	err = syscall.Kill(pid, 0)
	return errors.Is(err, syscall.ESRCH)
}

// ImageTag returns the tag an image built from files gets: the repository
// and the first 12 hex digits of a hash over the sorted file names and
// contents, so an unchanged broker is never rebuilt.
func ImageTag(files map[string][]byte) string {
	h := sha256.New()
	for _, name := range sortedKeys(files) {
		fmt.Fprintf(h, "%s\x00%d\x00", name, len(files[name]))
		h.Write(files[name])
	}
	return imageRepo + ":" + hex.EncodeToString(h.Sum(nil))[:12]
}

// BuildImage builds an image from an in-memory context holding files (name
// -> content, all mode 0755; "Dockerfile" must be among them) unless an
// image with the same content tag exists. It returns the tag and whether a
// build ran.
func (d *Docker) BuildImage(ctx context.Context, files map[string][]byte) (tag string, built bool, err error) {
	if _, ok := files["Dockerfile"]; !ok {
		return "", false, errors.New("build image: the context has no Dockerfile")
	}
	tag = ImageTag(files)
	list, err := d.cli.ImageList(ctx, client.ImageListOptions{Filters: make(client.Filters).Add("reference", tag)})
	if err != nil {
		return "", false, fmt.Errorf("list images: %w", err)
	}
	if len(list.Items) > 0 {
		return tag, false, nil
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, name := range sortedKeys(files) {
		hdr := &tar.Header{Name: name, Mode: 0o755, Size: int64(len(files[name])), ModTime: time.Unix(0, 0)}
		if err := tw.WriteHeader(hdr); err != nil {
			return "", false, fmt.Errorf("build context %s: %w", name, err)
		}
		if _, err := tw.Write(files[name]); err != nil {
			return "", false, fmt.Errorf("build context %s: %w", name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return "", false, fmt.Errorf("build context: %w", err)
	}
	res, err := d.cli.ImageBuild(ctx, &buf, client.ImageBuildOptions{
		Tags:        []string{tag},
		Remove:      true,
		ForceRemove: true,
		Labels:      map[string]string{LabelManaged: "true"},
	})
	if err != nil {
		return "", false, fmt.Errorf("build image %s%s: %w", tag, d.where(), err)
	}
	defer res.Body.Close()
	if err := readBuildStream(res.Body); err != nil {
		return "", false, fmt.Errorf("build image %s%s: %w", tag, d.where(), err)
	}
	return tag, true, nil
}

// readBuildStream drains the daemon's JSON progress stream and returns the
// first error it reports.
func readBuildStream(r io.Reader) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 4*1024*1024)
	for sc.Scan() {
		var msg struct {
			Error       string `json:"error"`
			ErrorDetail struct {
				Message string `json:"message"`
			} `json:"errorDetail"`
		}
		if json.Unmarshal(sc.Bytes(), &msg) == nil && (msg.Error != "" || msg.ErrorDetail.Message != "") {
			if msg.ErrorDetail.Message != "" {
				return errors.New(msg.ErrorDetail.Message)
			}
			return errors.New(msg.Error)
		}
	}
	return sc.Err()
}

// RemoveLeftovers removes every container, network and volume carrying the
// faultline label whose harness is gone (a crashed or killed run leaves
// them behind); objects of runs still going are kept. Images are kept too:
// they are cached by content.
func (d *Docker) RemoveLeftovers(ctx context.Context) error {
	return d.remove(ctx, make(client.Filters).Add("label", LabelManaged+"=true"), ownerGone)
}

// Teardown removes what this run created.
func (d *Docker) Teardown(ctx context.Context) error {
	return d.remove(ctx, make(client.Filters).Add("label", LabelRun+"="+d.runID), func(map[string]string) bool { return true })
}

func (d *Docker) remove(ctx context.Context, f client.Filters, gone func(labels map[string]string) bool) error {
	var errs []error
	cs, err := d.cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f})
	if err != nil {
		return fmt.Errorf("list containers: %w", err)
	}
	for _, c := range cs.Items {
		if !gone(c.Labels) {
			continue
		}
		if _, err := d.cli.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true}); err != nil {
			errs = append(errs, fmt.Errorf("remove container %s: %w", c.ID[:12], err))
		}
	}
	ns, err := d.cli.NetworkList(ctx, client.NetworkListOptions{Filters: f})
	if err != nil {
		errs = append(errs, fmt.Errorf("list networks: %w", err))
	} else {
		for _, n := range ns.Items {
			if !gone(n.Labels) {
				continue
			}
			if _, err := d.cli.NetworkRemove(ctx, n.ID, client.NetworkRemoveOptions{}); err != nil {
				errs = append(errs, fmt.Errorf("remove network %s: %w", n.Name, err))
			}
		}
	}
	vs, err := d.cli.VolumeList(ctx, client.VolumeListOptions{Filters: f})
	if err != nil {
		errs = append(errs, fmt.Errorf("list volumes: %w", err))
	} else {
		for _, v := range vs.Items {
			if !gone(v.Labels) {
				continue
			}
			if _, err := d.cli.VolumeRemove(ctx, v.Name, client.VolumeRemoveOptions{Force: true}); err != nil {
				errs = append(errs, fmt.Errorf("remove volume %s: %w", v.Name, err))
			}
		}
	}
	return errors.Join(errs...)
}

// CreateNetwork creates a private bridge network for the run and returns its
// name. A valid subnet pins the network's addresses (so nodes can be given
// fixed IPs that clients on the host reach too); driverOpts are the bridge
// driver's options (com.docker.network.bridge.*; nil for none).
func (d *Docker) CreateNetwork(ctx context.Context, name string, subnet netip.Prefix, driverOpts map[string]string) (string, error) {
	opts := client.NetworkCreateOptions{Driver: "bridge", Labels: d.labels(), Options: driverOpts}
	if subnet.IsValid() {
		opts.IPAM = &network.IPAM{Config: []network.IPAMConfig{{Subnet: subnet}}}
	}
	if _, err := d.cli.NetworkCreate(ctx, name, opts); err != nil {
		return "", fmt.Errorf("create network %s%s: %w", name, d.where(), err)
	}
	return name, nil
}

// NodeSpec describes one node container.
type NodeSpec struct {
	Name    string // container name and hostname (n1, n2, ...)
	Image   string
	Network string
	Cmd     []string // arguments to the image's entrypoint
	// Entrypoint replaces the image's entrypoint (optional).
	Entrypoint []string
	Env        []string
	// Files are written into the container before it starts (path ->
	// content), e.g. /etc/faultline/server.properties.
	Files map[string][]byte
	// NetAdmin grants CAP_NET_ADMIN (network partitions through netfilter).
	NetAdmin bool
	// Fuse grants CAP_SYS_ADMIN and /dev/fuse (the fault filesystem).
	Fuse bool
	// DataDir is where the node's named volume is mounted; the volume
	// outlives the container, so a killed node restarts on its own data.
	DataDir string
	// IP pins the node's address on the network (optional).
	IP netip.Addr
	// Volume names the data volume (default <run>-<name>-data); a one-shot
	// container shares a node's data by naming its volume.
	Volume string
}

// CreateNode creates (but does not start) a node container with its own data
// volume, named <run>-<node>-data.
func (d *Docker) CreateNode(ctx context.Context, spec NodeSpec) error {
	hc := &container.HostConfig{NetworkMode: container.NetworkMode(spec.Network)}
	if spec.NetAdmin {
		hc.CapAdd = append(hc.CapAdd, "NET_ADMIN")
	}
	if spec.Fuse {
		hc.CapAdd = append(hc.CapAdd, "SYS_ADMIN")
		hc.Devices = append(hc.Devices, container.DeviceMapping{PathOnHost: "/dev/fuse", PathInContainer: "/dev/fuse", CgroupPermissions: "rwm"})
	}
	if spec.DataDir != "" {
		vol := spec.Volume
		if vol == "" {
			vol = d.runID + "-" + spec.Name + "-data"
		}
		if _, err := d.cli.VolumeCreate(ctx, client.VolumeCreateOptions{Name: vol, Labels: d.labels()}); err != nil {
			return fmt.Errorf("create volume %s: %w", vol, err)
		}
		hc.Binds = append(hc.Binds, vol+":"+spec.DataDir)
	}
	endpoint := &network.EndpointSettings{Aliases: []string{spec.Name}}
	if spec.IP.IsValid() {
		endpoint.IPAMConfig = &network.EndpointIPAMConfig{IPv4Address: spec.IP}
	}
	_, err := d.cli.ContainerCreate(ctx, client.ContainerCreateOptions{
		Name: d.containerName(spec.Name),
		Config: &container.Config{
			Image:      spec.Image,
			Hostname:   spec.Name,
			Cmd:        spec.Cmd,
			Entrypoint: spec.Entrypoint,
			Env:        spec.Env,
			Labels:     d.labels(),
		},
		HostConfig: hc,
		NetworkingConfig: &network.NetworkingConfig{EndpointsConfig: map[string]*network.EndpointSettings{
			spec.Network: endpoint,
		}},
	})
	if err != nil {
		return fmt.Errorf("create container %s%s: %w", spec.Name, d.where(), err)
	}
	if len(spec.Files) > 0 {
		if err := d.CopyFiles(ctx, spec.Name, spec.Files); err != nil {
			return err
		}
	}
	return nil
}

// CopyFiles writes files (absolute path -> content) into a node's container.
func (d *Docker) CopyFiles(ctx context.Context, node string, files map[string][]byte) error {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dirs := map[string]bool{}
	for _, name := range sortedKeys(files) {
		rel := strings.TrimPrefix(name, "/")
		parts := strings.Split(rel, "/")
		for i := 1; i < len(parts); i++ {
			dir := strings.Join(parts[:i], "/") + "/"
			if !dirs[dir] {
				dirs[dir] = true
				if err := tw.WriteHeader(&tar.Header{Name: dir, Mode: 0o755, Typeflag: tar.TypeDir, ModTime: time.Unix(0, 0)}); err != nil {
					return fmt.Errorf("copy files to %s: %w", node, err)
				}
			}
		}
		if err := tw.WriteHeader(&tar.Header{Name: rel, Mode: 0o644, Size: int64(len(files[name])), ModTime: time.Unix(0, 0)}); err != nil {
			return fmt.Errorf("copy files to %s: %w", node, err)
		}
		if _, err := tw.Write(files[name]); err != nil {
			return fmt.Errorf("copy files to %s: %w", node, err)
		}
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("copy files to %s: %w", node, err)
	}
	_, err := d.cli.CopyToContainer(ctx, d.containerName(node), client.CopyToContainerOptions{DestinationPath: "/", Content: &buf})
	if err != nil {
		return fmt.Errorf("copy files to %s: %w", node, err)
	}
	return nil
}

func (d *Docker) containerName(node string) string { return d.runID + "-" + node }

// Start starts (or restarts, after a kill) a node's container.
func (d *Docker) Start(ctx context.Context, node string) error {
	if _, err := d.cli.ContainerStart(ctx, d.containerName(node), client.ContainerStartOptions{}); err != nil {
		return fmt.Errorf("start %s: %w", node, err)
	}
	return nil
}

// Signal sends a signal (e.g. "KILL", "TERM", "STOP", "CONT") to the node's
// main process.
func (d *Docker) Signal(ctx context.Context, node, signal string) error {
	if _, err := d.cli.ContainerKill(ctx, d.containerName(node), client.ContainerKillOptions{Signal: signal}); err != nil {
		return fmt.Errorf("signal %s %s: %w", signal, node, err)
	}
	return nil
}

// Freeze pauses every process of the node's container (the cgroup
// freezer), as a paused machine.
func (d *Docker) Freeze(ctx context.Context, node string) error {
	if _, err := d.cli.ContainerPause(ctx, d.containerName(node), client.ContainerPauseOptions{}); err != nil {
		return fmt.Errorf("pause %s: %w", node, err)
	}
	return nil
}

// Thaw unpauses what Freeze paused.
func (d *Docker) Thaw(ctx context.Context, node string) error {
	if _, err := d.cli.ContainerUnpause(ctx, d.containerName(node), client.ContainerUnpauseOptions{}); err != nil {
		return fmt.Errorf("unpause %s: %w", node, err)
	}
	return nil
}

// Running reports whether the node's container is running.
func (d *Docker) Running(ctx context.Context, node string) (bool, error) {
	res, err := d.cli.ContainerInspect(ctx, d.containerName(node), client.ContainerInspectOptions{})
	if err != nil {
		return false, fmt.Errorf("inspect %s: %w", node, err)
	}
	return res.Container.State != nil && res.Container.State.Running, nil
}

// Wait blocks until the node's container is no longer running, or ctx ends.
func (d *Docker) Wait(ctx context.Context, node string) error {
	for {
		running, err := d.Running(ctx, node)
		if err != nil {
			return err
		}
		if !running {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for %s to stop: %w", node, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Exec runs a command inside a running node and returns its stdout; a
// non-zero exit is an error carrying stderr.
func (d *Docker) Exec(ctx context.Context, node string, cmd []string) (string, error) {
	ex, err := d.cli.ExecCreate(ctx, d.containerName(node), client.ExecCreateOptions{Cmd: cmd, AttachStdout: true, AttachStderr: true})
	if err != nil {
		return "", fmt.Errorf("exec %v on %s: %w", cmd, node, err)
	}
	att, err := d.cli.ExecAttach(ctx, ex.ID, client.ExecAttachOptions{})
	if err != nil {
		return "", fmt.Errorf("exec %v on %s: %w", cmd, node, err)
	}
	defer att.Close()
	var stdout, stderr bytes.Buffer
	if _, err := stdcopy.StdCopy(&stdout, &stderr, att.Reader); err != nil {
		return "", fmt.Errorf("exec %v on %s: read output: %w", cmd, node, err)
	}
	ins, err := d.cli.ExecInspect(ctx, ex.ID, client.ExecInspectOptions{})
	if err != nil {
		return "", fmt.Errorf("exec %v on %s: %w", cmd, node, err)
	}
	if ins.ExitCode != 0 {
		return stdout.String(), fmt.Errorf("exec %v on %s: exit %d: %s", cmd, node, ins.ExitCode, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// RunOnce runs a one-shot container (spec.Name must be unique in the run)
// to completion and returns its combined output; a non-zero exit is an
// error. The container is removed afterwards.
func (d *Docker) RunOnce(ctx context.Context, spec NodeSpec) (string, error) {
	if err := d.CreateNode(ctx, spec); err != nil {
		return "", err
	}
	name := d.containerName(spec.Name)
	defer func() {
		_, _ = d.cli.ContainerRemove(context.WithoutCancel(ctx), name, client.ContainerRemoveOptions{Force: true})
	}()
	wait := d.cli.ContainerWait(ctx, name, client.ContainerWaitOptions{Condition: container.WaitConditionNextExit})
	if err := d.Start(ctx, spec.Name); err != nil {
		return "", err
	}
	var code int64
	select {
	case res := <-wait.Result:
		code = res.StatusCode
	case err := <-wait.Error:
		return "", fmt.Errorf("wait for %s: %w", spec.Name, err)
	}
	var out strings.Builder
	if err := d.Logs(ctx, spec.Name, &out, false); err != nil {
		return "", err
	}
	if code != 0 {
		return out.String(), fmt.Errorf("%s %v exited %d: %s", spec.Name, spec.Cmd, code, strings.TrimSpace(out.String()))
	}
	return out.String(), nil
}

// Logs copies the node's output (stdout and stderr, every incarnation) to w
// until ctx ends or, when follow is false, until the current end.
func (d *Docker) Logs(ctx context.Context, node string, w io.Writer, follow bool) error {
	return d.logs(ctx, node, w, client.ContainerLogsOptions{ShowStdout: true, ShowStderr: true, Follow: follow})
}

// FollowIncarnation streams the output of the node's current incarnation
// (everything since it last started) to w until the container stops or ctx
// ends, so a node's log reaches the store while the run goes on.
func (d *Docker) FollowIncarnation(ctx context.Context, node string, w io.Writer) error {
	res, err := d.cli.ContainerInspect(ctx, d.containerName(node), client.ContainerInspectOptions{})
	if err != nil {
		return fmt.Errorf("inspect %s: %w", node, err)
	}
	if res.Container.State == nil || res.Container.State.StartedAt == "" {
		return fmt.Errorf("logs of %s: the container has not started", node)
	}
	return d.logs(ctx, node, w, client.ContainerLogsOptions{ShowStdout: true, ShowStderr: true, Follow: true, Since: res.Container.State.StartedAt})
}

func (d *Docker) logs(ctx context.Context, node string, w io.Writer, opts client.ContainerLogsOptions) error {
	rc, err := d.cli.ContainerLogs(ctx, d.containerName(node), opts)
	if err != nil {
		return fmt.Errorf("logs of %s: %w", node, err)
	}
	defer rc.Close()
	if _, err := stdcopy.StdCopy(w, w, rc); err != nil && ctx.Err() == nil {
		return fmt.Errorf("logs of %s: %w", node, err)
	}
	return nil
}

// IP returns the node's address on the run's network.
func (d *Docker) IP(ctx context.Context, node, net string) (string, error) {
	res, err := d.cli.ContainerInspect(ctx, d.containerName(node), client.ContainerInspectOptions{})
	if err != nil {
		return "", fmt.Errorf("inspect %s: %w", node, err)
	}
	if res.Container.NetworkSettings == nil {
		return "", fmt.Errorf("inspect %s: no network settings", node)
	}
	ep, ok := res.Container.NetworkSettings.Networks[net]
	if !ok || ep == nil || !ep.IPAddress.IsValid() {
		return "", fmt.Errorf("inspect %s: not attached to network %s", node, net)
	}
	return ep.IPAddress.String(), nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
