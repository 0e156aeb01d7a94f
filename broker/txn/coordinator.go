package txn

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/faultline/faultline/broker/group"
	"github.com/faultline/faultline/broker/metadata"
	"github.com/faultline/faultline/internal/gostack"
)

// Coordinator is the transaction coordinator of one broker. Create it with
// New, feed it metadata images with ApplyImage, Close it at shutdown.
type Coordinator struct {
	cfg     Config
	log     StateLog
	markers MarkerWriter
	md      metadata.Source
	logger  *slog.Logger

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	appendLocks group.PartitionLocks

	// mu guards parts, txns and every entry's meta pointer. Lock order:
	// entry.mu, then the partition's append lock, then mu.
	mu       sync.Mutex
	closed   bool
	parts    map[int32]*partState
	txns     map[string]*entry
	tokenSeq uint64
}

// partState is one __transaction_state partition this broker leads; token
// changes at every gain of leadership so stale work can tell.
type partState struct {
	loading bool
	token   uint64
	epoch   int32 // the partition's leader epoch: the coordinator epoch
	cancel  context.CancelFunc
}

// entry is one transactional id. mu serialises the requests on it; meta
// is nil until the first InitProducerId is durable, and gen counts the
// records installed in it. finishing (like meta and gen guarded by the
// coordinator's mu) is the prepared transaction whose markers are being
// written, nil when none is.
type entry struct {
	mu        sync.Mutex
	partition int32
	meta      *Metadata
	gen       uint64
	finishing *finishing
}

// finishing is a prepared transaction being finished: its markers, then
// its Complete record.
type finishing struct {
	gen    uint64        // the entry's gen once its prepare record was in
	marked chan struct{} // closed once its markers are written (or it is given up)
	// complete is its Complete state, set once its markers are written:
	// from then on the transaction is decided in every partition, and
	// a request on the id reads it as complete before the record is
	// written (view).
	complete *Metadata
	// timer writes the Complete record once CompleteDelayMs passed after
	// the markers; set (under the coordinator's mu) with complete.
	timer *time.Timer
}

// view returns what e's requests decide on: its metadata, or the
// Complete state of its prepared transaction once the markers are
// written; the caller holds c.mu.
func (e *entry) view() *Metadata {
	if f := e.finishing; f != nil && f.complete != nil && f.gen == e.gen {
		return f.complete
	}
	return e.meta
}

// New returns a coordinator that owns no partition yet.
func New(cfg Config, log StateLog, markers MarkerWriter, md metadata.Source) (*Coordinator, error) {
	if log == nil || markers == nil || md == nil {
		return nil, errors.New("transaction coordinator needs a state log, a marker writer and a metadata source")
	}
	cfg.fillDefaults()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("transaction coordinator config: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &Coordinator{
		cfg: cfg, log: log, markers: markers, md: md, logger: cfg.Logger,
		ctx: ctx, cancel: cancel,
		parts: map[int32]*partState{},
		txns:  map[string]*entry{},
	}
	c.wg.Add(2)
	go c.every(cfg.AbortIntervalMs, func() { c.AbortTimedOut() })
	go c.every(cfg.ExpirationIntervalMs, func() { c.ExpireIDs() })
	return c, nil
}

// Close stops loads, marker retries and the timeout scan.
func (c *Coordinator) Close() {
	c.mu.Lock()
	c.closed = true
	for p := range c.parts {
		c.unloadLocked(p)
	}
	c.mu.Unlock()
	c.cancel()
	c.wg.Wait()
}

func (c *Coordinator) nowMs() int64 { return c.cfg.Now().UnixMilli() }

func (c *Coordinator) numPartitions() int32 {
	if t := c.md.Image().Topic(StateTopic); t != nil && len(t.Partitions) > 0 {
		return int32(len(t.Partitions))
	}
	return c.cfg.NumPartitions
}

// PartitionFor is the __transaction_state partition of a transactional id.
func (c *Coordinator) PartitionFor(txnID string) int32 {
	return group.HashPartition(txnID, c.numPartitions())
}

// ApplyImage brings the owned partitions in line with image: loads the
// __transaction_state partitions this node now leads (again when their
// leader epoch changed) and drops the others. It has the shape of a
// metadata.Publisher subscriber.
func (c *Coordinator) ApplyImage(_, image *metadata.Image) {
	leads := map[int32]int32{}
	if t := image.Topic(StateTopic); t != nil {
		for _, p := range t.Partitions {
			if p.Leader == c.cfg.NodeID {
				leads[p.Partition] = p.LeaderEpoch
			}
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	for p := range c.parts {
		if _, ok := leads[p]; !ok {
			c.unloadLocked(p)
		}
	}
	for p, epoch := range leads {
		if st := c.parts[p]; st != nil {
			if st.epoch == epoch {
				continue
			}
			c.unloadLocked(p)
		}
		c.tokenSeq++
		st := &partState{loading: true, token: c.tokenSeq, epoch: epoch}
		c.parts[p] = st
		c.startLoadLocked(p, st)
	}
}

func (c *Coordinator) startLoadLocked(p int32, st *partState) {
	ctx, cancel := context.WithCancel(c.ctx)
	st.cancel = cancel
	c.logger.Info(fmt.Sprintf("Loading transaction metadata from %s-%d (coordinator epoch %d)", StateTopic, p, st.epoch))
	c.wg.Add(1)
	go c.load(ctx, p, st)
}

func (c *Coordinator) unloadLocked(p int32) {
	st := c.parts[p]
	delete(c.parts, p)
	if st != nil && st.cancel != nil {
		st.cancel()
	}
	n := 0
	for id, e := range c.txns {
		if e.partition == p {
			c.stopCompleteLocked(e)
			delete(c.txns, id)
			n++
		}
	}
	c.logger.Info(fmt.Sprintf("Unloaded %d transactional ids of %s-%d", n, StateTopic, p))
}

func (c *Coordinator) current(p int32, token uint64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.parts[p]
	return st != nil && st.token == token && !st.loading
}

// load replays partition p and installs its transactional ids; prepared
// transactions get their markers (again).
func (c *Coordinator) load(ctx context.Context, p int32, st *partState) {
	defer c.wg.Done()
	for {
		err := c.loadOnce(ctx, p, st)
		if err == nil || ctx.Err() != nil {
			return
		}
		c.logger.Warn(fmt.Sprintf("Error loading transaction metadata from %s-%d, retrying in %d ms: %v", StateTopic, p, c.cfg.RetryBackoffMs, err))
		select {
		case <-ctx.Done():
			return
		case <-time.After(ms(c.cfg.RetryBackoffMs)):
		}
	}
}

func (c *Coordinator) loadOnce(ctx context.Context, p int32, st *partState) error {
	lock := c.appendLocks.Of(p)
	lock.Lock()
	defer lock.Unlock()
	start := c.cfg.Now()
	loaded := map[string]Metadata{}
	skipped := 0
	err := c.log.Replay(ctx, p, func(key, value []byte) error {
		m, tomb, err := DecodeRecord(key, value)
		switch {
		case err != nil:
			skipped++
			c.logger.Warn(fmt.Sprintf("Skipping unreadable record in %s-%d: %v", StateTopic, p, err))
		case tomb:
			delete(loaded, m.TransactionalID)
		default:
			loaded[m.TransactionalID] = m
		}
		return nil
	})
	if err != nil {
		return err
	}
	parts := c.numPartitions()
	c.mu.Lock()
	if cur := c.parts[p]; cur != st {
		c.mu.Unlock()
		return nil
	}
	var prepared []*entry
	for id, m := range loaded {
		if group.HashPartition(id, parts) != p {
			c.logger.Warn(fmt.Sprintf("Ignoring transactional id %s found in %s-%d: it belongs to partition %d", id, StateTopic, p, group.HashPartition(id, parts)))
			continue
		}
		m := m
		e := &entry{partition: p, meta: &m}
		c.txns[id] = e
		if m.State.prepared() {
			prepared = append(prepared, e)
		}
	}
	st.loading = false
	c.mu.Unlock()
	c.logger.Info(fmt.Sprintf("Finished loading %d transactional ids from %s-%d in %d milliseconds (%d to complete, %d unreadable records skipped)",
		len(loaded), StateTopic, p, c.cfg.Now().Sub(start).Milliseconds(), len(prepared), skipped))
	for _, e := range prepared {
		if c.cfg.Unsafe.TakeoverLeavesPrepared {
			continue
		}
		m := *e.meta
		if c.cfg.Unsafe.TakeoverCommitsAborts && m.State == PrepareAbort {
			m.State = PrepareCommit
		}
		c.finishAsync(e, p, st.token, st.epoch, m)
	}
	return nil
}

// op is the context of one request on a transactional id.
type op struct {
	e     *entry
	p     int32
	token uint64
	epoch int32
}

// lookup finds (or creates) the entry of txnID and checks that this node
// coordinates it; the caller then takes e.mu and calls recheck.
func (c *Coordinator) lookup(txnID string, create bool) (op, int16) {
	p := c.PartitionFor(txnID)
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.parts[p]
	switch {
	case st == nil || c.closed:
		return op{}, kerr.NotCoordinator.Code
	case st.loading:
		return op{}, kerr.CoordinatorLoadInProgress.Code
	}
	e := c.txns[txnID]
	if e == nil {
		if !create {
			return op{}, kerr.TransactionalIDNotFound.Code
		}
		e = &entry{partition: p}
		c.txns[txnID] = e
	}
	return op{e: e, p: p, token: st.token, epoch: st.epoch}, 0
}

// with runs fn on txnID's entry with its lock held; fn gets the current
// metadata (nil if none). It returns fn's code, or NOT_COORDINATOR when
// the partition moved meanwhile.
func (c *Coordinator) with(txnID string, create bool, fn func(o op, cur *Metadata) int16) int16 {
	o, code := c.lookup(txnID, create)
	if code != 0 {
		return code
	}
	c.awaitFinish(o.e)
	o.e.mu.Lock()
	defer o.e.mu.Unlock()
	if !c.current(o.p, o.token) {
		return kerr.NotCoordinator.Code
	}
	c.mu.Lock()
	var cur *Metadata
	if m := o.e.view(); m != nil {
		m := m.clone()
		cur = &m
	}
	c.mu.Unlock()
	return fn(o, cur)
}

// awaitFinish waits up to BusyWaitMs for the markers of e's prepared
// transaction, so that a producer that starts its next transaction right
// after EndTxn answered meets a complete one rather than
// CONCURRENT_TRANSACTIONS; past the wait the request is decided as it
// stands.
func (c *Coordinator) awaitFinish(e *entry) {
	c.mu.Lock()
	f := e.finishing
	c.mu.Unlock()
	if f == nil {
		return
	}
	select {
	case <-f.marked:
		return // the common case: no timer to arm
	default:
	}
	t := time.NewTimer(ms(c.cfg.BusyWaitMs))
	defer t.Stop()
	select {
	case <-f.marked:
	case <-t.C:
	case <-c.ctx.Done():
	}
}

// persist writes m to __transaction_state and installs it; the caller
// holds o.e.mu.
func (c *Coordinator) persist(o op, m Metadata) int16 {
	return c.write(o, m.TransactionalID, EncodeValue(m), m.State.String(), &m)
}

// write appends the record of transactional id id (value nil: its
// tombstone) to o's __transaction_state partition and, once it is there
// and the partition still ours, installs m (nil: the id is forgotten); the
// caller holds o.e.mu. what names the record in a failure's log line.
func (c *Coordinator) write(o op, id string, value []byte, what string, m *Metadata) int16 {
	lock := c.appendLocks.Of(o.p)
	lock.Lock()
	defer lock.Unlock()
	if !c.current(o.p, o.token) {
		return kerr.NotCoordinator.Code
	}
	if err := c.log.Append(c.ctx, ms(c.cfg.AppendTimeoutMs), o.p, EncodeKey(id), value); err != nil {
		c.logger.Warn(fmt.Sprintf("Failed to write transaction %s (%s) to %s-%d: %v", id, what, StateTopic, o.p, err))
		if errors.Is(err, ErrNotLeader) {
			return kerr.NotCoordinator.Code
		}
		return kerr.CoordinatorNotAvailable.Code
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if st := c.parts[o.p]; st == nil || st.token != o.token {
		return kerr.NotCoordinator.Code
	}
	o.e.meta = m
	o.e.gen++
	// The finished transaction's next state is written (or this is its
	// Complete record): a pending Complete record is no longer needed.
	c.stopCompleteLocked(o.e)
	return 0
}

func (c *Coordinator) newID() func() (int64, error) {
	return func() (int64, error) {
		ctx, cancel := context.WithTimeout(c.ctx, ms(c.cfg.AppendTimeoutMs))
		defer cancel()
		return c.cfg.NewProducerID(ctx)
	}
}

// apply persists a decision and starts its markers; it returns the code
// for the client and, when markers were started, a channel closed once
// the transaction is complete.
func (c *Coordinator) apply(o op, d Decision) (int16, <-chan struct{}) {
	if d.Write {
		if code := c.persist(o, d.Next); code != 0 {
			return code, nil
		}
	}
	if d.Markers {
		return d.Code, c.finishAsync(o.e, o.p, o.token, o.epoch, d.Next)
	}
	return d.Code, nil
}

// finishAsync writes the markers of prepared transaction m and then its
// Complete state, retrying until both are done or this node stops
// coordinating the partition; the caller holds e.mu, and m is e's
// metadata. Once the markers are written the next request on the id may
// go ahead (awaitFinish), deciding on the Complete state (view); the
// Complete record waits CompleteDelayMs for it, on a timer rather than a
// sleeping goroutine, and when that request writes first (a producer's
// next AddPartitionsToTxn), the record is not needed and the timer is
// stopped (write): the transaction's next state is durable, and it was
// written after the markers. The returned channel is closed once the
// markers are written, or when the transaction is no longer this node's
// to finish.
func (c *Coordinator) finishAsync(e *entry, p int32, token uint64, coordEpoch int32, m Metadata) <-chan struct{} {
	c.mu.Lock()
	f := &finishing{gen: e.gen, marked: make(chan struct{})}
	e.finishing = f
	c.mu.Unlock()
	c.wg.Add(1)
	go func() {
		gostack.Reserve()
		defer c.wg.Done()
		marked := sync.OnceFunc(func() { close(f.marked) })
		handedOff := false
		defer func() { // complete, superseded, or no longer this node's to finish
			if !handedOff {
				c.doneFinishing(e, f)
			}
			marked()
		}()
		marker := Marker{ProducerID: m.ProducerID, ProducerEpoch: m.ProducerEpoch, CoordinatorEpoch: coordEpoch,
			Commit: m.State == PrepareCommit, Partitions: m.Partitions}
		for attempt := 0; len(marker.Partitions) > 0; attempt++ {
			if attempt > 0 && !c.sleep(c.cfg.RetryBackoffMs) {
				return
			}
			if !c.current(p, token) {
				return
			}
			marker.Partitions = c.markers.WriteMarkers(c.ctx, ms(c.cfg.AppendTimeoutMs), marker)
			if len(marker.Partitions) > 0 && attempt%50 == 0 {
				c.logger.Warn(fmt.Sprintf("Markers of transaction %s not yet written to %d partitions; retrying", m.TransactionalID, len(marker.Partitions)))
			}
		}
		next, ok := Complete(m, c.nowMs())
		if !ok {
			return
		}
		c.mu.Lock()
		f.complete = &next
		if st := c.parts[p]; c.cfg.CompleteDelayMs > 0 && !c.closed && e.gen == f.gen && st != nil && st.token == token {
			c.wg.Add(1)
			handedOff = true
			f.timer = time.AfterFunc(ms(c.cfg.CompleteDelayMs), func() {
				defer c.wg.Done()
				defer c.doneFinishing(e, f)
				c.completeLoop(e, p, token, f)
			})
		}
		c.mu.Unlock()
		marked()
		if !handedOff {
			c.completeLoop(e, p, token, f)
		}
	}()
	return f.marked
}

// doneFinishing forgets f as e's transaction being finished.
func (c *Coordinator) doneFinishing(e *entry, f *finishing) {
	c.mu.Lock()
	if e.finishing == f {
		e.finishing = nil
	}
	c.mu.Unlock()
}

// stopCompleteLocked stops the Complete record timer of e's finished
// transaction, if one is pending, and forgets the transaction: its next
// state was written (write), or e is unloaded. The caller holds c.mu.
func (c *Coordinator) stopCompleteLocked(e *entry) {
	f := e.finishing
	if f == nil || f.timer == nil {
		return
	}
	if f.timer.Stop() {
		c.wg.Done()
	}
	e.finishing = nil
}

// completeLoop writes f's Complete record, retrying until it is written,
// superseded, or no longer this node's to write.
func (c *Coordinator) completeLoop(e *entry, p int32, token uint64, f *finishing) {
	for attempt := 0; ; attempt++ {
		if attempt > 0 && !c.sleep(c.cfg.RetryBackoffMs) {
			return
		}
		if !c.current(p, token) {
			return
		}
		if c.complete(e, p, token, f) {
			return
		}
	}
}

// complete persists the Complete state of f, true when done (or when the
// entry moved on and there is nothing left to do).
func (c *Coordinator) complete(e *entry, p int32, token uint64, f *finishing) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	c.mu.Lock()
	superseded := e.gen != f.gen
	c.mu.Unlock()
	if superseded {
		return true
	}
	next := f.complete.clone()
	next.UpdateMs = c.nowMs()
	code := c.persist(op{e: e, p: p, token: token}, next)
	if code == 0 {
		c.logger.Debug(fmt.Sprintf("Completed transaction %s as %s", next.TransactionalID, next.State))
	}
	return code == 0
}

func (c *Coordinator) sleep(msv int64) bool {
	t := time.NewTimer(ms(msv))
	defer t.Stop()
	select {
	case <-c.ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// every runs fn every intervalMs until the coordinator closes (the
// timeout scan, the expiry scan).
func (c *Coordinator) every(intervalMs int64, fn func()) {
	defer c.wg.Done()
	t := time.NewTicker(ms(intervalMs))
	defer t.Stop()
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-t.C:
			fn()
		}
	}
}

// AbortTimedOut aborts every open transaction this node coordinates that
// is older than its timeout, bumping its epoch to fence the producer that
// left it (transaction.abort.timed.out.transaction.cleanup.interval.ms
// runs it). It returns how many aborts it started.
func (c *Coordinator) AbortTimedOut() int {
	now := c.nowMs()
	c.mu.Lock()
	var ids []string
	for id, e := range c.txns {
		if e.meta != nil && TimedOut(*e.meta, now) {
			ids = append(ids, id)
		}
	}
	c.mu.Unlock()
	n := 0
	for _, id := range ids {
		c.with(id, false, func(o op, cur *Metadata) int16 {
			if cur == nil || !TimedOut(*cur, now) {
				return 0
			}
			c.logger.Info(fmt.Sprintf("Aborting transaction %s of producer %d epoch %d: it is older than its timeout of %d ms", id, cur.ProducerID, cur.ProducerEpoch, cur.TimeoutMs))
			code, _ := c.apply(o, Abort(*cur, c.newID(), now))
			if code == 0 {
				n++
			}
			return code
		})
	}
	return n
}

// Expired reports whether m is a transactional id to forget at nowMs: no
// transaction open (nor being ended) and unused for longer than
// expirationMs (transactional.id.expiration.ms).
func Expired(m Metadata, nowMs, expirationMs int64) bool {
	switch m.State {
	case Empty, CompleteCommit, CompleteAbort:
		return nowMs-m.UpdateMs > expirationMs
	}
	return false
}

// ExpireIDs forgets every transactional id this node coordinates that
// expired (Expired): a tombstone is written to __transaction_state first,
// so a later load forgets it too, and a producer that comes back with it
// gets a new producer id from InitProducerId. It returns how many it
// forgot (transaction.remove.expired.transaction.cleanup.interval.ms runs
// it).
func (c *Coordinator) ExpireIDs() int {
	now := c.nowMs()
	c.mu.Lock()
	var ids []string
	for id, e := range c.txns {
		if e.meta != nil && Expired(*e.meta, now, c.cfg.ExpirationMs) {
			ids = append(ids, id)
		}
	}
	c.mu.Unlock()
	n := 0
	for _, id := range ids {
		c.with(id, false, func(o op, cur *Metadata) int16 {
			if cur == nil || !Expired(*cur, now, c.cfg.ExpirationMs) {
				return 0
			}
			// The entry stays, with no metadata: as an id never seen, the
			// next InitProducerId starts it over (a request already
			// waiting on the entry sees the same).
			if code := c.write(o, id, nil, "expiry tombstone", nil); code != 0 {
				return code
			}
			c.logger.Info(fmt.Sprintf("Expired transactional id %s (producer %d, unused for %d ms)", id, cur.ProducerID, now-cur.UpdateMs))
			n++
			return 0
		})
	}
	return n
}
