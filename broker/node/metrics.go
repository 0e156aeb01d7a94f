package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// nodeMetrics are the lifecycle metrics the node owns. Request rates and
// latencies are registered by the server on the same registry.
type nodeMetrics struct {
	registry        *prometheus.Registry
	logLoadTimeMs   atomic.Int64
	numPartitions   atomic.Int64
	unsafeSwitchSet prometheus.Gauge
}

// newNodeMetrics builds a registry with the Go runtime and process
// collectors and the node's gauges; state is read at scrape time. The
// replica manager adds LeaderCount and PartitionCount, the server the
// request rates and latencies.
func newNodeMetrics(state func() BrokerState) *nodeMetrics {
	m := &nodeMetrics{registry: prometheus.NewRegistry()}
	m.registry.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	m.registry.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "kafka_server_broker_state",
			Help: "Broker lifecycle state as kafka.server:type=KafkaServer,name=BrokerState: 0 NOT_RUNNING, 1 STARTING, 2 RECOVERY, 3 RUNNING, 6 PENDING_CONTROLLED_SHUTDOWN, 7 SHUTTING_DOWN.",
		}, func() float64 { return float64(state()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "kafka_log_log_load_time_ms",
			Help: "Time the log manager took to load (and recover) every partition log at startup, as kafka.log:type=LogManager,name=LogLoadTime.",
		}, func() float64 { return float64(m.logLoadTimeMs.Load()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "kafka_log_num_partitions",
			Help: "Partition logs loaded from the log dirs at startup, as kafka.log:type=LogManager,name=NumPartitions.",
		}, func() float64 { return float64(m.numPartitions.Load()) }),
	)
	m.unsafeSwitchSet = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "faultline_unsafe_switches",
		Help: "Number of unsafe.* switches in effect (planted bugs); 0 in any real deployment.",
	})
	m.registry.MustRegister(m.unsafeSwitchSet)
	return m
}

// metricsServer serves /metrics from a registry over HTTP.
type metricsServer struct {
	srv  *http.Server
	ln   net.Listener
	done chan struct{}
}

// startMetricsServer listens on address ("host:port"; port 0 picks one) and
// serves the registry at /metrics.
func startMetricsServer(address string, reg *prometheus.Registry, logger *slog.Logger) (*metricsServer, error) {
	ln, err := net.Listen("tcp", address)
	if err != nil {
		return nil, fmt.Errorf("metrics endpoint on %s (faultline.metrics.address): %w", address, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	ms := &metricsServer{
		srv:  &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second},
		ln:   ln,
		done: make(chan struct{}),
	}
	go func() {
		defer close(ms.done)
		if err := ms.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error("Metrics endpoint stopped: "+err.Error(), ComponentKey, "MetricsServer")
		}
	}()
	logger.Info(fmt.Sprintf("Serving Prometheus metrics on http://%s/metrics", ln.Addr()), ComponentKey, "MetricsServer")
	return ms, nil
}

func (ms *metricsServer) addr() net.Addr { return ms.ln.Addr() }

func (ms *metricsServer) close(ctx context.Context) error {
	err := ms.srv.Shutdown(ctx)
	<-ms.done
	return err
}
