package raftq

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sync"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/faultline/faultline/broker/metadata"
	"github.com/faultline/faultline/broker/quorum"
	"github.com/faultline/faultline/broker/storage"
)

// applyItem is one committed entry with its offsets, or a snapshot from the
// leader to install.
type applyItem struct {
	index, term uint64
	baseOffset  int64
	endOffset   int64 // exclusive
	data        []byte
	snapshot    *receivedSnapshot
}

type receivedSnapshot struct {
	header  SnapshotHeader
	records []metadata.Record
	data    []byte
	done    chan error
}

// applier applies committed entries on its own goroutine, in order: it
// folds them into the image that snapshots are made of, delivers them to
// subscribers, answers the Appends waiting for them and takes snapshots.
// Subscribers therefore never hold up the raft goroutine.
type applier struct {
	q *Quorum

	qmu    sync.Mutex
	queue  []applyItem
	signal chan struct{}
	stopC  chan struct{}
	done   chan struct{}

	mu               sync.Mutex // guards the fields below; held while delivering
	subs             map[int]func(quorum.Batch) error
	order            []int
	nextID           int
	image            *metadata.Image
	imageErr         error // the image stopped applying: no more snapshots
	snap             SnapshotHeader
	snapRecords      []metadata.Record
	snapData         []byte
	appliedIndex     uint64
	appliedTerm      uint64
	appliedEnd       int64
	lastAppendMs     int64
	sinceSnapBytes   int64
	sinceSnapRecords int64
	closed           bool
}

// recover sets the applier to the snapshot and applies the committed
// entries after it to the image (there are no subscribers yet).
func (a *applier) recover(sh SnapshotHeader, snapRecs []metadata.Record, snapData []byte, ents []*raftpb.Entry, commit uint64) error {
	a.subs = map[int]func(quorum.Batch) error{}
	a.image = metadata.NewImage(a.q.cfg.ClusterID)
	if sh.EndOffset > 0 {
		im, err := a.image.ApplyBatch(sh.EndOffset-1, snapRecs)
		if err != nil {
			return fmt.Errorf("load metadata snapshot: %w", err)
		}
		a.image = im
	}
	a.snap, a.snapRecords, a.snapData = sh, snapRecs, snapData
	a.appliedIndex, a.appliedTerm, a.appliedEnd = sh.RaftIndex, sh.RaftTerm, sh.EndOffset
	for _, e := range ents {
		if e.GetIndex() > commit {
			break
		}
		base, _ := a.q.offsets.endOffset(e.GetIndex() - 1)
		end, _ := a.q.offsets.endOffset(e.GetIndex())
		a.applyEntry(applyItem{index: e.GetIndex(), term: e.GetTerm(), baseOffset: base, endOffset: end, data: e.GetData()}, false)
	}
	return nil
}

func (a *applier) start() {
	a.signal = make(chan struct{}, 1)
	a.stopC = make(chan struct{})
	a.done = make(chan struct{})
	go a.run()
}

func (a *applier) stop() {
	close(a.stopC)
	<-a.done
	a.mu.Lock()
	a.closed = true
	a.subs = map[int]func(quorum.Batch) error{}
	a.order = nil
	a.mu.Unlock()
}

func (a *applier) enqueue(items ...applyItem) {
	a.qmu.Lock()
	a.queue = append(a.queue, items...)
	a.qmu.Unlock()
	select {
	case a.signal <- struct{}{}:
	default:
	}
}

func (a *applier) run() {
	defer close(a.done)
	for {
		select {
		case <-a.stopC:
			return
		case <-a.signal:
		}
		for {
			a.qmu.Lock()
			items := a.queue
			a.queue = nil
			a.qmu.Unlock()
			if len(items) == 0 {
				break
			}
			for _, it := range items {
				select {
				case <-a.stopC:
					return
				default:
				}
				a.mu.Lock()
				if it.snapshot != nil {
					it.snapshot.done <- a.installSnapshot(it.snapshot)
				} else {
					a.applyEntry(it, true)
				}
				a.mu.Unlock()
			}
		}
	}
}

// applyEntry applies one committed entry; a.mu is held (or the applier is
// not running yet, during recover).
func (a *applier) applyEntry(it applyItem, live bool) {
	q := a.q
	b, err := decodeEntry(it, q.cfg.Now().UnixMilli())
	if err != nil {
		q.logger.Error(fmt.Sprintf("Committed metadata batch at offset %d does not decode; delivering it empty", it.baseOffset), "err", err)
		a.imageErr = err
	}
	if a.imageErr == nil {
		im, err := a.image.ApplyBatch(b.LastOffset, b.Records)
		if err != nil {
			q.logger.Error("A committed metadata batch does not apply to the image; metadata snapshots are off until restart", "offset", b.LastOffset, "err", err)
			a.imageErr = err
		} else {
			a.image = im
		}
	}
	if live {
		for _, id := range a.order {
			if err := a.subs[id](b); err != nil {
				q.logger.Error("Metadata subscriber failed to apply a committed batch", "offset", b.LastOffset, "err", err)
			}
		}
	}
	a.appliedIndex, a.appliedTerm, a.appliedEnd = it.index, it.term, it.endOffset
	a.lastAppendMs = b.AppendTimeMs
	a.sinceSnapBytes += int64(len(it.data))
	a.sinceSnapRecords += int64(len(b.Records))
	if live {
		q.mu.Lock()
		if p := q.waiters[it.index]; p != nil {
			delete(q.waiters, it.index)
			if p.term == it.term {
				p.done <- proposalResult{lastOffset: it.endOffset - 1}
			} else {
				p.done <- proposalResult{err: fmt.Errorf("%w: the batch was replaced by a newer leader's entry", quorum.ErrNotLeader)}
			}
		}
		q.mu.Unlock()
	}
	a.maybeSnapshot()
}

// decodeEntry turns a committed entry into a Batch: an empty entry (a new
// leader's first) is an empty batch.
func decodeEntry(it applyItem, nowMs int64) (quorum.Batch, error) {
	b := quorum.Batch{BaseOffset: it.baseOffset, LastOffset: it.endOffset - 1, Epoch: termEpoch(it.term), AppendTimeMs: nowMs}
	if len(it.data) == 0 {
		return b, nil
	}
	h, err := storage.ValidateBatch(it.data)
	if err != nil {
		return b, err
	}
	b.AppendTimeMs = h.MaxTimestamp
	recs, err := decodeRecords(it.data)
	b.Records = recs
	return b, err
}

func decodeRecords(raw []byte) ([]metadata.Record, error) {
	recs, err := storage.DecodeRecords(raw)
	if err != nil {
		return nil, err
	}
	out := make([]metadata.Record, 0, len(recs))
	for _, r := range recs {
		m, err := metadata.Decode(r.Value)
		if err != nil {
			return out, fmt.Errorf("metadata record %d of the batch: %w", len(out), err)
		}
		out = append(out, m)
	}
	return out, nil
}

// maybeSnapshot writes a snapshot once enough was applied since the last,
// then asks the raft goroutine to compact behind it.
func (a *applier) maybeSnapshot() {
	q := a.q
	due := a.sinceSnapBytes >= q.cfg.SnapshotIntervalBytes ||
		(q.cfg.SnapshotIntervalRecords > 0 && a.sinceSnapRecords >= q.cfg.SnapshotIntervalRecords)
	if !due || a.imageErr != nil || a.appliedIndex <= a.snap.RaftIndex {
		return
	}
	h := SnapshotHeader{
		Version:                     snapshotVersion,
		RaftIndex:                   a.appliedIndex,
		RaftTerm:                    a.appliedTerm,
		EndOffset:                   a.appliedEnd,
		Voters:                      q.voters,
		LastContainedLogTimestampMs: a.lastAppendMs,
	}
	recs := imageDelta(metadata.NewImage(q.cfg.ClusterID), a.image)
	data := EncodeSnapshot(h, recs, q.cfg.Now().UnixMilli())
	name := SnapshotFileName(h.EndOffset, h.Epoch())
	if err := writeFileDurably(q.cfg.FS, filepath.Join(q.dir, name), data); err != nil {
		q.logger.Warn(fmt.Sprintf("Failed to write metadata snapshot %s", name), "err", err)
		return
	}
	a.snap, a.snapRecords, a.snapData = h, recs, data
	a.sinceSnapBytes, a.sinceSnapRecords = 0, 0
	q.logger.Info(fmt.Sprintf("Wrote metadata snapshot %s: %d records rebuild the image up to offset %d", name, len(recs), h.EndOffset))
	q.post(func() { q.compactTo(h, data) })
}

// installSnapshot installs a snapshot from the leader (a.mu is held): the
// file, the log restarted at its end, the image, and one batch to the
// subscribers with the records that take their image from ours to the
// snapshot's. Appends waiting below its end learn that their outcome is
// unknown here.
func (a *applier) installSnapshot(rs *receivedSnapshot) error {
	q := a.q
	h := rs.header
	name := SnapshotFileName(h.EndOffset, h.Epoch())
	part := filepath.Join(q.dir, name[:len(name)-len(snapshotSuffix)]+snapshotPartSuffix)
	if err := writeSynced(q.cfg.FS, part, rs.data); err != nil {
		return fmt.Errorf("install snapshot %s: %w", name, err)
	}
	if err := q.log.TruncateFullyAndStartAt(h.EndOffset); err != nil {
		return fmt.Errorf("install snapshot %s: restart the metadata log: %w", name, err)
	}
	if err := q.cfg.FS.Rename(part, filepath.Join(q.dir, name)); err != nil {
		return fmt.Errorf("install snapshot %s: %w", name, err)
	}
	if err := q.cfg.FS.SyncDir(q.dir); err != nil {
		return fmt.Errorf("install snapshot %s: %w", name, err)
	}
	next, err := metadata.NewImage(q.cfg.ClusterID).ApplyBatch(h.EndOffset-1, rs.records)
	if err != nil {
		return fmt.Errorf("install snapshot %s: %w", name, err)
	}
	from := a.image
	if a.imageErr != nil {
		from = metadata.NewImage(q.cfg.ClusterID)
	}
	if h.EndOffset > a.appliedEnd {
		b := quorum.Batch{BaseOffset: a.appliedEnd, LastOffset: h.EndOffset - 1, Epoch: h.Epoch(), AppendTimeMs: h.LastContainedLogTimestampMs, Records: imageDelta(from, next)}
		for _, id := range a.order {
			if err := a.subs[id](b); err != nil {
				q.logger.Error("Metadata subscriber failed to apply a snapshot", "offset", b.LastOffset, "err", err)
			}
		}
	}
	a.image, a.imageErr = next, nil
	a.snap, a.snapRecords, a.snapData = h, rs.records, rs.data
	a.appliedIndex, a.appliedTerm, a.appliedEnd = h.RaftIndex, h.RaftTerm, h.EndOffset
	a.lastAppendMs = h.LastContainedLogTimestampMs
	a.sinceSnapBytes, a.sinceSnapRecords = 0, 0
	q.mu.Lock()
	for i, p := range q.waiters {
		if i <= h.RaftIndex {
			p.done <- proposalResult{err: fmt.Errorf("outcome unknown: a snapshot from the leader replaced raft entries up to %d", h.RaftIndex)}
			delete(q.waiters, i)
		}
	}
	q.mu.Unlock()
	q.deleteOldSnapshots(h.EndOffset)
	return nil
}

// Append implements quorum.Quorum: on the leader it proposes the records as
// one raft entry and returns the offset of the last one once the entry is
// committed and applied here. ErrNotLeader on any other voter, or when the
// entry lost to another leader's. A context that ends first leaves the
// outcome unknown.
func (q *Quorum) Append(ctx context.Context, records []metadata.Record) (int64, error) {
	if len(records) == 0 {
		return 0, fmt.Errorf("append to metadata log: no records")
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	q.mu.Lock()
	failed, closed, leader := q.failed, q.closed, q.leader.LeaderID
	q.mu.Unlock()
	switch {
	case failed != nil:
		return 0, fmt.Errorf("append to metadata log: %w", failed)
	case closed:
		return 0, quorum.ErrClosed
	case leader != q.cfg.NodeID:
		return 0, q.notLeader(RaftID(leader))
	}
	nowMs := q.cfg.Now().UnixMilli()
	recs := make([]storage.Record, len(records))
	for i, r := range records {
		recs[i] = storage.Record{TimestampMs: nowMs, Value: metadata.Encode(r)}
	}
	data := storage.BuildBatch(recs, storage.BatchOptions{})
	if len(data) > q.cfg.BatchBytesMax {
		return 0, fmt.Errorf("append to metadata log: %w: %d bytes, at most %d", storage.ErrRecordTooLarge, len(data), q.cfg.BatchBytesMax)
	}
	p := &proposal{data: data, done: make(chan proposalResult, 1)}
	select {
	case q.propC <- p:
	case <-ctx.Done():
		return 0, ctx.Err()
	case <-q.stopC:
		return 0, q.stoppedErr()
	}
	select {
	case r := <-p.done:
		return r.lastOffset, r.err
	case <-ctx.Done():
		return 0, ctx.Err()
	case <-q.stopC:
		select {
		case r := <-p.done:
			return r.lastOffset, r.err
		default:
		}
		return 0, q.stoppedErr()
	}
}

func (q *Quorum) stoppedErr() error {
	if err := q.Err(); err != nil {
		return err
	}
	return quorum.ErrClosed
}

// Subscribe implements quorum.Quorum: fn first gets the newest snapshot's
// records as one batch of its own (offsets 0 to the snapshot's end - 1),
// then the
// committed batches after it merged into few batches, then every batch
// applied later, on the applier goroutine. fn must not call Append (it
// would wait for itself).
func (q *Quorum) Subscribe(fn func(quorum.Batch) error) (func(), error) {
	a := &q.ap
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return nil, quorum.ErrClosed
	}
	if err := a.replay(fn); err != nil {
		return nil, err
	}
	id := a.nextID
	a.nextID++
	a.subs[id] = fn
	a.order = append(a.order, id)
	return func() {
		a.mu.Lock()
		defer a.mu.Unlock()
		delete(a.subs, id)
		if i := slices.Index(a.order, id); i >= 0 {
			a.order = slices.Delete(a.order, i, i+1)
		}
	}, nil
}

func (a *applier) replay(fn func(quorum.Batch) error) error {
	if a.snap.EndOffset > 0 {
		// The snapshot goes alone, so that a subscriber can tell where it
		// ends.
		snap := quorum.Batch{BaseOffset: 0, LastOffset: a.snap.EndOffset - 1, Epoch: a.snap.Epoch(),
			AppendTimeMs: a.snap.LastContainedLogTimestampMs, Records: slices.Clone(a.snapRecords)}
		if err := fn(snap); err != nil {
			return fmt.Errorf("apply metadata snapshot ending at offset %d: %w", snap.LastOffset, err)
		}
	}
	m := quorum.NewMerger(fn)
	err := quorum.ForEachStoredBatch(a.q.log, a.snap.EndOffset, a.appliedEnd, func(h storage.BatchHeader, raw []byte) error {
		b := quorum.Batch{BaseOffset: h.BaseOffset, LastOffset: h.LastOffset(), Epoch: h.PartitionLeaderEpoch, AppendTimeMs: h.MaxTimestamp}
		if !h.IsControl() {
			recs, err := decodeRecords(raw)
			if err != nil {
				return fmt.Errorf("metadata batch at offset %d: %w", h.BaseOffset, err)
			}
			b.Records = recs
		}
		return m.Add(b)
	})
	if err != nil {
		return fmt.Errorf("replay metadata log: %w", err)
	}
	return m.Flush()
}

// ReadCommitted is the hook for observers (brokers following the metadata
// log without a vote): whole stored batches from fromOffset, at most
// maxBytes (at least one batch), none at or beyond the committed end, and
// that end (the high watermark). Below the log start it fails with
// storage.ErrOffsetOutOfRange: the observer then loads LatestSnapshot and
// reads on from its end. Every voter answers; the leader is the freshest.
// A replicaID >= 0 that is not a voter is listed by Describe as an
// observer whose log end offset is fromOffset, as Kafka's leader learns an
// observer's position from its fetches.
func (q *Quorum) ReadCommitted(replicaID int32, fromOffset int64, maxBytes int32) (batches []byte, highWatermark int64, err error) {
	hw := q.log.HighWatermark()
	if replicaID >= 0 {
		if _, voter := q.cfg.Voters[replicaID]; !voter {
			q.noteObserver(replicaID, fromOffset, hw)
		}
	}
	b, err := q.log.Read(fromOffset, maxBytes, hw, true)
	if err != nil {
		return nil, hw, fmt.Errorf("read committed metadata: %w", err)
	}
	return b, hw, nil
}

// observerExpiryMs: an observer that has not fetched for this long leaves
// Describe (Kafka forgets observers after 5 minutes too).
const observerExpiryMs = 5 * 60 * 1000

// observersMax bounds how many observers are tracked.
const observersMax = 4096

type observerState struct {
	logEndOffset   int64
	lastFetchMs    int64
	lastCaughtUpMs int64
}

func (q *Quorum) noteObserver(id int32, offset, hw int64) {
	nowMs := q.cfg.Now().UnixMilli()
	q.mu.Lock()
	defer q.mu.Unlock()
	o, ok := q.observers[id]
	if !ok {
		o = observerState{lastCaughtUpMs: -1}
		if len(q.observers) >= observersMax {
			return
		}
	}
	o.logEndOffset, o.lastFetchMs = offset, nowMs
	if offset >= hw {
		o.lastCaughtUpMs = nowMs
	}
	q.observers[id] = o
}

// DecodeBatches turns what ReadCommitted returned into batches: control
// batches (a new leader's first entry) become batches without records. It
// never panics on any input.
func DecodeBatches(data []byte) ([]quorum.Batch, error) {
	var out []quorum.Batch
	err := storage.ForEachBatch(data, func(h storage.BatchHeader, raw []byte) error {
		b := quorum.Batch{BaseOffset: h.BaseOffset, LastOffset: h.LastOffset(), Epoch: h.PartitionLeaderEpoch, AppendTimeMs: h.MaxTimestamp}
		if h.IsControl() {
			if _, err := storage.ValidateBatch(raw); err != nil {
				return fmt.Errorf("metadata batch at offset %d: %w", h.BaseOffset, err)
			}
		} else {
			recs, err := decodeRecords(raw)
			if err != nil {
				return fmt.Errorf("metadata batch at offset %d: %w", h.BaseOffset, err)
			}
			b.Records = recs
		}
		out = append(out, b)
		return nil
	})
	return out, err
}

// LatestSnapshot returns the newest snapshot's header and its encoded form
// (DecodeSnapshot parses it); data is nil before the first snapshot, when
// the log starts at offset 0.
func (q *Quorum) LatestSnapshot() (SnapshotHeader, []byte) {
	a := &q.ap
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.snap, a.snapData
}
