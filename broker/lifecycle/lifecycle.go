package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/faultline/faultline/broker/metadata"
)

// BrokerState is a broker's lifecycle state, with Kafka's codes (the
// BrokerState metric reports them).
type BrokerState int8

// Kafka's BrokerState codes.
const (
	StateNotRunning                BrokerState = 0
	StateStarting                  BrokerState = 1
	StateRecovery                  BrokerState = 2
	StateRunning                   BrokerState = 3
	StatePendingControlledShutdown BrokerState = 6
	StateShuttingDown              BrokerState = 7
	StateUnknown                   BrokerState = 127
)

// reached reports whether a broker in state s is in want or past it: a
// broker goes STARTING, RECOVERY, RUNNING, PENDING_CONTROLLED_SHUTDOWN,
// SHUTTING_DOWN in that order, the order of their codes.
func (s BrokerState) reached(want BrokerState) bool {
	return s != StateUnknown && s >= want
}

func (s BrokerState) String() string {
	switch s {
	case StateNotRunning:
		return "NOT_RUNNING"
	case StateStarting:
		return "STARTING"
	case StateRecovery:
		return "RECOVERY"
	case StateRunning:
		return "RUNNING"
	case StatePendingControlledShutdown:
		return "PENDING_CONTROLLED_SHUTDOWN"
	case StateShuttingDown:
		return "SHUTTING_DOWN"
	}
	return "UNKNOWN"
}

// catchUpRetry is how soon a broker that is not caught up with the
// metadata log yet heartbeats again while it starts.
const catchUpRetry = 10 * time.Millisecond

// Config configures a Manager.
type Config struct {
	BrokerID      int32
	ClusterID     string
	IncarnationID metadata.Uuid // new at every start of the process
	Listeners     []metadata.Endpoint
	Rack          string
	// PreviousBrokerEpoch is the epoch of this broker's last clean
	// shutdown, -1 if unknown: it lets the controller accept the new
	// incarnation before the old session expires.
	PreviousBrokerEpoch int64
	// HeartbeatInterval is broker.heartbeat.interval.ms.
	HeartbeatInterval time.Duration
	// RequestTimeout bounds one registration or heartbeat (default:
	// the heartbeat interval, at least 500 ms).
	RequestTimeout time.Duration
	// MetadataOffset returns the offset of the last metadata record this
	// broker applied (its image's Offset).
	MetadataOffset func() int64
	Transport      ControllerTransport
	Logger         *slog.Logger
}

// Manager is the broker side of registration and heartbeats (Kafka's
// BrokerLifecycleManager). It registers with the active controller, then
// heartbeats every HeartbeatInterval with the broker's metadata offset,
// asking to stay fenced until SetReadyToUnfence, and drives the broker's
// state: STARTING → RECOVERY once the controller says it is caught up →
// RUNNING once unfenced; BeginControlledShutdown → PENDING_CONTROLLED_SHUTDOWN
// (heartbeats want shutdown) → SHUTTING_DOWN once the controller says it
// may stop, after which it sends nothing more. It registers again when the
// controller no longer knows its epoch (STALE_BROKER_EPOCH,
// BROKER_ID_NOT_REGISTERED), and retries a DUPLICATE_BROKER_REGISTRATION
// (the previous incarnation's session has not expired yet).
type Manager struct {
	cfg    Config
	logger *slog.Logger

	mu        sync.Mutex
	state     BrokerState
	epoch     int64 // -1 until registered
	fenced    bool
	ready     bool
	changed   chan struct{} // closed and replaced at every change
	wake      chan struct{} // buffered(1): send the next heartbeat now
	cancel    context.CancelFunc
	done      chan struct{}
	startOnce sync.Once
}

// New returns a lifecycle in STARTING; Start runs it.
func New(cfg Config) (*Manager, error) {
	if cfg.Transport == nil || cfg.MetadataOffset == nil || cfg.HeartbeatInterval <= 0 {
		return nil, errors.New("broker lifecycle: Transport, MetadataOffset and HeartbeatInterval are required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = max(cfg.HeartbeatInterval, 500*time.Millisecond)
	}
	return &Manager{
		cfg: cfg, logger: cfg.Logger, state: StateStarting, epoch: -1, fenced: true,
		changed: make(chan struct{}), wake: make(chan struct{}, 1), done: make(chan struct{}),
	}, nil
}

// Start runs registration and heartbeats in a goroutine until Close or
// SHUTTING_DOWN.
func (l *Manager) Start() {
	l.startOnce.Do(func() {
		ctx, cancel := context.WithCancel(context.Background())
		l.mu.Lock()
		l.cancel = cancel
		l.mu.Unlock()
		go func() {
			defer close(l.done)
			l.run(ctx)
		}()
	})
}

// Close stops the lifecycle (without controlled shutdown) and waits for
// its goroutine.
func (l *Manager) Close() {
	l.mu.Lock()
	cancel := l.cancel
	l.mu.Unlock()
	if cancel == nil {
		return
	}
	cancel()
	<-l.done
}

// State returns the broker's lifecycle state.
func (l *Manager) State() BrokerState {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.state
}

// BrokerEpoch returns the epoch of the current registration, -1 before
// the first.
func (l *Manager) BrokerEpoch() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.epoch
}

// Fenced reports whether the controller's last answer had this broker
// fenced.
func (l *Manager) Fenced() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.fenced
}

// Changed returns a channel closed at the next change of state, epoch or
// fencing.
func (l *Manager) Changed() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.changed
}

// WaitForState waits until the broker reaches want or a later state.
func (l *Manager) WaitForState(ctx context.Context, want BrokerState) error {
	for {
		ch := l.Changed()
		s := l.State()
		if s.reached(want) {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("broker %d waiting for state %s (now %s): %w", l.cfg.BrokerID, want, s, ctx.Err())
		}
	}
}

// SetReadyToUnfence tells the controller, from the next heartbeat on (sent
// at once), that the broker no longer wants to be fenced: its logs are
// loaded and it can serve.
func (l *Manager) SetReadyToUnfence() {
	l.mu.Lock()
	l.ready = true
	l.mu.Unlock()
	l.poke()
}

// BeginControlledShutdown enters PENDING_CONTROLLED_SHUTDOWN: the next
// heartbeats (the first at once) ask the controller to move leadership
// away. A broker that never registered goes straight to SHUTTING_DOWN.
func (l *Manager) BeginControlledShutdown() {
	l.mu.Lock()
	switch {
	case l.state == StateShuttingDown || l.state == StatePendingControlledShutdown:
	case l.epoch < 0:
		l.setStateLocked(StateShuttingDown)
	default:
		l.setStateLocked(StatePendingControlledShutdown)
	}
	l.mu.Unlock()
	l.poke()
}

// ControlledShutdown begins a controlled shutdown and waits until the
// controller says the broker may stop (SHUTTING_DOWN).
func (l *Manager) ControlledShutdown(ctx context.Context) error {
	l.BeginControlledShutdown()
	return l.WaitForState(ctx, StateShuttingDown)
}

func (l *Manager) poke() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// setStateLocked changes the state and signals; callers hold mu.
func (l *Manager) setStateLocked(s BrokerState) {
	if l.state == s {
		return
	}
	l.logger.Info(fmt.Sprintf("Broker %d transitioned from %s to %s", l.cfg.BrokerID, l.state, s))
	l.state = s
	l.signalLocked()
}

func (l *Manager) signalLocked() {
	close(l.changed)
	l.changed = make(chan struct{})
}

func (l *Manager) run(ctx context.Context) {
	backoff := retryBackoffMin
	for {
		l.mu.Lock()
		state, epoch := l.state, l.epoch
		l.mu.Unlock()
		if state == StateShuttingDown {
			return
		}
		var next time.Duration
		if epoch < 0 {
			next = l.register(ctx)
		} else {
			next = l.heartbeat(ctx, epoch)
		}
		if next < 0 { // failed: back off
			next, backoff = backoff, min(2*backoff, l.cfg.HeartbeatInterval)
		} else {
			backoff = retryBackoffMin
		}
		if next == 0 {
			if ctx.Err() != nil {
				return
			}
			continue
		}
		t := time.NewTimer(next)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-l.wake:
			t.Stop()
		case <-t.C:
		}
	}
}

// register sends one BrokerRegistration and returns when to send next:
// 0 at once, negative to back off.
func (l *Manager) register(ctx context.Context) time.Duration {
	req := kmsg.NewPtrBrokerRegistrationRequest()
	req.BrokerID, req.ClusterID, req.IncarnationID = l.cfg.BrokerID, l.cfg.ClusterID, l.cfg.IncarnationID
	for _, e := range l.cfg.Listeners {
		ln := kmsg.NewBrokerRegistrationRequestListener()
		ln.Name, ln.Host, ln.Port, ln.SecurityProtocol = e.Name, e.Host, e.Port, e.SecurityProtocol
		req.Listeners = append(req.Listeners, ln)
	}
	if l.cfg.Rack != "" {
		rack := l.cfg.Rack
		req.Rack = &rack
	}
	req.PreviousBrokerEpoch = l.cfg.PreviousBrokerEpoch
	rctx, cancel := context.WithTimeout(ctx, l.cfg.RequestTimeout)
	defer cancel()
	raw, err := l.cfg.Transport.Send(rctx, req)
	if err != nil {
		l.logger.Warn(fmt.Sprintf("Broker %d could not send its registration to the controller", l.cfg.BrokerID), "err", err)
		return -1
	}
	resp, ok := raw.(*kmsg.BrokerRegistrationResponse)
	if !ok {
		l.logger.Error(fmt.Sprintf("Broker %d got a %T to its registration", l.cfg.BrokerID, raw))
		return -1
	}
	if resp.ErrorCode != 0 {
		// NOT_CONTROLLER is the answer while the quorum elects its
		// leader (a single node's included): the next attempt goes to
		// another controller.
		if resp.ErrorCode != kerr.NotController.Code {
			l.logger.Warn(fmt.Sprintf("Broker %d registration failed: %v", l.cfg.BrokerID, kerr.ErrorForCode(resp.ErrorCode)))
		}
		if resp.ErrorCode == kerr.DuplicateBrokerRegistration.Code {
			return l.cfg.HeartbeatInterval
		}
		return -1
	}
	l.mu.Lock()
	l.epoch = resp.BrokerEpoch
	l.signalLocked()
	l.mu.Unlock()
	l.logger.Info(fmt.Sprintf("Registered broker %d with controller quorum", l.cfg.BrokerID), "brokerEpoch", resp.BrokerEpoch)
	return 0
}

// heartbeat sends one BrokerHeartbeat, applies the answer to the state
// machine, and returns when to send next: 0 at once, negative to back off.
func (l *Manager) heartbeat(ctx context.Context, epoch int64) time.Duration {
	l.mu.Lock()
	state, ready := l.state, l.ready
	l.mu.Unlock()
	req := kmsg.NewPtrBrokerHeartbeatRequest()
	req.BrokerID, req.BrokerEpoch = l.cfg.BrokerID, epoch
	req.CurrentMetadataOffset = l.cfg.MetadataOffset()
	req.WantFence = !ready && state != StatePendingControlledShutdown
	req.WantShutdown = state == StatePendingControlledShutdown
	rctx, cancel := context.WithTimeout(ctx, l.cfg.RequestTimeout)
	defer cancel()
	raw, err := l.cfg.Transport.Send(rctx, req)
	if err != nil {
		l.logger.Warn(fmt.Sprintf("Broker %d could not send a heartbeat to the controller", l.cfg.BrokerID), "err", err)
		return -1
	}
	resp, ok := raw.(*kmsg.BrokerHeartbeatResponse)
	if !ok {
		l.logger.Error(fmt.Sprintf("Broker %d got a %T to its heartbeat", l.cfg.BrokerID, raw))
		return -1
	}
	switch resp.ErrorCode {
	case 0:
	case kerr.StaleBrokerEpoch.Code, kerr.BrokerIDNotRegistered.Code:
		l.logger.Warn(fmt.Sprintf("Broker %d heartbeat at broker epoch %d: %v; registering again", l.cfg.BrokerID, epoch, kerr.ErrorForCode(resp.ErrorCode)))
		l.mu.Lock()
		if l.epoch == epoch {
			l.cfg.PreviousBrokerEpoch = epoch
			l.epoch = -1
			l.fenced = true
			l.signalLocked()
		}
		l.mu.Unlock()
		return 0
	default:
		if resp.ErrorCode != kerr.NotController.Code {
			l.logger.Warn(fmt.Sprintf("Broker %d heartbeat failed: %v", l.cfg.BrokerID, kerr.ErrorForCode(resp.ErrorCode)))
		}
		return -1
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.epoch != epoch {
		return 0
	}
	if l.fenced != resp.IsFenced {
		if resp.IsFenced && l.state == StateRunning {
			l.logger.Warn(fmt.Sprintf("Broker %d was fenced by the controller", l.cfg.BrokerID))
		}
		l.fenced = resp.IsFenced
		l.signalLocked()
	}
	switch l.state {
	case StateStarting:
		if resp.IsCaughtUp {
			l.logger.Info(fmt.Sprintf("Broker %d caught up with the metadata log at offset %d", l.cfg.BrokerID, req.CurrentMetadataOffset))
			l.setStateLocked(StateRecovery)
			return 0
		}
		// As Kafka's broker, ask again soon: the image is usually a
		// batch behind the registration that the controller just
		// committed.
		return catchUpRetry
	case StateRecovery:
		if !resp.IsFenced {
			l.logger.Info(fmt.Sprintf("Broker %d is unfenced at broker epoch %d", l.cfg.BrokerID, epoch))
			l.setStateLocked(StateRunning)
		}
	case StatePendingControlledShutdown:
		if resp.ShouldShutdown {
			l.logger.Info(fmt.Sprintf("Broker %d: the controller moved its leaderships away; shutting down", l.cfg.BrokerID))
			l.setStateLocked(StateShuttingDown)
			return 0
		}
	}
	return l.cfg.HeartbeatInterval
}
