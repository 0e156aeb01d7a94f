package quorumtest

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/faultline/faultline/broker/metadata"
	"github.com/faultline/faultline/broker/quorum"
	"github.com/faultline/faultline/broker/storage"
)

// LocalConfig configures a Local quorum.
type LocalConfig struct {
	NodeID int32
	// Logs opens __cluster_metadata-0 (the LogManager of the metadata log
	// dir).
	Logs      quorum.LogOpener
	LogConfig storage.LogConfig // zero: storage.DefaultLogConfig()
	Logger    *slog.Logger
	Now       func() time.Time
}

// Local is a quorum with a single voter and no raft, for the unit tests of
// the packages above the quorum: a batch is committed as soon as it is
// fsynced to the local metadata log. Nodes run raftq.
type Local struct {
	nodeID int32
	log    *storage.Log
	logger *slog.Logger
	now    func() time.Time
	epoch  int32

	mu     sync.Mutex // serializes appends, subscriptions and delivery
	subs   map[int]func(quorum.Batch) error
	order  []int
	nextID int
	closed bool
}

// OpenLocal opens (or creates) the metadata log and becomes its leader with
// an epoch one above the log's newest one.
func OpenLocal(cfg LocalConfig) (*Local, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.LogConfig == (storage.LogConfig{}) {
		cfg.LogConfig = storage.DefaultLogConfig()
	}
	l, err := cfg.Logs.GetOrCreateLog(quorum.MetadataPartition, cfg.LogConfig)
	if err != nil {
		return nil, fmt.Errorf("open metadata log: %w", err)
	}
	epoch := int32(1)
	if e, ok := l.LatestEpoch(); ok {
		epoch = e + 1
	}
	leo := l.LogEndOffset()
	if err := l.AssignEpochStartOffset(epoch, leo); err != nil {
		return nil, fmt.Errorf("open metadata log: %w", err)
	}
	// Everything on disk was fsynced before it was acknowledged, and a
	// single voter has nobody to disagree with: it is all committed.
	l.UpdateHighWatermark(leo)
	cfg.Logger.Info(fmt.Sprintf("Local controller quorum: node %d leads epoch %d, metadata log end offset %d", cfg.NodeID, epoch, leo))
	return &Local{
		nodeID: cfg.NodeID,
		log:    l,
		logger: cfg.Logger,
		now:    cfg.Now,
		epoch:  epoch,
		subs:   map[int]func(quorum.Batch) error{},
	}, nil
}

// Append implements Quorum.
func (q *Local) Append(ctx context.Context, records []metadata.Record) (int64, error) {
	if len(records) == 0 {
		return 0, fmt.Errorf("append to metadata log: no records")
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return 0, quorum.ErrClosed
	}
	nowMs := q.now().UnixMilli()
	recs := make([]storage.Record, len(records))
	for i, r := range records {
		recs[i] = storage.Record{TimestampMs: nowMs, Value: metadata.Encode(r)}
	}
	batch := storage.BuildBatch(recs, storage.BatchOptions{})
	info, err := q.log.AppendAsLeader(batch, q.epoch, nowMs)
	if err != nil {
		return 0, fmt.Errorf("append to metadata log: %w", err)
	}
	if err := q.log.Flush(); err != nil {
		return 0, fmt.Errorf("append to metadata log: fsync: %w", err)
	}
	q.log.UpdateHighWatermark(info.LastOffset + 1)
	b := quorum.Batch{BaseOffset: info.FirstOffset, LastOffset: info.LastOffset, Epoch: q.epoch, AppendTimeMs: nowMs, Records: records}
	for _, id := range q.order {
		if err := q.subs[id](b); err != nil {
			q.logger.Error("Metadata subscriber failed to apply a committed batch", "offset", b.LastOffset, "err", err)
		}
	}
	return info.LastOffset, nil
}

// Subscribe implements Quorum: it replays the log from disk, then adds fn.
func (q *Local) Subscribe(fn func(quorum.Batch) error) (func(), error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return nil, quorum.ErrClosed
	}
	if err := q.replay(fn); err != nil {
		return nil, err
	}
	id := q.nextID
	q.nextID++
	q.subs[id] = fn
	q.order = append(q.order, id)
	return func() {
		q.mu.Lock()
		defer q.mu.Unlock()
		delete(q.subs, id)
		for i, x := range q.order {
			if x == id {
				q.order = append(q.order[:i:i], q.order[i+1:]...)
				break
			}
		}
	}, nil
}

func (q *Local) replay(fn func(quorum.Batch) error) error {
	m := quorum.NewMerger(fn)
	err := quorum.ForEachStoredBatch(q.log, q.log.LogStartOffset(), q.log.LogEndOffset(), func(h storage.BatchHeader, raw []byte) error {
		b, err := decodeBatch(h, raw)
		if err != nil {
			return err
		}
		return m.Add(b)
	})
	if err != nil {
		return fmt.Errorf("replay metadata log: %w", err)
	}
	return m.Flush()
}

// decodeBatch turns one stored batch into metadata records. Control batches
// carry no metadata and become empty batches (they still advance offsets).
func decodeBatch(h storage.BatchHeader, raw []byte) (quorum.Batch, error) {
	b := quorum.Batch{BaseOffset: h.BaseOffset, LastOffset: h.LastOffset(), Epoch: h.PartitionLeaderEpoch, AppendTimeMs: h.MaxTimestamp}
	if h.IsControl() {
		return b, nil
	}
	recs, err := storage.DecodeRecords(raw)
	if err != nil {
		return quorum.Batch{}, fmt.Errorf("decode metadata batch at offset %d: %w", h.BaseOffset, err)
	}
	for _, r := range recs {
		m, err := metadata.Decode(r.Value)
		if err != nil {
			return quorum.Batch{}, fmt.Errorf("metadata record at offset %d: %w", r.Offset, err)
		}
		b.Records = append(b.Records, m)
	}
	return b, nil
}

// Leader implements Quorum: this node, always.
func (q *Local) Leader() quorum.LeaderAndEpoch {
	return quorum.LeaderAndEpoch{LeaderID: q.nodeID, Epoch: q.epoch}
}

// Describe implements Quorum.
func (q *Local) Describe() quorum.Description {
	leo := q.log.LogEndOffset()
	now := q.now().UnixMilli()
	return quorum.Description{
		LeaderID:      q.nodeID,
		LeaderEpoch:   q.epoch,
		HighWatermark: q.log.HighWatermark(),
		Voters:        []quorum.ReplicaState{{ReplicaID: q.nodeID, LogEndOffset: leo, LastFetchTimestamp: now, LastCaughtUpTimestamp: now}},
	}
}

// Close stops appends and delivery. The log itself belongs to the log
// manager, which flushes and closes it at shutdown.
func (q *Local) Close() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.closed = true
	q.subs = map[int]func(quorum.Batch) error{}
	q.order = nil
	return nil
}
