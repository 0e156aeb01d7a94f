package harness

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faultline/faultline/checker"
	"github.com/faultline/faultline/nemesis"
	"github.com/faultline/faultline/workloads"
	"github.com/faultline/faultline/workloads/compact"
	"github.com/faultline/faultline/workloads/queue"
)

// testWorkloads is the registry of the harness's tests, the one
// cmd/faultline fills.
var testWorkloads = workloads.Registry{"queue": queue.New, "compact": compact.New}

// parseNemesis parses a --nemesis list of a test.
func parseNemesis(t *testing.T, list string) nemesis.Spec {
	t.Helper()
	s, err := nemesis.ParseSpec(list)
	require.NoError(t, err)
	return s
}

// buildBinaries builds static bin/broker and bin/faultline into a temp dir.
func buildBinaries(t *testing.T) (broker, agent string) {
	t.Helper()
	dir := t.TempDir()
	for name, pkg := range map[string]string{"broker": "../cmd/broker", "faultline": "../cmd/faultline"} {
		cmd := exec.Command("go", "build", "-o", filepath.Join(dir, name), pkg)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, string(out))
	}
	return filepath.Join(dir, "broker"), filepath.Join(dir, "faultline")
}

func shortTest(t *testing.T, runtime string) Test {
	broker, agent := buildBinaries(t)
	tt := DefaultTest()
	tt.Runtime, tt.Nodes, tt.ReplicationFactor = runtime, 1, 1
	tt.Nemesis = parseNemesis(t, "kill")
	tt.TimeLimit, tt.NemesisInterval = Duration(12*time.Second), Duration(4*time.Second)
	tt.Concurrency, tt.Seed = 3, 7
	tt.Store = t.TempDir()
	tt.BrokerBinary, tt.AgentBinary = broker, agent
	tt.BrokerConfig = map[string]string{"log.flush.interval.messages": "1"}
	return tt
}

// checkRun asserts the store layout of DESIGN.md and a valid verdict.
func checkRun(t *testing.T, tt Test, o Outcome, out string) {
	t.Helper()
	assert.Equal(t, checker.Valid, o.Result.Valid, "%s", out)
	for _, f := range []string{"history.jsonl", "results.json", "report.html", "junit.xml", "test.json", "nodes/n1/broker.log"} {
		assert.FileExists(t, filepath.Join(o.Dir, f))
	}
	latest, err := filepath.EvalSymlinks(filepath.Join(tt.Store, "latest"))
	require.NoError(t, err)
	dir, err := filepath.EvalSymlinks(o.Dir)
	require.NoError(t, err)
	assert.Equal(t, dir, latest)
	h, err := checker.ReadHistory(filepath.Join(o.Dir, "history.jsonl"))
	require.NoError(t, err, "the stored history keeps the invoke/complete discipline")
	kills := 0
	for _, op := range h {
		if op.Process == checker.NemesisProcess && op.F == "start-kill" && op.Type == checker.OK {
			kills++
		}
	}
	assert.Positive(t, kills, "the nemesis killed the node at least once")
	assert.Positive(t, o.Result.Stats.Sends)
	logs, err := os.ReadFile(filepath.Join(o.Dir, "nodes/n1/broker.log"))
	require.NoError(t, err)
	assert.Contains(t, string(logs), "Found unclean shutdown file marker", "the killed node recovered on restart")
	report, err := os.ReadFile(filepath.Join(o.Dir, "report.html"))
	require.NoError(t, err)
	assert.Contains(t, string(report), "VALID")
}

// TestRunProcessRuntime runs a whole short test against one local broker
// process that is killed and restarted.
func TestRunProcessRuntime(t *testing.T) {
	if testing.Short() {
		t.Skip("skipping: -short")
	}
	tt := shortTest(t, "process")
	var out bytes.Buffer
	o, err := Run(context.Background(), tt, testWorkloads, &out)
	require.NoError(t, err, out.String())
	checkRun(t, tt, o, out.String())
	assert.Contains(t, out.String(), "phase: final reads")
}

// TestRunDockerRuntime does the same with the node in a container built
// FROM scratch; it skips only when no Docker daemon is reachable.
func TestRunDockerRuntime(t *testing.T) {
	if testing.Short() {
		t.Skip("skipping: -short")
	}
	d, err := NewDocker(context.Background(), "probe")
	if errors.Is(err, ErrNoDocker) {
		t.Skipf("skipping: no Docker daemon reachable: %v", err)
	}
	require.NoError(t, err)
	d.Close()
	tt := shortTest(t, "docker")
	var out bytes.Buffer
	o, err := Run(context.Background(), tt, testWorkloads, &out)
	require.NoError(t, err, out.String())
	checkRun(t, tt, o, out.String())
	assert.False(t, strings.Contains(out.String(), "teardown:"), out.String())
}
