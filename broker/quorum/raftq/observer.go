package raftq

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
	"github.com/faultline/faultline/broker/quorum"
)

// Sender carries a request to the controllers over the Kafka protocol: one
// attempt against the controller it believes leads the quorum, whose
// answer it returns (the broker's controller channel is one).
type Sender interface {
	Send(ctx context.Context, req kmsg.Request) (kmsg.Response, error)
}

// ObserverConfig configures an Observer.
type ObserverConfig struct {
	// BrokerID is the observer's node id, its replica id in Fetch.
	BrokerID  int32
	ClusterID string
	// Controllers are the controllers' listeners, asked for a snapshot
	// when the log starts after the offset to fetch (bootstrap servers
	// have negative ids).
	Controllers map[int32]string
	// Dial opens the snapshot connections; nil dials directly.
	Dial   DialFunc
	Logger *slog.Logger
	// FetchWait is how long a fetch waits at the leader for new batches
	// (default 500 ms).
	FetchWait time.Duration
}

// Observer is the metadata quorum as a broker-only node sees it: it follows
// __cluster_metadata-0 without a vote, fetching committed batches from the
// quorum leader's controller listener (Fetch with its broker id as replica
// id, as Kafka's brokers do, served from ReadCommitted), and learns the
// leader with DescribeQuorum. Below the leader's log start it loads the
// newest snapshot over the controller listener (SnapshotMagic). It keeps
// the batches in memory; a restart fetches the log again.
type Observer struct {
	brokerID  int32
	tr        Sender
	logger    *slog.Logger
	fetchWait time.Duration
	addrs     map[int32]string
	dial      DialFunc

	// deliverMu orders deliveries: the fetch loop holds it while it hands
	// batches to the subscribers, Subscribe while it replays. mu guards
	// the fields below and is never held while calling a subscriber.
	deliverMu sync.Mutex
	mu        sync.Mutex
	leader    quorum.LeaderAndEpoch
	batches   []quorum.Batch
	image     *metadata.Image // the image of the batches delivered
	next      int64           // the next offset to fetch
	hw        int64
	subs      map[int]func(quorum.Batch) error
	subID     int
	changed   chan struct{}

	cancel context.CancelFunc
	done   chan struct{}
}

var _ quorum.Quorum = (*Observer)(nil)

// NewObserver returns an observer that fetches nothing until Start.
func NewObserver(cfg ObserverConfig) *Observer {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.FetchWait <= 0 {
		cfg.FetchWait = 500 * time.Millisecond
	}
	return &Observer{
		brokerID: cfg.BrokerID, logger: cfg.Logger, fetchWait: cfg.FetchWait, addrs: cfg.Controllers, dial: cfg.Dial,
		leader: quorum.LeaderAndEpoch{LeaderID: -1}, image: metadata.NewImage(cfg.ClusterID), hw: -1,
		subs: map[int]func(quorum.Batch) error{}, changed: make(chan struct{}), done: make(chan struct{}),
	}
}

// Append implements quorum.Quorum: an observer never appends.
func (o *Observer) Append(context.Context, []metadata.Record) (int64, error) {
	return 0, quorum.ErrNotLeader
}

// Subscribe implements quorum.Quorum: the batches fetched so far, merged
// into one, then each new one.
func (o *Observer) Subscribe(fn func(quorum.Batch) error) (func(), error) {
	o.deliverMu.Lock()
	defer o.deliverMu.Unlock()
	o.mu.Lock()
	batches := o.batches
	o.mu.Unlock()
	if len(batches) > 0 {
		merged := quorum.Batch{BaseOffset: batches[0].BaseOffset, LastOffset: batches[len(batches)-1].LastOffset, Epoch: batches[len(batches)-1].Epoch}
		for _, b := range batches {
			merged.Records = append(merged.Records, b.Records...)
		}
		if err := fn(merged); err != nil {
			return nil, err
		}
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.subID++
	id := o.subID
	o.subs[id] = fn
	return func() {
		o.mu.Lock()
		delete(o.subs, id)
		o.mu.Unlock()
	}, nil
}

// Leader implements quorum.Quorum: the leader the last DescribeQuorum named.
func (o *Observer) Leader() quorum.LeaderAndEpoch {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.leader
}

// Describe implements quorum.Quorum: only what an observer knows.
func (o *Observer) Describe() quorum.Description {
	o.mu.Lock()
	defer o.mu.Unlock()
	return quorum.Description{LeaderID: o.leader.LeaderID, LeaderEpoch: o.leader.Epoch, HighWatermark: o.hw}
}

// Start runs the fetch loop over tr until Close. tr's leader hint may be
// Leader.
func (o *Observer) Start(tr Sender) {
	ctx, cancel := context.WithCancel(context.Background())
	o.tr, o.cancel = tr, cancel
	go func() {
		defer close(o.done)
		o.run(ctx)
	}()
}

// Close stops the fetch loop.
func (o *Observer) Close() {
	if o.cancel != nil {
		o.cancel()
		<-o.done
	}
}

// WaitCaughtUp waits until the observer applied the high watermark of a
// fetch answer at least once.
func (o *Observer) WaitCaughtUp(ctx context.Context) error {
	for {
		o.mu.Lock()
		ok := o.hw >= 0 && o.next >= o.hw
		ch := o.changed
		o.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("catching up with the metadata log: %w", ctx.Err())
		}
	}
}

func (o *Observer) run(ctx context.Context) {
	backoff := 50 * time.Millisecond
	lastRefresh := time.Time{}
	for ctx.Err() == nil {
		if o.Leader().LeaderID < 0 || time.Since(lastRefresh) > 2*time.Second {
			o.refreshLeader(ctx)
			lastRefresh = time.Now()
		}
		if err := o.fetch(ctx); err != nil {
			if ctx.Err() != nil {
				return
			}
			o.logger.Debug("Metadata fetch failed", "err", err)
			o.mu.Lock()
			o.leader.LeaderID = -1
			o.mu.Unlock()
			t := time.NewTimer(backoff)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			backoff = min(2*backoff, time.Second)
			continue
		}
		backoff = 50 * time.Millisecond
	}
}

// refreshLeader asks the controllers who leads the quorum.
func (o *Observer) refreshLeader(ctx context.Context) {
	req := kmsg.NewPtrDescribeQuorumRequest()
	rt := kmsg.NewDescribeQuorumRequestTopic()
	rt.Topic = quorum.MetadataTopic
	rp := kmsg.NewDescribeQuorumRequestTopicPartition()
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	raw, err := o.tr.Send(rctx, req)
	if err != nil {
		return
	}
	resp, ok := raw.(*kmsg.DescribeQuorumResponse)
	if !ok || len(resp.Topics) == 0 || len(resp.Topics[0].Partitions) == 0 {
		return
	}
	p := resp.Topics[0].Partitions[0]
	if p.LeaderID >= 0 {
		o.mu.Lock()
		if p.LeaderEpoch >= o.leader.Epoch {
			o.leader = quorum.LeaderAndEpoch{LeaderID: p.LeaderID, Epoch: p.LeaderEpoch}
		}
		o.mu.Unlock()
	}
}

// fetch sends one Fetch to the leader (the transport's pick) and applies
// the batches it returns.
func (o *Observer) fetch(ctx context.Context) error {
	o.mu.Lock()
	next := o.next
	o.mu.Unlock()
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = o.brokerID
	req.ReplicaState.ID, req.ReplicaState.Epoch = o.brokerID, -1
	req.MaxWaitMillis = int32(o.fetchWait.Milliseconds())
	req.MinBytes, req.MaxBytes = 1, 8<<20
	req.SessionEpoch = -1
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic, ft.TopicID = quorum.MetadataTopic, quorum.MetadataTopicID
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.Partition, fp.FetchOffset, fp.PartitionMaxBytes = 0, next, 4<<20
	fp.CurrentLeaderEpoch, fp.LastFetchedEpoch, fp.LogStartOffset = -1, -1, -1
	ft.Partitions = append(ft.Partitions, fp)
	req.Topics = append(req.Topics, ft)
	rctx, cancel := context.WithTimeout(ctx, o.fetchWait+5*time.Second)
	defer cancel()
	raw, err := o.tr.Send(rctx, req)
	if err != nil {
		return err
	}
	resp, ok := raw.(*kmsg.FetchResponse)
	if !ok {
		return fmt.Errorf("metadata fetch: unexpected answer %T", raw)
	}
	if resp.ErrorCode != 0 {
		return fmt.Errorf("metadata fetch: %w", kerr.ErrorForCode(resp.ErrorCode))
	}
	if len(resp.Topics) == 0 || len(resp.Topics[0].Partitions) == 0 {
		return errors.New("metadata fetch: empty answer")
	}
	p := resp.Topics[0].Partitions[0]
	if p.ErrorCode != 0 {
		if p.ErrorCode == kerr.OffsetOutOfRange.Code {
			return o.loadSnapshot(ctx, next)
		}
		return fmt.Errorf("metadata fetch at offset %d: %w", next, kerr.ErrorForCode(p.ErrorCode))
	}
	batches, err := DecodeBatches(p.RecordBatches)
	if err != nil {
		return fmt.Errorf("metadata fetch at offset %d: %w", next, err)
	}
	o.deliver(batches)
	o.mu.Lock()
	o.hw = p.HighWatermark
	close(o.changed)
	o.changed = make(chan struct{})
	o.mu.Unlock()
	return nil
}

// deliver hands the batches after the last one delivered to every
// subscriber, in order, and folds them into the observer's image.
func (o *Observer) deliver(batches []quorum.Batch) {
	o.deliverMu.Lock()
	defer o.deliverMu.Unlock()
	for _, b := range batches {
		o.mu.Lock()
		if b.LastOffset < o.next {
			o.mu.Unlock()
			continue
		}
		o.batches = append(o.batches, b)
		o.next = b.LastOffset + 1
		subs := make([]func(quorum.Batch) error, 0, len(o.subs))
		for _, fn := range o.subs {
			subs = append(subs, fn)
		}
		o.mu.Unlock()
		if next, err := o.image.ApplyBatch(b.LastOffset, b.Records); err == nil {
			o.image = next
		} else {
			o.logger.Error(fmt.Sprintf("Applying metadata batch at offset %d failed", b.BaseOffset), "err", err)
		}
		for _, fn := range subs {
			if err := fn(b); err != nil {
				o.logger.Error(fmt.Sprintf("Applying metadata batch at offset %d failed", b.BaseOffset), "err", err)
			}
		}
	}
}

// loadSnapshot brings the observer to the controllers' newest snapshot when
// their log starts after next: one batch with the records that take its
// image to the snapshot's, then fetching goes on from the snapshot's end.
func (o *Observer) loadSnapshot(ctx context.Context, next int64) error {
	ids := make([]int32, 0, len(o.addrs))
	if l := o.Leader().LeaderID; l >= 0 {
		if _, ok := o.addrs[l]; ok {
			ids = append(ids, l)
		}
	}
	for id := range o.addrs {
		ids = append(ids, id)
	}
	var lastErr error
	for _, id := range ids {
		sctx, cancel := context.WithTimeout(ctx, time.Minute)
		data, err := fetchSnapshot(sctx, o.dial, o.addrs[id])
		cancel()
		if err != nil {
			lastErr = err
			continue
		}
		if data == nil {
			continue
		}
		h, recs, err := DecodeSnapshot(data)
		if err != nil {
			lastErr = err
			continue
		}
		if h.EndOffset <= next {
			continue
		}
		target, err := metadata.NewImage(o.image.ClusterID).ApplyBatch(h.EndOffset-1, recs)
		if err != nil {
			lastErr = err
			continue
		}
		o.logger.Info(fmt.Sprintf("Loaded the metadata snapshot ending at offset %d from %s: the controllers' log starts after offset %d", h.EndOffset, o.addrs[id], next))
		o.deliver([]quorum.Batch{{BaseOffset: next, LastOffset: h.EndOffset - 1, Epoch: h.Epoch(), Records: imageDelta(o.image, target)}})
		return nil
	}
	if lastErr == nil {
		lastErr = errors.New("no controller has a snapshot past it")
	}
	return fmt.Errorf("metadata fetch at offset %d: below the log start: %w", next, lastErr)
}
