package harness

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// dockerOrSkip connects to the daemon, skipping the test only when no Docker
// daemon is reachable.
func dockerOrSkip(t *testing.T, runID string) *Docker {
	t.Helper()
	d, err := NewDocker(context.Background(), runID)
	if errors.Is(err, ErrNoDocker) {
		t.Skipf("skipping: no Docker daemon reachable: %v", err)
	}
	require.NoError(t, err)
	t.Cleanup(func() { _ = d.Close() })
	return d
}

func buildEchoNode(t *testing.T) []byte {
	t.Helper()
	out := filepath.Join(t.TempDir(), "node")
	cmd := exec.Command("go", "build", "-o", out, "./testdata/echonode")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	b, err := cmd.CombinedOutput()
	require.NoError(t, err, string(b))
	bin, err := os.ReadFile(out)
	require.NoError(t, err)
	return bin
}

func TestImageTagDependsOnContentOnly(t *testing.T) {
	a := ImageTag(map[string][]byte{"Dockerfile": []byte("FROM scratch"), "x": []byte("1")})
	b := ImageTag(map[string][]byte{"x": []byte("1"), "Dockerfile": []byte("FROM scratch")})
	c := ImageTag(map[string][]byte{"Dockerfile": []byte("FROM scratch"), "x": []byte("2")})
	assert.Equal(t, a, b)
	assert.NotEqual(t, a, c)
	assert.True(t, strings.HasPrefix(a, "faultline-node:"))
}

func TestDockerRuntimeLifecycle(t *testing.T) {
	runID := fmt.Sprintf("fltest%d", time.Now().UnixNano()%1_000_000_000)
	d := dockerOrSkip(t, runID)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	t.Cleanup(func() { _ = d.Teardown(context.Background()) })

	files := map[string][]byte{
		"Dockerfile": []byte("FROM scratch\nCOPY node /node\nENTRYPOINT [\"/node\"]\n"),
		"node":       buildEchoNode(t),
	}
	tag, _, err := d.BuildImage(ctx, files)
	require.NoError(t, err)
	_, built, err := d.BuildImage(ctx, files)
	require.NoError(t, err)
	assert.False(t, built, "an unchanged context must not be rebuilt")

	net, err := d.CreateNetwork(ctx, runID+"-net", netip.Prefix{}, nil)
	require.NoError(t, err)
	for _, n := range []string{"n1", "n2"} {
		require.NoError(t, d.CreateNode(ctx, NodeSpec{Name: n, Image: tag, Network: net, DataDir: "/data", NetAdmin: true,
			Files: map[string][]byte{"/etc/faultline/hello": []byte("hi " + n)}}))
		require.NoError(t, d.Start(ctx, n))
	}
	out, err := d.Exec(ctx, "n1", []string{"/node", "cat", "/etc/faultline/hello"})
	require.NoError(t, err)
	assert.Equal(t, "hi n1", out)

	// n1 reaches n2 by name on the private network.
	require.Eventually(t, func() bool {
		out, err := d.Exec(ctx, "n1", []string{"/node", "dial", "n2:7000"})
		return err == nil && strings.Contains(out, "connected")
	}, 20*time.Second, 100*time.Millisecond)
	ip, err := d.IP(ctx, "n2", net)
	require.NoError(t, err)
	assert.NotEmpty(t, ip)

	// kill -9 and restart on the same data volume.
	require.NoError(t, d.Signal(ctx, "n2", "KILL"))
	require.NoError(t, d.Wait(ctx, "n2"))
	running, err := d.Running(ctx, "n2")
	require.NoError(t, err)
	assert.False(t, running)
	require.NoError(t, d.Start(ctx, "n2"))
	out, err = d.Exec(ctx, "n2", []string{"/node", "cat", "/data/boots"})
	require.NoError(t, err)
	assert.Equal(t, "2", out, "the restarted node must find its own data")

	// A failing exec reports the exit status and stderr.
	_, err = d.Exec(ctx, "n1", []string{"/node", "cat", "/nonexistent"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "exit 1")

	var logs strings.Builder
	require.NoError(t, d.Logs(ctx, "n2", &logs, false))
	assert.Contains(t, logs.String(), "boot 1")
	assert.Contains(t, logs.String(), "boot 2")

	require.NoError(t, d.Teardown(ctx))
	left, err := d.cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: make(client.Filters).Add("label", LabelRun+"="+runID)})
	require.NoError(t, err)
	assert.Empty(t, left.Items)
	vols, err := d.cli.VolumeList(ctx, client.VolumeListOptions{Filters: make(client.Filters).Add("label", LabelRun+"="+runID)})
	require.NoError(t, err)
	assert.Empty(t, vols.Items)
}
