package harness

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/client"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faultline/faultline/checker"
)

// cancelOnWriter cancels a run when its output first contains trigger (the
// first progress line, so client operations are in flight), after calling
// before.
type cancelOnWriter struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	trigger string
	before  func()
	cancel  context.CancelFunc
	fired   bool
}

func (w *cancelOnWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n, err := w.buf.Write(p)
	if !w.fired && strings.Contains(w.buf.String(), w.trigger) {
		w.fired = true
		if w.before != nil {
			w.before()
		}
		w.cancel()
	}
	return n, err
}

func (w *cancelOnWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// checkInterrupted asserts what a cancelled run leaves: ErrInterrupted, a
// history whose every invoke has its completion (the ops in flight at the
// cancel were recorded), and the node logs.
func checkInterrupted(t *testing.T, o Outcome, err error, out string) {
	t.Helper()
	require.ErrorIs(t, err, ErrInterrupted, out)
	assert.Contains(t, out, "interrupted during the workload")
	h, err := checker.ReadHistory(filepath.Join(o.Dir, "history.jsonl"))
	require.NoError(t, err, "every invoke of the interrupted run has its completion")
	assert.NotEmpty(t, h)
	assert.FileExists(t, filepath.Join(o.Dir, "nodes", "n1", "broker.log"))
}

// TestRunInterruptedProcess cancels a process-runtime run mid-workload:
// the broker processes are gone afterwards.
func TestRunInterruptedProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("skipping: -short")
	}
	tt := shortTest(t, "process")
	tt.TimeLimit = Duration(5 * time.Minute)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := &cancelOnWriter{trigger: "ops/s", cancel: cancel}
	o, err := Run(ctx, tt, testWorkloads, w)
	checkInterrupted(t, o, err, w.String())
	_, derr := net.DialTimeout("tcp", ProcessHost(o.Dir, 1)+":9092", time.Second)
	assert.Error(t, derr, "the broker process must be gone after an interrupted run")
}

// TestRunInterruptedDocker cancels a Docker run mid-workload (Ctrl-C): the
// node log was streamed into the store before the cancel, and afterwards
// no container, network or volume of the run is left.
func TestRunInterruptedDocker(t *testing.T) {
	if testing.Short() {
		t.Skip("skipping: -short")
	}
	d := dockerOrSkip(t, "probe")
	tt := shortTest(t, "docker")
	tt.TimeLimit = Duration(5 * time.Minute)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var streamed []byte
	w := &cancelOnWriter{trigger: "ops/s", cancel: cancel}
	w.before = func() {
		// The store path is on the first line: faultline: ... store=DIR
		line, _, _ := strings.Cut(w.buf.String(), "\n")
		_, dir, _ := strings.Cut(line, "store=")
		streamed, _ = os.ReadFile(filepath.Join(dir, "nodes", "n1", "broker.log"))
	}
	o, err := Run(ctx, tt, testWorkloads, w)
	checkInterrupted(t, o, err, w.String())
	assert.Contains(t, string(streamed), "Kafka broker 1 is ready to serve requests", "the node log reaches the store while the run goes on")
	require.NotEmpty(t, o.RunID)

	lctx, lcancel := context.WithTimeout(context.Background(), time.Minute)
	defer lcancel()
	f := make(client.Filters).Add("label", LabelRun+"="+o.RunID)
	cs, err := d.cli.ContainerList(lctx, client.ContainerListOptions{All: true, Filters: f})
	require.NoError(t, err)
	assert.Empty(t, cs.Items, "containers left behind")
	ns, err := d.cli.NetworkList(lctx, client.NetworkListOptions{Filters: f})
	require.NoError(t, err)
	assert.Empty(t, ns.Items, "networks left behind")
	vs, err := d.cli.VolumeList(lctx, client.VolumeListOptions{Filters: f})
	require.NoError(t, err)
	assert.Empty(t, vs.Items, "volumes left behind")
}

// TestOwnerGone: leftovers are only the objects whose harness is certainly
// gone.
func TestOwnerGone(t *testing.T) {
	host, err := os.Hostname()
	require.NoError(t, err)
	assert.True(t, ownerGone(map[string]string{}), "no owner label: an old run")
	assert.False(t, ownerGone(map[string]string{LabelOwner: owner()}), "this process is alive")
	assert.False(t, ownerGone(map[string]string{LabelOwner: "elsewhere:1"}), "another host's run may be alive")
	assert.True(t, ownerGone(map[string]string{LabelOwner: host + ":2147483646"}), "no such process")
}
