// Package compact is the compaction workload, registered as "compact":
// keyed upserts and deletes (tombstones) to one topic with
// cleanup.policy=compact, then a final scan of every partition from its
// start to its end, which the checker's "compaction" analysis holds
// against the latest acknowledged put of each key (lost-latest-value,
// resurrected-delete).
//
// Record key k (an integer, written "k<k>") lives in partition k mod P of
// topic "c0", so each partition holds several keys for the cleaner to
// compact. Puts go to a window of Keys keys that moves up one key every
// RetireEvery puts; a key behind the window is never written again, so
// its latest value has to outlive the rest of the run. A put is invoked
// as [k, v] (v null: delete) and completes as [k, v, offset]; a send that
// errors is info (it may have been written). The scan reads every partition up to the end offsets it
// lists at its start and completes as {"k": [[offset, v], ...]}; one that
// does not get there in time fails, and the final phase tries again with
// a fresh process. When the final phase ends without a scan that got
// there, it says why (Stalls): for every key of a partition the last scan
// did not finish, the partition's high watermark, last stable offset and
// open transactions, which the harness records as a stalled-reads event.
// The topic rolls segments every second and asks for eager cleaning
// (min.cleanable.dirty.ratio 0.01, delete.retention.ms 2 s), so a
// broker's cleaner runs during a short test; a broker that does not
// compact (kfake) keeps the whole log, which checks valid as well.
//
// Under --txn (txn.go) every put is a transaction of its own from a
// transactional producer per client: ok once committed, fail once aborted
// (one in AbortOneIn on purpose, held open up to MaxHold first), info when
// the outcome is unknown. The scan then reads committed records only
// (read_committed, the markers kept to see each partition's end), and the
// checker adds G1a: an aborted put's value in the scan.
package compact

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/faultline/faultline/checker"
	"github.com/faultline/faultline/workloads"
)

// Topic is the compacted topic the workload writes.
const Topic = "c0"

// Keys is the number of record keys written at a time (default of New).
const Keys = 16

// TopicConfigs are the compacted topic's settings.
func TopicConfigs() map[string]*string {
	s := func(v string) *string { return &v }
	return map[string]*string{
		"cleanup.policy":            s("compact"),
		"segment.ms":                s("1000"),
		"min.cleanable.dirty.ratio": s("0.01"),
		"delete.retention.ms":       s("2000"),
		"min.compaction.lag.ms":     s("0"),
	}
}

const requestTimeout = workloads.DefaultRequestTimeout

// New builds the workload against a serving cluster.
func New(o workloads.Options) (workloads.Workload, error) {
	if o.Subscribe {
		return nil, errors.New("the compact workload has no --subscribe")
	}
	parts := o.PartitionsPerTopic
	if parts <= 0 {
		parts = 4
	}
	rf := o.ReplicationFactor
	if rf <= 0 {
		rf = 3
	}
	adminCl, err := kgo.NewClient(kgo.SeedBrokers(o.Seeds...), kgo.RequestRetries(3), kgo.RetryTimeout(requestTimeout))
	if err != nil {
		return nil, fmt.Errorf("admin client: %w", err)
	}
	w := &workload{o: o, parts: parts, rf: int16(rf), adm: kadm.NewClient(adminCl), gen: NewGenerator(o.Seed, Keys)}
	return w, nil
}

type workload struct {
	o       workloads.Options
	parts   int
	rf      int16
	adm     *kadm.Client
	gen     *Generator
	mu      sync.Mutex // guards created and clients: clients are made concurrently
	created bool
	clients int // clients made so far: the next one's number
	// began are the transactional.ids a transaction began under.
	began workloads.TxnIDs
}

func (w *workload) Generator() workloads.Generator { return w.gen }

func (w *workload) ensure(ctx context.Context) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.created {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	res, err := w.adm.CreateTopics(ctx, int32(w.parts), w.rf, TopicConfigs(), Topic)
	if err != nil {
		return fmt.Errorf("create topic %s: %w", Topic, err)
	}
	for _, r := range res {
		if r.Err != nil && !errors.Is(r.Err, kerr.TopicAlreadyExists) {
			return fmt.Errorf("create topic %s: %w", Topic, r.Err)
		}
	}
	w.created = true
	return nil
}

func (w *workload) NewClient() (workloads.Client, error) {
	if err := w.ensure(context.Background()); err != nil {
		return nil, err
	}
	w.mu.Lock()
	w.clients++
	n := w.clients
	w.mu.Unlock()
	return newClient(w.o, w.parts, n, &w.began)
}

// UsedTransactionalIDs returns the transactional.ids a transaction began
// under (at most workloads.TxnIDsMax) and how many more there were, for
// the harness's probe after the final reads.
func (w *workload) UsedTransactionalIDs() ([]string, int) { return w.began.List(), w.began.Dropped() }

func (w *workload) OwnsTopic(topic string) bool { return topic == Topic }

// TransactionalIDs returns the transactional.ids of the last clients made
// (at most 64; none without --txn), for faults aimed at their coordinators.
func (w *workload) TransactionalIDs() []string {
	if !w.o.Txn {
		return nil
	}
	w.mu.Lock()
	n := w.clients
	w.mu.Unlock()
	return workloads.RecentIDs(int64(n), func(i int64) string { return txnPutID(int(i)) })
}

func (w *workload) Close() { w.adm.Close() }

// Final scans the topic until one scan reached every partition's end.
func (w *workload) Final(context.Context, io.Writer) workloads.Final {
	return &final{w: w, started: map[int]bool{}}
}

type final struct {
	w       *workload
	started map[int]bool
	done    bool
	mu      sync.Mutex // guards short and seen: scans run on the harness's workers
	// short maps the partitions the last scan that stopped short did not
	// finish to the end offsets it needed.
	short map[int32]int64
	// seen maps each open transaction a look after a stopped scan found
	// on a partition it did not finish to when a look first found it
	// (under --txn): how long a transaction stays open is measured on the
	// harness's clock, never the broker's.
	seen map[openTxn]time.Time
}

// openTxn names a transaction open on a partition of the topic.
type openTxn struct {
	partition   int32
	producerID  int64
	epoch       int16
	firstOffset int64
}

func (f *final) Next(p int) (checker.Op, bool) {
	if f.done || f.started[p] {
		return checker.Op{}, false
	}
	f.started[p] = true
	return checker.Op{Type: checker.Invoke, F: checker.FScan, Raw: []byte("null")}, true
}

func (f *final) Update(c checker.Op) {
	if c.F == checker.FScan && c.Type == checker.OK {
		f.done = true
	}
}

// NewClient makes the scan's client: no transactional producer (it only
// scans), reading committed records under --txn.
func (f *final) NewClient() (workloads.Client, error) {
	if err := f.w.ensure(context.Background()); err != nil {
		return nil, err
	}
	o := f.w.o
	o.Txn = false
	c, err := newClient(o, f.w.parts, 0, nil)
	if err != nil {
		return nil, err
	}
	c.readCommitted = f.w.o.Txn
	c.stoppedShort = f.stopped
	return c, nil
}

// stopped learns the partitions a scan did not finish and, under --txn,
// looks at the transactions open on them (DescribeProducers), noting when
// each was first found open.
func (f *final) stopped(need map[int32]int64) {
	f.mu.Lock()
	f.short = need
	f.mu.Unlock()
	if !f.w.o.Txn {
		return
	}
	set := kadm.TopicsSet{}
	for p := range need {
		set.Add(Topic, p)
	}
	// The scan's own context has ended; this look gets its own bound.
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	producers, err := f.w.adm.DescribeProducers(ctx, set)
	cancel()
	now := time.Now()
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.seen == nil {
		f.seen = map[openTxn]time.Time{}
	}
	for p := range need {
		open, _ := workloads.OpenTxns(producers, err, Topic, p) // a partition not listed is looked at next time
		for _, t := range open {
			k := openTxn{p, t.ProducerID, t.Epoch, t.FirstOffset}
			if _, ok := f.seen[k]; !ok {
				f.seen[k] = now
			}
		}
	}
}

func (f *final) Done() bool      { return f.done }
func (f *final) Missing() string { return "a scan of topic " + Topic + " to its end" }

var _ workloads.StallExplainer = (*final)(nil)

// Stalls says, for every key the workload may have put to a partition the
// last scan did not finish, what the healed cluster answers for that
// partition (workloads.FillStalls), and under --txn the transaction
// timeout of the workload's producers (the only writers of the topic) and
// how long each open transaction has been seen open, from the first look
// that found it after a scan stopped short (OpenTxn.OpenForMs): a last
// stable offset held below the high watermark by a transaction that never
// ended keeps the scan, and every read_committed reader, from the records
// above it, which the checker reports where it finds acknowledged puts
// there once the transaction stayed open well past its timeout.
// The keys repeat their partition's answer; there are about puts /
// RetireEvery + Keys of them in all.
func (f *final) Stalls(ctx context.Context) []checker.Stall {
	f.mu.Lock()
	short := f.short
	f.mu.Unlock()
	if len(short) == 0 {
		return nil
	}
	var out []checker.Stall
	for k := range f.w.gen.KeysUsed() {
		if p := int32(k % f.w.parts); short[p] > 0 {
			out = append(out, checker.Stall{Key: k, Topic: Topic, Partition: p})
		}
	}
	workloads.FillStalls(ctx, f.w.adm, requestTimeout, f.w.o.Txn, out)
	if f.w.o.Txn {
		timeout := workloads.TxnTimeoutOr(f.w.o.TxnTimeout, requestTimeout).Milliseconds()
		now := time.Now()
		f.mu.Lock()
		for i := range out {
			s := &out[i]
			s.TxnTimeoutMs = timeout
			for j := range s.OpenTxns {
				t := &s.OpenTxns[j]
				if first, ok := f.seen[openTxn{s.Partition, t.ProducerID, t.Epoch, t.FirstOffset}]; ok {
					t.OpenForMs = now.Sub(first).Milliseconds()
				}
			}
		}
		f.mu.Unlock()
	}
	return out
}

// Generator hands out puts: three in four upsert a fresh value, one in
// four deletes, each to a random key of a sliding window of keys. Every
// RetireEvery puts the window moves up by one key, and the key that falls
// out of it is never written again: its latest value must then survive
// every later cleaning, restart and failover until the final scan. (With a
// fixed set of keys written to the end, a cleaner that drops a key's
// latest record is hidden by the next put of the key.) It is a pure
// function of its seed.
type Generator struct {
	rng   *rand.Rand
	keys  int
	puts  int
	value int64
}

// RetireEvery is how many puts the key window waits before it retires its
// lowest key.
const RetireEvery = 32

// NewGenerator returns a generator over a window of keys record keys.
func NewGenerator(seed int64, keys int) *Generator {
	return &Generator{rng: rand.New(rand.NewPCG(uint64(seed), 0xc0ffee)), keys: keys}
}

// Next returns the next put.
func (g *Generator) Next(int) (checker.Op, bool) {
	k := g.puts/RetireEvery + g.rng.IntN(g.keys)
	g.puts++
	v := "null"
	if g.rng.IntN(4) != 0 {
		v = strconv.FormatInt(g.value, 10)
		g.value++
	}
	return checker.Op{Type: checker.Invoke, F: checker.FPut, Raw: []byte(fmt.Sprintf("[%d,%s]", k, v))}, true
}

// Update learns nothing: puts do not depend on outcomes.
func (g *Generator) Update(checker.Op) {}

// KeysUsed is how many keys the puts handed out so far may have written:
// keys 0 up to (not including) it. Like Next, it must not run
// concurrently with Next.
func (g *Generator) KeysUsed() int {
	if g.puts == 0 {
		return 0
	}
	return (g.puts-1)/RetireEvery + g.keys
}

type client struct {
	parts    int
	producer *kgo.Client
	seeds    []string
	// txn is set under --txn: each put is a transaction of its own.
	txn *txnPut
	// readCommitted makes the scan read committed records only (--txn).
	readCommitted bool
	// stoppedShort, when set, learns the partitions a scan did not
	// finish and the end offsets it needed there.
	stoppedShort func(need map[int32]int64)
}

func newClient(o workloads.Options, parts, n int, began *workloads.TxnIDs) (*client, error) {
	popts := []kgo.Opt{
		kgo.SeedBrokers(o.Seeds...),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(0),
		kgo.ProduceRequestTimeout(requestTimeout),
		kgo.RecordDeliveryTimeout(2 * requestTimeout),
		kgo.RetryTimeout(requestTimeout),
	}
	switch o.Acks.OrDefault() {
	case workloads.AcksLeader:
		popts = append(popts, kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
	case workloads.AcksNone:
		popts = append(popts, kgo.RequiredAcks(kgo.NoAck()), kgo.DisableIdempotentWrite())
	default:
		popts = append(popts, kgo.RequiredAcks(kgo.AllISRAcks()))
		if !o.Idempotent {
			popts = append(popts, kgo.DisableIdempotentWrite())
		}
	}
	var txn *txnPut
	if o.Txn {
		txn = newTxnPut(o, n, began)
		popts = append(popts, kgo.TransactionalID(txn.id), kgo.TransactionTimeout(txn.timeout))
	}
	p, err := kgo.NewClient(popts...)
	if err != nil {
		return nil, fmt.Errorf("producer: %w", err)
	}
	return &client{parts: parts, producer: p, seeds: o.Seeds, txn: txn, readCommitted: o.Txn}, nil
}

func (c *client) Close() { c.producer.Close() }

func (c *client) Invoke(ctx context.Context, op checker.Op) checker.Op {
	switch op.F {
	case checker.FPut:
		return c.put(ctx, op)
	case checker.FScan:
		return c.scan(ctx, op)
	}
	op.Type, op.Error = checker.Fail, "unknown operation "+op.F
	return op
}

func (c *client) put(ctx context.Context, op checker.Op) checker.Op {
	pv, err := checker.ParsePut(op.Raw)
	if err != nil {
		op.Type, op.Error = checker.Fail, err.Error()
		return op
	}
	rec := &kgo.Record{Topic: Topic, Partition: int32(pv.Key % c.parts), Key: []byte("k" + strconv.Itoa(pv.Key))}
	v := "null"
	if pv.Value != nil {
		v = strconv.FormatInt(*pv.Value, 10)
		rec.Value = []byte(v)
	}
	if c.txn != nil {
		return c.txn.put(ctx, c.producer, op, pv.Key, v, rec)
	}
	sctx, cancel := context.WithTimeout(ctx, 3*requestTimeout)
	err = c.producer.ProduceSync(sctx, rec).FirstErr()
	cancel()
	if err != nil {
		op.Type, op.Error = checker.Info, err.Error()
		op.Raw = []byte(fmt.Sprintf("[%d,%s,null]", pv.Key, v))
		return op
	}
	op.Type = checker.OK
	op.Raw = []byte(fmt.Sprintf("[%d,%s,%d]", pv.Key, v, rec.Offset))
	return op
}

// scan reads every partition from the start up to the end offsets listed
// when it began.
func (c *client) scan(ctx context.Context, op checker.Op) checker.Op {
	adminCl, err := kgo.NewClient(kgo.SeedBrokers(c.seeds...), kgo.RetryTimeout(requestTimeout))
	if err != nil {
		op.Type, op.Error = checker.Fail, err.Error()
		return op
	}
	lctx, cancel := context.WithTimeout(ctx, requestTimeout)
	ends, err := kadm.NewClient(adminCl).ListEndOffsets(lctx, Topic)
	cancel()
	adminCl.Close()
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		op.Type, op.Error = checker.Fail, "list end offsets: "+err.Error()
		return op
	}
	need := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			need[o.Partition] = o.Offset
		}
	})
	starts := map[int32]kgo.Offset{}
	for p := range c.parts {
		starts[int32(p)] = kgo.NewOffset().AtStart()
	}
	copts := []kgo.Opt{kgo.SeedBrokers(c.seeds...), kgo.FetchMaxWait(time.Second),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{Topic: starts}), kgo.RetryTimeout(requestTimeout)}
	if c.readCommitted {
		// Committed records only; the markers are kept so that the scan
		// sees a partition's last offset, a marker under transactions.
		copts = append(copts, kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords())
	}
	consumer, err := kgo.NewClient(copts...)
	if err != nil {
		op.Type, op.Error = checker.Fail, err.Error()
		return op
	}
	defer consumer.Close()
	out := map[string][][2]any{}
	for len(need) > 0 && ctx.Err() == nil {
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		fetches := consumer.PollFetches(pctx)
		cancel()
		fetches.EachRecord(func(r *kgo.Record) {
			if end, ok := need[r.Partition]; ok && r.Offset >= end-1 {
				delete(need, r.Partition)
			}
			if r.Attrs.IsControl() {
				return
			}
			k, err := strconv.Atoi(string(r.Key[min(1, len(r.Key)):]))
			if err != nil || len(r.Key) == 0 || r.Key[0] != 'k' {
				return
			}
			var v any
			if r.Value != nil {
				n, err := strconv.ParseInt(string(r.Value), 10, 64)
				if err != nil {
					return
				}
				v = n
			}
			ks := strconv.Itoa(k)
			out[ks] = append(out[ks], [2]any{r.Offset, v})
		})
	}
	if len(need) > 0 {
		if c.stoppedShort != nil {
			c.stoppedShort(need)
		}
		op.Type, op.Error = checker.Fail, fmt.Sprintf("scan did not reach the end of partitions %v", need)
		return op
	}
	b, err := json.Marshal(out)
	if err != nil {
		op.Type, op.Error = checker.Fail, err.Error()
		return op
	}
	op.Type, op.Raw = checker.OK, b
	return op
}
