package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"runtime/debug"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/faultline/faultline/broker/config"
)

// DefaultMaxRequestBytes is Kafka's default socket.request.max.bytes.
const DefaultMaxRequestBytes int32 = config.DefaultSocketRequestMaxBytes

// Options tunes the network layer. The zero value is usable.
type Options struct {
	// ListenerName names the listener in log lines (PLAINTEXT when empty).
	ListenerName string
	// MaxRequestBytes refuses larger frames and closes their connection.
	// Zero uses Backend.MaxRequestBytes, and if that is zero too Kafka's
	// default of 104857600 (socket.request.max.bytes).
	MaxRequestBytes int32
	// MaxInFlightPerConn bounds how many requests of one connection are
	// decoded and being handled before their responses are written; the
	// connection is not read further until one completes. Default 32.
	MaxInFlightPerConn int
	// IdleTimeout closes a connection that sent nothing for this long
	// (connections.max.idle.ms). Zero uses Kafka's 10 minutes; negative
	// disables it.
	IdleTimeout time.Duration
}

func (o *Options) fill(b *Backend) {
	if o.ListenerName == "" {
		o.ListenerName = "PLAINTEXT"
	}
	if o.MaxRequestBytes <= 0 {
		o.MaxRequestBytes = b.MaxRequestBytes
	}
	if o.MaxRequestBytes <= 0 {
		o.MaxRequestBytes = DefaultMaxRequestBytes
	}
	if o.MaxInFlightPerConn <= 0 {
		o.MaxInFlightPerConn = 32
	}
	if o.IdleTimeout == 0 {
		o.IdleTimeout = 10 * time.Minute
	}
}

// Server accepts Kafka client connections and dispatches their requests to
// the Backend.
type Server struct {
	opts    Options
	backend Backend
	log     *slog.Logger
	metrics *metrics
	apis    map[int16]*api
	apiKeys []kmsg.ApiVersionsResponseApiKey // ApiVersions' list
	apiM    map[int16]apiMetrics

	// shutdown is closed when Shutdown begins: listeners stop, connections
	// stop reading, long polls return what they have.
	shutdown     chan struct{}
	shutdownOnce sync.Once

	mu        sync.Mutex
	listeners map[net.Listener]struct{}
	conns     map[*conn]struct{}
	connsWG   sync.WaitGroup
	servers   sync.WaitGroup
}

// New builds a server. Missing Backend components switch off the APIs that
// need them (see ApiVersions); Metadata is required.
func New(opts Options, backend Backend, logger *slog.Logger, reg prometheus.Registerer) (*Server, error) {
	if backend.Metadata == nil {
		return nil, errors.New("server: backend has no metadata source")
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	opts.fill(&backend)
	m, err := newMetrics(reg)
	if err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	s := &Server{
		opts:      opts,
		backend:   backend,
		log:       logger.With("component", "SocketServer"),
		metrics:   m,
		apis:      available(&backend),
		apiM:      map[int16]apiMetrics{},
		shutdown:  make(chan struct{}),
		listeners: map[net.Listener]struct{}{},
		conns:     map[*conn]struct{}{},
	}
	for k, a := range s.apis {
		s.apiM[k] = m.forAPI(a.name)
	}
	s.apiKeys = servedApiKeys(s.apis)
	return s, nil
}

// ErrServerClosed is returned by Serve after Shutdown.
var ErrServerClosed = errors.New("server: closed")

// Serve accepts connections on ln until Shutdown or an accept error, and
// closes ln when it returns.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	select {
	case <-s.shutdown:
		s.mu.Unlock()
		_ = ln.Close()
		return ErrServerClosed
	default:
	}
	s.listeners[ln] = struct{}{}
	s.servers.Add(1)
	s.mu.Unlock()
	defer s.servers.Done()
	defer func() {
		s.mu.Lock()
		delete(s.listeners, ln)
		s.mu.Unlock()
		_ = ln.Close()
	}()

	s.log.Info(fmt.Sprintf("Accepting connections on listener %s://%s", s.opts.ListenerName, ln.Addr()))
	var backoff time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			select {
			case <-s.shutdown:
				return ErrServerClosed
			default:
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				s.log.Warn("accept failed, retrying", "err", err, "backoff", backoff)
				time.Sleep(backoff)
				continue
			}
			return fmt.Errorf("accept on %s: %w", ln.Addr(), err)
		}
		backoff = 0
		if !s.startConn(nc) {
			return ErrServerClosed
		}
	}
}

// ListenAndServe listens on every address ("host:port") and serves them
// until Shutdown. It returns once all listeners are bound, with the bound
// listeners' addresses (useful with port 0); serving continues in the
// background and errors other than ErrServerClosed are logged.
func (s *Server) ListenAndServe(addrs ...string) ([]net.Addr, error) {
	lns := make([]net.Listener, 0, len(addrs))
	for _, a := range addrs {
		ln, err := net.Listen("tcp", a)
		if err != nil {
			for _, l := range lns {
				_ = l.Close()
			}
			return nil, fmt.Errorf("listen on %s: %w", a, err)
		}
		lns = append(lns, ln)
	}
	bound := make([]net.Addr, len(lns))
	for i, ln := range lns {
		bound[i] = ln.Addr()
		go func() {
			if err := s.Serve(ln); err != nil && !errors.Is(err, ErrServerClosed) {
				s.log.Error("listener stopped", "listener", ln.Addr().String(), "err", err)
			}
		}()
	}
	return bound, nil
}

// Shutdown stops accepting connections, stops reading new requests, lets
// the requests already read finish and their responses be written, then
// closes the connections. Long polls end early with what they have. When
// ctx ends first, the remaining connections are closed at once and ctx's
// error is returned.
func (s *Server) Shutdown(ctx context.Context) error {
	s.shutdownOnce.Do(func() {
		s.mu.Lock()
		close(s.shutdown)
		for ln := range s.listeners {
			_ = ln.Close()
		}
		for c := range s.conns {
			c.stopReading()
		}
		s.mu.Unlock()
		s.log.Info("Stopping socket server request processors: no new connections or requests; finishing in-flight requests")
	})
	done := make(chan struct{})
	go func() {
		s.connsWG.Wait()
		s.servers.Wait()
		close(done)
	}()
	select {
	case <-done:
		s.log.Info("Stopped socket server request processors")
		return nil
	case <-ctx.Done():
		s.mu.Lock()
		for c := range s.conns {
			c.forceClose()
		}
		s.mu.Unlock()
		return fmt.Errorf("server shutdown: %w", ctx.Err())
	}
}

func (s *Server) startConn(nc net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-s.shutdown:
		_ = nc.Close()
		return false
	default:
	}
	c := newConn(s, nc)
	s.conns[c] = struct{}{}
	s.connsWG.Add(1)
	s.metrics.accepted.Inc()
	s.metrics.connections.Inc()
	go c.run()
	return true
}

func (s *Server) connDone(c *conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
	s.metrics.connections.Dec()
	s.connsWG.Done()
}

// bug logs a recovered panic with its stack; panics here are bugs in this
// broker, never something a client may cause.
func (s *Server) bug(p any, what string) error {
	s.log.Error("BUG: recovered panic", "while", what, "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
	return fmt.Errorf("panic while %s: %v", what, p)
}
