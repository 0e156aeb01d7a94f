package agent_test

import (
	"context"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faultline/faultline/harness"
)

// TestPowerLossInsideAContainer runs a writer under the agent on the fault
// filesystem in a real node container, as the harness runs a broker with a
// disk fault asked for, cuts its power, and reads the node's volume: the
// fsynced data is there, the unsynced tail and file are not.
func TestPowerLossInsideAContainer(t *testing.T) {
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Skipf("skipping: no /dev/fuse on this host: %v", err)
	}
	d, ctx, runID := dockerForTest(t, "fldisk", 4*time.Minute)
	tag := buildImage(ctx, t, d, "FROM scratch\nCOPY node /node\nCOPY faultline /faultline\nVOLUME [\"/data\"]\nENTRYPOINT [\"/node\"]\n",
		map[string]string{"node": "./testdata/agentnode", "faultline": "../../cmd/faultline"})
	net, err := d.CreateNetwork(ctx, runID+"-net", netip.Prefix{}, nil)
	require.NoError(t, err)
	volume := runID + "-n1-data"
	require.NoError(t, d.CreateNode(ctx, harness.NodeSpec{
		Name: "n1", Image: tag, Network: net, Fuse: true, DataDir: "/disk", Volume: volume,
		Entrypoint: []string{"/faultline"},
		Cmd:        []string{"agent", "run", "--backing", "/disk/data", "--mount", "/data", "--", "/node", "write", "/data"},
	}))
	require.NoError(t, d.Start(ctx, "n1"))
	t.Cleanup(func() {
		if t.Failed() {
			var logs strings.Builder
			_ = d.Logs(context.Background(), "n1", &logs, false)
			t.Logf("n1's output:\n%s", logs.String())
		}
	})
	require.Eventually(t, func() bool {
		out, err := d.Exec(ctx, "n1", []string{"/node", "cat", "/data/synced"})
		return err == nil && out == "durabletail"
	}, 30*time.Second, 200*time.Millisecond, "the writer sees its own writes through the mount")
	mounts, err := d.Exec(ctx, "n1", []string{"/node", "cat", "/proc/mounts"})
	require.NoError(t, err)
	assert.Regexp(t, `(?m)^\S+ /data fuse`, mounts, "the data dir is the fault filesystem")
	status, err := d.Exec(ctx, "n1", []string{"/faultline", "agent", "disk", "status"})
	require.NoError(t, err)
	assert.Contains(t, status, "unsynced")

	_, err = d.Exec(ctx, "n1", []string{"/faultline", "agent", "disk", "power", "seed=1"})
	if err != nil {
		t.Logf("power: %v (the node may end before the exec returns)", err)
	}
	waitCtx, waitCancel := context.WithTimeout(ctx, 30*time.Second)
	defer waitCancel()
	require.NoError(t, d.Wait(waitCtx, "n1"), "a power loss takes the node down")

	read := func(name string) (string, error) {
		return d.RunOnce(ctx, harness.NodeSpec{
			Name: "read-" + name, Image: tag, Network: net, DataDir: "/disk", Volume: volume,
			Cmd: []string{"cat", "/disk/data/" + name},
		})
	}
	out, err := read("synced")
	require.NoError(t, err)
	assert.Equal(t, "durable", out, "the fsynced data survives, the unsynced tail does not")
	_, err = read("unsynced")
	assert.Error(t, err, "a file whose name no directory fsync made durable is gone")

	require.NoError(t, d.Start(ctx, "n1"), "the node starts again on what the disk kept")
	require.Eventually(t, func() bool {
		out, err := d.Exec(ctx, "n1", []string{"/node", "cat", "/data/synced"})
		return err == nil && out == "durable"
	}, 30*time.Second, 200*time.Millisecond)
}
