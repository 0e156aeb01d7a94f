package node

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/faultline/faultline/broker/config"
	"github.com/faultline/faultline/broker/controller"
	"github.com/faultline/faultline/broker/lifecycle"
	"github.com/faultline/faultline/broker/quorum"
	"github.com/faultline/faultline/broker/quorum/raftq"
	"github.com/faultline/faultline/broker/server"
)

// quorumVoters returns the controller quorum's voters, id -> host:port
// of their controller listener. A combined node that lists none (a
// quickstart configuration naming itself in
// controller.quorum.bootstrap.servers) is the only voter.
func quorumVoters(cfg *config.Config) (map[int32]string, error) {
	listeners := cfg.ControllerListeners()
	if len(listeners) == 0 {
		return nil, errors.New("controller.listener.names: no listener of listeners is a controller listener; the voters and brokers reach the controller on it")
	}
	if len(cfg.ControllerQuorumVoters) > 0 {
		return voterAddrs(cfg), nil
	}
	if !cfg.IsBroker() {
		return nil, errors.New("controller.quorum.voters: a controller-only node must list the voters, itself among them")
	}
	return map[int32]string{cfg.NodeID: listeners[0].Address()}, nil
}

// voterAddrs maps controller.quorum.voters' ids to host:port.
func voterAddrs(cfg *config.Config) map[int32]string {
	out := make(map[int32]string, len(cfg.ControllerQuorumVoters))
	for _, v := range cfg.ControllerQuorumVoters {
		out[v.ID] = net.JoinHostPort(v.Host, strconv.Itoa(int(v.Port)))
	}
	return out
}

// bootstrapServers is controller.quorum.bootstrap.servers as host:port.
func bootstrapServers(cfg *config.Config) []string {
	var out []string
	for _, b := range cfg.ControllerQuorumBootstrapServers {
		out = append(out, b.String())
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

// startVoter opens this node's voter of the raft controller quorum on
// __cluster_metadata-0 (its raft traffic arrives on the controller
// listener, bound next) and feeds the metadata image from it. The only
// voter of a one-voter quorum elects itself at once.
func (n *Node) startVoter() error {
	cfg := n.cfg
	logs, err := n.metadataLogs()
	if err != nil {
		return err
	}
	voters := n.voters
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
		SegmentBytes:          int64(cfg.MetadataLogSegmentBytes),
	})
	if err != nil {
		_ = tr.Close()
		return err
	}
	n.quorum, n.raft, n.raftTransport = q, q, tr
	n.recoveredLogEnd = q.RecoveredLogEndOffset()
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

// startControllerListener binds the controller listener: the raft
// connections of the other voters and the Kafka requests of brokers
// (registration, heartbeats, AlterPartition, DescribeQuorum, forwarded
// admin requests, this node's own broker included) share it.
func (n *Node) startControllerListener() error {
	l := n.cfg.ControllerListeners()[0]
	ln, err := net.Listen("tcp", l.Address())
	if err != nil {
		return fmt.Errorf("controller listener: bind %s: %w", l, err)
	}
	n.ctrlListenerCfg = l
	n.ctrlListener = raftq.NewControllerListener(ln, n.raftTransport, n.raft, n.logger.With(ComponentKey, "SocketServer"))
	n.pushStop("controller listener", func(context.Context) error { return ignoreClosed(n.ctrlListener.Close()) })
	return nil
}

// startController starts this node's controller on the raft quorum (it
// decides only while its node leads the quorum), its session expiry loop,
// its metrics and the controller listener's Kafka server.
func (n *Node) startController() error {
	cfg := n.cfg
	c, err := controller.New(n.controllerConfig(), n.quorum)
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
	if cfg.AutoLeaderRebalanceEnable {
		bctx, bcancel := context.WithCancel(context.Background())
		bdone := make(chan struct{})
		go func() {
			defer close(bdone)
			_ = c.RunLeaderBalance(bctx, time.Duration(cfg.LeaderImbalanceCheckIntervalMs)*time.Millisecond)
		}()
		n.pushStop("controller leader rebalance", func(context.Context) error { bcancel(); <-bdone; return nil })
	}

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

// startObserver follows the metadata log as an observer (a broker-only
// node), fetching from the quorum leader's controller listener, and waits
// until the image caught up with the controllers' high watermark.
func (n *Node) startObserver(ctx context.Context) error {
	obs := raftq.NewObserver(raftq.ObserverConfig{
		BrokerID:    n.cfg.NodeID,
		ClusterID:   n.clusterID,
		Controllers: controllerAddrs(n.cfg),
		Dial:        raftq.DialFunc(n.dial),
		Logger:      n.logger.With(ComponentKey, "MetadataLoader"),
	})
	tr, err := lifecycle.NewKgoTransport(lifecycle.KgoTransportConfig{
		Voters:    voterAddrs(n.cfg),
		Bootstrap: bootstrapServers(n.cfg),
		Leader:    obs.Leader,
		ClientID:  fmt.Sprintf("broker-%d-metadata-fetcher", n.cfg.NodeID),
		Logger:    n.logger.With(ComponentKey, "RaftManager"),
		Dial:      n.dial,
	})
	if err != nil {
		return err
	}
	n.pushStop("metadata fetch channel", func(context.Context) error { tr.Close(); return nil })
	n.quorum = obs
	cancel, err := quorum.FeedPublisher(obs, n.publisher)
	if err != nil {
		return err
	}
	obs.Start(tr)
	n.pushStop("metadata observer", func(context.Context) error { obs.Close(); cancel(); return nil })
	n.logger.Info(fmt.Sprintf("Following the metadata log of the controller quorum %s as an observer", votersString(n.cfg)), ComponentKey, "MetadataLoader")
	wctx, cancel := context.WithTimeout(ctx, time.Duration(n.cfg.InitialBrokerRegistrationTimeoutMs)*time.Millisecond)
	defer cancel()
	if err := obs.WaitCaughtUp(wctx); err != nil {
		return fmt.Errorf("initial.broker.registration.timeout.ms: no controller of %s served the metadata log: %w", votersString(n.cfg), err)
	}
	im := n.publisher.Image()
	n.logger.Info(fmt.Sprintf("Loaded metadata log up to offset %d: %d topics, %d brokers", im.Offset, len(im.Topics), len(im.Brokers)), ComponentKey, "MetadataLoader")
	return n.applyTopicConfigs(im)
}

// controllerConfig is this node's controller configuration.
func (n *Node) controllerConfig() controller.Config {
	cfg := n.cfg
	return controller.Config{
		NodeID:    cfg.NodeID,
		ClusterID: n.clusterID,
		Defaults: controller.Defaults{
			NumPartitions:         cfg.NumPartitions,
			ReplicationFactor:     int16(cfg.DefaultReplicationFactor),
			UncleanLeaderElection: cfg.UncleanLeaderElectionEnable,
			TopicConfigs:          cfg.TopicDefaults(),
		},
		ValidateConfig: validateTopicConfig,
		ValidateTopic:  validateTopicSettings(cfg),
		Logger:         n.logger.With(ComponentKey, "QuorumController"),
		Cluster:        true,
		Unsafe:         controllerUnsafe(cfg),
		VoterEndpoints: voterEndpoints(cfg),
	}
}

// voterEndpoints are the configured voters' controller listeners.
func voterEndpoints(cfg *config.Config) []controller.VoterEndpoint {
	name := ""
	if len(cfg.ControllerListenerNames) > 0 {
		name = cfg.ControllerListenerNames[0]
	}
	var out []controller.VoterEndpoint
	for _, v := range cfg.ControllerQuorumVoters {
		out = append(out, controller.VoterEndpoint{NodeID: v.ID, Listener: name, Host: v.Host, Port: int32(v.Port)})
	}
	return out
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

// kill stops the node as a crash would (for tests): no controlled
// shutdown, connections cut at once, logs closed without checkpoints or the
// clean shutdown marker, so that the next start recovers.
func (n *Node) kill() {
	n.killed.Store(true)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = n.Shutdown(ctx)
}
