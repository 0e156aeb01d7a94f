package harness

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/moby/moby/client"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faultline/faultline/checker"
	"github.com/faultline/faultline/harness/testspec"
)

// socketProxy serves a unix socket at path that forwards every connection
// to the daemon at target (unix:// or tcp://): a second endpoint of this
// machine's one daemon, as a second host would be. It counts the
// connections it forwarded.
func socketProxy(t *testing.T, path, target string) *atomic.Int64 {
	t.Helper()
	u, err := client.ParseHostURL(target)
	require.NoError(t, err)
	require.Contains(t, []string{"unix", "tcp"}, u.Scheme, "the test proxies a unix or plain tcp daemon")
	ln, err := net.Listen("unix", path)
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	conns := new(atomic.Int64)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns.Add(1)
			go func() {
				defer c.Close()
				up, err := net.Dial(u.Scheme, u.Host)
				if err != nil {
					return
				}
				defer up.Close()
				done := make(chan struct{})
				go func() { _, _ = io.Copy(up, c); close(done) }()
				_, _ = io.Copy(c, up)
				<-done
			}()
		}
	}()
	return conns
}

// containerInPath finds the container a request names
// (/v1.41/containers/<name>/start, ?name=<name> on create).
var containerInPath = regexp.MustCompile(`/containers/([^/]+)/`)

// TestDockerRunOverTwoEndpoints runs a short three-node test with n1 on
// the default endpoint and n2, n3 on a second unix socket that reaches the
// same daemon: the run is valid, every request that names a node's
// container (create, copy, start, inspect, logs, exec) went through the
// client of that node's own endpoint, the one daemon got one network, and
// test.json keeps the placement for a replay.
func TestDockerRunOverTwoEndpoints(t *testing.T) {
	if testing.Short() {
		t.Skip("skipping: -short")
	}
	dockerOrSkip(t, "probe")
	dir, err := os.MkdirTemp("", "flmh") // short: a unix socket path has at most 107 bytes
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	sock := filepath.Join(dir, "docker.sock")
	proxied := socketProxy(t, sock, DefaultDockerHost())
	first, second := DefaultDockerHost(), "unix://"+sock

	tt := shortTest(t, "docker")
	tt.Nodes, tt.ReplicationFactor = 3, 3
	tt.Nemesis = parseNemesis(t, "none")
	tt.TimeLimit = Duration(10 * time.Second)
	tt.DockerHosts = map[string]string{"n2": second, "n3": second} // n1: the default
	var mu sync.Mutex
	requests := map[string][]string{} // endpoint -> method and path of each request
	tt.dockerClientOpts = func(endpoint string) []client.Opt {
		return []client.Opt{client.WithHTTPRequestHook(func(req *http.Request) error {
			mu.Lock()
			defer mu.Unlock()
			line := req.Method + " " + req.URL.Path
			if name := req.URL.Query().Get("name"); name != "" {
				line += "?name=" + name
			}
			requests[endpoint] = append(requests[endpoint], line)
			return nil
		})}
	}
	var out bytes.Buffer
	o, err := Run(context.Background(), tt, testWorkloads, &out)
	require.NoError(t, err, out.String())
	assert.Equal(t, checker.Valid, o.Result.Valid, out.String())
	assert.Positive(t, o.Result.Stats.Sends)
	assert.Contains(t, out.String(), "placement: n1 "+first)
	assert.Contains(t, out.String(), "n2 "+second)

	mu.Lock()
	defer mu.Unlock()
	endpointOf := map[string]string{"n1": first, "n2": second, "n3": second}
	created := map[string]string{} // container -> endpoint it was created through
	networks := 0
	for endpoint, lines := range requests {
		for _, line := range lines {
			if strings.HasSuffix(strings.Fields(line)[1], "/networks/create") {
				networks++
			}
			name := ""
			if m := containerInPath.FindStringSubmatch(line); m != nil {
				name = m[1]
			}
			if _, after, ok := strings.Cut(line, "/containers/create?name="); ok {
				name = after
				created[name] = endpoint
			}
			node, ok := strings.CutPrefix(name, o.RunID+"-")
			if !ok {
				continue
			}
			node, _, _ = strings.Cut(node, "-") // n2-format is n2's
			assert.Equal(t, endpointOf[node], endpoint, "%s went through the client of %s", line, node)
		}
	}
	for node, endpoint := range endpointOf {
		assert.Equal(t, endpoint, created[o.RunID+"-"+node], "%s's container was made through its own client", node)
		assert.Equal(t, endpoint, created[o.RunID+"-"+node+"-format"], "%s's format container was made through its own client", node)
	}
	assert.Equal(t, 1, networks, "two endpoints of one daemon share its network")
	assert.Positive(t, proxied.Load(), "the second endpoint's requests went through its own socket")

	b, err := os.ReadFile(filepath.Join(o.Dir, "test.json"))
	require.NoError(t, err)
	spec, err := testspec.Decode(b)
	require.NoError(t, err)
	assert.Equal(t, endpointOf, spec.DockerHosts, "test.json keeps every node's place, the default written out")
	replay, _, _, err := LoadReplay(o.Dir)
	require.NoError(t, err)
	assert.Equal(t, endpointOf, replay.DockerHosts, "--replay places the nodes as they were")
	report, err := os.ReadFile(filepath.Join(o.Dir, "report.html"))
	require.NoError(t, err)
	assert.Contains(t, string(report), "n2 "+second)
	for _, n := range []string{"n1", "n2", "n3"} {
		assert.FileExists(t, filepath.Join(o.Dir, "nodes", n, "broker.log"))
	}
	var res struct{ Valid any }
	b, err = os.ReadFile(filepath.Join(o.Dir, "results.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &res))
	assert.Equal(t, true, res.Valid)
}
