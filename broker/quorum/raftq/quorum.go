package raftq

import (
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/faultline/faultline/broker/metadata"
	"github.com/faultline/faultline/broker/quorum"
	"github.com/faultline/faultline/broker/storage"
)

// maxTerm is the largest raft term that fits a Kafka leader epoch.
const maxTerm = math.MaxInt32

func termEpoch(term uint64) int32 { return int32(min(term, maxTerm)) }

// Config configures a Quorum. Zero values take the defaults named.
type Config struct {
	// NodeID is this voter's node.id.
	NodeID int32
	// Voters is controller.quorum.voters: every voter's node id and raft
	// address. The quorum itself uses only the ids; the addresses are for
	// the TCP transport built when Transport is nil.
	Voters map[int32]string
	// DataDir is the metadata log dir; the log is DataDir/__cluster_metadata-0.
	DataDir string
	// FS does the disk I/O (default storage.OS).
	FS storage.FS
	// Logs, when set, opens the metadata log (the node's LogManager over
	// DataDir, already loaded); nil: the quorum loads its own LogManager
	// over DataDir and shuts it down on Close.
	Logs quorum.LogOpener
	// ClusterID is written into quorum-state.
	ClusterID string
	// Transport carries raft messages; Open starts it and Close closes it.
	// nil: a TCP transport listening on Voters[NodeID].
	Transport Transport
	Logger    *slog.Logger

	// TickInterval is one raft tick (default 100 ms). ElectionTicks
	// (default 10) and HeartbeatTicks (default 1) count ticks: with the
	// defaults a follower campaigns after 1 to 2 s without a leader, as
	// Kafka's controller.quorum.election.timeout.ms of 1000.
	TickInterval   time.Duration
	ElectionTicks  int
	HeartbeatTicks int

	// SnapshotIntervalBytes (default 20 MiB, Kafka's
	// metadata.log.max.record.bytes.between.snapshots) and
	// SnapshotIntervalRecords (default 0, off) trigger a snapshot once that
	// much has been applied since the last one.
	SnapshotIntervalBytes   int64
	SnapshotIntervalRecords int64
	// CompactionLagEntries is how many entries raft keeps in memory behind
	// a snapshot for slow followers (default 1024); a follower further
	// behind is sent the snapshot.
	CompactionLagEntries uint64
	// BatchBytesMax bounds one appended batch (default 1 MiB).
	BatchBytesMax int
	// SegmentBytes is the metadata log's segment size (default 16 MiB).
	SegmentBytes int64

	Now func() time.Time
}

func (c *Config) setDefaults() error {
	if c.FS == nil {
		c.FS = storage.OS
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.TickInterval <= 0 {
		c.TickInterval = 100 * time.Millisecond
	}
	if c.ElectionTicks <= 0 {
		c.ElectionTicks = 10
	}
	if c.HeartbeatTicks <= 0 {
		c.HeartbeatTicks = 1
	}
	if c.SnapshotIntervalBytes <= 0 {
		c.SnapshotIntervalBytes = 20 << 20
	}
	if c.CompactionLagEntries == 0 {
		c.CompactionLagEntries = 1024
	}
	if c.BatchBytesMax <= 0 {
		c.BatchBytesMax = 1 << 20
	}
	if c.SegmentBytes <= 0 {
		c.SegmentBytes = 16 << 20
	}
	switch {
	case c.NodeID < 0:
		return fmt.Errorf("node.id %d: must be at least 0", c.NodeID)
	case len(c.Voters) == 0:
		return errors.New("controller.quorum.voters: no voters")
	case c.DataDir == "" && c.Logs == nil:
		return errors.New("metadata log dir: not set")
	case c.HeartbeatTicks >= c.ElectionTicks:
		return fmt.Errorf("election ticks %d: must exceed heartbeat ticks %d", c.ElectionTicks, c.HeartbeatTicks)
	}
	if _, ok := c.Voters[c.NodeID]; !ok {
		return fmt.Errorf("controller.quorum.voters: node.id %d is not a voter (voters %v)", c.NodeID, slices.Sorted(maps.Keys(c.Voters)))
	}
	for id := range c.Voters {
		if id < 0 {
			return fmt.Errorf("controller.quorum.voters: voter id %d: must be at least 0", id)
		}
	}
	return nil
}

// Quorum is a voter of the raft controller quorum: quorum.Quorum over etcd
// raft, with the metadata log __cluster_metadata-0 as its raft log.
type Quorum struct {
	cfg    Config
	id     uint64
	voters []int32 // sorted
	logger *slog.Logger
	log    *storage.Log
	logs   *storage.LogManager // ours to shut down; nil when cfg.Logs was given
	dir    string
	mem    *raft.MemoryStorage
	rn     *raft.RawNode // owned by the raft goroutine
	tr     Transport

	recvC   chan *raftpb.Message
	propC   chan *proposal
	eventsC chan struct{}
	stopC   chan struct{}
	stopped sync.Once
	wg      sync.WaitGroup

	eventsMu sync.Mutex
	events   []func()

	// hs is the hard state last handed out by raft; hsDirty: only its
	// commit index changed since it was written (see saveHardState).
	hs      hardState
	hsDirty bool

	// recoveredLogEnd is the metadata log end offset Open found.
	recoveredLogEnd int64

	mu          sync.Mutex // guards the fields below
	offsets     entryOffsets
	leader      quorum.LeaderAndEpoch
	commitIndex uint64
	desc        quorum.Description
	lastHeardMs map[uint64]int64
	caughtUpMs  map[uint64]int64
	observers   map[int32]observerState
	waiters     map[uint64]*proposal
	failed      error
	closed      bool

	ap applier
}

// proposal is one Append in flight.
type proposal struct {
	data  []byte
	index uint64
	term  uint64
	done  chan proposalResult
}

type proposalResult struct {
	lastOffset int64
	err        error
}

// metadataLogConfig is the metadata log's configuration: no retention
// (the quorum deletes only what a snapshot covers) and room for large
// batches.
func metadataLogConfig(segmentBytes int64) storage.LogConfig {
	c := storage.DefaultLogConfig()
	c.SegmentBytes = segmentBytes
	c.RetentionMs = -1
	c.RetentionBytes = -1
	c.MaxMessageBytes = int32(min(segmentBytes, math.MaxInt32))
	return c
}

// Open starts this voter: it opens the metadata log, loads the newest
// snapshot and quorum-state, rebuilds raft's log from the metadata log,
// applies what quorum-state says is committed, starts the transport and the
// raft goroutine. Elections start after the first election timeout; the
// only voter of a one-voter quorum elects itself at once.
func Open(cfg Config) (*Quorum, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, fmt.Errorf("raft quorum: %w", err)
	}
	q := &Quorum{
		cfg:         cfg,
		id:          RaftID(cfg.NodeID),
		voters:      slices.Sorted(maps.Keys(cfg.Voters)),
		logger:      cfg.Logger,
		recvC:       make(chan *raftpb.Message, 4096),
		propC:       make(chan *proposal, 256),
		eventsC:     make(chan struct{}, 1),
		stopC:       make(chan struct{}),
		lastHeardMs: map[uint64]int64{},
		caughtUpMs:  map[uint64]int64{},
		observers:   map[int32]observerState{},
		waiters:     map[uint64]*proposal{},
		leader:      quorum.LeaderAndEpoch{LeaderID: -1},
	}
	q.ap.q = q
	if err := q.openLog(); err != nil {
		return nil, fmt.Errorf("raft quorum: %w", err)
	}
	applied, err := q.recover()
	if err != nil {
		q.closeLog()
		return nil, fmt.Errorf("raft quorum: %w", err)
	}
	rn, err := raft.NewRawNode(&raft.Config{
		ID:                        q.id,
		ElectionTick:              cfg.ElectionTicks,
		HeartbeatTick:             cfg.HeartbeatTicks,
		Storage:                   q.mem,
		Applied:                   applied,
		MaxSizePerMsg:             uint64(cfg.BatchBytesMax),
		MaxInflightMsgs:           256,
		MaxUncommittedEntriesSize: 64 << 20,
		CheckQuorum:               true,
		PreVote:                   true,
		Logger:                    raftLogger{l: cfg.Logger.With("component", "raft")},
	})
	if err != nil {
		q.closeLog()
		return nil, fmt.Errorf("raft quorum: %w", err)
	}
	q.rn = rn
	q.updateLeader()
	if cfg.Transport == nil {
		tr, err := NewTCPTransport(TCPConfig{NodeID: cfg.NodeID, Voters: cfg.Voters, ListenAddr: cfg.Voters[cfg.NodeID], Logger: cfg.Logger})
		if err != nil {
			q.closeLog()
			return nil, fmt.Errorf("raft quorum: %w", err)
		}
		cfg.Transport = tr
		q.cfg.Transport = tr
	}
	q.tr = cfg.Transport
	if err := q.tr.Start(q); err != nil {
		q.closeLog()
		return nil, fmt.Errorf("raft quorum: start transport: %w", err)
	}
	q.ap.start()
	q.wg.Add(1)
	go q.run()
	return q, nil
}

func (q *Quorum) openLog() error {
	logCfg := metadataLogConfig(q.cfg.SegmentBytes)
	opener := q.cfg.Logs
	if opener == nil {
		lm, err := storage.NewLogManager(q.cfg.FS, []string{q.cfg.DataDir}, storage.ManagerOptions{Logger: q.logger})
		if err != nil {
			return fmt.Errorf("open metadata log dir: %w", err)
		}
		if _, err := lm.Load(); err != nil {
			return fmt.Errorf("load metadata log dir: %w", err)
		}
		q.logs = lm
		opener = lm
	}
	l, err := opener.GetOrCreateLog(quorum.MetadataPartition, logCfg)
	if err != nil {
		q.closeLog()
		return fmt.Errorf("open metadata log: %w", err)
	}
	// A log loaded by a LogManager carries the manager's defaults, with
	// time retention: the metadata log must only lose what a snapshot
	// covers.
	if err := l.SetConfig(logCfg); err != nil {
		q.closeLog()
		return fmt.Errorf("configure metadata log: %w", err)
	}
	q.log = l
	q.dir = l.Dir()
	return nil
}

func (q *Quorum) closeLog() {
	if q.logs != nil {
		if err := q.logs.Shutdown(0); err != nil {
			q.logger.Warn("Failed to shut down the metadata log manager", "err", err)
		}
		q.logs = nil
	}
}

// recover rebuilds the state of the last run: the newest usable snapshot,
// the raft log behind it (one entry per stored batch), the hard state, and
// the image up to the committed index. It returns the applied index.
func (q *Quorum) recover() (uint64, error) {
	if err := q.finishSnapshotInstall(); err != nil {
		return 0, err
	}
	snapData, sh, snapRecs, err := q.loadNewestSnapshot()
	if err != nil {
		return 0, err
	}
	if err := q.alignLogWithSnapshot(sh); err != nil {
		return 0, err
	}
	ents, err := q.readEntries(sh)
	if err != nil {
		return 0, err
	}
	hs, _, err := readQuorumState(q.cfg.FS, q.dir)
	if err != nil {
		return 0, err
	}
	hs.Commit = max(hs.Commit, sh.RaftIndex)
	last := q.offsets.lastIndex()
	if hs.Commit > last {
		return 0, fmt.Errorf("%s says raft index %d is committed, but the metadata log ends at index %d: committed entries were lost", QuorumStateFile, hs.Commit, last)
	}
	if n := len(ents); n > 0 && ents[n-1].GetTerm() > hs.Term {
		// Entries are written before the term is; a crash in between
		// leaves a term on disk above quorum-state's. Raft requires its
		// term to be at least its log's last term.
		hs.Term, hs.Vote = ents[n-1].GetTerm(), 0
	}
	q.hs = hs
	q.mem = raft.NewMemoryStorage()
	voters := make([]uint64, len(q.voters))
	for i, v := range q.voters {
		voters[i] = RaftID(v)
	}
	snap := &raftpb.Snapshot{
		Data: snapData,
		Metadata: &raftpb.SnapshotMetadata{
			Index:     new(sh.RaftIndex),
			Term:      new(sh.RaftTerm),
			ConfState: &raftpb.ConfState{Voters: voters},
		},
	}
	if err := q.mem.ApplySnapshot(snap); err != nil {
		return 0, fmt.Errorf("load snapshot into raft: %w", err)
	}
	if err := q.mem.SetHardState(&raftpb.HardState{Term: new(hs.Term), Vote: new(hs.Vote), Commit: new(hs.Commit)}); err != nil {
		return 0, err
	}
	if err := q.mem.Append(ents); err != nil {
		return 0, err
	}
	if err := writeQuorumState(q.cfg.FS, q.dir, hs, q.cfg.ClusterID, q.voters); err != nil {
		return 0, err
	}
	if err := q.ap.recover(sh, snapRecs, snapData, ents, hs.Commit); err != nil {
		return 0, err
	}
	q.commitIndex = hs.Commit
	q.recoveredLogEnd = q.offsets.logEndOffset()
	end, _ := q.offsets.endOffset(hs.Commit)
	q.log.UpdateHighWatermark(end)
	q.logger.Info(fmt.Sprintf("Recovered the metadata quorum state of node %d: epoch %d, voted for %d, snapshot at offset %d (index %d), log end offset %d (index %d), committed up to offset %d (index %d)",
		q.cfg.NodeID, hs.Term, NodeID(hs.Vote), sh.EndOffset, sh.RaftIndex, q.offsets.logEndOffset(), last, end, hs.Commit))
	return hs.Commit, nil
}

// finishSnapshotInstall completes or discards a snapshot received from the
// leader whose installation a crash interrupted. Installing writes
// <name>.part, empties the log at the snapshot's end offset, then renames
// the part: a part whose offset is the start of an empty log was installed.
func (q *Quorum) finishSnapshotInstall() error {
	parts, err := listSnapshots(q.cfg.FS, q.dir, snapshotPartSuffix)
	if err != nil {
		return err
	}
	start, leo := q.log.LogStartOffset(), q.log.LogEndOffset()
	for _, p := range parts {
		path := filepath.Join(q.dir, p.name)
		if p.endOffset == start && start == leo {
			if _, _, _, err := readSnapshotFile(q.cfg.FS, path); err == nil {
				final := filepath.Join(q.dir, SnapshotFileName(p.endOffset, p.epoch))
				if err := q.cfg.FS.Rename(path, final); err != nil {
					return fmt.Errorf("finish installing snapshot %s: %w", p.name, err)
				}
				if err := q.cfg.FS.SyncDir(q.dir); err != nil {
					return fmt.Errorf("finish installing snapshot %s: %w", p.name, err)
				}
				q.logger.Info(fmt.Sprintf("Completed installing metadata snapshot %s interrupted by a crash", filepath.Base(final)))
				continue
			}
		}
		if err := q.cfg.FS.Remove(path); err != nil {
			return fmt.Errorf("delete unfinished snapshot %s: %w", p.name, err)
		}
	}
	return nil
}

// loadNewestSnapshot returns the newest snapshot that parses; a torn or
// corrupt one is skipped with a warning. No snapshot: the empty one at
// index 0, offset 0.
func (q *Quorum) loadNewestSnapshot() ([]byte, SnapshotHeader, []metadata.Record, error) {
	files, err := listSnapshots(q.cfg.FS, q.dir, snapshotSuffix)
	if err != nil {
		return nil, SnapshotHeader{}, nil, err
	}
	for _, f := range files {
		data, h, recs, err := readSnapshotFile(q.cfg.FS, filepath.Join(q.dir, f.name))
		if err != nil {
			q.logger.Warn(fmt.Sprintf("Skipping unreadable metadata snapshot %s", f.name), "err", err)
			continue
		}
		q.logger.Info(fmt.Sprintf("Loaded metadata snapshot %s: %d records up to offset %d (raft index %d)", f.name, len(recs), h.EndOffset, h.RaftIndex))
		return data, h, recs, nil
	}
	return nil, SnapshotHeader{}, nil, nil
}

// alignLogWithSnapshot makes the log start at or before the snapshot's end
// with a batch boundary there, or empties it at the snapshot's end when the
// log is behind it.
func (q *Quorum) alignLogWithSnapshot(sh SnapshotHeader) error {
	start, leo := q.log.LogStartOffset(), q.log.LogEndOffset()
	q.offsets.reset(sh.RaftIndex, sh.EndOffset)
	switch {
	case leo < sh.EndOffset:
		if err := q.log.TruncateFullyAndStartAt(sh.EndOffset); err != nil {
			return fmt.Errorf("restart the metadata log at snapshot offset %d: %w", sh.EndOffset, err)
		}
		return nil
	case start > sh.EndOffset:
		return fmt.Errorf("the metadata log starts at offset %d but the newest usable snapshot ends at %d: offsets [%d, %d) are lost", start, sh.EndOffset, sh.EndOffset, start)
	}
	if sh.EndOffset > start {
		q.log.UpdateHighWatermark(sh.EndOffset)
		if err := q.log.IncrementLogStartOffset(sh.EndOffset); err != nil {
			return fmt.Errorf("move the metadata log start to snapshot offset %d: %w", sh.EndOffset, err)
		}
	}
	return nil
}

// readEntries rebuilds raft entries from the batches after the snapshot:
// entry snapshot index + k is the k-th batch, its term the batch's leader
// epoch; a control batch is an empty entry (a new leader's first entry).
func (q *Quorum) readEntries(sh SnapshotHeader) ([]*raftpb.Entry, error) {
	var ents []*raftpb.Entry
	prevTerm := sh.RaftTerm
	off := sh.EndOffset
	err := quorum.ForEachStoredBatch(q.log, off, q.log.LogEndOffset(), func(h storage.BatchHeader, raw []byte) error {
		if h.BaseOffset != off {
			return fmt.Errorf("batch at offset %d where raft entry %d should start at %d", h.BaseOffset, q.offsets.lastIndex()+1, off)
		}
		term := uint64(max(h.PartitionLeaderEpoch, 0))
		if term < prevTerm || term == 0 {
			return fmt.Errorf("batch at offset %d has epoch %d after epoch %d", h.BaseOffset, h.PartitionLeaderEpoch, prevTerm)
		}
		prevTerm = term
		idx := q.offsets.lastIndex() + 1
		e := &raftpb.Entry{Index: new(idx), Term: new(term), Type: raftpb.EntryNormal.Enum()}
		if !h.IsControl() {
			e.Data = append([]byte(nil), raw...)
		}
		if err := q.offsets.add(h.NextOffset()); err != nil {
			return err
		}
		ents = append(ents, e)
		off = h.NextOffset()
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("rebuild raft log from the metadata log: %w", err)
	}
	return ents, nil
}

// Leader implements quorum.Quorum: raft's leader and term.
func (q *Quorum) Leader() quorum.LeaderAndEpoch {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.leader
}

// Describe implements quorum.Quorum. On the leader every voter's log end
// offset is its raft match index mapped to an offset; elsewhere only this
// voter's is known (-1 for the others), as Kafka answers DescribeQuorum
// only on the leader. Observers are the non-voters that read through
// ReadCommitted on this voter in the last 5 minutes.
func (q *Quorum) Describe() quorum.Description {
	q.mu.Lock()
	defer q.mu.Unlock()
	d := q.desc
	d.Voters = slices.Clone(d.Voters)
	nowMs := q.cfg.Now().UnixMilli()
	for _, id := range slices.Sorted(maps.Keys(q.observers)) {
		o := q.observers[id]
		if nowMs-o.lastFetchMs > observerExpiryMs {
			delete(q.observers, id)
			continue
		}
		d.Observers = append(d.Observers, quorum.ReplicaState{ReplicaID: id, LogEndOffset: o.logEndOffset, LastFetchTimestamp: o.lastFetchMs, LastCaughtUpTimestamp: o.lastCaughtUpMs})
	}
	return d
}

// RecoveredLogEndOffset is the end offset of the metadata log Open
// recovered. The commit index on disk may lag behind what this voter
// applied before it stopped, never behind this offset: a state built
// from the log up to here holds every record the voter may have applied.
func (q *Quorum) RecoveredLogEndOffset() int64 { return q.recoveredLogEnd }

// Done is closed when the quorum stops: after Close, or after a storage
// failure (then Err says which, and the node should exit).
func (q *Quorum) Done() <-chan struct{} { return q.stopC }

// Err is the error that stopped the quorum (a failed disk write), nil
// while it runs or after a plain Close.
func (q *Quorum) Err() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.failed
}

// Close stops the raft goroutine, the applier and the transport, fails
// pending Appends with quorum.ErrClosed, writes the hard state and shuts
// down the log manager it opened.
func (q *Quorum) Close() error {
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return nil
	}
	q.closed = true
	q.mu.Unlock()
	q.stop()
	q.wg.Wait()
	err := q.tr.Close()
	q.ap.stop()
	q.mu.Lock()
	for i, p := range q.waiters {
		p.done <- proposalResult{err: quorum.ErrClosed}
		delete(q.waiters, i)
	}
	q.mu.Unlock()
	if q.hsDirty {
		if werr := writeQuorumState(q.cfg.FS, q.dir, q.hs, q.cfg.ClusterID, q.voters); werr != nil && err == nil {
			err = werr
		}
	}
	q.closeLog()
	return err
}

func (q *Quorum) stop() { q.stopped.Do(func() { close(q.stopC) }) }

// ensure Quorum is a quorum.Quorum.
var _ quorum.Quorum = (*Quorum)(nil)
