package replica

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/faultline/faultline/broker/metadata"
	"github.com/faultline/faultline/broker/storage"
)

// ISRResult is the partition state the controller committed for an
// AlterPartition: the ISR and the epochs it holds at.
type ISRResult struct {
	LeaderEpoch    int32
	PartitionEpoch int32
	ISR            []int32
}

// ISRSender sends one AlterPartition to the active controller and returns
// what it committed. An error (the controller unreachable, or its refusal
// as a kerr error: FENCED_LEADER_EPOCH, INVALID_UPDATE_VERSION,
// INELIGIBLE_REPLICA, NOT_CONTROLLER, ...) leaves the ISR as it is; the
// change is proposed again on a later check if it still applies.
type ISRSender interface {
	AlterPartition(ctx context.Context, change ISRChange) (ISRResult, error)
}

// ISRLoopConfig configures an ISRLoop.
type ISRLoopConfig struct {
	Manager *Manager
	Sender  ISRSender
	// RetryMs is how long a refused or failed change waits before it is
	// proposed again at the same partition epoch; 0 uses half of
	// replica.lag.time.max.ms.
	RetryMs int64
	// TimeoutMs bounds one AlterPartition (default 30000).
	TimeoutMs int64
	Logger    *slog.Logger
}

// ISRLoop is the leader's ISR maintenance: every replica.lag.time.max.ms/2,
// and whenever a follower outside the ISR catches up, it sends the
// Manager's ISRChanges to the controller, one at a time, and installs the
// committed ISR at once (the image brings the same ISR later).
type ISRLoop struct {
	cfg    ISRLoopConfig
	m      *Manager
	logger *slog.Logger
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once

	// mu serializes Check; failed remembers, per partition, the partition
	// epoch of a refused change and when it may be sent again.
	mu     sync.Mutex
	failed map[storage.TopicPartition]failedChange
}

type failedChange struct {
	partitionEpoch int32
	leaderEpoch    int32
	isr            []int32
	retryAt        time.Time
}

// NewISRLoop makes the loop; Start runs it.
func NewISRLoop(cfg ISRLoopConfig) (*ISRLoop, error) {
	if cfg.Manager == nil || cfg.Sender == nil {
		return nil, errors.New("isr loop: needs a manager and a sender")
	}
	if cfg.RetryMs <= 0 {
		cfg.RetryMs = max(cfg.Manager.cfg.ReplicaLagTimeMaxMs/2, 1)
	}
	if cfg.TimeoutMs <= 0 {
		cfg.TimeoutMs = 30000
	}
	if cfg.Logger == nil {
		cfg.Logger = cfg.Manager.logger
	}
	return &ISRLoop{cfg: cfg, m: cfg.Manager, logger: cfg.Logger, done: make(chan struct{}), failed: map[storage.TopicPartition]failedChange{}}, nil
}

// Start runs the loop in a goroutine until Stop.
func (l *ISRLoop) Start() {
	ctx, cancel := context.WithCancel(context.Background())
	l.cancel = cancel
	go l.run(ctx)
}

// Stop ends the loop and waits for it. It may be called before Start.
func (l *ISRLoop) Stop() {
	l.once.Do(func() {
		if l.cancel == nil {
			close(l.done)
			return
		}
		l.cancel()
		<-l.done
	})
}

func (l *ISRLoop) run(ctx context.Context) {
	defer close(l.done)
	interval := time.Duration(max(l.m.cfg.ReplicaLagTimeMaxMs/2, 1)) * time.Millisecond
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-l.m.isrWake:
		}
		l.Check(ctx)
	}
}

// Check sends the ISR changes due now and installs those the controller
// commits; the loop calls it, tests may call it directly.
func (l *ISRLoop) Check(ctx context.Context) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.m.cfg.Now()
	im := l.m.image.Load()
	for _, ch := range l.m.ISRChanges(now.UnixMilli()) {
		if ctx.Err() != nil {
			return
		}
		// A change already in flight is sent again as it was: the
		// controller may have committed it.
		retry := slices.Equal(ch.NewISR, l.m.pendingISR(ch))
		if !retry {
			if ch = eligibleOnly(ch, im, l.m.isr(ch.TopicPartition)); ch.NewISR == nil {
				continue
			}
		}
		if f, ok := l.failed[ch.TopicPartition]; ok && f.partitionEpoch == ch.PartitionEpoch && f.leaderEpoch == ch.LeaderEpoch &&
			slices.Equal(f.isr, ch.NewISR) && now.Before(f.retryAt) {
			continue
		}
		if !retry && !l.m.propose(ch) {
			continue
		}
		l.logger.Info(fmt.Sprintf("[Partition %s broker=%d] Proposing ISR %v at leader epoch %d, partition epoch %d",
			ch.TopicPartition, l.m.cfg.NodeID, ch.NewISR, ch.LeaderEpoch, ch.PartitionEpoch))
		rctx, cancel := context.WithTimeout(ctx, time.Duration(l.cfg.TimeoutMs)*time.Millisecond)
		res, err := l.cfg.Sender.AlterPartition(rctx, ch)
		cancel()
		if err != nil {
			l.logger.Warn(fmt.Sprintf("[Partition %s broker=%d] Failed to alter ISR to %v", ch.TopicPartition, l.m.cfg.NodeID, ch.NewISR), "err", err)
			l.failed[ch.TopicPartition] = failedChange{partitionEpoch: ch.PartitionEpoch, leaderEpoch: ch.LeaderEpoch, isr: ch.NewISR,
				retryAt: now.Add(time.Duration(l.cfg.RetryMs) * time.Millisecond)}
			if committedNothing(err) {
				l.m.refused(ch)
			}
			continue
		}
		delete(l.failed, ch.TopicPartition)
		l.m.InstallISR(ch.TopicPartition.Topic, ch.TopicPartition.Partition, res)
	}
}

// committedNothing reports whether the controller's refusal means it
// rejected the change itself: an ineligible member or an invalid request.
// Kafka's leader goes back to its committed ISR on these, and so does
// this one. A moved partition epoch (INVALID_UPDATE_VERSION) is settled by
// the image that carries it; a lost answer, a timeout or NOT_CONTROLLER
// say nothing of what was committed: the change stays pending and is sent
// again.
func committedNothing(err error) bool {
	return errors.Is(err, kerr.IneligibleReplica) || errors.Is(err, kerr.InvalidRequest)
}

// pendingISR is the unsettled ISR change of the partition ch is about, nil
// when there is none at ch's epochs.
func (m *Manager) pendingISR(ch ISRChange) []int32 {
	var out []int32
	m.withLeaderState(ch, func(st *State) bool {
		out = slices.Clone(st.PendingISR)
		return false
	})
	return out
}

// propose records ch as in flight (State.Propose) and reports whether the
// partition is still led by this broker at ch's epochs.
func (m *Manager) propose(ch ISRChange) bool {
	return m.withLeaderState(ch, func(st *State) bool {
		return st.Propose(ch.NewISR)
	})
}

// refused settles ch after a refusal that committed nothing.
func (m *Manager) refused(ch ISRChange) {
	m.withLeaderState(ch, func(st *State) bool {
		if !slices.Equal(st.PendingISR, ch.NewISR) {
			return false
		}
		return st.ProposalRefused()
	})
}

// withLeaderState calls fn with the leader state of ch's partition if this
// broker still leads it at ch's leader and partition epochs, and publishes
// the high watermark when fn reports that it moved. It reports whether fn
// was called.
func (m *Manager) withLeaderState(ch ISRChange, fn func(st *State) (hwMoved bool)) bool {
	p := m.get(ch.TopicPartition.Topic, ch.TopicPartition.Partition)
	if p == nil {
		return false
	}
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.state != OnlineReplica {
		return false
	}
	p.stMu.Lock()
	st := p.st
	if st == nil || st.LeaderEpoch != ch.LeaderEpoch || st.PartitionEpoch != ch.PartitionEpoch {
		p.stMu.Unlock()
		return false
	}
	moved := fn(st)
	p.stMu.Unlock()
	if moved {
		p.publishHW()
		m.signalChanged()
	}
	return true
}

// InstallISR installs an ISR the controller committed for a partition this
// broker leads (from an AlterPartition answer), unless the partition moved
// on: another leader epoch, or an image with a newer partition epoch.
// acks=all waiters are woken: the high watermark may move, or the ISR fell
// below min.insync.replicas.
func (m *Manager) InstallISR(topic string, partition int32, res ISRResult) {
	p := m.get(topic, partition)
	if p == nil {
		return
	}
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.state != OnlineReplica || p.leaderEpoch != res.LeaderEpoch {
		return
	}
	p.stMu.Lock()
	if p.st == nil || res.PartitionEpoch <= p.st.PartitionEpoch {
		p.stMu.Unlock()
		return
	}
	before := slices.Clone(p.st.ISR)
	p.st.SetISR(res.ISR, res.PartitionEpoch)
	p.stMu.Unlock()
	m.countISRChange(p, before, res.ISR)
	p.publishHW()
	m.signalChanged()
}

// countISRChange logs and counts an ISR shrink or expansion.
func (m *Manager) countISRChange(p *partition, before, after []int32) {
	switch {
	case len(after) < len(before):
		m.isrShrinks.Inc()
		m.logger.Info(fmt.Sprintf("[Partition %s broker=%d] ISR updated to %v (shrank from %v)", p.tp, m.cfg.NodeID, after, before))
	case len(after) > len(before):
		m.isrExpands.Inc()
		m.logger.Info(fmt.Sprintf("[Partition %s broker=%d] ISR updated to %v (expanded from %v)", p.tp, m.cfg.NodeID, after, before))
	}
}

// wakeISR asks the ISR loop for an early check (a follower caught up).
func (m *Manager) wakeISR() {
	select {
	case m.isrWake <- struct{}{}:
	default:
	}
}

// eligibleOnly drops, from an expansion, the replicas that may not join an
// ISR (fenced or shutting down brokers, KAFKA-INTERNALS §3); NewISR is nil
// when nothing is left to change.
func eligibleOnly(ch ISRChange, im *metadata.Image, current []int32) ISRChange {
	out := ch.NewISR[:0:0]
	for _, r := range ch.NewISR {
		if slices.Contains(current, r) || im.Live(r) {
			out = append(out, r)
		}
	}
	if slices.Equal(out, current) {
		ch.NewISR = nil
		return ch
	}
	ch.NewISR = out
	return ch
}

// isr is the ISR of a partition this broker leads, nil otherwise.
func (m *Manager) isr(tp storage.TopicPartition) []int32 {
	p := m.get(tp.Topic, tp.Partition)
	if p == nil {
		return nil
	}
	p.mu.RLock()
	defer p.mu.RUnlock()
	p.stMu.Lock()
	defer p.stMu.Unlock()
	if p.st == nil {
		return nil
	}
	return slices.Clone(p.st.ISR)
}
