package queue

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/faultline/faultline/checker"
)

// errAbortedOnPurpose is the error of a transaction the client aborted by
// choice (Options.TxnAbortOneIn).
const errAbortedOnPurpose = "aborted on purpose"

// txnState is a transactional client's own state: its transactional.id,
// the choice of aborts, and the next offset of each key its consumer will
// read (what the transaction commits for the group, and where an aborted
// transaction's polls rewind to).
type txnState struct {
	id  string
	rng *rand.Rand
	// restarts draws the restarts after a commit, from a stream of its
	// own so that the other choices stay as they were without them.
	restarts *rand.Rand
	next     map[int]int64
	// committed is the producer id and epoch the current producer last
	// sent a commit at (none yet: -1), or unknownEpoch. Below
	// transaction.version 2 a transaction runs at its predecessor's
	// epoch, and a delayed copy of that commit can still commit it.
	committed producerEpoch
}

// producerEpoch is a producer id and epoch as kgo's ProducerID reports
// them.
type producerEpoch struct {
	id    int64
	epoch int16
}

var (
	noEpoch      = producerEpoch{-1, -1}
	unknownEpoch = producerEpoch{-2, -2}
)

// newTxnState is the state of the n-th client, under transactional.id id
// ("": its own, txnID).
func newTxnState(opts Options, n int64, id string) *txnState {
	if id == "" {
		id = txnID(opts, n)
	}
	return &txnState{
		id:        id,
		rng:       rand.New(rand.NewPCG(uint64(opts.Seed), uint64(n))),
		restarts:  rand.New(rand.NewPCG(uint64(opts.Seed), uint64(n)^restartStream)),
		next:      map[int]int64{},
		committed: noEpoch,
	}
}

// restartStream tells txnState.restarts' PCG stream from rng's.
const restartStream = 0x7265737461727400

// epoch is the producer id and epoch the open transaction runs at, or
// unknownEpoch when the producer cannot say in a request timeout.
func (c *Client) epoch(ctx context.Context) producerEpoch {
	ctx, cancel := context.WithTimeout(ctx, c.opts.RequestTimeout)
	defer cancel()
	id, epoch, err := c.producer.ProducerID(ctx)
	if err != nil {
		return unknownEpoch
	}
	return producerEpoch{id, epoch}
}

// onlyAborted reports whether a transaction at at that this client never
// asked to commit can only end aborted: no commit this producer sent is
// at the same epoch (from transaction.version 2 every EndTxn bumps the
// epoch, which fences a delayed copy of the last one). Unknown epochs
// prove nothing.
func (c *Client) onlyAborted(at producerEpoch) bool {
	return at != unknownEpoch && c.txn.committed != unknownEpoch && c.txn.committed != at
}

// transact runs a txn operation: its sends and polls in one Kafka
// transaction, the consumer's new offsets committed in it (when it
// produced anything: kgo ends a transaction that added no partition
// without asking the broker), then commit, or abort now and then on
// purpose. An aborted transaction (on purpose, or after a send failed)
// completes fail: none of its sends may be seen. An abort that errs is
// fail too where no commit was sent at the transaction's epoch (its
// producer is then replaced), info otherwise; by the same rule, so does
// one fenced before its commit by a successor with its transactional.id
// (Options.TxnFenceOneIn, marked Fenced) whose commit was refused. A
// commit whose outcome is
// unknown completes info. After an abort the consumer rewinds the keys the
// transaction polled, so the next poll reads them again. The op records the offsets it sent (Committed) and,
// after an abort, the group's offsets read back (GroupOffsets).
func (c *Client) transact(ctx context.Context, op checker.Op) checker.Op {
	if c.txn == nil {
		op.Type, op.Error = checker.Fail, "txn operation on a client made without Options.Txn"
		return op
	}
	// Committed is what the transaction sent to the group: nothing yet.
	op.Committed = map[int]int64{}
	var keys []int
	for _, m := range op.Mops {
		if m.F == "send" {
			keys = append(keys, m.Key)
		}
	}
	if err := c.topics.Ensure(ctx, keys); err != nil {
		op.Type, op.Error = checker.Fail, err.Error()
		return op
	}
	before := maps.Clone(c.txn.next)
	polled := map[int]bool{}
	at := c.epoch(ctx)
	if err := c.producer.BeginTransaction(); err != nil {
		// Nothing reached the broker, but a producer that cannot begin
		// (a transaction left open, a fatal error) will not recover:
		// info retires the process, whose successor gets a new client
		// and transactional.id.
		op.Type, op.Error = checker.Info, "begin transaction: "+err.Error()
		return op
	}
	c.topics.began.Add(c.txn.id)
	mops := make([]checker.MicroOp, len(op.Mops))
	copy(mops, op.Mops)
	op.Mops = mops
	produced := false
	var failure error
	for i, m := range mops {
		switch m.F {
		case "send":
			topic, part := c.opts.TopicPartition(m.Key)
			rec := &kgo.Record{Topic: topic, Partition: part, Key: []byte(strconv.Itoa(m.Key)), Value: []byte(strconv.FormatInt(m.Value, 10))}
			sctx, cancel := context.WithTimeout(ctx, 3*c.opts.RequestTimeout)
			err := c.producer.ProduceSync(sctx, rec).FirstErr()
			cancel()
			if err != nil {
				failure = fmt.Errorf("send to key %d: %w", m.Key, err)
			} else {
				produced = true
				off := rec.Offset
				mops[i].Offset, mops[i].Completed = &off, true
			}
		case "poll":
			polls, err := c.pollOnce(ctx)
			if err != nil && len(polls) == 0 {
				failure = fmt.Errorf("poll: %w", err)
			}
			for k := range polls {
				polled[k] = true
			}
			mops[i] = checker.MicroOp{F: "poll", Polls: polls}
		}
		if failure != nil {
			break
		}
	}
	abort := failure != nil
	onPurpose := !abort && c.opts.TxnAbortOneIn > 0 && c.txn.rng.IntN(c.opts.TxnAbortOneIn) == 0
	// The offsets go into transactions aborted on purpose too, so that an
	// abort must also throw its offsets away (the group must never resume
	// at an offset only an aborted transaction committed).
	if !abort && produced && len(polled) > 0 {
		for k := range polled {
			op.Committed[k] = c.txn.next[k]
		}
		if err := c.sendOffsets(ctx, op.Committed); err != nil {
			failure, abort = fmt.Errorf("offsets to transaction: %w", err), true
			// A TxnOffsetCommit that timed out may still land after
			// the abort (before transaction.version 2 nothing fences
			// it) and be committed by the producer's next
			// transaction: these offsets cannot count as aborted.
			op.Committed = map[int]int64{}
		}
	}
	abort = abort || onPurpose
	// Now and then a transaction about to commit meets a successor first:
	// a new producer with the same transactional.id, as a restarted
	// instance of an exactly-once application has, whose InitProducerId
	// must fence this one and abort its transaction.
	var successor *kgo.Client
	if !abort && produced && c.opts.TxnFenceOneIn > 0 && c.txn.rng.IntN(c.opts.TxnFenceOneIn) == 0 {
		successor = c.initSuccessor(ctx)
	}
	// Micro-ops the transaction did not get to stay as invoked, without an
	// offset or poll result.
	ectx, cancel := context.WithTimeout(ctx, 3*c.opts.RequestTimeout)
	defer cancel()
	if abort {
		err := c.producer.AbortBufferedRecords(ectx)
		if err == nil {
			err = c.producer.EndTransaction(ectx, kgo.TryAbort)
		}
		c.rewind(before, polled)
		switch {
		case err != nil && c.onlyAborted(at):
			// The abort itself failed, but no commit was ever sent for
			// this transaction, nor one at its epoch: only this
			// producer could send one, so it is replaced (the new one,
			// with the same transactional.id, fences it at its
			// InitProducerId) and the transaction can only be aborted,
			// by its timeout or the fence.
			c.replaceProducer()
			c.fence(ctx)
			op.Type, op.Error = checker.Fail, fmt.Sprintf("aborted: the abort failed (%v), no commit was sent at its epoch and the producer was closed (after: %v)", err, causeOr(failure))
		case err != nil:
			// The abort failed and the transaction may yet commit: a
			// delayed copy of the last commit at the same epoch
			// (before transaction.version 2), or an epoch unknown.
			op.Type, op.Error = checker.Info, fmt.Sprintf("abort: %v (after: %v)", err, causeOr(failure))
		case failure != nil:
			op.Type, op.Error = checker.Fail, "aborted: "+failure.Error()
		default:
			op.Type, op.Error = checker.Fail, errAbortedOnPurpose
		}
		if op.Type == checker.Fail {
			c.readBackOffsets(ctx, &op)
		}
		return op
	}
	if successor != nil {
		return c.commitFenced(ctx, ectx, op, successor, at, before, polled)
	}
	c.txn.committed = at
	if err := c.producer.EndTransaction(ectx, kgo.TryCommit); err != nil {
		// A commit that errs may have been decided by the coordinator
		// all the same.
		op.Type, op.Error = checker.Info, "commit: "+err.Error()
		return op
	}
	op.Type = checker.OK
	if c.opts.TxnRestartOneIn > 0 && c.txn.restarts.IntN(c.opts.TxnRestartOneIn) == 0 {
		c.restartAfterCommit(ctx)
	}
	return op
}

// restartAfterCommit replaces the producer, right after its commit
// answered, by a new one with the same transactional.id whose
// InitProducerId has completed: the coordinator must let the commit's
// markers finish first (CONCURRENT_TRANSACTIONS until then), never abort
// it. When the InitProducerId does not complete, the producer stays; if
// the new one fenced it all the same, its next transaction fails fenced.
func (c *Client) restartAfterCommit(ctx context.Context) {
	if successor := c.initSuccessor(ctx); successor != nil {
		c.handOver(successor)
	}
}

// initSuccessor starts a producer with this client's transactional.id and
// waits for its InitProducerId, which fences the current producer and
// aborts its open transaction. It returns nil, the successor closed, when
// the InitProducerId did not complete: whether it fenced anything is then
// unknown.
func (c *Client) initSuccessor(ctx context.Context) *kgo.Client {
	successor, err := kgo.NewClient(c.producerOpts...)
	if err != nil {
		return nil
	}
	ictx, cancel := context.WithTimeout(ctx, 3*c.opts.RequestTimeout)
	defer cancel()
	if _, _, err := successor.ProducerID(ictx); err != nil {
		successor.Close()
		return nil
	}
	return successor
}

// commitFenced tries to commit with the producer successor fenced, then
// hands the client over to successor. A correct broker refuses the commit:
// the transaction was aborted by the successor's InitProducerId, so the op
// fails whatever error the commit got (its offsets count as aborted, and
// the group's are read back as after any abort); a commit that succeeds is
// recorded ok and Fenced, for the checker's fenced-commit.
func (c *Client) commitFenced(ctx, ectx context.Context, op checker.Op, successor *kgo.Client, at producerEpoch, before map[int]int64, polled map[int]bool) checker.Op {
	aborted := c.onlyAborted(at)
	err := c.producer.EndTransaction(ectx, kgo.TryCommit)
	c.handOver(successor)
	op.Fenced = true
	switch {
	case err == nil:
		op.Type = checker.OK
		return op
	case !aborted:
		// A delayed copy of the zombie's last commit, at this epoch, may
		// have committed the transaction before the fence.
		op.Type, op.Error = checker.Info, "fenced by a new producer of its transactional.id, after a commit at the same epoch: "+err.Error()
		return op
	}
	c.rewind(before, polled)
	op.Type, op.Error = checker.Fail, "fenced by a new producer of its transactional.id: "+err.Error()
	c.readBackOffsets(ctx, &op)
	return op
}

// fence has the producer complete its InitProducerId (epoch), so that
// the transaction of the producer it replaced is aborted now rather than
// at its timeout; an error leaves that to the timeout.
func (c *Client) fence(ctx context.Context) { c.epoch(ctx) }

// readBackOffsets records, on an aborted txn op that sent offsets, what
// the abort left as the group's offsets of those keys: never what only
// aborted transactions sent (aborted-offsets). An observation only; the
// consumer rewinds to its own positions. A failed read records nothing.
func (c *Client) readBackOffsets(ctx context.Context, op *checker.Op) {
	if len(op.Committed) == 0 {
		return
	}
	if offs, err := c.groupOffsets(ctx, slices.Collect(maps.Keys(op.Committed))); err == nil {
		op.GroupOffsets = offs
	}
}

func causeOr(err error) string {
	if err == nil {
		return errAbortedOnPurpose
	}
	return err.Error()
}

// sendOffsets commits, within the open transaction, offsets (key -> the
// consumer's next offset, what the op records as Committed) for the group
// Options.Group (Kafka's AddOffsetsToTxn then TxnOffsetCommit, as a
// producer's sendOffsetsToTransaction does for an assigning consumer:
// generation -1, no member).
func (c *Client) sendOffsets(ctx context.Context, offsets map[int]int64) error {
	ctx, cancel := context.WithTimeout(ctx, c.opts.RequestTimeout)
	defer cancel()
	id, epoch, err := c.producer.ProducerID(ctx)
	if err != nil {
		return err
	}
	add := kmsg.NewPtrAddOffsetsToTxnRequest()
	add.TransactionalID, add.ProducerID, add.ProducerEpoch, add.Group = c.txn.id, id, epoch, c.opts.Group
	resp, err := add.RequestWith(ctx, c.producer)
	if err != nil {
		return err
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return err
	}
	commit := kmsg.NewPtrTxnOffsetCommitRequest()
	commit.TransactionalID, commit.Group, commit.ProducerID, commit.ProducerEpoch = c.txn.id, c.opts.Group, id, epoch
	commit.Generation = -1
	byTopic := map[string]int{}
	for k, next := range offsets {
		topic, part := c.opts.TopicPartition(k)
		i, ok := byTopic[topic]
		if !ok {
			tid, err := c.topics.TopicID(ctx, topic)
			if err != nil {
				return err
			}
			i = len(commit.Topics)
			byTopic[topic] = i
			t := kmsg.NewTxnOffsetCommitRequestTopic()
			t.Topic, t.TopicID = topic, tid
			commit.Topics = append(commit.Topics, t)
		}
		p := kmsg.NewTxnOffsetCommitRequestTopicPartition()
		p.Partition, p.Offset, p.LeaderEpoch = part, next, -1
		commit.Topics[i].Partitions = append(commit.Topics[i].Partitions, p)
	}
	cresp, err := commit.RequestWith(ctx, c.producer)
	if err != nil {
		return err
	}
	var errs []error
	for i, t := range cresp.Topics {
		name := t.Topic
		if name == "" && i < len(commit.Topics) {
			name = commit.Topics[i].Topic
		}
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				errs = append(errs, fmt.Errorf("%s-%d: %w", name, p.Partition, err))
			}
		}
	}
	return errors.Join(errs...)
}

// groupOffsets reads the committed offsets of the group Options.Group for
// keys, waiting out pending transactional commits (RequireStable): where a
// transactional consumer newly assigned a key resumes, as an exactly-once
// application restarting does, and what an abort must have left in place.
// Keys without a committed offset are left out.
func (c *Client) groupOffsets(ctx context.Context, keys []int) (map[int]int64, error) {
	keyOf := map[string]map[int32]int{}
	for _, k := range keys {
		t, p := c.opts.TopicPartition(k)
		if keyOf[t] == nil {
			keyOf[t] = map[int32]int{}
		}
		keyOf[t][p] = k
	}
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Group, req.RequireStable = c.opts.Group, true
	for t, parts := range keyOf {
		rt := kmsg.NewOffsetFetchRequestTopic()
		rt.Topic, rt.Partitions = t, slices.Collect(maps.Keys(parts))
		req.Topics = append(req.Topics, rt)
	}
	out := map[int]int64{}
	if len(keyOf) == 0 {
		return out, nil
	}
	ctx, cancel := context.WithTimeout(ctx, c.opts.RequestTimeout)
	defer cancel()
	for {
		// Only the keys asked for: another client's open transaction
		// on another partition of the group must not hold this read up.
		err := c.fetchGroupOffsets(ctx, req, keyOf, out)
		if err == nil || errors.Is(err, kerr.GroupIDNotFound) {
			return out, nil
		}
		if !errors.Is(err, kerr.UnstableOffsetCommit) && !kerr.IsRetriable(err) {
			return nil, fmt.Errorf("committed offsets of group %s: %w", c.opts.Group, err)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("committed offsets of group %s: %w (last: %w)", c.opts.Group, ctx.Err(), err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// fetchGroupOffsets sends req once and fills out with the committed
// offset (when there is one) of each partition keyOf names; the error is
// the request's, the group's or a named partition's first.
func (c *Client) fetchGroupOffsets(ctx context.Context, req *kmsg.OffsetFetchRequest, keyOf map[string]map[int32]int, out map[int]int64) error {
	clear(out)
	resp, err := req.RequestWith(ctx, c.producer)
	if err != nil {
		return err
	}
	code, topics := resp.ErrorCode, resp.Topics
	if len(resp.Groups) > 0 { // the batched form (v8+)
		code = resp.Groups[0].ErrorCode
		topics = nil
		for _, t := range resp.Groups[0].Topics {
			rt := kmsg.NewOffsetFetchResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewOffsetFetchResponseTopicPartition()
				rp.Partition, rp.Offset, rp.ErrorCode = p.Partition, p.Offset, p.ErrorCode
				rt.Partitions = append(rt.Partitions, rp)
			}
			topics = append(topics, rt)
		}
	}
	if err := kerr.ErrorForCode(code); err != nil {
		return err
	}
	for _, t := range topics {
		for _, p := range t.Partitions {
			k, ok := keyOf[t.Topic][p.Partition]
			if !ok {
				continue
			}
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return fmt.Errorf("%s-%d: %w", t.Topic, p.Partition, err)
			}
			if p.Offset >= 0 {
				out[k] = p.Offset
			}
		}
	}
	return nil
}

// rewind moves the consumer back to where it was before a transaction for
// every key the transaction polled (Jepsen's client seeks back after an
// aborted transaction), so that the next polls read those records again.
func (c *Client) rewind(before map[int]int64, polled map[int]bool) {
	if len(polled) == 0 {
		return
	}
	remove := map[string][]int32{}
	add := map[string]map[int32]kgo.Offset{}
	for k := range polled {
		t, p := c.opts.TopicPartition(k)
		remove[t] = append(remove[t], p)
		if add[t] == nil {
			add[t] = map[int32]kgo.Offset{}
		}
		if o, ok := before[k]; ok {
			add[t][p] = kgo.NewOffset().At(o)
			c.txn.next[k] = o
		} else {
			add[t][p] = kgo.NewOffset().AtStart()
			delete(c.txn.next, k)
		}
	}
	c.consumer.RemoveConsumePartitions(remove)
	c.consumer.AddConsumePartitions(add)
}

// txnID is the transactional.id of the n-th client of a test.
func txnID(opts Options, n int64) string { return fmt.Sprintf("%s-%d", opts.TxnIDPrefix, n) }
