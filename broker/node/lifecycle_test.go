package node

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faultline/faultline/broker/storage"
)

// assertInOrder checks that each of lines appears in log, in the given order.
func assertInOrder(t *testing.T, log string, lines ...string) {
	t.Helper()
	at := 0
	for _, l := range lines {
		i := strings.Index(log[at:], l)
		if !assert.GreaterOrEqual(t, i, 0, "missing (in order) log line %q", l) {
			return
		}
		at += i + len(l)
	}
}

func scrape(t *testing.T, n *Node) string {
	t.Helper()
	require.NotNil(t, n.MetricsAddr())
	resp, err := http.Get("http://" + n.MetricsAddr().String() + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	return string(body)
}

func TestStartupPhasesLogAndMetrics(t *testing.T) {
	dir := t.TempDir()
	n, logs := startNodeLogs(t, map[string]string{"log.dirs": filepath.Join(dir, "data"), "unsafe.enable": "true", "unsafe.recovery.skip.crc": "true"})
	assert.Equal(t, StateRunning, n.State())
	assertInOrder(t, logs.String(),
		"INFO Starting Kafka version",
		"WARN UNSAFE SWITCH unsafe.recovery.skip.crc=true IN EFFECT (planted bug, never for real data): recovery after an unclean shutdown does not check batch CRCs",
		"Loading logs from log dirs [",
		"Loaded metadata log up to offset",
		"Registered broker 1 with controller quorum",
		"Accepting connections on listener PLAINTEXT://"+n.Addr().String(),
		"Kafka broker 1 is ready to serve requests (KafkaServer)",
	)
	body := scrape(t, n)
	assert.Contains(t, body, "kafka_server_broker_state 3\n")
	assert.Contains(t, body, "kafka_log_log_load_time_ms ")
	assert.Contains(t, body, "kafka_server_replica_manager_leader_count ")
	assert.Contains(t, body, "go_goroutines ")

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, n.Shutdown(ctx))
	assert.Equal(t, StateNotRunning, n.State())
	assertInOrder(t, logs.String(),
		"Kafka broker 1 is ready to serve requests",
		"Starting controlled shutdown of broker 1",
		"Controlled shutdown request returned successfully",
		"INFO shutting down (KafkaServer)",
		"Shutting down the log manager",
		"shut down completed",
	)
	_, err := os.Stat(filepath.Join(dir, "data", storage.CleanShutdownFile))
	assert.NoError(t, err, "clean shutdown marker")
	select {
	case <-n.Done():
	default:
		t.Fatal("Done not closed after Shutdown")
	}
	assert.NoError(t, n.Err())
}

func TestStartRefusesUnformattedAndMismatchedDirs(t *testing.T) {
	dir := t.TempDir()
	props := nodeProps(t, map[string]string{"log.dirs": filepath.Join(dir, "a") + "," + filepath.Join(dir, "b")})
	cfg := testConfig(t, props)
	_, err := Start(context.Background(), cfg, nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "no meta.properties found in "+filepath.Join(dir, "a"))

	require.NoError(t, storage.FormatLogDir(storage.OS, filepath.Join(dir, "a"), testClusterID, 1, false))
	require.NoError(t, storage.FormatLogDir(storage.OS, filepath.Join(dir, "b"), RandomUUID(), 1, false))
	_, err = Start(context.Background(), cfg, nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "cluster id mismatch")

	other := nodeProps(t, map[string]string{"log.dirs": filepath.Join(dir, "a"), "node.id": "2", "controller.quorum.voters": "2@127.0.0.1:9093"})
	_, err = Start(context.Background(), testConfig(t, other), nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "does not match node.id 2")
}

func TestFailedStartUndoesItsPhases(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer taken.Close()
	dir := t.TempDir()
	props := nodeProps(t, map[string]string{
		"log.dirs":  filepath.Join(dir, "data"),
		"listeners": "PLAINTEXT://" + taken.Addr().String() + ",CONTROLLER://127.0.0.1:0",
	})
	cfg := testConfig(t, props)
	_, err = Format(cfg, FormatOptions{ClusterID: testClusterID})
	require.NoError(t, err)
	logs := &syncBuffer{}
	_, err = Start(context.Background(), cfg, slog.New(NewKafkaHandler(logs, slog.LevelInfo)))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "listeners: bind PLAINTEXT://"+taken.Addr().String())
	assert.Contains(t, logs.String(), "Fatal error during broker startup")

	// Everything the failed start opened was released: the same data dir
	// and metrics address serve a new start.
	props["listeners"] = "PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0"
	n := startNode(t, props)
	assert.Equal(t, StateRunning, n.State())
}

func TestAdvertised(t *testing.T) {
	hostname, err := os.Hostname()
	require.NoError(t, err)
	bound := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 40000}
	wildcard := &net.TCPAddr{IP: net.IPv4zero, Port: 40001}
	for _, tc := range []struct {
		name       string
		listeners  string
		advertised string
		bound      net.Addr
		host       string
		port       int32
	}{
		{"port 0 advertises the bound port", "PLAINTEXT://127.0.0.1:0", "", bound, "127.0.0.1", 40000},
		{"advertised listener wins", "PLAINTEXT://127.0.0.1:0", "PLAINTEXT://broker.example:9092", bound, "broker.example", 9092},
		{"wildcard advertises the host name", "PLAINTEXT://:0", "", wildcard, hostname, 40001},
	} {
		t.Run(tc.name, func(t *testing.T) {
			props := testProps(t.TempDir())
			props["listeners"] = tc.listeners + ",CONTROLLER://127.0.0.1:0"
			if tc.advertised != "" {
				props["advertised.listeners"] = tc.advertised
			}
			cfg := testConfig(t, props)
			host, port := advertised(cfg, cfg.BrokerListeners()[0], tc.bound)
			assert.Equal(t, tc.host, host)
			assert.Equal(t, tc.port, port)
		})
	}
}
