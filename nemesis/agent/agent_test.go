package agent_test

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

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faultline/faultline/harness"
)

// TestPartitionInsideContainers installs and removes drop rules inside real
// node containers (the only place the agent may run) and checks the effect
// on TCP connections in both directions.
func TestPartitionInsideContainers(t *testing.T) {
	d, ctx, runID := dockerForTest(t, "flagent", 3*time.Minute)
	tag := buildImage(ctx, t, d, "FROM scratch\nCOPY node /node\nENTRYPOINT [\"/node\"]\n", map[string]string{"node": "./testdata/agentnode"})
	net, err := d.CreateNetwork(ctx, runID+"-net", netip.Prefix{}, nil)
	require.NoError(t, err)
	for _, n := range []string{"n1", "n2", "n3"} {
		require.NoError(t, d.CreateNode(ctx, harness.NodeSpec{Name: n, Image: tag, Network: net, NetAdmin: true}))
		require.NoError(t, d.Start(ctx, n))
	}
	reach := func(from, to string) bool {
		out, err := d.Exec(ctx, from, []string{"/node", "dial", to + ":7000"})
		return err == nil && strings.Contains(out, "connected")
	}
	require.Eventually(t, func() bool { return reach("n1", "n2") && reach("n2", "n1") && reach("n1", "n3") },
		20*time.Second, 100*time.Millisecond)

	_, err = d.Exec(ctx, "n1", []string{"/node", "drop", "n2"})
	require.NoError(t, err)
	assert.False(t, reach("n2", "n1"), "n1 drops n2's packets")
	assert.False(t, reach("n1", "n2"), "the replies from n2 are dropped too")
	assert.True(t, reach("n1", "n3"), "n3 is not cut")
	assert.True(t, reach("n3", "n1"), "n3 is not cut")
	count, err := d.Exec(ctx, "n1", []string{"/node", "dropped"})
	require.NoError(t, err)
	assert.Equal(t, "1", strings.TrimSpace(count))

	_, err = d.Exec(ctx, "n1", []string{"/node", "heal"})
	require.NoError(t, err)
	assert.True(t, reach("n2", "n1"))
	assert.True(t, reach("n1", "n2"))
	count, err = d.Exec(ctx, "n1", []string{"/node", "dropped"})
	require.NoError(t, err)
	assert.Equal(t, "0", strings.TrimSpace(count))
}

// dockerForTest connects to the daemon (skipping the test without one),
// and removes what the test created when it ends.
func dockerForTest(t *testing.T, prefix string, limit time.Duration) (*harness.Docker, context.Context, string) {
	t.Helper()
	runID := fmt.Sprintf("%s%d", prefix, time.Now().UnixNano()%1_000_000_000)
	d, err := harness.NewDocker(context.Background(), runID)
	if errors.Is(err, harness.ErrNoDocker) {
		t.Skipf("skipping: no Docker daemon reachable: %v", err)
	}
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	t.Cleanup(func() { _ = d.Teardown(context.Background()); d.Close(); cancel() })
	return d, ctx, runID
}

// buildImage builds the static binaries of pkgs (file name -> package)
// into an image with dockerfile and returns its tag.
func buildImage(ctx context.Context, t *testing.T, d *harness.Docker, dockerfile string, pkgs map[string]string) string {
	t.Helper()
	files := map[string][]byte{"Dockerfile": []byte(dockerfile)}
	for name, pkg := range pkgs {
		bin := filepath.Join(t.TempDir(), name)
		build := exec.Command("go", "build", "-o", bin, pkg)
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		out, err := build.CombinedOutput()
		require.NoError(t, err, string(out))
		files[name], err = os.ReadFile(bin)
		require.NoError(t, err)
	}
	tag, _, err := d.BuildImage(ctx, files)
	require.NoError(t, err)
	return tag
}
