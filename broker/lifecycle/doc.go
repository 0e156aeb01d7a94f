// Package lifecycle is the broker side of the broker lifecycle: the
// channel to the active controller, registration and heartbeats, and the
// BrokerState they drive (Kafka's BrokerLifecycleManager and
// NodeToControllerChannelManager). Package controller is the other side.
//
//   - ControllerTransport carries one request to the controller believed
//     active; KgoTransport is the production one (a franz-go client whose
//     seeds are the controllers' listeners, the quorum leader first).
//     SendToActive retries on NOT_CONTROLLER and network errors with
//     backoff within a deadline; ActiveController wraps it for the
//     replica's AlterPartition sender.
//   - Manager registers the broker (BrokerRegistration), then heartbeats
//     every broker.heartbeat.interval.ms with its metadata offset, asking
//     again within milliseconds while it is not caught up, and drives the
//     BrokerState: STARTING → RECOVERY once the controller says it is
//     caught up → RUNNING once unfenced; ControlledShutdown →
//     PENDING_CONTROLLED_SHUTDOWN (heartbeats want shutdown) →
//     SHUTTING_DOWN once the controller says it may stop. It registers
//     again when the controller no longer knows its epoch.
//   - Forwarder serves the admin requests of a broker's client listener:
//     decided in process while the node's own controller (LocalController)
//     is the active one, else sent to the active controller.
//
// Use (as package node wires it):
//
//	tr, _ := lifecycle.NewKgoTransport(lifecycle.KgoTransportConfig{Voters: voters, Leader: q.Leader})
//	m, _ := lifecycle.New(lifecycle.Config{BrokerID: 1, Transport: tr, HeartbeatInterval: 2 * time.Second, ...})
//	m.Start()
//	_ = m.WaitForState(ctx, lifecycle.StateRecovery) // registered, the image caught up
//	// ... the broker's parts start following the image ...
//	m.SetReadyToUnfence()
//	_ = m.WaitForState(ctx, lifecycle.StateRunning)
//	defer m.ControlledShutdown(ctx)
//
// What it must never do: decide anything the controller decides (fencing,
// leadership), or send anything once SHUTTING_DOWN.
package lifecycle
