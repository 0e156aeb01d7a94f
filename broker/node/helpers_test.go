package node

import (
	"bytes"
	"context"
	"log/slog"
	"maps"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/faultline/faultline/broker/config"
)

// syncBuffer is a goroutine-safe log sink for tests.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// testClusterID is the cluster id test nodes are formatted with.
const testClusterID = "MkU3OEVBNTcwNTJENDM2Qg"

// testProps returns a single-node configuration on loopback with port 0,
// its data under dir.
func testProps(dir string) map[string]string {
	return map[string]string{
		"process.roles":                    "broker,controller",
		"node.id":                          "1",
		"listeners":                        "PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
		"controller.listener.names":        "CONTROLLER",
		"controller.quorum.voters":         "1@127.0.0.1:9093",
		"log.dirs":                         filepath.Join(dir, "data"),
		"offsets.topic.replication.factor": "1",
		"offsets.topic.num.partitions":     "3",
		"group.initial.rebalance.delay.ms": "0",
		"faultline.metrics.address":        "127.0.0.1:0",
	}
}

// testConfig validates props (testProps of a fresh temp dir overridden by
// extra) into a Config.
func testConfig(tb testing.TB, props map[string]string) *config.Config {
	tb.Helper()
	cfg, _, err := config.FromMap(props)
	if err != nil {
		tb.Fatalf("config: %v", err)
	}
	return cfg
}

// nodeProps merges extra over testProps of a new temp dir; when extra sets
// log.dirs the node reuses that dir.
func nodeProps(tb testing.TB, extra map[string]string) map[string]string {
	props := testProps(tb.TempDir())
	maps.Copy(props, extra)
	return props
}

// startNode formats (if needed) and starts a node with nodeProps(extra);
// the node is shut down when the test ends.
func startNode(tb testing.TB, extra map[string]string) *Node {
	tb.Helper()
	n, _ := startNodeLogs(tb, extra)
	return n
}

// startNodeLogs is startNode that also returns the node's log output.
func startNodeLogs(tb testing.TB, extra map[string]string) (*Node, *syncBuffer) {
	tb.Helper()
	cfg := testConfig(tb, nodeProps(tb, extra))
	if _, err := Format(cfg, FormatOptions{ClusterID: testClusterID, IgnoreFormatted: true}); err != nil {
		tb.Fatalf("format: %v", err)
	}
	logs := &syncBuffer{}
	logger := slog.New(NewKafkaHandler(logs, slog.LevelInfo))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	n, err := Start(ctx, cfg, logger)
	if err != nil {
		tb.Fatalf("start node: %v\n%s", err, logs)
	}
	tb.Cleanup(func() {
		stopNode(tb, n)
		if tb.Failed() && !strings.Contains(tb.Name(), "Bench") {
			tb.Logf("node log:\n%s", logs)
		}
	})
	return n, logs
}

// stopNode shuts n down (a no-op when it already is).
func stopNode(tb testing.TB, n *Node) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := n.Shutdown(ctx); err != nil {
		tb.Errorf("shutdown: %v", err)
	}
}

// requestCount is how many requests of the API (kmsg's name,
// "AddPartitionsToTxn") the node's server received.
func (n *Node) requestCount(api string) float64 {
	families, err := n.metrics.registry.Gather()
	if err != nil {
		return -1
	}
	for _, f := range families {
		if f.GetName() != "kafka_network_requests_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "api" && l.GetValue() == api {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}
