package node

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/faultline/faultline/broker/config"
	"github.com/faultline/faultline/broker/controller"
	"github.com/faultline/faultline/broker/metadata"
	"github.com/faultline/faultline/broker/quorum"
	"github.com/faultline/faultline/broker/quorum/raftq"
	"github.com/faultline/faultline/broker/replica"
	"github.com/faultline/faultline/broker/server"
	"github.com/faultline/faultline/broker/storage"
)

// topology is the shape of the cluster this node belongs to.
type topology int

const (
	// singleNode: a combined broker and controller, the only voter.
	singleNode topology = iota
	// combinedVoter: a combined broker and controller, one voter of a
	// raft quorum of several.
	combinedVoter
	// brokerOnly: a broker that follows the metadata log as an observer.
	brokerOnly
	// controllerOnly: a voter of the raft quorum that serves no clients.
	controllerOnly
)

// checkTopology tells which topology cfg describes, or why this build
// cannot run it.
func checkTopology(cfg *config.Config) (topology, error) {
	if !cfg.IsBroker() && !cfg.IsController() {
		return 0, fmt.Errorf("process.roles=%s: want broker, controller or broker,controller", strings.Join(cfg.ProcessRoles, ","))
	}
	if !cfg.IsController() {
		for _, v := range cfg.ControllerQuorumVoters {
			if v.ID == cfg.NodeID {
				return 0, fmt.Errorf("controller.quorum.voters lists node.id %d, but process.roles=%s has no controller role", cfg.NodeID, strings.Join(cfg.ProcessRoles, ","))
			}
		}
		if len(cfg.ControllerQuorumVoters) == 0 && len(cfg.ControllerQuorumBootstrapServers) == 0 {
			return 0, errors.New("controller.quorum.voters or controller.quorum.bootstrap.servers: a broker needs the controllers' addresses")
		}
		return brokerOnly, nil
	}
	self := false
	for _, v := range cfg.ControllerQuorumVoters {
		if v.ID == cfg.NodeID {
			self = true
		}
	}
	// A combined node that is the only voter is a single node (its quorum
	// is local, it binds no controller listener). A controller-only node
	// that is the only voter runs the raft quorum alone: brokers register
	// with it on its controller listener, as in Kafka's one-controller
	// clusters.
	if cfg.IsBroker() && (len(cfg.ControllerQuorumVoters) == 0 || (self && len(cfg.ControllerQuorumVoters) == 1)) {
		return singleNode, nil
	}
	if len(cfg.ControllerQuorumVoters) == 0 {
		return 0, errors.New("controller.quorum.voters: a controller-only node must list the voters, itself among them")
	}
	if !self {
		return 0, fmt.Errorf("controller.quorum.voters does not list node.id %d: a node with process.roles=%s must be a voter", cfg.NodeID, strings.Join(cfg.ProcessRoles, ","))
	}
	if len(cfg.ControllerListeners()) == 0 {
		return 0, errors.New("controller.listener.names: no listener of listeners is a controller listener; the voters reach each other on it")
	}
	if !cfg.IsBroker() {
		return controllerOnly, nil
	}
	return combinedVoter, nil
}

// voterAddrs maps controller.quorum.voters' ids to host:port.
func voterAddrs(cfg *config.Config) map[int32]string {
	out := make(map[int32]string, len(cfg.ControllerQuorumVoters))
	for _, v := range cfg.ControllerQuorumVoters {
		out[v.ID] = net.JoinHostPort(v.Host, strconv.Itoa(int(v.Port)))
	}
	return out
}

// votersString renders the controllers as controller.quorum.voters (or
// controller.quorum.bootstrap.servers) does, for messages.
func votersString(cfg *config.Config) string {
	var out []string
	for _, v := range cfg.ControllerQuorumVoters {
		out = append(out, v.String())
	}
	for _, b := range cfg.ControllerQuorumBootstrapServers {
		out = append(out, b.String())
	}
	return strings.Join(out, ",")
}

// controllerAddrs maps the controllers' ids to their addresses; the
// bootstrap servers, whose ids are unknown, get negative keys.
func controllerAddrs(cfg *config.Config) map[int32]string {
	out := voterAddrs(cfg)
	for i, b := range cfg.ControllerQuorumBootstrapServers {
		out[int32(-1-i)] = b.String()
	}
	return out
}

// readPreviousBrokerEpoch reads the broker epoch of the last clean shutdown
// from the marker of the first log dir, -1 when there is none. It must run
// before the log manager loads (and removes) the marker.
func readPreviousBrokerEpoch(cfg *config.Config) int64 {
	for _, dir := range cfg.LogDirs {
		data, err := os.ReadFile(filepath.Join(dir, storage.CleanShutdownFile))
		if err != nil {
			continue
		}
		if epoch, err := storage.ReadCleanShutdownMarker(data); err == nil {
			return epoch
		}
	}
	return -1
}

// startRaftMetadata opens this voter of the raft quorum on
// __cluster_metadata-0, with its raft traffic arriving on the controller
// listener, and feeds the metadata image from it.
func (n *Node) startRaftMetadata() error {
	cfg := n.cfg
	logs, err := n.metadataLogs()
	if err != nil {
		return err
	}
	voters := voterAddrs(cfg)
	logger := n.logger.With(ComponentKey, "RaftManager")
	tr, err := raftq.NewTCPTransport(raftq.TCPConfig{NodeID: cfg.NodeID, Voters: voters, Logger: logger, Dial: n.dial})
	if err != nil {
		return err
	}
	q, err := raftq.Open(raftq.Config{
		NodeID:    cfg.NodeID,
		Voters:    voters,
		Logs:      logs,
		ClusterID: n.clusterID,
		Transport: tr,
		Logger:    logger,
		// Kafka's metadata.log.max.record.bytes.between.snapshots.
		SnapshotIntervalBytes: cfg.MetadataLogMaxRecordBytesBetweenSnapshots,
		TickInterval:          raftTick(cfg),
		ElectionTicks:         raftElectionTicks,
	})
	if err != nil {
		_ = tr.Close()
		return err
	}
	n.quorum, n.raft, n.raftTransport = q, q, tr
	n.pushStop("controller quorum", func(context.Context) error { return q.Close() })
	go func() {
		<-q.Done()
		if err := q.Err(); err != nil {
			n.fail(fmt.Errorf("controller quorum: %w", err))
		}
	}()
	cancel, err := quorum.FeedPublisher(q, n.publisher)
	if err != nil {
		return fmt.Errorf("replay metadata log: %w", err)
	}
	n.pushStop("metadata publisher", func(context.Context) error { cancel(); return nil })
	im := n.publisher.Image()
	n.logger.Info(fmt.Sprintf("Loaded metadata log up to offset %d: %d topics, %d brokers", im.Offset, len(im.Topics), len(im.Brokers)), ComponentKey, "MetadataLoader")
	return n.applyTopicConfigs(im)
}

// raftElectionTicks is raft's election timeout in ticks: a follower
// campaigns after 1 to 2 election timeouts without hearing a leader.
const raftElectionTicks = 10

// raftTick is the raft tick that makes the election timeout
// controller.quorum.election.timeout.ms (Kafka's default 1000 ms gives
// 100 ms ticks; the leader heartbeats every tick). It is never below 10 ms.
func raftTick(cfg *config.Config) time.Duration {
	return max(time.Duration(cfg.ControllerQuorumElectionTimeoutMs)*time.Millisecond/raftElectionTicks, 10*time.Millisecond)
}

// bindControllerListener binds the controller listener: the raft
// connections of the other voters and the Kafka requests of brokers
// (registration, heartbeats, AlterPartition, DescribeQuorum, forwarded
// admin requests) share it.
func (n *Node) bindControllerListener() error {
	l := n.cfg.ControllerListeners()[0]
	ln, err := net.Listen("tcp", l.Address())
	if err != nil {
		return fmt.Errorf("controller listener: bind %s: %w", l, err)
	}
	n.ctrlListenerCfg = l
	n.ctrlListener = newSniffListener(ln, n.raftTransport, n.raft, n.logger.With(ComponentKey, "SocketServer"))
	n.pushStop("controller listener", func(context.Context) error { return ignoreClosed(n.ctrlListener.Close()) })
	return nil
}

// startClusterController starts this node's controller on the raft quorum
// (it decides only while its node leads the quorum), its session expiry
// loop, its metrics and the controller listener's Kafka server.
func (n *Node) startClusterController() error {
	cfg := n.cfg
	c, err := controller.New(n.controllerConfig(true), n.quorum)
	if err != nil {
		return err
	}
	n.controller = c
	n.pushStop("controller", func(context.Context) error { c.Close(); return nil })
	if err := c.RegisterMetrics(n.metrics.registry); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = c.RunExpiry(ctx, expiryTick(cfg), time.Duration(cfg.BrokerSessionTimeoutMs)*time.Millisecond)
	}()
	n.pushStop("controller session expiry", func(context.Context) error { cancel(); <-done; return nil })

	mlr, cancelMLR, err := newMetadataLogReplicas(n.raft)
	if err != nil {
		return err
	}
	n.pushStop("metadata log fetches", func(context.Context) error { cancelMLR(); return nil })
	srv, err := server.New(server.Options{
		ListenerName:    n.ctrlListenerCfg.Name,
		MaxRequestBytes: cfg.SocketRequestMaxBytes,
	}, server.Backend{
		NodeID:          cfg.NodeID,
		ClusterID:       n.clusterID,
		Metadata:        &withMetadataTopic{src: n.publisher},
		Controller:      c,
		ControllerAPIs:  c,
		Replicas:        mlr,
		AdvertisedHost:  n.ctrlListenerCfg.Host,
		AdvertisedPort:  n.ctrlListenerCfg.Port,
		MaxRequestBytes: cfg.SocketRequestMaxBytes,
	}, n.logger, prometheus.WrapRegistererWithPrefix("controller_listener_", n.metrics.registry))
	if err != nil {
		return err
	}
	n.ctrlServer = srv
	ln := n.ctrlListener
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, server.ErrServerClosed) {
			n.fail(fmt.Errorf("controller listener %s: %w", n.ctrlListenerCfg, err))
		}
	}()
	n.pushStop("controller listener server", n.shutdownServer(srv))
	// The quorum stops before the controller listener: requests waiting
	// for a commit (a heartbeat while the other voters are gone) then end
	// with NOT_CONTROLLER instead of holding the listener's shutdown.
	q := n.raft
	n.pushStop("controller quorum", func(context.Context) error { return q.Close() })
	return nil
}

// startControllerChannel makes the client to the active controller that
// registration, heartbeats, AlterPartition and forwarded admin requests go
// through, the quorum leader first, and the Forwarder serving admin
// requests on the broker listener.
func (n *Node) startControllerChannel(leader func() quorum.LeaderAndEpoch) error {
	cfg := n.cfg
	var bootstrap []string
	for _, b := range cfg.ControllerQuorumBootstrapServers {
		bootstrap = append(bootstrap, b.String())
	}
	tr, err := controller.NewKgoTransport(controller.KgoTransportConfig{
		Voters:    voterAddrs(cfg),
		Bootstrap: bootstrap,
		Leader:    leader,
		ClientID:  fmt.Sprintf("broker-%d-to-controller", cfg.NodeID),
		Logger:    n.logger.With(ComponentKey, "NodeToControllerChannelManager"),
		Dial:      n.dial,
	})
	if err != nil {
		return err
	}
	n.ctrlTransport = tr
	n.pushStop("controller channel", func(context.Context) error { tr.Close(); return nil })
	n.forwarder = &controller.Forwarder{Local: n.controller, Transport: tr, Logger: n.logger.With(ComponentKey, "ControllerForwarder")}
	return nil
}

// startObserverMetadata follows the metadata log as an observer (a
// broker-only node) and waits until the image caught up with the
// controllers' high watermark.
func (n *Node) startObserverMetadata(ctx context.Context) error {
	obs := newObserver(n.cfg.NodeID, nil, n.logger.With(ComponentKey, "MetadataLoader"))
	obs.image = metadata.NewImage(n.clusterID)
	obs.addrs = controllerAddrs(n.cfg)
	obs.dial = n.dial
	if err := n.startControllerChannel(obs.Leader); err != nil {
		return err
	}
	obs.tr = n.ctrlTransport
	n.quorum = obs
	cancel, err := quorum.FeedPublisher(obs, n.publisher)
	if err != nil {
		return err
	}
	obs.start()
	n.pushStop("metadata observer", func(context.Context) error { obs.close(); cancel(); return nil })
	n.logger.Info(fmt.Sprintf("Following the metadata log of the controller quorum %s as an observer", votersString(n.cfg)), ComponentKey, "MetadataLoader")
	wctx, cancel := context.WithTimeout(ctx, time.Duration(n.cfg.InitialBrokerRegistrationTimeoutMs)*time.Millisecond)
	defer cancel()
	if err := obs.waitCaughtUp(wctx); err != nil {
		return fmt.Errorf("initial.broker.registration.timeout.ms: no controller of %s served the metadata log: %w", votersString(n.cfg), err)
	}
	im := n.publisher.Image()
	n.logger.Info(fmt.Sprintf("Loaded metadata log up to offset %d: %d topics, %d brokers", im.Offset, len(im.Topics), len(im.Brokers)), ComponentKey, "MetadataLoader")
	return n.applyTopicConfigs(im)
}

// expiryTick is how often the active controller looks for expired broker
// sessions: a broker is fenced at most this long after its session
// expired, so a quarter of the heartbeat interval, at most 250 ms, keeps
// failover within broker.session.timeout.ms plus a heartbeat.
func expiryTick(cfg *config.Config) time.Duration {
	return max(min(time.Duration(cfg.BrokerHeartbeatIntervalMs)*time.Millisecond/4, 250*time.Millisecond), 10*time.Millisecond)
}

// shutdownServer stops srv, at once when the node is killed.
func (n *Node) shutdownServer(srv *server.Server) func(context.Context) error {
	return func(ctx context.Context) error {
		if n.killed.Load() {
			cctx, cancel := context.WithCancel(ctx)
			cancel()
			_ = srv.Shutdown(cctx)
			return nil
		}
		return srv.Shutdown(ctx)
	}
}

// startReplication starts the follower side (one fetcher per leader this
// node follows) and the leader side (the ISR loop sending AlterPartition to
// the active controller). The fetcher follows the image after the replica
// manager, so it sees the roles the image gave.
func (n *Node) startReplication() error {
	cfg := n.cfg
	listener := cfg.InterBrokerListenerName
	if listener == "" || listener != n.listenerCfg.Name {
		listener = n.listenerCfg.Name
	}
	f, err := replica.NewFetcher(replica.FetcherConfig{
		Manager:           n.replicas,
		Dialer:            replica.KgoDialer{DialConn: n.dial},
		ListenerName:      listener,
		MaxWaitMs:         int32(cfg.ReplicaFetchWaitMaxMs),
		MinBytes:          cfg.ReplicaFetchMinBytes,
		PartitionMaxBytes: cfg.ReplicaFetchMaxBytes,
		MaxBytes:          cfg.ReplicaFetchResponseMaxBytes,
		BackoffMs:         cfg.ReplicaFetchBackoffMs,
		Registerer:        n.metrics.registry,
		Logger:            n.logger.With(ComponentKey, "ReplicaFetcherManager"),
	})
	if err != nil {
		return err
	}
	n.fetcher = f
	cancel := n.publisher.Subscribe(f.ApplyImage)
	n.pushStop("replica fetcher", func(context.Context) error { cancel(); f.Stop(); return nil })

	tr := n.ctrlTransport
	isr, err := replica.NewISRLoop(replica.ISRLoopConfig{
		Manager: n.replicas,
		Sender: replica.KafkaISRSender{
			BrokerID: cfg.NodeID,
			Image:    n.publisher.Image,
			Controller: func(context.Context) (replica.BrokerClient, error) {
				return controller.ActiveController{Transport: tr}, nil
			},
		},
		Logger: n.logger.With(ComponentKey, "AlterPartitionManager"),
	})
	if err != nil {
		return err
	}
	isr.Start()
	n.pushStop("ISR loop", func(context.Context) error { isr.Stop(); return nil })
	return nil
}

// startLifecycle registers this broker with the active controller and
// heartbeats; it returns once the controller unfenced the broker. The
// controlled shutdown is pushed by the caller once the network layer runs,
// so that it happens before the network layer stops.
func (n *Node) startLifecycle(ctx context.Context) error {
	cfg := n.cfg
	incarnation, err := ParseUUID(RandomUUID())
	if err != nil {
		return err
	}
	lc, err := controller.NewBrokerLifecycle(controller.LifecycleConfig{
		BrokerID:      cfg.NodeID,
		ClusterID:     n.clusterID,
		IncarnationID: metadata.Uuid(incarnation),
		Listeners: []metadata.Endpoint{{
			Name: n.listenerCfg.Name,
			Host: n.advertisedHost,
			Port: uint16(n.advertisedPort),
		}},
		Rack:                cfg.BrokerRack,
		PreviousBrokerEpoch: n.previousEpoch,
		HeartbeatInterval:   time.Duration(cfg.BrokerHeartbeatIntervalMs) * time.Millisecond,
		MetadataOffset:      func() int64 { return n.publisher.Image().Offset },
		Transport:           n.ctrlTransport,
		Logger:              n.logger.With(ComponentKey, "BrokerLifecycleManager"),
	})
	if err != nil {
		return err
	}
	n.lifecycle = lc
	lc.Start()
	n.pushStop("broker lifecycle", func(context.Context) error { lc.Close(); return nil })
	// The logs are loaded and the replica manager follows the image: the
	// broker may be unfenced as soon as it caught up with the metadata log.
	lc.SetReadyToUnfence()
	go n.trackEpoch(lc)
	if err := waitRegistered(ctx, lc, time.Duration(cfg.InitialBrokerRegistrationTimeoutMs)*time.Millisecond); err != nil {
		return fmt.Errorf("initial.broker.registration.timeout.ms: no active controller of %s accepted the registration of broker %d: %w", votersString(cfg), cfg.NodeID, err)
	}
	if err := lc.WaitForState(ctx, controller.StateRunning); err != nil {
		return fmt.Errorf("waiting to be unfenced by the controller quorum: %w", err)
	}
	n.epoch.Store(lc.BrokerEpoch())
	n.logger.Info(fmt.Sprintf("Completed registration with controller, broker epoch %d", lc.BrokerEpoch()), ComponentKey, "BrokerServer")
	return nil
}

// waitRegistered waits until the lifecycle registered once, at most
// timeout.
func waitRegistered(ctx context.Context, lc *controller.BrokerLifecycle, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		ch := lc.Changed()
		if lc.BrokerEpoch() >= 0 {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// trackEpoch keeps n.epoch, the epoch written in the clean shutdown marker,
// equal to the lifecycle's current registration.
func (n *Node) trackEpoch(lc *controller.BrokerLifecycle) {
	for {
		ch := lc.Changed()
		if e := lc.BrokerEpoch(); e >= 0 {
			n.epoch.Store(e)
		}
		if s := lc.State(); s == controller.StateShuttingDown {
			return
		}
		select {
		case <-ch:
		case <-n.done:
			return
		}
	}
}

// pushClusterControlledShutdown makes the controlled shutdown the first
// step of Shutdown: the controller moves this broker's leaderships away
// while it still serves its followers, then the rest stops.
func (n *Node) pushClusterControlledShutdown() {
	lc := n.lifecycle
	n.pushControlledShutdownStop("controlled shutdown", func(ctx context.Context) error {
		if !n.cfg.ControlledShutdownEnable || n.killed.Load() {
			return nil
		}
		// Past a session timeout the controller, if there is one, has
		// fenced this broker and moved its leaderships anyway: without a
		// controller (the last voters stopping) the shutdown goes on.
		wait := time.Duration(n.cfg.BrokerSessionTimeoutMs+n.cfg.BrokerHeartbeatIntervalMs) * time.Millisecond
		cctx, cancel := context.WithTimeout(ctx, wait)
		defer cancel()
		if err := lc.ControlledShutdown(cctx); err != nil {
			if ctx.Err() != nil {
				return err
			}
			n.log.Warn(fmt.Sprintf("Controlled shutdown got no answer from the controller quorum within %v; shutting down without it", wait))
			return nil
		}
		n.log.Info("Controlled shutdown request returned successfully")
		return nil
	})
}

// sniffListener is the controller listener: each accepted connection is
// sniffed; raft connections go to the raft transport, Kafka ones to the
// server through Accept.
type sniffListener struct {
	net.Listener
	tr     *raftq.TCPTransport
	q      *raftq.Quorum
	conns  chan net.Conn
	closed chan struct{}
	once   sync.Once
	failed chan struct{}
	err    error
	logger interface {
		Warn(msg string, args ...any)
	}
}

func newSniffListener(ln net.Listener, tr *raftq.TCPTransport, q *raftq.Quorum, logger interface{ Warn(string, ...any) }) *sniffListener {
	s := &sniffListener{Listener: ln, tr: tr, q: q, conns: make(chan net.Conn), closed: make(chan struct{}), failed: make(chan struct{}), logger: logger}
	go s.acceptLoop()
	return s
}

func (s *sniffListener) acceptLoop() {
	for {
		c, err := s.Listener.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				time.Sleep(5 * time.Millisecond)
				continue
			}
			s.err = err
			close(s.failed)
			return
		}
		go s.classify(c)
	}
}

func (s *sniffListener) classify(c net.Conn) {
	conn, isRaft, err := raftq.SniffRaft(c, 10*time.Second)
	if err != nil {
		_ = c.Close()
		return
	}
	if isRaft {
		_ = s.tr.ServeConn(conn)
		return
	}
	conn, isSnapshot, err := sniffSnapshot(conn)
	if err != nil {
		_ = conn.Close()
		return
	}
	if isSnapshot {
		_ = serveSnapshot(conn, s.q)
		return
	}
	select {
	case s.conns <- conn:
	case <-s.closed:
		_ = conn.Close()
	}
}

// Accept returns the next Kafka connection.
func (s *sniffListener) Accept() (net.Conn, error) {
	select {
	case c := <-s.conns:
		return c, nil
	case <-s.closed:
		return nil, net.ErrClosed
	case <-s.failed:
		return nil, s.err
	}
}

// Close stops accepting; raft connections close with the transport.
func (s *sniffListener) Close() error {
	var err error
	s.once.Do(func() {
		close(s.closed)
		err = s.Listener.Close()
	})
	return err
}

// kill stops the node as a crash would (for tests): no controlled
// shutdown, connections cut at once, logs closed without checkpoints or the
// clean shutdown marker, so that the next start recovers.
func (n *Node) kill() {
	n.killed.Store(true)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = n.Shutdown(ctx)
}
