package goclients

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// nodeProperties is one combined node's file, as README.md's "Run a
// cluster by hand" writes it, with durable topic defaults and a fast
// failover (%[1]d node id, %[2]s voters, %[3]d client port, %[4]d
// controller port, %[5]s log dir); StartCluster appends its extra lines.
const nodeProperties = `process.roles=broker,controller
node.id=%[1]d
controller.quorum.voters=%[2]s
controller.listener.names=CONTROLLER
listeners=PLAINTEXT://127.0.0.1:%[3]d,CONTROLLER://127.0.0.1:%[4]d
log.dirs=%[5]s
default.replication.factor=3
min.insync.replicas=2
unclean.leader.election.enable=false
offsets.topic.replication.factor=3
num.partitions=3
broker.session.timeout.ms=2000
broker.heartbeat.interval.ms=250
replica.lag.time.max.ms=3000
`

// Cluster is three broker processes of the faultline binary, restartable
// on their data.
type Cluster struct {
	Addrs   []string // client listeners, node 1 first
	bin     string
	configs []string
	logs    []string
	started [3]atomic.Int32 // starts of each node, to wait for its latest

	mu       sync.Mutex // guards procs
	procs    []*exec.Cmd
	restarts sync.WaitGroup // KillAndRestart's pending restarts
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// faultlineRoot is the enclosing faultline module's directory: the first
// parent of the working directory whose go.mod declares it.
func faultlineRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && bytes.HasPrefix(b, []byte("module github.com/faultline/faultline\n")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no enclosing github.com/faultline/faultline module")
		}
		dir = parent
	}
}

// BuildBroker builds cmd/broker of the enclosing faultline module, or
// takes FAULTLINE_COMPAT_BROKER.
func BuildBroker(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("FAULTLINE_COMPAT_BROKER"); p != "" {
		return p
	}
	root, err := faultlineRoot()
	require.NoError(t, err)
	bin := filepath.Join(t.TempDir(), "broker")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/broker")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "go build cmd/broker: %s", out)
	return bin
}

// StartCluster formats and serves three combined nodes (each a voter and
// a broker) with nodeProperties and extra (more properties lines, which
// override the defaults above them), and waits until every one serves.
// They are killed when t ends.
func StartCluster(t *testing.T, extra string) *Cluster {
	t.Helper()
	c := &Cluster{bin: BuildBroker(t)}
	out, err := exec.Command(c.bin, "random-uuid").Output()
	require.NoError(t, err)
	id := strings.TrimSpace(string(out))
	dir := t.TempDir()
	var voters []string
	ports := make([][2]int, 3)
	for i := range 3 {
		ports[i] = [2]int{freePort(t), freePort(t)}
		voters = append(voters, fmt.Sprintf("%d@127.0.0.1:%d", i+1, ports[i][1]))
	}
	for i := range 3 {
		cfg := filepath.Join(dir, fmt.Sprintf("node-%d.properties", i+1))
		props := fmt.Sprintf(nodeProperties, i+1, strings.Join(voters, ","), ports[i][0], ports[i][1], filepath.Join(dir, fmt.Sprintf("node-%d", i+1))) + extra
		require.NoError(t, os.WriteFile(cfg, []byte(props), 0o644))
		out, err := exec.Command(c.bin, "format", "-t", id, "-c", cfg).CombinedOutput()
		require.NoError(t, err, "format: %s", out)
		c.configs = append(c.configs, cfg)
		c.Addrs = append(c.Addrs, fmt.Sprintf("127.0.0.1:%d", ports[i][0]))
		c.logs = append(c.logs, filepath.Join(dir, fmt.Sprintf("node-%d.log", i+1)))
		c.procs = append(c.procs, nil)
	}
	for i := range 3 {
		require.NoError(t, c.start(i))
	}
	t.Cleanup(func() {
		if keep := os.Getenv("FAULTLINE_COMPAT_LOGS"); keep != "" && t.Failed() {
			for i, l := range c.logs {
				if b, err := os.ReadFile(l); err == nil && os.MkdirAll(keep, 0o755) == nil {
					dst := filepath.Join(keep, fmt.Sprintf("%s-node-%d.log", strings.ReplaceAll(t.Name(), "/", "_"), i+1))
					if os.WriteFile(dst, b, 0o644) == nil {
						t.Logf("node %d's log: %s", i+1, dst)
					}
				}
			}
		}
		// A restart still sleeping would start a broker after the kill
		// below; wait for it (its pause is bounded) so none outlives t.
		c.restarts.Wait()
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, p := range c.procs {
			if p != nil {
				_ = p.Process.Kill()
				_ = p.Wait()
			}
		}
	})
	for i := range 3 {
		c.WaitReady(t, i)
	}
	return c
}

// Bootstrap is the client listeners, comma-separated.
func (c *Cluster) Bootstrap() string { return strings.Join(c.Addrs, ",") }

// start serves node i on its data, its output appended to its log.
func (c *Cluster) start(i int) error {
	f, err := os.OpenFile(c.logs[i], os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	cmd := exec.Command(c.bin, "serve", "-c", c.configs[i])
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = dieWithParent()
	if err := cmd.Start(); err != nil {
		return err
	}
	c.mu.Lock()
	c.procs[i] = cmd
	c.mu.Unlock()
	c.started[i].Add(1)
	return nil
}

// WaitReady waits for node i's ready line in its log (its latest start).
func (c *Cluster) WaitReady(t *testing.T, i int) {
	t.Helper()
	line := fmt.Sprintf("Kafka broker %d is ready to serve requests", i+1)
	require.Eventually(t, func() bool {
		b, _ := os.ReadFile(c.logs[i])
		return strings.Count(string(b), line) >= int(c.started[i].Load())
	}, 30*time.Second, 50*time.Millisecond, "node %d never became ready", i+1)
}

// KillAndRestart SIGKILLs node i and serves it again on its data after a
// pause, in the background; the channel yields the restart's error.
func (c *Cluster) KillAndRestart(t *testing.T, i int, down time.Duration) <-chan error {
	t.Helper()
	done := make(chan error, 1)
	c.mu.Lock()
	p := c.procs[i]
	c.procs[i] = nil
	c.mu.Unlock()
	require.NoError(t, p.Process.Kill())
	_ = p.Wait()
	c.restarts.Add(1)
	go func() {
		defer c.restarts.Done()
		time.Sleep(down)
		done <- c.start(i)
	}()
	return done
}
