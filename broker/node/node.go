package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/faultline/faultline/broker/config"
	"github.com/faultline/faultline/broker/controller"
	"github.com/faultline/faultline/broker/group"
	"github.com/faultline/faultline/broker/lifecycle"
	"github.com/faultline/faultline/broker/metadata"
	"github.com/faultline/faultline/broker/quorum"
	"github.com/faultline/faultline/broker/quorum/raftq"
	"github.com/faultline/faultline/broker/replica"
	"github.com/faultline/faultline/broker/server"
	"github.com/faultline/faultline/broker/storage"
	"github.com/faultline/faultline/broker/txn"
)

// Node is one running broker. Build it with Start; stop it with Shutdown.
type Node struct {
	cfg       *config.Config
	logger    *slog.Logger // the root logger handed to the components
	log       *slog.Logger // the node's own lines (KafkaServer)
	state     stateBox
	clusterID string

	metrics    *nodeMetrics
	metricsSrv *metricsServer

	fs        storage.FS // under log.dirs
	logs      *storage.LogManager
	quorum    quorum.Quorum // the raft voter or the observer
	publisher *metadata.Publisher
	replicas  *replica.Manager
	groups    *group.Coordinator
	txns      *txn.Coordinator
	// txnPeers are the transaction coordinator's broker clients, which
	// txnAdder shares.
	txnPeers *markerWriter
	server   *server.Server

	// A controller's parts, nil on a broker-only node.
	voters          map[int32]string // controller.quorum.voters (this node alone when none are listed)
	raft            *raftq.Quorum
	raftTransport   *raftq.TCPTransport
	controller      *controller.Controller
	ctrlListener    *raftq.ControllerListener
	ctrlListenerCfg config.Listener
	ctrlServer      *server.Server
	// recoveredLogEnd is the end of the metadata log this voter found at
	// startup; 0 on an observer.
	recoveredLogEnd int64

	// A broker's parts, nil on a controller-only node.
	listener       net.Listener
	listenerCfg    config.Listener
	advertisedHost string
	advertisedPort int32
	previousEpoch  int64        // broker epoch of the last clean shutdown, -1 if none
	epoch          atomic.Int64 // broker epoch from the registration, -1 before
	ctrlTransport  *lifecycle.KgoTransport
	forwarder      *lifecycle.Forwarder
	lifecycle      *lifecycle.Manager
	fetcher        *replica.Fetcher
	// dial opens every connection this node makes to another node (raft,
	// controller channel, replica fetchers, snapshots); nil dials directly.
	dial DialFunc
	// killed makes the stops a crash: no controlled shutdown, connections
	// cut, logs closed without checkpoints or the clean shutdown marker.
	killed atomic.Bool

	// stops run in reverse order at shutdown: each phase of Start that
	// succeeded pushes the way to undo it.
	stops []stopFunc

	bgCancel context.CancelFunc

	shutdownOnce sync.Once
	shutdownErr  error
	done         chan struct{}
	errMu        sync.Mutex
	err          error
}

// stopFunc undoes one startup phase, at shutdown or when a start fails.
type stopFunc struct {
	name string
	fn   func(ctx context.Context) error
	// controlledShutdown marks the steps of a shutdown that run while the
	// broker is PENDING_CONTROLLED_SHUTDOWN: the network layer finishing
	// its requests and the controller moving leadership away. The others
	// run SHUTTING_DOWN.
	controlledShutdown bool
}

// Start runs the startup phases of seed 000 in order and returns once the
// broker is ready to serve requests: configuration checks and banner, log
// loading (and recovery), metadata replay, registration, replica manager,
// group coordinator, network layer. A failure undoes the phases that
// completed and returns an error saying what to fix. ctx bounds the startup
// only, not the life of the node.
func Start(ctx context.Context, cfg *config.Config, logger *slog.Logger) (*Node, error) {
	return StartWith(ctx, cfg, logger, Options{})
}

// DialFunc opens a connection, as net.Dialer.DialContext does.
type DialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// Options are what a node takes besides its configuration; the zero value
// is a production node.
type Options struct {
	// Dial, when set, opens every connection the node makes to other
	// nodes: raft messages, the controller channel, replica fetchers and
	// metadata snapshots. Tests put a fault switch here (see
	// internal/faultnet) to cut or slow the links between nodes.
	Dial DialFunc
	// FS, when set, carries every file operation on log.dirs (default
	// storage.OS). Tests put storage's ErrorFS here to fail the disk.
	FS storage.FS
}

// StartWith is Start with options.
func StartWith(ctx context.Context, cfg *config.Config, logger *slog.Logger, opts Options) (*Node, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	n := &Node{
		cfg:    cfg,
		logger: logger,
		log:    logger.With(ComponentKey, "KafkaServer"),
		done:   make(chan struct{}),
		dial:   opts.Dial,
		fs:     opts.FS,
	}
	if n.fs == nil {
		n.fs = storage.OS
	}
	n.epoch.Store(-1)
	n.state.set(StateStarting)
	if err := n.startup(ctx); err != nil {
		n.log.Error(fmt.Sprintf("Fatal error during broker startup: %v", err))
		stopCtx, cancel := context.WithTimeout(context.Background(), ShutdownTimeout(cfg))
		defer cancel()
		_ = n.runStops(stopCtx) // errors are logged; the startup error is the one to report
		n.state.set(StateNotRunning)
		close(n.done)
		return nil, err
	}
	return n, nil
}

// startup runs seed 000's phases in order. Every role goes through the
// same steps: a single combined node is the only voter of a one-voter
// controller quorum, registered and heartbeating like any broker of a
// cluster.
func (n *Node) startup(ctx context.Context) error {
	// Phase 1: configuration, data dirs, cluster id.
	// Phase 2: log manager: every partition log loaded, recovered after an
	// unclean shutdown.
	if err := runSteps(ctx, n.checkConfiguration, n.startLogManager); err != nil {
		return err
	}
	// Phase 3: metadata: the metadata log replayed into the image, as a
	// voter of the controller quorum (with the controller and its
	// listener) or, on a broker-only node, as an observer.
	metadata := []func() error{n.startVoter, n.startControllerListener, n.startController}
	if !n.cfg.IsController() {
		metadata = []func() error{func() error { return n.startObserver(ctx) }}
	}
	if err := runSteps(ctx, metadata...); err != nil {
		return err
	}
	if !n.cfg.IsBroker() {
		n.state.set(StateRunning)
		n.log.Info(fmt.Sprintf("Kafka controller %d is ready to serve requests on %s", n.cfg.NodeID, n.ctrlListener.Addr()))
		return nil
	}
	// Phase 4: registration with the controller quorum (the listener
	// bound first, for the endpoint it registers, and the channel to the
	// active controller), heartbeats until the controller says the image
	// caught up with the metadata log. Only then do the broker's parts
	// follow the image (seed 000: the broker learns its partitions from
	// the metadata log after it registered): a node restarted on its own
	// metadata log replays an image that can be far behind, in which it
	// still leads partitions and __transaction_state partitions that moved
	// while it was down, and acting on it writes on stale leaderships (a
	// transaction's marker appended to a log about to be truncated, a
	// prepared transaction the quorum never committed finished).
	// Phase 5: the broker's parts following the caught-up image: the
	// replica manager (stray logs deleted once the image caught up with
	// the quorum), the replica fetchers and ISR updates, the group and
	// transaction coordinators; then unfenced.
	// Phase 6: the network layer; a Shutdown starts with the controlled
	// shutdown.
	err := runSteps(ctx, n.bindListener, n.startControllerChannel, func() error { return n.register(ctx) },
		n.startReplicaManager, n.startReplication, n.startGroupCoordinator, n.startTxnCoordinator,
		func() error { return n.unfence(ctx) }, n.startNetwork, n.pushControlledShutdown)
	if err != nil {
		return err
	}
	n.state.set(StateRunning)
	n.log.Info(fmt.Sprintf("Kafka broker %d is ready to serve requests", n.cfg.NodeID))
	return nil
}

// runSteps runs steps in order until one fails or ctx ends.
func runSteps(ctx context.Context, steps ...func() error) error {
	for _, step := range steps {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := step(); err != nil {
			return err
		}
	}
	return nil
}

// checkConfiguration logs the banner and the configuration, checks the
// data dirs and reads the cluster id they were formatted with.
func (n *Node) checkConfiguration() error {
	cfg := n.cfg
	n.log.Info(fmt.Sprintf("Starting Kafka version %s (faultline broker)", VersionString()))
	n.logger.Info(fmt.Sprintf("Loaded configuration: broker ID %d, process.roles=%s, log.dirs=%v",
		cfg.NodeID, strings.Join(cfg.ProcessRoles, ","), cfg.LogDirs), ComponentKey, "KafkaConfig")
	for _, w := range cfg.UnsafeWarnings() {
		n.log.Warn(w)
	}
	if cfg.IsController() {
		voters, err := quorumVoters(cfg)
		if err != nil {
			return err
		}
		n.voters = voters
	}
	if err := cfg.CheckDirs(); err != nil {
		return err
	}
	n.previousEpoch = storage.PreviousBrokerEpoch(n.fs, cfg.LogDirs)
	clusterID, err := checkFormatted(cfg)
	if err != nil {
		return err
	}
	n.clusterID = clusterID
	n.log.Info(fmt.Sprintf("Cluster ID = %s", clusterID))

	// The image starts empty; the metadata phase replays the log into it.
	n.publisher = metadata.NewPublisher(metadata.NewImage(clusterID))
	n.metrics = newNodeMetrics(n.State)
	n.metrics.unsafeSwitchSet.Set(float64(len(cfg.EnabledUnsafe())))
	if cfg.MetricsAddress != "" {
		ms, err := startMetricsServer(cfg.MetricsAddress, n.metrics.registry, n.logger)
		if err != nil {
			return err
		}
		n.metricsSrv = ms
		n.pushStop("metrics endpoint", ms.close)
	}
	return nil
}

// startLogManager loads every partition log of the log dirs, recovering the
// dirs that were not shut down cleanly.
func (n *Node) startLogManager() error {
	cfg := n.cfg
	n.state.set(StateRecovery)
	lc, err := defaultLogConfig(cfg)
	if err != nil {
		return err
	}
	lm, err := storage.NewLogManager(n.fs, cfg.LogDirs, storage.ManagerOptions{
		OnDirOffline:                      n.logDirFailed,
		RecoveryThreadsPerDataDir:         int(cfg.NumRecoveryThreadsPerDataDir),
		DefaultLogConfig:                  lc,
		TopicConfig:                       n.metadataTopicConfig,
		Logger:                            n.logger.With(ComponentKey, "LogManager"),
		HighWatermarkCheckpointIntervalMs: cfg.ReplicaHighWatermarkCheckpointIntervalMs,
		RecoveryPointCheckpointIntervalMs: cfg.LogFlushOffsetCheckpointIntervalMs,
		RetentionCheckIntervalMs:          cfg.LogRetentionCheckIntervalMs,
		ProducerIDExpirationMs:            cfg.ProducerIDExpirationMs,
		Unsafe:                            storageUnsafe(cfg),
		Cleaner: storage.CleanerOptions{
			Disabled:         !cfg.LogCleanerEnable || cfg.LogCleanerThreads == 0,
			Threads:          int(cfg.LogCleanerThreads),
			BackoffMs:        cfg.LogCleanerBackoffMs,
			DedupeBufferSize: cfg.LogCleanerDedupeBufferSize,
		},
	})
	if err != nil {
		return err
	}
	stats, err := lm.Load()
	if err != nil {
		return fmt.Errorf("load logs: %w", err)
	}
	n.logs = lm
	n.metrics.logLoadTimeMs.Store(stats.LogLoadTimeMs)
	n.metrics.numPartitions.Store(int64(stats.Logs))
	n.pushStop("log manager", n.stopLogManager(lm))
	bgCtx, cancel := context.WithCancel(context.Background())
	n.bgCancel = cancel
	lm.RunBackground(bgCtx)
	return nil
}

// logDirFailed stops the broker when one of its log dirs went offline (an
// I/O error or a failed fsync): the dir's partitions already answer
// KAFKA_STORAGE_ERROR, and the controlled shutdown that follows moves their
// leaderships away at once instead of after a session timeout. A broker
// stops on any failed dir, as Kafka's KRaft brokers do without JBOD
// support, rather than serve what it holds in memory; it writes no
// clean-shutdown marker in the failed dir, so its next start is unclean.
func (n *Node) logDirFailed(dir string, cause error) {
	n.fail(fmt.Errorf("stopping broker %d because log dir %s failed (its partitions are offline): %w", n.cfg.NodeID, dir, cause))
}

// metadataLogs returns the log manager holding __cluster_metadata-0: the
// node's, or one of its own when metadata.log.dir is apart from log.dirs.
func (n *Node) metadataLogs() (*storage.LogManager, error) {
	cfg := n.cfg
	if containsDir(cfg.LogDirs, cfg.MetadataLogDir) {
		return n.logs, nil
	}
	// A metadata.log.dir apart from log.dirs gets its own manager, as
	// Kafka keeps the metadata log apart from the partition logs.
	lm, err := storage.NewLogManager(storage.OS, []string{cfg.MetadataLogDir}, storage.ManagerOptions{
		RecoveryThreadsPerDataDir: 1,
		TopicConfig:               n.metadataTopicConfig,
		Logger:                    n.logger.With(ComponentKey, "LogManager"),
	})
	if err != nil {
		return nil, err
	}
	if _, err := lm.Load(); err != nil {
		return nil, fmt.Errorf("load metadata log dir %s: %w", cfg.MetadataLogDir, err)
	}
	n.pushStop("metadata log manager", n.stopLogManager(lm))
	return lm, nil
}

// metadataTopicConfig is the log manager's TopicConfig: the metadata log
// has no retention (the quorum deletes only what a snapshot covers), with
// the metadata.log.segment.* sizes. Other topics load with the broker
// defaults until applyTopicConfigs.
func (n *Node) metadataTopicConfig(topic string) (storage.LogConfig, bool) {
	if topic != quorum.MetadataTopic {
		return storage.LogConfig{}, false
	}
	lc := storage.DefaultLogConfig()
	lc.SegmentBytes = int64(n.cfg.MetadataLogSegmentBytes)
	lc.SegmentMs = n.cfg.MetadataLogSegmentMs
	lc.RetentionMs = -1
	lc.RetentionBytes = -1
	return lc, true
}

// applyTopicConfigs gives the logs loaded at startup their topic's config
// overrides from the metadata image (logs load before the metadata log is
// replayed, with the broker defaults, as Kafka's do before its first image).
// A topic whose overrides this broker cannot apply (written by an older
// controller that checked less) keeps the defaults, logged: one topic's
// config must not keep the node from starting.
func (n *Node) applyTopicConfigs(im *metadata.Image) error {
	settings := topicSettings(n.cfg)
	for tp, l := range n.logs.Logs() {
		t := im.Topic(tp.Topic)
		if t == nil || len(t.Configs) == 0 || tp.Topic == quorum.MetadataTopic {
			continue
		}
		s, err := settings(t.Configs)
		if err == nil && s.Log != l.Config() {
			err = l.SetConfig(s.Log)
		}
		if err != nil {
			n.logger.Error(fmt.Sprintf("Partition %s keeps the default config: topic %s's overrides cannot be applied", tp, t.Name), "err", err)
		}
	}
	return nil
}

// stopLogManager flushes and closes the logs of lm with checkpoints and the
// clean shutdown marker, or, when the node is killed, only closes them.
func (n *Node) stopLogManager(lm *storage.LogManager) func(context.Context) error {
	return func(context.Context) error {
		if n.killed.Load() {
			for _, l := range lm.Logs() {
				_ = l.Close()
			}
			return nil
		}
		return lm.Shutdown(n.brokerEpoch())
	}
}

// containsDir reports whether dirs holds dir (compared as cleaned paths).
func containsDir(dirs []string, dir string) bool {
	for _, d := range dirs {
		if filepath.Clean(d) == filepath.Clean(dir) {
			return true
		}
	}
	return false
}

// bindListener binds the client listener early, as Kafka binds its sockets
// before registering: the registration carries the bound port (listeners
// with port 0 work), and clients are only served once startNetwork runs.
func (n *Node) bindListener() error {
	listeners := n.cfg.BrokerListeners()
	if len(listeners) == 0 {
		return errors.New("listeners: no broker listener (every listener is named in controller.listener.names)")
	}
	l := listeners[0]
	for _, other := range listeners[1:] {
		n.log.Warn(fmt.Sprintf("Listener %s is not served: this build serves one client listener, %s", other, l))
	}
	ln, err := net.Listen("tcp", l.Address())
	if err != nil {
		return fmt.Errorf("listeners: bind %s: %w", l, err)
	}
	n.listener, n.listenerCfg = ln, l
	n.advertisedHost, n.advertisedPort = advertised(n.cfg, l, ln.Addr())
	n.pushStop("listener", func(context.Context) error {
		if n.server == nil {
			return ignoreClosed(ln.Close())
		}
		return nil
	})
	return nil
}

func ignoreClosed(err error) error {
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}

// startGroupCoordinator starts the consumer-group coordinator over
// __consumer_offsets.
func (n *Node) startGroupCoordinator() error {
	cfg := n.cfg
	gc, err := group.New(group.Config{
		NodeID:                       cfg.NodeID,
		OffsetsTopicNumPartitions:    cfg.OffsetsTopicNumPartitions,
		GroupInitialRebalanceDelayMs: cfg.GroupInitialRebalanceDelayMs,
		GroupMinSessionTimeoutMs:     cfg.GroupMinSessionTimeoutMs,
		GroupMaxSessionTimeoutMs:     cfg.GroupMaxSessionTimeoutMs,
		GroupMaxSize:                 cfg.GroupMaxSize,
		OffsetMetadataMaxBytes:       cfg.OffsetMetadataMaxBytes,
		OffsetsCommitTimeoutMs:       cfg.OffsetsCommitTimeoutMs,
		Unsafe:                       groupUnsafe(cfg),
		Logger:                       n.logger.With(ComponentKey, "GroupCoordinator"),
	}, &offsetsLog{cfg: cfg, md: n.publisher, controller: n.forwarder, replicas: n.replicas}, n.publisher)
	if err != nil {
		return err
	}
	n.groups = gc
	cancel := n.publisher.Subscribe(gc.ApplyImage)
	n.pushStop("group coordinator", func(context.Context) error { cancel(); gc.Close(); return nil })
	return nil
}

// startNetwork serves clients on the bound listener.
func (n *Node) startNetwork() error {
	cfg := n.cfg
	backend := server.Backend{
		NodeID:              cfg.NodeID,
		ClusterID:           n.clusterID,
		Metadata:            n.publisher,
		Controller:          n.forwarder,
		Replicas:            n.replicas,
		Groups:              n.groups,
		Txns:                n.txns,
		TxnMarkers:          n.txnMarkers(),
		TxnAdder:            n.txnAdder(),
		TransactionVersion:  cfg.TransactionVersion,
		VerifyTxnPartitions: cfg.TransactionPartitionVerificationEnable,
		AdvertisedHost:      n.advertisedHost,
		AdvertisedPort:      n.advertisedPort,
		AutoCreateTopics:    cfg.AutoCreateTopicsEnable,
		Configs:             configSource{cfg: cfg, md: n.publisher},
		MaxRequestBytes:     cfg.SocketRequestMaxBytes,
		ClientContext:       group.WithClient,
		LogDirs:             n.logs,
	}
	idle := time.Duration(cfg.ConnectionsMaxIdleMs) * time.Millisecond
	if cfg.ConnectionsMaxIdleMs < 0 {
		idle = -1
	}
	srv, err := server.New(server.Options{
		ListenerName:    n.listenerCfg.Name,
		MaxRequestBytes: cfg.SocketRequestMaxBytes,
		IdleTimeout:     idle,
	}, backend, n.logger, n.metrics.registry)
	if err != nil {
		return err
	}
	n.server = srv
	ln := &acceptingListener{Listener: n.listener, accepting: make(chan struct{})}
	l := n.listenerCfg
	served := make(chan error, 1)
	go func() {
		err := srv.Serve(ln)
		served <- err
		if err != nil && !errors.Is(err, server.ErrServerClosed) {
			n.fail(fmt.Errorf("listener %s: %w", l, err))
		}
	}()
	n.pushControlledShutdownStop("network layer", n.shutdownServer(srv))
	// The broker is ready once the network layer accepts connections.
	select {
	case <-ln.accepting:
		return nil
	case err := <-served:
		return fmt.Errorf("listener %s: %w", l, err)
	}
}

// acceptingListener tells when the server first waits in Accept, that is
// when the network layer has started accepting connections.
type acceptingListener struct {
	net.Listener
	once      sync.Once
	accepting chan struct{}
}

func (a *acceptingListener) Accept() (net.Conn, error) {
	a.once.Do(func() { close(a.accepting) })
	return a.Listener.Accept()
}

// advertised returns the host and port clients are told to use: the
// advertised listener of the same name, else the bound address; a port of 0
// (or an advertised listener copied from a port-0 listener) becomes the
// bound port, and an empty or wildcard host the bound IP, or this machine's
// host name when bound to every interface.
func advertised(cfg *config.Config, l config.Listener, bound net.Addr) (string, int32) {
	host, port := l.Host, l.Port
	for _, a := range cfg.AdvertisedListeners {
		if a.Name == l.Name {
			host, port = a.Host, a.Port
			break
		}
	}
	if tcp, ok := bound.(*net.TCPAddr); ok && port == 0 {
		port = int32(tcp.Port)
	}
	if host == "" || host == "0.0.0.0" || host == "::" {
		if tcp, ok := bound.(*net.TCPAddr); ok && !tcp.IP.IsUnspecified() {
			host = tcp.IP.String()
		} else if name, err := os.Hostname(); err == nil && name != "" {
			host = name // as Kafka advertises its canonical host name
		} else {
			host = "localhost"
		}
	}
	return host, port
}

func (n *Node) pushStop(name string, fn func(ctx context.Context) error) {
	n.stops = append(n.stops, stopFunc{name: name, fn: fn})
}

// pushControlledShutdownStop is pushStop for a step of the controlled
// shutdown phase.
func (n *Node) pushControlledShutdownStop(name string, fn func(ctx context.Context) error) {
	n.stops = append(n.stops, stopFunc{name: name, fn: fn, controlledShutdown: true})
}

// runStops undoes the started phases in reverse order; it returns the first
// error and logs the others.
func (n *Node) runStops(ctx context.Context) error {
	var first error
	for i := len(n.stops) - 1; i >= 0; i-- {
		s := n.stops[i]
		if !s.controlledShutdown && n.state.get() == StatePendingControlledShutdown {
			n.state.set(StateShuttingDown)
			n.log.Info("shutting down")
		}
		if s.name == "log manager" && n.bgCancel != nil {
			n.bgCancel()
		}
		if err := s.fn(ctx); err != nil {
			n.log.Error(fmt.Sprintf("Error while stopping the %s: %v", s.name, err))
			if first == nil {
				first = fmt.Errorf("stop %s: %w", s.name, err)
			}
		}
	}
	n.stops = nil
	return first
}

// brokerEpoch is the epoch written into the clean shutdown marker.
func (n *Node) brokerEpoch() int64 { return n.epoch.Load() }

// fail records a fatal error of a running node and stops it.
func (n *Node) fail(err error) {
	n.errMu.Lock()
	if n.err == nil {
		n.err = err
	}
	n.errMu.Unlock()
	n.log.Error(fmt.Sprintf("Fatal error, shutting down: %v", err))
	go func() { _ = n.Shutdown(context.Background()) }()
}

// State returns the current BrokerState.
func (n *Node) State() BrokerState { return n.state.get() }

// Addr is the bound address of the client listener (of the controller
// listener on a controller-only node).
func (n *Node) Addr() net.Addr {
	if n.listener == nil && n.ctrlListener != nil {
		return n.ctrlListener.Addr()
	}
	return n.listener.Addr()
}

// MetricsAddr is the bound address of the /metrics endpoint, nil when
// faultline.metrics.address is not set.
func (n *Node) MetricsAddr() net.Addr {
	if n.metricsSrv == nil {
		return nil
	}
	return n.metricsSrv.addr()
}

// ClusterID is the cluster id read from meta.properties.
func (n *Node) ClusterID() string { return n.clusterID }

// Done is closed once the node has stopped, by Shutdown or a fatal error.
func (n *Node) Done() <-chan struct{} { return n.done }

// Err is the fatal error that stopped the node, nil after a requested
// shutdown.
func (n *Node) Err() error {
	n.errMu.Lock()
	defer n.errMu.Unlock()
	return n.err
}

// Shutdown is a controlled shutdown: the node stops accepting connections,
// lets in-flight requests finish, stops the coordinator and replica manager,
// flushes every log, writes the checkpoints and the clean-shutdown marker.
// When ctx ends first, the remaining steps are cut short and the marker may
// be missing, so the next start recovers. Calling it again waits for the
// first call and returns its result.
func (n *Node) Shutdown(ctx context.Context) error {
	n.shutdownOnce.Do(func() {
		n.state.set(StatePendingControlledShutdown)
		n.log.Info(fmt.Sprintf("Starting controlled shutdown of broker %d", n.cfg.NodeID))
		n.shutdownErr = n.runStops(ctx)
		n.state.set(StateNotRunning)
		n.log.Info("shut down completed")
		close(n.done)
	})
	<-n.done
	return n.shutdownErr
}

// ShutdownTimeout bounds a controlled shutdown started by a signal:
// controlled.shutdown.max.retries attempts spaced by
// controlled.shutdown.retry.backoff.ms, and at least 30 s for flushing.
func ShutdownTimeout(cfg *config.Config) time.Duration {
	d := time.Duration(cfg.ControlledShutdownMaxRetries) * time.Duration(cfg.ControlledShutdownRetryBackoffMs) * time.Millisecond
	return max(d, 30*time.Second)
}
