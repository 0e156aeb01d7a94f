package harness

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/faultline/faultline/harness/profile"
)

// Process runs nodes as local child processes, node i listening on
// 127.A.B.(10+i), where A.B is derived from the run's directory (every 127/8
// address is loopback on Linux, so no set-up is needed, and two runs on one
// machine never reach each other's brokers). It makes the faults a process can honestly make: kill, stop,
// pause. Network partitions need root and are refused with ErrUnsupported.
type Process struct {
	dir     string // per-run directory: nodes/<name>/{data,server.properties,broker.log}
	cluster Cluster
	profile *profile.Profile
	host    func(i int) string
	starts  map[string][]string // node -> its rendered start command

	mu    sync.Mutex
	procs map[string]*exec.Cmd
	exits map[string]chan struct{}
}

// NewProcess returns a process runtime keeping node data under dir.
func NewProcess(dir string) *Process {
	return &Process{dir: dir, host: func(i int) string { return ProcessHost(dir, i) },
		procs: map[string]*exec.Cmd{}, exits: map[string]chan struct{}{}}
}

// ProcessHost returns the loopback address of node i of the process-runtime
// run kept in dir: 127.A.B.(10+i) with A in 1..250 and B in 0..249 taken
// from a hash of dir, so concurrent runs use distinct addresses.
func ProcessHost(dir string, i int) string {
	h := fnv.New32a()
	h.Write([]byte(dir))
	v := h.Sum32()
	return fmt.Sprintf("127.%d.%d.%d", 1+v%250, (v/250)%250, 10+i)
}

func (p *Process) nodeDir(name string) string { return filepath.Join(p.dir, "nodes", name) }

// Setup renders each node's files from the broker profile into its
// directory, runs the profile's format command and starts the node.
func (p *Process) Setup(ctx context.Context, c Cluster) ([]Node, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	p.cluster, p.profile = c, c.profile()
	paths, err := p.profile.BinaryPaths(c.binaryEnv())
	if err != nil {
		return nil, err
	}
	for name, path := range paths {
		if _, err := os.Stat(path); err != nil {
			return nil, fmt.Errorf("process runtime: profile %s: binaries.%s: %w (build it with make build)", p.profile.Name, name, err)
		}
	}
	bin := func(name string) string { return paths[name] }
	p.starts = map[string][]string{}
	var nodes []Node
	for i, name := range c.Names() {
		id := i + 1
		dir := p.nodeDir(name)
		if err := os.MkdirAll(filepath.Join(dir, "data"), 0o755); err != nil {
			return nil, fmt.Errorf("node %s: %w", name, err)
		}
		nd, err := c.NodeData(id, p.host, p.host(id), filepath.Join(dir, "data"), dir)
		if err != nil {
			return nil, err
		}
		r, err := p.profile.Render(nd, bin)
		if err != nil {
			return nil, err
		}
		for fname, b := range r.Files {
			if err := os.WriteFile(filepath.Join(dir, fname), b, 0o644); err != nil {
				return nil, fmt.Errorf("node %s: %w", name, err)
			}
		}
		if len(r.Format) > 0 {
			out, err := exec.CommandContext(ctx, r.Format[0], r.Format[1:]...).CombinedOutput()
			if err != nil {
				return nil, fmt.Errorf("format %s: %v: %s", name, err, out)
			}
		}
		p.starts[name] = r.Start
		nodes = append(nodes, Node{
			Name: name, ID: int32(id),
			Addr:       fmt.Sprintf("%s:%d", p.host(id), ClientPort),
			Controller: nd.Controller,
			Broker:     nd.Broker,
		})
	}
	for _, n := range nodes {
		if err := p.Start(ctx, n.Name); err != nil {
			return nil, err
		}
	}
	return nodes, nil
}

// Start starts a node's broker process, appending to its broker.log.
func (p *Process) Start(_ context.Context, node string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, running := p.procs[node]; running {
		return fmt.Errorf("start %s: already running", node)
	}
	start := p.starts[node]
	if len(start) == 0 {
		return fmt.Errorf("start %s: not set up", node)
	}
	dir := p.nodeDir(node)
	logf, err := os.OpenFile(filepath.Join(dir, "broker.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("start %s: %w", node, err)
	}
	cmd := exec.Command(start[0], start[1:]...)
	cmd.Stdout, cmd.Stderr = logf, logf
	// Its own process group keeps a terminal's Ctrl-C away from the
	// broker (the harness heals and stops it); Pdeathsig kills it when the
	// harness dies without a teardown, so no broker outlives its run.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("start %s: %w", node, err)
	}
	exited := make(chan struct{})
	p.procs[node], p.exits[node] = cmd, exited
	go func() {
		_ = cmd.Wait()
		logf.Close()
		p.mu.Lock()
		if p.procs[node] == cmd {
			delete(p.procs, node)
			delete(p.exits, node)
		}
		p.mu.Unlock()
		close(exited)
	}()
	return nil
}

func (p *Process) signal(node string, sig syscall.Signal) (chan struct{}, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	cmd, ok := p.procs[node]
	if !ok {
		return nil, fmt.Errorf("signal %s: %s is not running", sig, node)
	}
	if err := cmd.Process.Signal(sig); err != nil {
		return nil, fmt.Errorf("signal %s %s: %w", sig, node, err)
	}
	return p.exits[node], nil
}

func waitExit(ctx context.Context, node string, exited chan struct{}) error {
	select {
	case <-exited:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("wait for %s to exit: %w", node, ctx.Err())
	}
}

// Kill sends SIGKILL and waits for the process to be gone.
func (p *Process) Kill(ctx context.Context, node string) error {
	exited, err := p.signal(node, p.sig(p.profile.Signals.Kill))
	if err != nil {
		return err
	}
	return waitExit(ctx, node, exited)
}

// sig maps a profile's signal name to the signal.
func (p *Process) sig(name string) syscall.Signal {
	if s, ok := signals[profile.SignalName(name)]; ok {
		return s
	}
	return syscall.SIGKILL
}

var signals = map[string]syscall.Signal{
	"TERM": syscall.SIGTERM, "KILL": syscall.SIGKILL, "STOP": syscall.SIGSTOP, "CONT": syscall.SIGCONT, "INT": syscall.SIGINT,
	"HUP": syscall.SIGHUP, "QUIT": syscall.SIGQUIT, "USR1": syscall.SIGUSR1, "USR2": syscall.SIGUSR2, "TSTP": syscall.SIGTSTP,
}

// Stop sends SIGTERM and waits for the controlled shutdown to finish; a
// paused process is resumed first so it can act on the signal.
func (p *Process) Stop(ctx context.Context, node string) error {
	exited, err := p.signal(node, p.sig(p.profile.Signals.Stop))
	if err != nil {
		return err
	}
	_, _ = p.signal(node, p.sig(p.profile.Signals.Resume))
	return waitExit(ctx, node, exited)
}

// Pause sends SIGSTOP.
func (p *Process) Pause(_ context.Context, node string) error {
	_, err := p.signal(node, p.sig(p.profile.Signals.Pause))
	return err
}

// Resume sends SIGCONT.
func (p *Process) Resume(_ context.Context, node string) error {
	_, err := p.signal(node, p.sig(p.profile.Signals.Resume))
	return err
}

// Isolate is refused: cutting traffic between local processes needs root
// and rules on the host, which this runtime never touches.
func (p *Process) Isolate(_ context.Context, node string, from []string) error {
	if len(from) == 0 {
		return nil
	}
	return fmt.Errorf("partition %s: %w (use --runtime docker)", node, ErrUnsupported)
}

// Running reports whether the node's process is up.
func (p *Process) Running(_ context.Context, node string) (bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, ok := p.procs[node]
	return ok, nil
}

// Teardown kills every node still running. Data stays in the run directory
// for the report.
func (p *Process) Teardown(ctx context.Context) error {
	p.mu.Lock()
	var names []string
	for n := range p.procs {
		names = append(names, n)
	}
	p.mu.Unlock()
	var errs []error
	for _, n := range names {
		_, _ = p.signal(n, syscall.SIGCONT)
		kctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		if err := p.Kill(kctx, n); err != nil {
			errs = append(errs, err)
		}
		cancel()
	}
	return errors.Join(errs...)
}
