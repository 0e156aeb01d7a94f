package node

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/faultline/faultline/broker/lifecycle"
	"github.com/faultline/faultline/broker/metadata"
	"github.com/faultline/faultline/broker/replica"
)

// The broker's steps of the startup, after the metadata phase: they run on
// every node with the broker role, the only voter of a single-node cluster
// included.

// startControllerChannel makes the client to the active controller that
// registration, heartbeats, AlterPartition and forwarded admin requests go
// through, the quorum leader first, and the Forwarder serving admin
// requests on the broker listener (decided in process while this node's
// own controller is the active one).
func (n *Node) startControllerChannel() error {
	cfg := n.cfg
	tr, err := lifecycle.NewKgoTransport(lifecycle.KgoTransportConfig{
		Voters:    n.controllerChannelVoters(),
		Bootstrap: bootstrapServers(cfg),
		Leader:    n.quorum.Leader,
		ClientID:  fmt.Sprintf("broker-%d-to-controller", cfg.NodeID),
		Logger:    n.logger.With(ComponentKey, "NodeToControllerChannelManager"),
		Dial:      n.dial,
	})
	if err != nil {
		return err
	}
	n.ctrlTransport = tr
	n.pushStop("controller channel", func(context.Context) error { tr.Close(); return nil })
	n.forwarder = &lifecycle.Forwarder{Transport: tr, Logger: n.logger.With(ComponentKey, "ControllerForwarder")}
	if n.controller != nil {
		n.forwarder.Local = n.controller
	}
	return nil
}

// controllerChannelVoters are the voters' controller listeners as the
// controller channel dials them: this node's own is the address its
// controller listener is bound to (controller.quorum.voters may name a
// port the listener, bound to port 0, does not have).
func (n *Node) controllerChannelVoters() map[int32]string {
	voters := voterAddrs(n.cfg)
	if n.ctrlListener == nil {
		return voters
	}
	if n.voters != nil {
		voters = n.voters
	}
	out := make(map[int32]string, len(voters))
	for id, addr := range voters {
		out[id] = addr
	}
	if tcp, ok := n.ctrlListener.Addr().(*net.TCPAddr); ok {
		host := tcp.IP.String()
		if tcp.IP.IsUnspecified() {
			host = "localhost"
		}
		out[n.cfg.NodeID] = net.JoinHostPort(host, strconv.Itoa(tcp.Port))
	}
	return out
}

// startReplicaManager makes the replica manager follow the metadata image.
// The logs the image places on no replica of this broker (stray logs) are
// deleted once the image caught up with the quorum: an image behind the
// commit may not know a topic yet.
func (n *Node) startReplicaManager() error {
	cfg := n.cfg
	rm, err := replica.New(replica.Config{
		NodeID:              cfg.NodeID,
		Logs:                n.logs,
		TopicSettings:       topicSettings(cfg),
		ReplicaLagTimeMaxMs: cfg.ReplicaLagTimeMaxMs,
		Registerer:          n.metrics.registry,
		Logger:              n.logger.With(ComponentKey, "ReplicaManager"),
		Unsafe:              replicaUnsafe(cfg),
	})
	if err != nil {
		return err
	}
	n.replicas = rm
	caughtUp := n.metadataCatchUp()
	strayChecked := false
	cancel := n.publisher.Subscribe(func(prev, next *metadata.Image) {
		rm.ApplyImage(prev, next)
		if !strayChecked && caughtUp(next) {
			strayChecked = true
			rm.DeleteStrayLogs(next)
		}
	})
	n.pushStop("replica manager", func(context.Context) error { cancel(); return nil })
	return nil
}

// metadataCatchUp returns a test of whether an image holds everything the
// quorum committed before this node started: once a quorum leader is known,
// the target is the high watermark the quorum reports then and, on a
// voter, the end of the metadata log it recovered (its commit index on
// disk may lag behind the records it applied before it stopped).
func (n *Node) metadataCatchUp() func(*metadata.Image) bool {
	target := int64(-1)
	return func(im *metadata.Image) bool {
		if target < 0 {
			if n.quorum.Leader().LeaderID < 0 {
				return false
			}
			target = max(n.quorum.Describe().HighWatermark, n.recoveredLogEnd)
		}
		return im.Offset+1 >= target
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
			BrokerID:    cfg.NodeID,
			Image:       n.publisher.Image,
			BrokerEpoch: n.brokerEpoch, // -1 until this process registered
			Controller: func(context.Context) (replica.BrokerClient, error) {
				return lifecycle.ActiveController{Transport: tr}, nil
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

// register registers this broker with the active controller and
// heartbeats; it returns once the controller says the broker's image
// caught up with the metadata log (the lifecycle's RECOVERY), before any of
// the broker's parts follows the image. unfence then asks to be unfenced.
func (n *Node) register(ctx context.Context) error {
	cfg := n.cfg
	incarnation, err := ParseUUID(RandomUUID())
	if err != nil {
		return err
	}
	lc, err := lifecycle.New(lifecycle.Config{
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
	go n.trackEpoch(lc)
	if err := waitRegistered(ctx, lc, time.Duration(cfg.InitialBrokerRegistrationTimeoutMs)*time.Millisecond); err != nil {
		return fmt.Errorf("initial.broker.registration.timeout.ms: no active controller of %s accepted the registration of broker %d: %w", votersString(cfg), cfg.NodeID, err)
	}
	if err := lc.WaitForState(ctx, lifecycle.StateRecovery); err != nil {
		return fmt.Errorf("waiting to catch up with the metadata log: %w", err)
	}
	return nil
}

// unfence tells the controller the broker is ready (its logs loaded, its
// parts following the caught-up image) and returns once it is unfenced.
func (n *Node) unfence(ctx context.Context) error {
	lc := n.lifecycle
	lc.SetReadyToUnfence()
	if err := lc.WaitForState(ctx, lifecycle.StateRunning); err != nil {
		return fmt.Errorf("waiting to be unfenced by the controller quorum: %w", err)
	}
	n.epoch.Store(lc.BrokerEpoch())
	n.logger.Info(fmt.Sprintf("Completed registration with controller, broker epoch %d", lc.BrokerEpoch()), ComponentKey, "BrokerServer")
	return nil
}

// waitRegistered waits until the lifecycle registered once, at most
// timeout.
func waitRegistered(ctx context.Context, lc *lifecycle.Manager, timeout time.Duration) error {
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
func (n *Node) trackEpoch(lc *lifecycle.Manager) {
	for {
		ch := lc.Changed()
		if e := lc.BrokerEpoch(); e >= 0 {
			n.epoch.Store(e)
		}
		if s := lc.State(); s == lifecycle.StateShuttingDown {
			return
		}
		select {
		case <-ch:
		case <-n.done:
			return
		}
	}
}

// pushControlledShutdown makes the controlled shutdown the first step of
// Shutdown: the controller moves this broker's leaderships away (to
// another ISR member, or to no leader when there is none: a single node
// leaves its partitions leaderless until it is back) while it still serves
// its followers, then the rest stops.
func (n *Node) pushControlledShutdown() error {
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
	return nil
}
