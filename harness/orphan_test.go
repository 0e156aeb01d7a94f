package harness

import (
	"bufio"
	"context"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestHelperProcessRuntime is not a test: TestNoOrphanBrokers runs the
// test binary with it to get a harness process it can SIGKILL.
func TestHelperProcessRuntime(t *testing.T) {
	broker := os.Getenv("FAULTLINE_HELPER_BROKER")
	if broker == "" {
		return // run directly: nothing to do, this is TestNoOrphanBrokers' helper
	}
	p := NewProcess(os.Getenv("FAULTLINE_HELPER_DIR"))
	_, err := p.Setup(context.Background(), Cluster{Nodes: 1, Topology: "combined", ClusterID: newClusterID(), BrokerBinary: broker})
	require.NoError(t, err)
	os.Stdout.WriteString("helper ready\n")
	select {}
}

// TestNoOrphanBrokers: a harness killed with SIGKILL (no teardown) takes
// its process-runtime brokers with it.
func TestNoOrphanBrokers(t *testing.T) {
	if testing.Short() {
		t.Skip("skipping: -short")
	}
	broker, _ := buildBinaries(t)
	helper := exec.Command(os.Args[0], "-test.run=^TestHelperProcessRuntime$")
	dir := t.TempDir()
	helper.Env = append(os.Environ(), "FAULTLINE_HELPER_BROKER="+broker, "FAULTLINE_HELPER_DIR="+dir)
	out, err := helper.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, helper.Start())
	t.Cleanup(func() { _ = helper.Process.Kill(); _ = helper.Wait() })
	sc := bufio.NewScanner(out)
	ready := false
	for sc.Scan() {
		if strings.Contains(sc.Text(), "helper ready") {
			ready = true
			break
		}
	}
	require.True(t, ready, "the helper started its broker")
	addr := ProcessHost(dir, 1) + ":9092"
	require.Eventually(t, func() bool {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
		}
		return err == nil
	}, 30*time.Second, 100*time.Millisecond, "the broker listens")

	require.NoError(t, helper.Process.Kill())
	_ = helper.Wait()
	require.Eventually(t, func() bool {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err == nil {
			c.Close()
		}
		return err != nil
	}, 30*time.Second, 100*time.Millisecond, "the broker must die with its harness")
}
