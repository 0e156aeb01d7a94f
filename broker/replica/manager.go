package replica

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/faultline/faultline/broker/config"
	"github.com/faultline/faultline/broker/metadata"
	"github.com/faultline/faultline/broker/storage"
)

// Settings are the parts of a topic's effective config the replica layer
// uses.
type Settings struct {
	Log               storage.LogConfig
	MinInsyncReplicas int
}

// LogStore creates, finds and deletes partition logs; *storage.LogManager is
// one.
type LogStore interface {
	GetOrCreateLog(tp storage.TopicPartition, cfg storage.LogConfig) (*storage.Log, error)
	GetLog(tp storage.TopicPartition) (*storage.Log, bool)
	DeleteLog(tp storage.TopicPartition) error
	Logs() map[storage.TopicPartition]*storage.Log
	// TruncateTo and TruncateFullyAndStartAt cut a follower's log and
	// checkpoint its recovery point before they return, so that a crash
	// right after cannot recover from a point above the new log end.
	TruncateTo(tp storage.TopicPartition, offset int64) error
	TruncateFullyAndStartAt(tp storage.TopicPartition, offset int64) error
	// IncrementLogStartOffset advances a log's start and checkpoints it
	// before it returns.
	IncrementLogStartOffset(tp storage.TopicPartition, offset int64) error
}

// Config configures a Manager.
type Config struct {
	NodeID int32
	Logs   LogStore
	// TopicSettings turns a topic's config overrides into its effective
	// settings; nil gives storage.DefaultLogConfig() and
	// min.insync.replicas 1 to every topic.
	TopicSettings func(overrides map[string]string) (Settings, error)
	// ReplicaLagTimeMaxMs mirrors replica.lag.time.max.ms (default 30000).
	ReplicaLagTimeMaxMs int64
	// Registerer receives the metrics; nil registers nothing.
	Registerer prometheus.Registerer
	Logger     *slog.Logger
	Now        func() time.Time
	// Unsafe are the planted bugs of this broker's replication; the zero
	// value is the safe broker.
	Unsafe Unsafe
}

// Manager holds the partitions of this broker. It follows the metadata image
// (ApplyImage): a partition whose replicas include this node gets a log, and
// the role the image gives it. The server answers Produce, Fetch,
// ListOffsets and OffsetForLeaderEpoch through it (server.Replicas).
type Manager struct {
	cfg    Config
	logger *slog.Logger

	mu    sync.RWMutex
	parts map[storage.TopicPartition]*partition

	image atomic.Pointer[metadata.Image]

	// applyMu serializes ApplyImage; failedTopics are topics with a
	// partition that failed to apply, retried with the next image.
	applyMu      sync.Mutex
	failedTopics map[string]bool

	changedMu sync.Mutex
	changed   chan struct{}

	// isrWake asks the ISR loop for an early check (capacity 1).
	isrWake chan struct{}

	isrShrinks prometheus.Counter
	isrExpands prometheus.Counter
}

// partition is one partition of this broker.
type partition struct {
	tp       storage.TopicPartition
	topicID  metadata.Uuid
	log      *storage.Log
	settings Settings

	// mu: role changes take it exclusively; produce and fetch share it, so
	// that a role never changes in the middle of an append.
	mu          sync.RWMutex
	state       ReplicaState
	leader      int32
	leaderEpoch int32

	// stMu guards st and hwMoved; appends and fetches update st under a
	// shared mu.
	stMu    sync.Mutex
	st      *State        // nil unless leader
	hwMoved chan struct{} // closed when the high watermark moves or the role changes
}

// New makes a Manager with no partitions; feed it images with ApplyImage.
func New(cfg Config) (*Manager, error) {
	if cfg.Logs == nil {
		return nil, errors.New("replica manager: no log store")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.ReplicaLagTimeMaxMs <= 0 {
		cfg.ReplicaLagTimeMaxMs = config.DefaultReplicaLagTimeMaxMs
	}
	if cfg.TopicSettings == nil {
		cfg.TopicSettings = func(map[string]string) (Settings, error) {
			return Settings{Log: storage.DefaultLogConfig(), MinInsyncReplicas: 1}, nil
		}
	}
	m := &Manager{
		cfg:          cfg,
		logger:       cfg.Logger,
		parts:        map[storage.TopicPartition]*partition{},
		changed:      make(chan struct{}),
		isrWake:      make(chan struct{}, 1),
		failedTopics: map[string]bool{},
		isrShrinks: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kafka_server_replica_manager_isr_shrinks_total",
			Help: "ISR shrinks of partitions this broker leads (IsrShrinksPerSec).",
		}),
		isrExpands: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kafka_server_replica_manager_isr_expands_total",
			Help: "ISR expansions of partitions this broker leads (IsrExpandsPerSec).",
		}),
	}
	m.image.Store(metadata.NewImage(""))
	if cfg.Registerer != nil {
		collectors := []prometheus.Collector{
			m.isrShrinks, m.isrExpands,
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{
				Name: "kafka_server_replica_manager_leader_count",
				Help: "Partitions this broker leads (LeaderCount).",
			}, func() float64 { return float64(m.count(func(p *partition) bool { return p.state == OnlineReplica })) }),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{
				Name: "kafka_server_replica_manager_partition_count",
				Help: "Partitions with a replica on this broker (PartitionCount).",
			}, func() float64 { return float64(m.count(func(*partition) bool { return true })) }),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{
				Name: "kafka_server_replica_manager_under_replicated_partitions",
				Help: "Partitions this broker leads whose ISR is smaller than their replica set (UnderReplicatedPartitions).",
			}, func() float64 { return float64(m.count(func(p *partition) bool { return p.underReplicated() })) }),
		}
		for _, c := range collectors {
			// A metric another component already exports under the same
			// name is not worth failing startup for: keep theirs.
			if err := cfg.Registerer.Register(c); err != nil {
				m.logger.Warn("Replica manager metric not registered; another component exports it", "err", err)
			}
		}
	}
	return m, nil
}

func (m *Manager) count(pred func(*partition) bool) int {
	m.mu.RLock()
	defer m.mu.RUnlock()
	n := 0
	for _, p := range m.parts {
		p.mu.RLock()
		if pred(p) {
			n++
		}
		p.mu.RUnlock()
	}
	return n
}

func (p *partition) underReplicated() bool {
	if p.state != OnlineReplica {
		return false
	}
	p.stMu.Lock()
	defer p.stMu.Unlock()
	return p.st != nil && p.st.UnderReplicated()
}

// Changed returns a channel that is closed the next time a
// log end offset or high watermark of any partition grows.
func (m *Manager) Changed() <-chan struct{} {
	m.changedMu.Lock()
	defer m.changedMu.Unlock()
	return m.changed
}

func (m *Manager) signalChanged() {
	m.changedMu.Lock()
	close(m.changed)
	m.changed = make(chan struct{})
	m.changedMu.Unlock()
}

func (m *Manager) get(topic string, partition int32) *partition {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.parts[storage.TopicPartition{Topic: topic, Partition: partition}]
}

// State returns the replica state of a partition on this broker.
func (m *Manager) State(topic string, partition int32) ReplicaState {
	p := m.get(topic, partition)
	if p == nil {
		return NonExistentReplica
	}
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.state
}

// HighWatermark returns a partition's high watermark, or -1 when this broker
// has no replica of it.
func (m *Manager) HighWatermark(topic string, partition int32) int64 {
	p := m.get(topic, partition)
	if p == nil {
		return -1
	}
	return p.log.HighWatermark()
}

// ApplyImage brings the partitions in line with a new metadata image; use it
// as a metadata.Publisher subscriber. Partitions whose replicas include this
// node get a log and the role the image names: leader, follower, or offline
// when the partition has no leader. Partitions that are gone from the image
// (topic deleted, replica moved away) have their logs deleted. Failures are
// logged and leave the partition offline: one bad partition must not stop
// the others.
func (m *Manager) ApplyImage(prev, next *metadata.Image) {
	if next == nil {
		return
	}
	m.image.Store(next)
	nowMs := m.cfg.Now().UnixMilli()
	want := map[storage.TopicPartition]bool{}
	m.applyMu.Lock()
	defer m.applyMu.Unlock()
	var jobs []applyJob
	for _, name := range next.TopicNames() {
		t := next.Topics[name]
		// Images are copy on write: a topic whose pointer did not change
		// did not change, and was applied with the previous image.
		unchanged := prev != nil && prev.Topics[name] == t && !m.failedTopics[name]
		delete(m.failedTopics, name)
		var settings Settings
		var settingsErr error
		if !unchanged {
			if settings, settingsErr = m.cfg.TopicSettings(t.Configs); settingsErr != nil {
				settingsErr = fmt.Errorf("config of topic %s: %w", t.Name, settingsErr)
			}
		}
		for _, pt := range t.Partitions {
			if !slices.Contains(pt.Replicas, m.cfg.NodeID) {
				continue
			}
			tp := storage.TopicPartition{Topic: t.Name, Partition: pt.Partition}
			want[tp] = true
			if unchanged {
				continue
			}
			jobs = append(jobs, applyJob{t: t, pt: pt, tp: tp, settings: settings, err: settingsErr})
		}
	}
	m.applyPartitions(jobs, nowMs)
	for _, j := range jobs {
		if j.err != nil {
			m.failedTopics[j.t.Name] = true
			m.logger.Error(fmt.Sprintf("Partition %s could not take its role from the metadata image", j.tp), "err", j.err)
		}
	}
	m.mu.RLock()
	var gone []*partition
	for tp, p := range m.parts {
		if !want[tp] {
			gone = append(gone, p)
		}
	}
	m.mu.RUnlock()
	sort.Slice(gone, func(i, j int) bool { return gone[i].tp.String() < gone[j].tp.String() })
	for _, p := range gone {
		if err := m.deletePartition(p); err != nil {
			m.logger.Error(fmt.Sprintf("Deleting partition %s failed", p.tp), "err", err)
		}
	}
	m.signalChanged()
}

// applyJob is one partition whose role an image changes.
type applyJob struct {
	t        *metadata.Topic
	pt       metadata.Partition
	tp       storage.TopicPartition
	settings Settings
	err      error
}

// applyWorkersMax bounds the partitions that take their roles at once.
// Becoming leader writes the leader-epoch checkpoint with an fsync; a
// broker starting with a thousand partitions spends its start waiting for
// them one by one unless they overlap.
const applyWorkersMax = 16

// applyPartitions applies each job (distinct partitions) with a bounded
// pool of workers, leaving each job's error in it.
func (m *Manager) applyPartitions(jobs []applyJob, nowMs int64) {
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(applyWorkersMax, len(jobs)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				j := &jobs[i]
				if j.err == nil {
					j.err = m.applyPartition(j.t, j.pt, j.tp, j.settings, nowMs)
				}
			}
		}()
	}
	for i := range jobs {
		next <- i
	}
	close(next)
	wg.Wait()
}

func (m *Manager) applyPartition(t *metadata.Topic, pt metadata.Partition, tp storage.TopicPartition, settings Settings, nowMs int64) error {
	p := m.get(tp.Topic, tp.Partition)
	if p != nil && p.topicID != (metadata.Uuid{}) && p.topicID != t.ID {
		// The topic was deleted and created again under the same name.
		if err := m.deletePartition(p); err != nil {
			return err
		}
		p = nil
	}
	if p == nil {
		created := settings
		if created.Log.Validate() != nil {
			// A topic whose overrides the log refuses (written before
			// the controller checked them) still gets its replica, on
			// the broker's default log settings; the SetConfig below
			// logs why.
			if def, err := m.cfg.TopicSettings(nil); err == nil {
				created.Log = def.Log
			}
		}
		log, err := m.cfg.Logs.GetOrCreateLog(tp, created.Log)
		if err != nil {
			return fmt.Errorf("create log: %w", err)
		}
		p = &partition{tp: tp, topicID: t.ID, log: log, settings: created, state: NewReplica, leader: -1, leaderEpoch: -1, hwMoved: make(chan struct{})}
		m.mu.Lock()
		m.parts[tp] = p
		m.mu.Unlock()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.topicID = t.ID
	if settings.Log != p.settings.Log {
		if err := p.log.SetConfig(settings.Log); err != nil {
			// The log keeps its settings (the next image of the topic
			// tries again) but the partition still takes its role: a
			// config the log refuses must not freeze leadership changes.
			m.logger.Error(fmt.Sprintf("Partition %s keeps its log config: the log refuses topic %s's", tp, t.Name), "err", err)
		} else {
			p.settings.Log = settings.Log
		}
	}
	if settings.MinInsyncReplicas != p.settings.MinInsyncReplicas {
		p.settings.MinInsyncReplicas = settings.MinInsyncReplicas
		p.stMu.Lock()
		if p.st != nil {
			p.st.MinInsyncReplicas = settings.MinInsyncReplicas
		}
		p.stMu.Unlock()
	}
	switch {
	case pt.Leader == m.cfg.NodeID:
		if p.state == OnlineReplica && p.leaderEpoch == pt.LeaderEpoch {
			p.stMu.Lock()
			if pt.PartitionEpoch < p.st.PartitionEpoch {
				// The AlterPartition answer already installed a newer ISR.
				p.stMu.Unlock()
				return nil
			}
			before := slices.Clone(p.st.ISR)
			p.st.SetISR(pt.ISR, pt.PartitionEpoch)
			p.stMu.Unlock()
			m.countISRChange(p, before, pt.ISR)
			// Waiters re-check: the high watermark may have moved, or the
			// ISR fell below min.insync.replicas.
			p.publishHW()
			return nil
		}
		return m.becomeLeader(p, pt, nowMs)
	case pt.Leader == metadata.NoLeader:
		m.setRole(p, OfflineReplica, pt)
	default:
		// Issue 3: start fetching from pt.Leader, truncating first.
		m.setRole(p, OnlineFetchingReplica, pt)
	}
	return nil
}

// becomeLeader makes p the leader of pt's epoch. Callers hold p.mu.
func (m *Manager) becomeLeader(p *partition, pt metadata.Partition, nowMs int64) error {
	leo := p.log.LogEndOffset()
	if latest, ok := p.log.LatestEpoch(); !ok || latest < pt.LeaderEpoch {
		if err := p.log.AssignEpochStartOffset(pt.LeaderEpoch, leo); err != nil {
			m.setRole(p, OfflineReplica, pt)
			return fmt.Errorf("become leader: %w", err)
		}
	}
	st := NewLeaderState(m.cfg.NodeID, pt.LeaderEpoch, pt.PartitionEpoch, pt.Replicas, pt.ISR, p.settings.MinInsyncReplicas, leo, p.log.HighWatermark(), nowMs)
	st.HWFromLeaderLEO = m.cfg.Unsafe.HWFromLeaderLEO
	st.ISRBeforeCommit = m.cfg.Unsafe.SkipEpochFencing
	p.log.UpdateHighWatermark(st.HW)
	m.transition(p, OnlineReplica)
	p.leader, p.leaderEpoch = pt.Leader, pt.LeaderEpoch
	p.stMu.Lock()
	p.st = st
	close(p.hwMoved)
	p.hwMoved = make(chan struct{})
	p.stMu.Unlock()
	m.logger.Info(fmt.Sprintf("Partition %s: leader at epoch %d from offset %d with partition epoch %d, high watermark %d, ISR %v",
		p.tp, pt.LeaderEpoch, leo, pt.PartitionEpoch, st.HW, pt.ISR))
	return nil
}

// setRole moves p to a non-leader state. Callers hold p.mu.
func (m *Manager) setRole(p *partition, state ReplicaState, pt metadata.Partition) {
	if p.state != state {
		m.logger.Info(fmt.Sprintf("Partition %s: %s, leader %d at epoch %d", p.tp, state, pt.Leader, pt.LeaderEpoch))
	}
	m.transition(p, state)
	p.leader, p.leaderEpoch = pt.Leader, pt.LeaderEpoch
	p.stMu.Lock()
	p.st = nil
	close(p.hwMoved)
	p.hwMoved = make(chan struct{})
	p.stMu.Unlock()
}

// transition changes p.state, logging moves the state machine does not
// list (they are bugs, but not worth stopping a broker for).
func (m *Manager) transition(p *partition, to ReplicaState) {
	if p.state != to && !CanTransition(p.state, to) {
		m.logger.Warn(fmt.Sprintf("Partition %s: unexpected replica state change %s -> %s", p.tp, p.state, to))
	}
	p.state = to
}

func (m *Manager) deletePartition(p *partition) error {
	p.mu.Lock()
	m.transition(p, DeletingReplica)
	p.stMu.Lock()
	p.st = nil
	close(p.hwMoved)
	p.hwMoved = make(chan struct{})
	p.stMu.Unlock()
	err := m.cfg.Logs.DeleteLog(p.tp)
	m.transition(p, NonExistentReplica)
	p.mu.Unlock()
	m.mu.Lock()
	if m.parts[p.tp] == p {
		delete(m.parts, p.tp)
	}
	m.mu.Unlock()
	if err != nil {
		return fmt.Errorf("delete log of %s: %w", p.tp, err)
	}
	m.logger.Info(fmt.Sprintf("Deleted log for partition %s", p.tp))
	return nil
}

// DeleteStrayLogs deletes every log that im does not place on this broker:
// logs of topics deleted while this broker was down or crashed before it
// finished deleting them. Left alone, such a log would resurface as the
// content of a new topic with the same name. The metadata log
// (__cluster_metadata) is never touched. Call it once at startup, after
// the metadata log has been replayed (im must be complete; an image still
// loading would make every log look stray). It returns the deleted
// partitions.
func (m *Manager) DeleteStrayLogs(im *metadata.Image) []storage.TopicPartition {
	var stray []storage.TopicPartition
	for tp := range m.cfg.Logs.Logs() {
		if tp.Topic == metadataTopic {
			continue
		}
		if p := im.Partition(tp.Topic, tp.Partition); p != nil && slices.Contains(p.Replicas, m.cfg.NodeID) {
			continue
		}
		stray = append(stray, tp)
	}
	sort.Slice(stray, func(i, j int) bool { return stray[i].String() < stray[j].String() })
	var deleted []storage.TopicPartition
	for _, tp := range stray {
		m.logger.Info(fmt.Sprintf("Deleting stray log %s: the metadata image places no replica of it on broker %d", tp, m.cfg.NodeID))
		if p := m.get(tp.Topic, tp.Partition); p != nil {
			if err := m.deletePartition(p); err != nil {
				m.logger.Error(fmt.Sprintf("Deleting stray log %s failed", tp), "err", err)
				continue
			}
		} else if err := m.cfg.Logs.DeleteLog(tp); err != nil {
			m.logger.Error(fmt.Sprintf("Deleting stray log %s failed", tp), "err", err)
			continue
		}
		deleted = append(deleted, tp)
	}
	return deleted
}

// ISRChange is an ISR change a leader wants the controller to make (the
// content of an AlterPartition request).
type ISRChange struct {
	TopicPartition storage.TopicPartition
	TopicID        metadata.Uuid
	LeaderEpoch    int32
	PartitionEpoch int32
	NewISR         []int32
}

// ISRChanges returns, for every partition this broker leads, the ISR it
// should have now: out-of-sync followers (no catch-up within
// replica.lag.time.max.ms) removed, or caught-up replicas added; while a
// change is in flight (State.PendingISR), that change again. With a single
// node every ISR is the leader alone and there is never a change; the
// ISRLoop sends these to the controller.
func (m *Manager) ISRChanges(nowMs int64) []ISRChange {
	m.mu.RLock()
	parts := make([]*partition, 0, len(m.parts))
	for _, p := range m.parts {
		parts = append(parts, p)
	}
	m.mu.RUnlock()
	sort.Slice(parts, func(i, j int) bool { return parts[i].tp.String() < parts[j].tp.String() })
	var out []ISRChange
	for _, p := range parts {
		p.mu.RLock()
		p.stMu.Lock()
		if p.state == OnlineReplica && p.st != nil {
			// An unsettled change is sent again as it was, and nothing
			// else is proposed until it settles.
			isr := p.st.PendingISR
			if isr == nil {
				isr = p.st.ShrinkISR(nowMs, m.cfg.ReplicaLagTimeMaxMs)
			}
			if isr == nil {
				isr = p.st.ExpandISR()
			}
			if isr != nil {
				out = append(out, ISRChange{TopicPartition: p.tp, TopicID: p.topicID, LeaderEpoch: p.st.LeaderEpoch, PartitionEpoch: p.st.PartitionEpoch, NewISR: isr})
			}
		}
		p.stMu.Unlock()
		p.mu.RUnlock()
	}
	return out
}

// metadataTopic is the metadata log's topic (quorum.MetadataTopic; not
// imported to keep the replica layer independent of the quorum).
const metadataTopic = "__cluster_metadata"

// publishHW writes the state's high watermark to the log and wakes waiters.
func (p *partition) publishHW() {
	p.stMu.Lock()
	defer p.stMu.Unlock()
	if p.st != nil {
		p.log.UpdateHighWatermark(p.st.HW)
	}
	close(p.hwMoved)
	p.hwMoved = make(chan struct{})
}

// errorCode maps a storage error to the Kafka error code a producer sees.
func errorCode(err error) int16 {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, storage.ErrCorruptBatch), errors.Is(err, storage.ErrIncompleteBatch):
		return kerr.CorruptMessage.Code
	case errors.Is(err, storage.ErrRecordTooLarge):
		return kerr.MessageTooLarge.Code
	case errors.Is(err, storage.ErrOutOfOrderSequence):
		return kerr.OutOfOrderSequenceNumber.Code
	case errors.Is(err, storage.ErrInvalidProducerEpoch):
		return kerr.InvalidProducerEpoch.Code
	case errors.Is(err, storage.ErrUnsupportedMagic):
		return kerr.UnsupportedForMessageFormat.Code
	case errors.Is(err, storage.ErrUnsupportedCompression):
		return kerr.UnsupportedCompressionType.Code
	case errors.Is(err, storage.ErrInvalidRecord):
		return kerr.InvalidRecord.Code
	case errors.Is(err, storage.ErrInvalidTimestamp):
		return kerr.InvalidTimestamp.Code
	case errors.Is(err, storage.ErrOffsetOutOfRange):
		return kerr.OffsetOutOfRange.Code
	case errors.Is(err, storage.ErrLogClosed):
		return kerr.NotLeaderForPartition.Code
	case errors.Is(err, storage.ErrTransactionCoordinatorFenced):
		return kerr.TransactionCoordinatorFenced.Code
	}
	return kerr.KafkaStorageError.Code
}

// clientError reports whether a storage error is the client's fault (bad
// records), as opposed to a failure of this broker's disk.
func clientError(code int16) bool {
	return code != kerr.KafkaStorageError.Code && code != kerr.NotLeaderForPartition.Code
}

// unknownOrNotLeader is the error for a partition this broker has no
// leader replica of.
func (m *Manager) unknownOrNotLeader(topic string, partition int32) int16 {
	if m.image.Load().Partition(topic, partition) == nil {
		return kerr.UnknownTopicOrPartition.Code
	}
	return kerr.NotLeaderForPartition.Code
}

// checkLeaderEpoch compares a client's current leader epoch with ours.
func checkLeaderEpoch(current, ours int32) int16 {
	switch {
	case current < 0 || current == ours:
		return 0
	case current < ours:
		return kerr.FencedLeaderEpoch.Code
	default:
		return kerr.UnknownLeaderEpoch.Code
	}
}
