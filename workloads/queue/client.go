package queue

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/faultline/faultline/checker"
	"github.com/faultline/faultline/workloads"
)

// Options configure the Kafka clients of the queue workload.
type Options struct {
	Seeds []string // bootstrap brokers, host:port
	// PartitionsPerTopic maps keys onto topics: key k is partition
	// k mod P of topic "t<k div P>" (default 4).
	PartitionsPerTopic int
	ReplicationFactor  int16 // default 3
	// TopicConfigs are set on every topic the workload creates (e.g.
	// min.insync.replicas=2, unclean.leader.election.enable=false).
	TopicConfigs map[string]*string
	// Acks is the producers' setting (unset: all).
	Acks workloads.Acks
	// DisableIdempotence turns the idempotent producer off (it is on by
	// default, with acks=all only: other acks turn it off).
	DisableIdempotence bool
	// RequestTimeout bounds each produce and admin request (default 5 s).
	RequestTimeout time.Duration
	// PollTimeout is how long a poll waits for records (default 100 ms).
	PollTimeout time.Duration
	// Group is the consumer group of subscribe operations, and the group
	// whose offsets transactions commit.
	Group string
	// Txn makes every producer transactional (a transactional.id of its
	// own per client, so a crashed process's successor starts afresh) and
	// every consumer read_committed, for txn operations.
	Txn bool
	// TxnAbortOneIn is the odds that a transaction is aborted on purpose
	// after its micro-ops (default 10: one in ten; negative: never).
	TxnAbortOneIn int
	// TxnFenceOneIn is the odds that a transaction about to commit is
	// first fenced: a new producer with the client's transactional.id
	// completes its InitProducerId, the old one tries to commit (it must
	// fail) and the new one takes over (default 25; negative: never).
	TxnFenceOneIn int
	// TxnRestartOneIn is the odds that a transaction's producer is
	// restarted right after its commit answered, as an exactly-once
	// application redeployed or rebalanced is: a new producer with the
	// client's transactional.id completes its InitProducerId at once,
	// while the commit's markers may still be being written (it must wait
	// for them, never abort the commit), and takes over (default 10;
	// negative: never).
	TxnRestartOneIn int
	// TxnTimeout is the producers' transaction.timeout.ms, how long the
	// coordinator lets a transaction stay open before aborting it on its
	// own (default four request timeouts).
	TxnTimeout time.Duration
	// TxnIDPrefix starts every transactional.id (default "faultline").
	TxnIDPrefix string
	// Seed seeds each client's choice of the transactions it aborts.
	Seed int64
}

func (o Options) withDefaults() Options {
	if o.PartitionsPerTopic <= 0 {
		o.PartitionsPerTopic = 4
	}
	if o.ReplicationFactor == 0 {
		o.ReplicationFactor = 3
	}
	o.Acks = o.Acks.OrDefault()
	if o.RequestTimeout <= 0 {
		o.RequestTimeout = workloads.DefaultRequestTimeout
	}
	if o.PollTimeout <= 0 {
		o.PollTimeout = 100 * time.Millisecond
	}
	if o.Group == "" {
		o.Group = "faultline"
	}
	if o.TxnAbortOneIn == 0 {
		o.TxnAbortOneIn = 10
	}
	if o.TxnFenceOneIn == 0 {
		o.TxnFenceOneIn = 25
	}
	if o.TxnRestartOneIn == 0 {
		o.TxnRestartOneIn = 10
	}
	o.TxnTimeout = workloads.TxnTimeoutOr(o.TxnTimeout, o.RequestTimeout)
	if o.TxnIDPrefix == "" {
		o.TxnIDPrefix = "faultline"
	}
	return o
}

// TopicPartition returns the topic and partition key k maps onto.
func (o Options) TopicPartition(k int) (string, int32) {
	p := o.withDefaults().PartitionsPerTopic
	return "t" + strconv.Itoa(k/p), int32(k % p)
}

// topicsOf lists the distinct topics keys map onto, in the keys' order.
func (o Options) topicsOf(keys []int) []string {
	var topics []string
	for _, k := range keys {
		if t, _ := o.TopicPartition(k); !slices.Contains(topics, t) {
			topics = append(topics, t)
		}
	}
	return topics
}

// Key returns the key of a topic-partition, or false for a topic the
// workload did not make.
func (o Options) Key(topic string, partition int32) (int, bool) {
	p := o.withDefaults().PartitionsPerTopic
	if len(topic) < 2 || topic[0] != 't' {
		return 0, false
	}
	t, err := strconv.Atoi(topic[1:])
	if err != nil || t < 0 || partition < 0 || int(partition) >= p {
		return 0, false
	}
	return t*p + int(partition), true
}

// Topics creates the topics that hold keys, tolerating ones that exist.
// It is shared by every client of a test so each topic is created once.
type Topics struct {
	opts    Options
	kcl     *kgo.Client // adm's, for requests to one broker
	adm     *kadm.Client
	mu      sync.Mutex
	created map[string]bool
	// clients numbers the clients made, for their transactional.ids.
	clients atomic.Int64
	// began are the transactional.ids a transaction began under.
	began workloads.TxnIDs
	// ids caches topic IDs (TxnOffsetCommit v6+ names topics by ID).
	ids map[string][16]byte
}

// TopicID returns the ID of topic, asking the cluster the first time.
func (t *Topics) TopicID(ctx context.Context, topic string) ([16]byte, error) {
	t.mu.Lock()
	id, ok := t.ids[topic]
	t.mu.Unlock()
	if ok {
		return id, nil
	}
	ctx, cancel := context.WithTimeout(ctx, t.opts.RequestTimeout)
	defer cancel()
	details, err := t.adm.ListTopics(ctx, topic)
	if err != nil {
		return id, fmt.Errorf("topic id of %s: %w", topic, err)
	}
	d, ok := details[topic]
	if !ok || d.Err != nil {
		return id, fmt.Errorf("topic id of %s: %v", topic, d.Err)
	}
	t.mu.Lock()
	if t.ids == nil {
		t.ids = map[string][16]byte{}
	}
	t.ids[topic] = d.ID
	t.mu.Unlock()
	return d.ID, nil
}

// NewTopics returns a topic creator using its own admin connection.
func NewTopics(opts Options) (*Topics, error) {
	opts = opts.withDefaults()
	cl, err := kgo.NewClient(kgo.SeedBrokers(opts.Seeds...), kgo.RequestRetries(3), kgo.RetryTimeout(opts.RequestTimeout))
	if err != nil {
		return nil, fmt.Errorf("admin client: %w", err)
	}
	return &Topics{opts: opts, kcl: cl, adm: kadm.NewClient(cl), created: map[string]bool{}}, nil
}

// Ensure creates the topic of every key in keys that was not created yet.
func (t *Topics) Ensure(ctx context.Context, keys []int) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	var missing []string
	for _, k := range keys {
		topic, _ := t.opts.TopicPartition(k)
		if !t.created[topic] {
			missing = append(missing, topic)
			t.created[topic] = true // asked for at most once at a time
		}
	}
	if len(missing) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, t.opts.RequestTimeout)
	defer cancel()
	res, err := t.adm.CreateTopics(ctx, int32(t.opts.PartitionsPerTopic), t.opts.ReplicationFactor, t.opts.TopicConfigs, missing...)
	if err == nil {
		for _, r := range res {
			if r.Err != nil && !errors.Is(r.Err, kerr.TopicAlreadyExists) {
				err = fmt.Errorf("create topic %s: %w", r.Topic, r.Err)
				break
			}
		}
	}
	if err != nil {
		for _, m := range missing {
			delete(t.created, m)
		}
		return err
	}
	return nil
}

// Stalls reads, for each key, its partition's high watermark, last stable
// offset (ListOffsets read_committed) and, with txn, the transactions open
// there (DescribeProducers); what could not be read is the Stall's Error
// (workloads.FillStalls).
func (t *Topics) Stalls(ctx context.Context, keys []int, txn bool) []checker.Stall {
	if len(keys) == 0 {
		return nil
	}
	out := make([]checker.Stall, 0, len(keys))
	for _, k := range keys {
		topic, part := t.opts.TopicPartition(k)
		out = append(out, checker.Stall{Key: k, Topic: topic, Partition: part})
	}
	workloads.FillStalls(ctx, t.adm, t.opts.RequestTimeout, txn, out)
	var unlisted []int // keys whose high watermark was not listed
	for _, s := range out {
		if s.HighWatermark < 0 {
			unlisted = append(unlisted, s.Key)
		}
	}
	if len(unlisted) > 0 {
		gone := t.goneFor(ctx, unlisted, stallLooks, stallLookGap)
		for i := range out {
			out[i].Missing = gone[out[i].Key]
		}
	}
	return out
}

// A partition counts as gone (Stall.Missing) only when it is missing at
// every one of stallLooks looks, stallLookGap apart: a broker that has
// just restarted may serve before its metadata has caught up.
const (
	stallLooks   = 3
	stallLookGap = time.Second
)

// goneFor reports which of keys' partitions the cluster no longer lists:
// at each of looks looks, gap apart, every broker answered a Metadata
// request for their topics and each said the topic does not exist or
// listed it without the partition. Any other answer (a listed
// partition, another error) or an interrupted look keeps a partition out.
func (t *Topics) goneFor(ctx context.Context, keys []int, looks int, gap time.Duration) map[int]bool {
	keys = slices.Clone(keys)
	for look := range looks {
		if look > 0 {
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(gap):
			}
		}
		now := t.unlistedNow(ctx, keys)
		keys = slices.DeleteFunc(keys, func(k int) bool { return !now[k] }) // listed once: not gone
		if len(keys) == 0 {
			return nil
		}
	}
	gone := map[int]bool{}
	for _, k := range keys {
		gone[k] = true
	}
	return gone
}

// unlistedNow asks every broker the admin client knows (or, before it
// knows any, one of the seeds) for the metadata of keys' topics, and
// reports the keys whose partition none of them lists (unlistedBy).
func (t *Topics) unlistedNow(ctx context.Context, keys []int) map[int]bool {
	req := kmsg.NewPtrMetadataRequest()
	for _, name := range t.opts.topicsOf(keys) {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(name)
		req.Topics = append(req.Topics, rt)
	}
	type asker func(context.Context, kmsg.Request) (kmsg.Response, error)
	var askers []asker
	for _, b := range t.kcl.DiscoveredBrokers() {
		askers = append(askers, b.Request)
	}
	if len(askers) == 0 {
		askers = append(askers, t.kcl.Request)
	}
	answers := make([]*kmsg.MetadataResponse, len(askers))
	for i, ask := range askers {
		cctx, cancel := context.WithTimeout(ctx, t.opts.RequestTimeout)
		kresp, err := ask(cctx, req)
		cancel()
		if err == nil {
			answers[i] = kresp.(*kmsg.MetadataResponse)
		}
	}
	return unlistedBy(answers, keys, t.opts.TopicPartition)
}

// unlistedBy reports, for each key, whether every broker asked answered
// (answers[i] nil: broker i did not) and none lists the key's partition
// (unlistedIn). One broker that did not answer makes the look
// inconclusive: a broker cut off from the controller while a topic was
// created may answer from an image without it, and the others must be
// heard to outvote it.
func unlistedBy(answers []*kmsg.MetadataResponse, keys []int, partitionOf func(int) (string, int32)) map[int]bool {
	out := map[int]bool{}
	all := len(answers) > 0
	for _, a := range answers {
		all = all && a != nil
	}
	for _, k := range keys {
		topic, part := partitionOf(k)
		gone := all
		for _, a := range answers {
			gone = gone && unlistedIn(a, topic, part)
		}
		out[k] = gone
	}
	return out
}

// unlistedIn reports whether a Metadata answer says that topic does not
// exist (UNKNOWN_TOPIC_OR_PARTITION) or lists it without partition part.
// A topic the answer leaves out, or answers with another error, is not
// taken as gone.
func unlistedIn(resp *kmsg.MetadataResponse, topic string, part int32) bool {
	for _, rt := range resp.Topics {
		if rt.Topic == nil || *rt.Topic != topic {
			continue
		}
		switch rt.ErrorCode {
		case kerr.UnknownTopicOrPartition.Code:
			return true
		case 0:
			return !slices.ContainsFunc(rt.Partitions, func(p kmsg.MetadataResponseTopicPartition) bool { return p.Partition == part })
		}
		return false
	}
	return false
}

// EndOffsets returns each key's end offset (the offset the next write
// gets), for the final reads.
func (t *Topics) EndOffsets(ctx context.Context, keys []int) (map[int]int64, error) {
	names := t.opts.topicsOf(keys)
	ctx, cancel := context.WithTimeout(ctx, t.opts.RequestTimeout)
	defer cancel()
	listed, err := t.adm.ListEndOffsets(ctx, names...)
	if err != nil {
		return nil, fmt.Errorf("list end offsets: %w", err)
	}
	ends := map[int]int64{}
	var errs []error
	listed.Each(func(o kadm.ListedOffset) {
		k, ok := t.opts.Key(o.Topic, o.Partition)
		if !ok {
			return
		}
		if o.Err != nil {
			errs = append(errs, fmt.Errorf("end offset of %s-%d: %w", o.Topic, o.Partition, o.Err))
			return
		}
		ends[k] = o.Offset
	})
	return ends, errors.Join(errs...)
}

// Close releases the admin connection.
func (t *Topics) Close() { t.adm.Close() }

// Client is one process's Kafka client: a producer and an assigning (or
// group) consumer, after Jepsen's Kafka client.
type Client struct {
	opts     Options
	topics   *Topics
	producer *kgo.Client
	// producerOpts rebuild the producer when a send is abandoned.
	producerOpts []kgo.Opt
	consumer     *kgo.Client
	assigned     map[int]bool
	group        bool

	// rebalances collects the consumer group's assignments since the last
	// poll; the next poll's completion carries them (Jepsen's rebalance
	// log), so the checker can tell a skip across a rebalance from a bug.
	rebalanceMu sync.Mutex
	rebalances  []checker.Rebalance

	// txn is the transactional state: nil unless Options.Txn.
	txn *txnState

	// gate is the dialer of every connection of the client, which holds
	// what it sends while it is paused (workloads.Pausable).
	gate *workloads.Gate

	// mu guards producer and consumer being replaced against Close, which
	// the harness may call while an abandoned Invoke still runs; closed
	// says Close ran, so that a client made after it is closed at once.
	mu     sync.Mutex
	closed bool
}

// NewClient connects a client for one process.
func NewClient(opts Options, topics *Topics) (*Client, error) {
	return newClient(opts, topics, "")
}

// newClient is NewClient; with Options.Txn and txnID not empty, the
// producer takes over that transactional.id instead of a new one.
func newClient(opts Options, topics *Topics, txnID string) (*Client, error) {
	opts = opts.withDefaults()
	gate := &workloads.Gate{}
	popts := []kgo.Opt{
		kgo.SeedBrokers(opts.Seeds...),
		kgo.Dialer(gate.Dial),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(0),
		kgo.ProduceRequestTimeout(opts.RequestTimeout),
		kgo.RecordDeliveryTimeout(2 * opts.RequestTimeout),
		kgo.RetryTimeout(opts.RequestTimeout),
	}
	switch opts.Acks {
	case workloads.AcksLeader:
		popts = append(popts, kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
	case workloads.AcksNone:
		popts = append(popts, kgo.RequiredAcks(kgo.NoAck()), kgo.DisableIdempotentWrite())
	default:
		popts = append(popts, kgo.RequiredAcks(kgo.AllISRAcks()))
		if opts.DisableIdempotence {
			popts = append(popts, kgo.DisableIdempotentWrite())
		}
	}
	var txn *txnState
	if opts.Txn {
		n := topics.clients.Add(1)
		txn = newTxnState(opts, n, txnID)
		popts = append(popts, kgo.TransactionalID(txn.id), kgo.TransactionTimeout(opts.TxnTimeout))
	}
	producer, err := kgo.NewClient(popts...)
	if err != nil {
		return nil, fmt.Errorf("producer: %w", err)
	}
	c := &Client{opts: opts, topics: topics, producer: producer, producerOpts: popts, assigned: map[int]bool{}, txn: txn, gate: gate}
	if err := c.newConsumer(nil, false); err != nil {
		producer.Close()
		return nil, err
	}
	return c, nil
}

// The consumer group timeouts of subscribing consumers: 6 s is the least
// session a broker allows by default (group.min.session.timeout.ms), and a
// heartbeat every 500 ms finds a rebalance in well under a second.
const (
	groupSessionTimeout   = 6 * time.Second
	groupHeartbeat        = 500 * time.Millisecond
	groupRebalanceTimeout = 10 * time.Second
)

// newConsumer replaces the consumer: an assigning one (group == false), or
// a member of the test's consumer group subscribed to topics.
func (c *Client) newConsumer(topics []string, group bool) error {
	c.mu.Lock()
	old := c.consumer
	c.consumer = nil
	c.mu.Unlock()
	if old != nil {
		old.Close()
	}
	copts := []kgo.Opt{
		kgo.SeedBrokers(c.opts.Seeds...),
		kgo.Dialer(c.gate.Dial),
		kgo.FetchMaxWait(c.opts.PollTimeout),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.RetryTimeout(c.opts.RequestTimeout),
	}
	if c.opts.Txn {
		copts = append(copts, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	}
	if group {
		// Short group timeouts (as a test harness wants, not Kafka's
		// defaults of 45 s and 3 s): a member that crashed or sits on a
		// coordinator cut off from the rest is out of the group within
		// seconds, so a rebalance ends within a fault window instead of
		// stalling every member for most of a run.
		copts = append(copts, kgo.SessionTimeout(groupSessionTimeout), kgo.HeartbeatInterval(groupHeartbeat), kgo.RebalanceTimeout(groupRebalanceTimeout))
		copts = append(copts, kgo.ConsumerGroup(c.opts.Group), kgo.ConsumeTopics(topics...), kgo.DisableAutoCommit(),
			kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, assigned map[string][]int32) {
				var keys []int
				for t, ps := range assigned {
					for _, p := range ps {
						if k, ok := c.opts.Key(t, p); ok {
							keys = append(keys, k)
						}
					}
				}
				sort.Ints(keys)
				c.rebalanceMu.Lock()
				c.rebalances = append(c.rebalances, checker.Rebalance{Keys: keys})
				c.rebalanceMu.Unlock()
			}))
	}
	cl, err := kgo.NewClient(copts...)
	if err != nil {
		return fmt.Errorf("consumer: %w", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		cl.Close()
		return errClientClosed
	}
	c.consumer, c.group = cl, group
	return nil
}

// errClientClosed is the error of an operation that went on after the
// harness closed its client (an abandoned operation).
var errClientClosed = errors.New("the client was closed")

// Close closes both clients.
func (c *Client) Close() {
	c.mu.Lock()
	c.closed = true
	producer, consumer := c.producer, c.consumer
	c.mu.Unlock()
	producer.Close()
	if consumer != nil {
		consumer.Close()
	}
}

// Pause pauses the client just as its next Produce request leaves it
// (workloads.Pausable): that request and everything the client sends
// after it are held in flight, as a process frozen at that moment would
// leave them. A transaction's partitions added, its records not yet sent,
// is the moment a zombie's late send is most dangerous.
func (c *Client) Pause() { c.gate.PauseAtProduce() }

// Resume delivers what Pause held and lets the client's requests through.
func (c *Client) Resume() { c.gate.Resume() }

// Invoke performs one operation.
func (c *Client) Invoke(ctx context.Context, op checker.Op) checker.Op {
	switch op.F {
	case "send":
		return c.send(ctx, op)
	case "poll":
		return c.poll(ctx, op)
	case "txn":
		return c.transact(ctx, op)
	case "assign":
		return c.assign(ctx, op)
	case "subscribe":
		return c.subscribe(ctx, op)
	}
	op.Type, op.Error = checker.Fail, "unknown operation "+op.F
	return op
}

// errAcksNone is the error of every send under acks=0.
const errAcksNone = "acks=0: sent without an acknowledgement, so it may or may not have been written"

func (c *Client) send(ctx context.Context, op checker.Op) checker.Op {
	mops := append([]checker.MicroOp(nil), op.Mops...)
	op.Mops = mops
	for i, m := range mops {
		if err := c.topics.Ensure(ctx, []int{m.Key}); err != nil {
			// Nothing was sent: the topic could not even be created.
			op.Type, op.Error = checker.Fail, err.Error()
			return op
		}
		topic, part := c.opts.TopicPartition(m.Key)
		rec := &kgo.Record{Topic: topic, Partition: part, Key: []byte(strconv.Itoa(m.Key)), Value: []byte(strconv.FormatInt(m.Value, 10))}
		err := c.produce(ctx, rec)
		if err != nil {
			// A produce that errors may still have been written (a lost
			// acknowledgement, or retries that raced a leader change), so
			// the outcome is indeterminate.
			op.Type, op.Error = checker.Info, err.Error()
			return op
		}
		if c.opts.Acks == workloads.AcksNone {
			// With acks=0 the broker never answers: the record left this
			// client, and nothing says it was written (or when), so the
			// send is indeterminate, as a lost acknowledgement is.
			op.Type, op.Error = checker.Info, errAcksNone
			return op
		}
		mops[i].Completed = true
		off := rec.Offset
		mops[i].Offset = &off
	}
	op.Type = checker.OK
	return op
}

// replaceProducer closes the producer, never to send again, and starts a
// new one with the same options (its transactional.id included), as
// handOver.
func (c *Client) replaceProducer() {
	next, _ := kgo.NewClient(c.producerOpts...)
	c.handOver(next)
}

// handOver closes the producer, never to send again (what it buffers
// fails; never waited for), and makes next the client's producer (nil:
// none could be made, and the closed one stays). next's InitProducerId
// fences the old one, so no commit the old one sent decides anything
// after it.
func (c *Client) handOver(next *kgo.Client) {
	c.mu.Lock()
	old, closed := c.producer, c.closed
	if next != nil && !closed {
		c.producer = next
	}
	c.mu.Unlock()
	switch {
	case closed && next != nil:
		// Closed under an abandoned operation (Close closed old): nothing
		// made after it may outlive it.
		go next.Close()
	case !closed:
		go old.Close()
	}
	if c.txn != nil {
		c.txn.committed = noEpoch
	}
}

// produce sends rec and waits for its acknowledgement, at most a bound:
// an idempotent franz-go producer never fails a record it may have sent
// (its sequence numbers would break), so against a broker that came back
// without the producer's state or the topic (kfake after a restart) it
// retries forever. Past the bound the send is abandoned as indeterminate
// and the producer replaced by a new one (a new producer id), as a crashed
// client would be.
func (c *Client) produce(ctx context.Context, rec *kgo.Record) error {
	bound := 3 * c.opts.RequestTimeout
	sctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	done := make(chan error, 1)
	c.producer.Produce(sctx, rec, func(_ *kgo.Record, err error) { done <- err })
	select {
	case err := <-done:
		return err
	case <-time.After(bound + c.opts.RequestTimeout):
	}
	c.replaceProducer()
	return fmt.Errorf("no acknowledgement within %v: send abandoned, producer replaced", bound+c.opts.RequestTimeout)
}

func (c *Client) poll(ctx context.Context, op checker.Op) checker.Op {
	polls, ferr := c.pollOnce(ctx)
	if ferr != nil && len(polls) == 0 {
		// A poll changes nothing on the broker, so a failed one is a
		// definite fail.
		op.Type, op.Error = checker.Fail, ferr.Error()
		return op
	}
	if ferr != nil {
		// Records came with it: the poll is ok, and the error is kept as
		// evidence (a CRC mismatch or lost records that franz-go found).
		op.Error = ferr.Error()
	}
	if c.group && len(polls) > 0 {
		cctx, cancel := context.WithTimeout(ctx, c.opts.RequestTimeout)
		committed, err := c.commit(cctx)
		if err != nil {
			op.Error = strings.TrimPrefix(op.Error+"; commit: "+err.Error(), "; ")
		}
		op.Committed = committed
		cancel()
	}
	op.Mops = []checker.MicroOp{{F: "poll", Polls: polls}}
	op.Type = checker.OK
	c.rebalanceMu.Lock()
	op.RebalanceLog, c.rebalances = c.rebalances, nil
	c.rebalanceMu.Unlock()
	return op
}

// commit commits the consumer's uncommitted offsets and returns, per key,
// the offset whose commit the coordinator acknowledged (nil when none
// was), and the first error of the request or of a partition.
func (c *Client) commit(ctx context.Context) (map[int]int64, error) {
	var committed map[int]int64
	var first error
	c.consumer.CommitOffsetsSync(ctx, c.consumer.UncommittedOffsets(), func(_ *kgo.Client, req *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
		if err != nil {
			first = err
			return
		}
		offsets := map[string]map[int32]int64{}
		for _, t := range req.Topics {
			for _, p := range t.Partitions {
				if offsets[t.Topic] == nil {
					offsets[t.Topic] = map[int32]int64{}
				}
				offsets[t.Topic][p.Partition] = p.Offset
			}
		}
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				if p.ErrorCode != 0 {
					if first == nil {
						first = kerr.ErrorForCode(p.ErrorCode)
					}
					continue
				}
				o, ok := offsets[t.Topic][p.Partition]
				k, owned := c.opts.Key(t.Topic, p.Partition)
				if !ok || !owned {
					continue
				}
				if committed == nil {
					committed = map[int]int64{}
				}
				committed[k] = o
			}
		}
	})
	return committed, first
}

// pollOnce fetches once (waiting up to PollTimeout) and returns the
// records by key, noting each key's next offset for transactions; the
// error is the first fetch error other than the wait running out.
func (c *Client) pollOnce(ctx context.Context) (map[int][]checker.Pair, error) {
	pctx, cancel := context.WithTimeout(ctx, c.opts.PollTimeout)
	fetches := c.consumer.PollRecords(pctx, 1000)
	cancel()
	polls := map[int][]checker.Pair{}
	fetches.EachRecord(func(r *kgo.Record) {
		k, ok := c.opts.Key(r.Topic, r.Partition)
		if !ok {
			return
		}
		v, err := strconv.ParseInt(string(r.Value), 10, 64)
		if err != nil {
			return
		}
		polls[k] = append(polls[k], checker.Pair{Offset: r.Offset, Value: v})
		if c.txn != nil {
			c.txn.next[k] = r.Offset + 1
		}
	})
	var ferr error
	fetches.EachError(func(_ string, _ int32, err error) {
		if ferr == nil && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
			ferr = err
		}
	})
	return polls, ferr
}

func (c *Client) assign(ctx context.Context, op checker.Op) checker.Op {
	if err := c.topics.Ensure(ctx, op.Keys); err != nil {
		op.Type, op.Error = checker.Fail, err.Error()
		return op
	}
	if c.group {
		if err := c.newConsumer(nil, false); err != nil {
			op.Type, op.Error = checker.Fail, err.Error()
			return op
		}
		c.assigned = map[int]bool{}
	}
	want := map[int]bool{}
	for _, k := range op.Keys {
		want[k] = true
	}
	var resume map[int]int64
	if c.txn != nil && !op.SeekToBeginning {
		var err error
		var fresh []int
		for k := range want {
			if !c.assigned[k] {
				fresh = append(fresh, k)
			}
		}
		if resume, err = c.groupOffsets(ctx, fresh); err != nil {
			op.Type, op.Error = checker.Fail, err.Error()
			return op
		}
		op.Committed = resume
	}
	remove := map[string][]int32{}
	for k := range c.assigned {
		if !want[k] || op.SeekToBeginning {
			t, p := c.opts.TopicPartition(k)
			remove[t] = append(remove[t], p)
			delete(c.assigned, k)
			if c.txn != nil {
				delete(c.txn.next, k)
			}
		}
	}
	if len(remove) > 0 {
		c.consumer.RemoveConsumePartitions(remove)
	}
	add := map[string]map[int32]kgo.Offset{}
	for k := range want {
		if c.assigned[k] {
			continue
		}
		t, p := c.opts.TopicPartition(k)
		if add[t] == nil {
			add[t] = map[int32]kgo.Offset{}
		}
		add[t][p] = kgo.NewOffset().AtStart()
		if o, ok := resume[k]; ok {
			add[t][p] = kgo.NewOffset().At(o)
			c.txn.next[k] = o
		}
		c.assigned[k] = true
	}
	if len(add) > 0 {
		c.consumer.AddConsumePartitions(add)
	}
	op.Type = checker.OK
	return op
}

func (c *Client) subscribe(ctx context.Context, op checker.Op) checker.Op {
	if err := c.topics.Ensure(ctx, op.Keys); err != nil {
		op.Type, op.Error = checker.Fail, err.Error()
		return op
	}
	if err := c.newConsumer(c.opts.topicsOf(op.Keys), true); err != nil {
		op.Type, op.Error = checker.Fail, err.Error()
		return op
	}
	c.assigned = map[int]bool{}
	op.Type = checker.OK
	return op
}
