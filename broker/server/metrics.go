package server

import (
	"errors"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"
)

// metrics are the network layer's Prometheus series. Per-key children are
// resolved once at construction so the request path does no label lookups.
type metrics struct {
	requests    *prometheus.CounterVec
	latency     *prometheus.HistogramVec
	errors      *prometheus.CounterVec
	bytesIn     prometheus.Counter
	bytesOut    prometheus.Counter
	connections prometheus.Gauge
	accepted    prometheus.Counter
	closed      *prometheus.CounterVec
}

// apiMetrics are one API key's children.
type apiMetrics struct {
	requests prometheus.Counter
	latency  prometheus.Observer
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kafka_network_requests_total",
			Help: "Requests received, by API.",
		}, []string{"api"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "kafka_network_request_latency_seconds",
			Help:    "Time from a request's arrival to its response being ready, by API.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 4, 10),
		}, []string{"api"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kafka_network_request_errors_total",
			Help: "Error codes in responses, by API and error.",
		}, []string{"api", "error"}),
		bytesIn: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kafka_network_bytes_in_total",
			Help: "Request bytes read, size prefixes included.",
		}),
		bytesOut: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kafka_network_bytes_out_total",
			Help: "Response bytes written, size prefixes included.",
		}),
		connections: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "kafka_network_connections",
			Help: "Open client connections.",
		}),
		accepted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kafka_network_connections_accepted_total",
			Help: "Client connections accepted.",
		}),
		closed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kafka_network_connections_closed_total",
			Help: "Client connections closed by the broker, by reason.",
		}, []string{"reason"}),
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.requests, m.latency, m.errors, m.bytesIn, m.bytesOut, m.connections, m.accepted, m.closed} {
		if err := reg.Register(c); err != nil {
			var already prometheus.AlreadyRegisteredError
			if errors.As(err, &already) {
				return nil, errors.New("register network metrics: another server already registered them on this registerer")
			}
			return nil, err
		}
	}
	return m, nil
}

func (m *metrics) forAPI(name string) apiMetrics {
	return apiMetrics{
		requests: m.requests.WithLabelValues(name),
		latency:  m.latency.WithLabelValues(name),
	}
}

func (m *metrics) countErrors(apiName string, codes []int16) {
	for _, code := range codes {
		m.errors.WithLabelValues(apiName, errorName(code)).Inc()
	}
}

// errorName is the protocol's name for an error code.
func errorName(code int16) string {
	if ke := kerr.TypedErrorForCode(code); ke != nil && ke.Code == code {
		return ke.Message
	}
	return "ERROR_" + strconv.Itoa(int(code))
}
