package replica

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/faultline/faultline/broker/config"
	"github.com/faultline/faultline/broker/metadata"
	"github.com/faultline/faultline/broker/storage"
)

// BrokerClient sends requests to one broker over one connection (or pool).
type BrokerClient interface {
	Request(ctx context.Context, req kmsg.Request) (kmsg.Response, error)
	Close()
}

// Dialer opens a client to a broker at addr ("host:port"). Tests wrap it to
// cut or slow links between brokers.
type Dialer interface {
	Dial(ctx context.Context, brokerID int32, addr string) (BrokerClient, error)
}

// KgoDialer dials with a franz-go client pinned to the one broker: requests
// go to its seed broker, with the API versions franz-go negotiated.
type KgoDialer struct {
	// Opts are extra client options (TLS, SASL, client id, ...).
	Opts []kgo.Opt
	// DialConn opens the connection; nil uses franz-go's dialer. Tests put a
	// fault switch here.
	DialConn func(ctx context.Context, network, addr string) (net.Conn, error)
}

// Dial implements Dialer.
func (d KgoDialer) Dial(_ context.Context, brokerID int32, addr string) (BrokerClient, error) {
	opts := append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.ClientID("faultline-replica-fetcher")}, d.Opts...)
	if d.DialConn != nil {
		opts = append(opts, kgo.Dialer(d.DialConn))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("client to broker %d at %s: %w", brokerID, addr, err)
	}
	seeds := cl.SeedBrokers()
	if len(seeds) == 0 {
		cl.Close()
		return nil, fmt.Errorf("client to broker %d at %s: no seed broker", brokerID, addr)
	}
	return kgoClient{cl: cl, b: seeds[0]}, nil
}

type kgoClient struct {
	cl *kgo.Client
	b  *kgo.Broker
}

func (c kgoClient) Request(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	return c.b.Request(ctx, req)
}

func (c kgoClient) Close() { c.cl.Close() }

// FetcherConfig configures a Fetcher. Zero values take Kafka's defaults.
type FetcherConfig struct {
	Manager *Manager
	Dialer  Dialer // nil: KgoDialer{}
	// ListenerName picks the leader's endpoint (inter.broker.listener.name);
	// empty uses the broker's first endpoint (Broker.Host/Port).
	ListenerName string
	// MaxWaitMs mirrors replica.fetch.wait.max.ms (500).
	MaxWaitMs int32
	// MinBytes mirrors replica.fetch.min.bytes (1).
	MinBytes int32
	// PartitionMaxBytes mirrors replica.fetch.max.bytes (1048576).
	PartitionMaxBytes int32
	// MaxBytes mirrors replica.fetch.response.max.bytes (10485760).
	MaxBytes int32
	// BackoffMs mirrors replica.fetch.backoff.ms (1000): the pause after a
	// failed request, and the longest a partition the leader refused
	// (NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH, ...) waits for a new
	// image before it is tried again.
	BackoffMs int64
	// Registerer receives the fetcher metrics; nil registers nothing.
	Registerer prometheus.Registerer
	Logger     *slog.Logger
}

// Fetcher is the follower side of replication: one goroutine per source
// broker (a leader of partitions this broker follows) sends Fetch requests
// for all of them and hands the answers to Manager.ApplyFetchResponse.
// Subscribe its ApplyImage to the metadata publisher after the Manager's
// ApplyImage, so it sees the roles that image gave.
type Fetcher struct {
	cfg    FetcherConfig
	m      *Manager
	logger *slog.Logger

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	stopped bool
	sources map[int32]*source

	failedRequests prometheus.Counter
}

// NewFetcher makes a Fetcher with no sources; ApplyImage starts them.
func NewFetcher(cfg FetcherConfig) (*Fetcher, error) {
	if cfg.Manager == nil {
		return nil, errors.New("replica fetcher: no manager")
	}
	if cfg.Dialer == nil {
		cfg.Dialer = KgoDialer{}
	}
	if cfg.MaxWaitMs <= 0 {
		cfg.MaxWaitMs = config.DefaultReplicaFetchWaitMaxMs
	}
	if cfg.MinBytes <= 0 {
		cfg.MinBytes = 1
	}
	if cfg.PartitionMaxBytes <= 0 {
		cfg.PartitionMaxBytes = config.DefaultReplicaFetchMaxBytes
	}
	if cfg.MaxBytes <= 0 {
		cfg.MaxBytes = config.DefaultReplicaFetchResponseMaxBytes
	}
	if cfg.BackoffMs <= 0 {
		cfg.BackoffMs = config.DefaultReplicaFetchBackoffMs
	}
	if cfg.Logger == nil {
		cfg.Logger = cfg.Manager.logger
	}
	ctx, cancel := context.WithCancel(context.Background())
	f := &Fetcher{cfg: cfg, m: cfg.Manager, logger: cfg.Logger, ctx: ctx, cancel: cancel, sources: map[int32]*source{},
		failedRequests: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kafka_server_replica_fetcher_failed_requests_total",
			Help: "Fetch requests to leaders that failed (connection or request errors).",
		}),
	}
	if cfg.Registerer != nil {
		for _, c := range []prometheus.Collector{f.failedRequests,
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{
				Name: "kafka_server_replica_fetcher_manager_max_lag",
				Help: "The largest lag in messages of a followed partition behind its leader's high watermark (ReplicaFetcherManager MaxLag).",
			}, func() float64 { return float64(f.MaxLag()) }),
		} {
			if err := cfg.Registerer.Register(c); err != nil {
				f.logger.Warn("Replica fetcher metric not registered; another component exports it", "err", err)
			}
		}
	}
	return f, nil
}

// MaxLag is the largest lag of a followed partition: the leader's high
// watermark in its last answer minus this broker's log end, at least 0.
func (f *Fetcher) MaxLag() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	var lag int64
	for _, s := range f.sources {
		s.mu.Lock()
		for _, p := range s.parts {
			lag = max(lag, p.lag)
		}
		s.mu.Unlock()
	}
	return lag
}

// followed is a partition this broker follows, as its role says.
type followed struct {
	tp          storage.TopicPartition
	topicID     metadata.Uuid
	leader      int32
	leaderEpoch int32
}

// followedPartitions lists the partitions in a follower state, by leader.
func (m *Manager) followedPartitions() map[int32][]followed {
	m.mu.RLock()
	parts := make([]*partition, 0, len(m.parts))
	for _, p := range m.parts {
		parts = append(parts, p)
	}
	m.mu.RUnlock()
	out := map[int32][]followed{}
	for _, p := range parts {
		p.mu.RLock()
		if (p.state == OnlineFetchingReplica || p.state == TruncatingLog) && p.leader >= 0 && p.leader != m.cfg.NodeID {
			out[p.leader] = append(out[p.leader], followed{tp: p.tp, topicID: p.topicID, leader: p.leader, leaderEpoch: p.leaderEpoch})
		}
		p.mu.RUnlock()
	}
	for _, fs := range out {
		sort.Slice(fs, func(i, j int) bool { return fs[i].tp.String() < fs[j].tp.String() })
	}
	return out
}

// ApplyImage reconciles the fetchers with the roles of the Manager after an
// image: a goroutine per leader this broker follows partitions of, each
// with the current partition set and epochs. Partitions a leader refused
// are retried at once. Subscribe it after Manager.ApplyImage.
func (f *Fetcher) ApplyImage(_, next *metadata.Image) {
	if next == nil {
		return
	}
	want := f.m.followedPartitions()
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.stopped {
		return
	}
	for id, s := range f.sources {
		if _, ok := want[id]; !ok {
			f.logger.Info(fmt.Sprintf("[ReplicaFetcher replicaId=%d, leaderId=%d] Stopped: no partitions left to fetch", f.m.cfg.NodeID, id))
			s.cancel()
			delete(f.sources, id)
		}
	}
	for id, parts := range want {
		s := f.sources[id]
		if s == nil {
			s = f.newSource(id)
			f.sources[id] = s
			f.wg.Add(1)
			go s.run()
		}
		s.setPartitions(parts)
	}
}

// Sources returns the ids of the leaders being fetched from, sorted.
func (f *Fetcher) Sources() []int32 {
	f.mu.Lock()
	defer f.mu.Unlock()
	ids := make([]int32, 0, len(f.sources))
	for id := range f.sources {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	return ids
}

// Stop stops every fetcher goroutine and waits for them. A stopped Fetcher
// ignores images.
func (f *Fetcher) Stop() {
	f.mu.Lock()
	f.stopped = true
	f.sources = map[int32]*source{}
	f.mu.Unlock()
	f.cancel()
	f.wg.Wait()
}

// source fetches from one leader.
type source struct {
	f      *Fetcher
	id     int32
	ctx    context.Context
	cancel context.CancelFunc
	logger *slog.Logger

	mu    sync.Mutex
	parts map[storage.TopicPartition]*fetchPart
	wake  chan struct{} // capacity 1: the partition set changed

	client BrokerClient
	addr   string
}

type fetchPart struct {
	followed
	// blockedUntil: the leader refused the partition; skip it until then
	// or until the next image.
	blockedUntil time.Time
	lag          int64
}

func (f *Fetcher) newSource(id int32) *source {
	ctx, cancel := context.WithCancel(f.ctx)
	f.logger.Info(fmt.Sprintf("[ReplicaFetcher replicaId=%d, leaderId=%d] Starting", f.m.cfg.NodeID, id))
	return &source{
		f: f, id: id, ctx: ctx, cancel: cancel,
		logger: f.logger.With("leader", id),
		parts:  map[storage.TopicPartition]*fetchPart{},
		wake:   make(chan struct{}, 1),
	}
}

func (s *source) setPartitions(parts []followed) {
	s.mu.Lock()
	next := make(map[storage.TopicPartition]*fetchPart, len(parts))
	for _, p := range parts {
		next[p.tp] = &fetchPart{followed: p}
		if old := s.parts[p.tp]; old != nil {
			next[p.tp].lag = old.lag
		}
	}
	s.parts = next
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// sent is one partition of a request in flight.
type sent struct {
	tp          storage.TopicPartition
	leaderEpoch int32
}

// buildRequest makes the next Fetch from the partitions' positions. It
// returns nil when there is nothing to fetch, with the time the earliest
// blocked partition may be tried again (zero for none).
func (s *source) buildRequest() (*kmsg.FetchRequest, map[string]map[int32]sent, time.Time) {
	s.mu.Lock()
	parts := make([]*fetchPart, 0, len(s.parts))
	for _, p := range s.parts {
		parts = append(parts, p)
	}
	s.mu.Unlock()
	sort.Slice(parts, func(i, j int) bool { return parts[i].tp.String() < parts[j].tp.String() })
	m := s.f.m
	now := time.Now()
	var retry time.Time
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = m.cfg.NodeID
	req.ReplicaState.ID = m.cfg.NodeID
	req.ReplicaState.Epoch = -1
	if b, ok := m.image.Load().Brokers[m.cfg.NodeID]; ok {
		req.ReplicaState.Epoch = b.Epoch
	}
	req.MaxWaitMillis = s.f.cfg.MaxWaitMs
	req.MinBytes = s.f.cfg.MinBytes
	req.MaxBytes = s.f.cfg.MaxBytes
	req.SessionID, req.SessionEpoch = 0, -1
	inflight := map[string]map[int32]sent{}
	topics := map[string]int{}
	for _, p := range parts {
		s.mu.Lock()
		blocked := p.blockedUntil
		s.mu.Unlock()
		if now.Before(blocked) {
			if retry.IsZero() || blocked.Before(retry) {
				retry = blocked
			}
			continue
		}
		pos, ok := m.FollowerPosition(p.tp.Topic, p.tp.Partition)
		if !ok || pos.Leader != s.id {
			continue
		}
		i, ok := topics[p.tp.Topic]
		if !ok {
			rt := kmsg.NewFetchRequestTopic()
			rt.Topic, rt.TopicID = p.tp.Topic, p.topicID
			req.Topics = append(req.Topics, rt)
			i = len(req.Topics) - 1
			topics[p.tp.Topic] = i
			inflight[p.tp.Topic] = map[int32]sent{}
		}
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition = p.tp.Partition
		rp.CurrentLeaderEpoch = pos.LeaderEpoch
		rp.FetchOffset = pos.FetchOffset
		rp.LastFetchedEpoch = pos.LastFetchedEpoch
		rp.LogStartOffset = pos.LogStartOffset
		rp.PartitionMaxBytes = s.f.cfg.PartitionMaxBytes
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, rp)
		inflight[p.tp.Topic][p.tp.Partition] = sent{tp: p.tp, leaderEpoch: pos.LeaderEpoch}
	}
	if len(req.Topics) == 0 {
		return nil, nil, retry
	}
	return req, inflight, retry
}

// leaderAddr is the leader's address in the newest image.
func (s *source) leaderAddr() (string, error) {
	b, ok := s.f.m.image.Load().Brokers[s.id]
	if !ok {
		return "", fmt.Errorf("broker %d is not in the metadata image", s.id)
	}
	host, port := b.Host, int(b.Port)
	if name := s.f.cfg.ListenerName; name != "" {
		found := false
		for _, e := range b.Endpoints {
			if e.Name == name {
				host, port, found = e.Host, int(e.Port), true
				break
			}
		}
		if !found {
			return "", fmt.Errorf("broker %d has no listener %s", s.id, name)
		}
	}
	if host == "" || port <= 0 {
		return "", fmt.Errorf("broker %d has no address", s.id)
	}
	return net.JoinHostPort(host, strconv.Itoa(port)), nil
}

// conn returns the client to the leader, redialling when its address moved.
func (s *source) conn() (BrokerClient, error) {
	addr, err := s.leaderAddr()
	if err != nil {
		return nil, err
	}
	if s.client != nil && s.addr == addr {
		return s.client, nil
	}
	s.closeConn()
	cl, err := s.f.cfg.Dialer.Dial(s.ctx, s.id, addr)
	if err != nil {
		return nil, err
	}
	s.client, s.addr = cl, addr
	return cl, nil
}

func (s *source) closeConn() {
	if s.client != nil {
		s.client.Close()
		s.client, s.addr = nil, ""
	}
}

// pause waits for d, a partition-set change or the end of the fetcher.
func (s *source) pause(d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-s.wake:
	case <-s.ctx.Done():
	}
}

func (s *source) run() {
	defer s.f.wg.Done()
	defer s.closeConn()
	backoff := time.Duration(s.f.cfg.BackoffMs) * time.Millisecond
	failures := 0
	for s.ctx.Err() == nil {
		req, inflight, retry := s.buildRequest()
		if req == nil {
			d := time.Hour
			if !retry.IsZero() {
				d = max(time.Until(retry), time.Millisecond)
			}
			s.pause(d)
			continue
		}
		resp, err := s.fetch(req)
		if err != nil {
			if s.ctx.Err() != nil {
				return
			}
			failures++
			s.f.failedRequests.Inc()
			// The first failure is worth a line; a leader that stays away
			// is worth one every few attempts.
			if failures == 1 || failures%30 == 0 {
				s.logger.Warn(fmt.Sprintf("[ReplicaFetcher replicaId=%d, leaderId=%d] Error sending fetch request; backing off %s", s.f.m.cfg.NodeID, s.id, backoff), "err", err, "failures", failures)
			}
			s.closeConn()
			s.pause(backoff)
			continue
		}
		if failures > 0 {
			s.logger.Info(fmt.Sprintf("[ReplicaFetcher replicaId=%d, leaderId=%d] Fetching again after %d failed attempts", s.f.m.cfg.NodeID, s.id, failures))
			failures = 0
		}
		if resp.ErrorCode != 0 {
			s.logger.Warn(fmt.Sprintf("[ReplicaFetcher replicaId=%d, leaderId=%d] Fetch failed; backing off %s", s.f.m.cfg.NodeID, s.id, backoff), "err", kerr.ErrorForCode(resp.ErrorCode))
			s.pause(backoff)
			continue
		}
		s.apply(resp, inflight, backoff)
	}
}

func (s *source) fetch(req *kmsg.FetchRequest) (*kmsg.FetchResponse, error) {
	cl, err := s.conn()
	if err != nil {
		return nil, err
	}
	kresp, err := cl.Request(s.ctx, req)
	if err != nil {
		return nil, fmt.Errorf("fetch from broker %d: %w", s.id, err)
	}
	resp, ok := kresp.(*kmsg.FetchResponse)
	if !ok {
		return nil, fmt.Errorf("fetch from broker %d: unexpected response %T", s.id, kresp)
	}
	return resp, nil
}

// apply hands each partition's answer to the Manager.
func (s *source) apply(resp *kmsg.FetchResponse, inflight map[string]map[int32]sent, backoff time.Duration) {
	byID := map[metadata.Uuid]string{}
	s.mu.Lock()
	for _, p := range s.parts {
		byID[p.topicID] = p.tp.Topic
	}
	s.mu.Unlock()
	for _, t := range resp.Topics {
		name := t.Topic
		if _, ok := inflight[name]; !ok {
			name = byID[metadata.Uuid(t.TopicID)]
		}
		for _, rp := range t.Partitions {
			snt, ok := inflight[name][rp.Partition]
			if !ok {
				continue
			}
			res := LeaderData{
				ErrorCode:      rp.ErrorCode,
				HighWatermark:  rp.HighWatermark,
				LogStartOffset: rp.LogStartOffset,
				Records:        rp.RecordBatches,
			}
			if rp.DivergingEpoch.Epoch >= 0 || rp.DivergingEpoch.EndOffset >= 0 {
				res.DivergingEpoch = &DivergingEpoch{Epoch: rp.DivergingEpoch.Epoch, EndOffset: rp.DivergingEpoch.EndOffset}
			}
			err := s.f.m.ApplyFetchResponse(snt.tp.Topic, snt.tp.Partition, snt.leaderEpoch, res)
			switch {
			case err == nil:
				s.setLag(snt.tp, rp.HighWatermark)
			case errors.Is(err, ErrNotFollower):
			case isRefusal(err):
				s.logger.Info(fmt.Sprintf("[ReplicaFetcher replicaId=%d, leaderId=%d] Partition %s refused at leader epoch %d; waiting for new metadata", s.f.m.cfg.NodeID, s.id, snt.tp, snt.leaderEpoch), "err", err)
				s.block(snt.tp, backoff)
			default:
				s.logger.Error(fmt.Sprintf("[ReplicaFetcher replicaId=%d, leaderId=%d] Error processing data for partition %s", s.f.m.cfg.NodeID, s.id, snt.tp), "err", err)
				s.block(snt.tp, backoff)
			}
		}
	}
}

// isRefusal reports whether the leader refused a partition for a reason a
// newer image resolves.
func isRefusal(err error) bool {
	for _, e := range []error{kerr.NotLeaderForPartition, kerr.FencedLeaderEpoch, kerr.UnknownLeaderEpoch,
		kerr.UnknownTopicOrPartition, kerr.UnknownTopicID, kerr.ReplicaNotAvailable} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

func (s *source) block(tp storage.TopicPartition, d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p := s.parts[tp]; p != nil {
		p.blockedUntil = time.Now().Add(d)
	}
}

// setLag records how far a partition is behind the leader's high
// watermark after applying an answer.
func (s *source) setLag(tp storage.TopicPartition, leaderHW int64) {
	pos, ok := s.f.m.FollowerPosition(tp.Topic, tp.Partition)
	if !ok {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if p := s.parts[tp]; p != nil {
		p.lag = max(leaderHW-pos.FetchOffset, 0)
	}
}
