package txn

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/faultline/faultline/broker/group"
)

// OffsetsTopic is where AddOffsetsToTxn puts a group's partition.
const OffsetsTopic = "__consumer_offsets"

// InitProducerID answers an InitProducerId that carries a transactional id.
func (c *Coordinator) InitProducerID(_ context.Context, req *kmsg.InitProducerIDRequest) *kmsg.InitProducerIDResponse {
	resp := kmsg.NewPtrInitProducerIDResponse()
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	if req.TransactionalID == nil || *req.TransactionalID == "" {
		resp.ErrorCode = kerr.InvalidRequest.Code
		return resp
	}
	if req.TransactionTimeoutMillis <= 0 || int64(req.TransactionTimeoutMillis) > c.cfg.MaxTimeoutMs {
		resp.ErrorCode = kerr.InvalidTransactionTimeout.Code
		return resp
	}
	id := *req.TransactionalID
	in := InitRequest{TimeoutMs: req.TransactionTimeoutMillis, ProducerID: -1, ProducerEpoch: -1, UnsafeKeepOpen: c.cfg.Unsafe.InitKeepsOpen}
	if req.Version >= 3 {
		in.ProducerID, in.ProducerEpoch = req.ProducerID, req.ProducerEpoch
	}
	resp.ErrorCode = c.with(id, true, func(o op, cur *Metadata) int16 {
		d := InitProducerID(cur, id, in, c.newID(), c.nowMs())
		code, _ := c.apply(o, d)
		if code == 0 {
			resp.ProducerID, resp.ProducerEpoch = d.Next.ProducerID, d.Next.ProducerEpoch
			c.logger.Info(fmt.Sprintf("Initialized transactional id %s with producer id %d and epoch %d", id, d.Next.ProducerID, d.Next.ProducerEpoch))
		}
		return code
	})
	if resp.ErrorCode == kerr.ProducerFenced.Code && req.Version < 4 {
		resp.ErrorCode = kerr.InvalidProducerEpoch.Code
	}
	return resp
}

// AddPartitionsToTxn answers v0-v3 (one transaction per request, from a
// client). Partitions that do not exist fail with
// UNKNOWN_TOPIC_OR_PARTITION and the others with OPERATION_NOT_ATTEMPTED.
func (c *Coordinator) AddPartitionsToTxn(_ context.Context, req *kmsg.AddPartitionsToTxnRequest) *kmsg.AddPartitionsToTxnResponse {
	if req.Version >= 4 {
		return c.addPartitionsBatched(req)
	}
	var tps []TopicPartition
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			tps = append(tps, TopicPartition{Topic: t.Topic, Partition: p})
		}
	}
	codes := c.addPartitions(req.TransactionalID, req.ProducerID, req.ProducerEpoch, tps, req.Version)
	resp := kmsg.NewPtrAddPartitionsToTxnResponse()
	i := 0
	for _, t := range req.Topics {
		rt := kmsg.NewAddPartitionsToTxnResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p, codes[i]
			i++
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// addPartitions adds tps to the transaction of id and answers per
// partition, in tps' order: UNKNOWN_TOPIC_OR_PARTITION for one missing
// from the image (and OPERATION_NOT_ATTEMPTED for the others then), else
// the decision's code, as the request version words it.
func (c *Coordinator) addPartitions(id string, producerID int64, epoch int16, tps []TopicPartition, version int16) []int16 {
	img := c.md.Image()
	codes := make([]int16, len(tps))
	unknown := false
	for i, tp := range tps {
		if img.Partition(tp.Topic, tp.Partition) == nil {
			codes[i], unknown = kerr.UnknownTopicOrPartition.Code, true
		}
	}
	code := kerr.OperationNotAttempted.Code
	if !unknown {
		code = c.with(id, false, func(o op, cur *Metadata) int16 {
			code, _ := c.apply(o, AddPartitions(cur, producerID, epoch, tps, c.nowMs()))
			return code
		})
		if code == kerr.TransactionalIDNotFound.Code {
			code = kerr.InvalidProducerIDMapping.Code
		}
		if code == kerr.ProducerFenced.Code && version < 2 {
			code = kerr.InvalidProducerEpoch.Code
		}
	}
	for i := range codes {
		if codes[i] == 0 {
			codes[i] = code
		}
	}
	return codes
}

// AddForLeader is AddPartitionsToTxn v4's work for one transaction, in
// process: the leader of tps, on this node, adds them to the transaction
// of id (KIP-890 part 2) or, with verifyOnly, checks that each is in it
// (part 1; one missing fails only itself). Codes come in tps' order.
// Leaders on other nodes send the request (addPartitionsBatched).
func (c *Coordinator) AddForLeader(id string, producerID int64, epoch int16, tps []TopicPartition, verifyOnly bool) []int16 {
	if !verifyOnly {
		return c.addPartitions(id, producerID, epoch, tps, 4)
	}
	codes := make([]int16, len(tps))
	for i := range tps {
		codes[i] = c.with(id, false, func(_ op, cur *Metadata) int16 {
			return VerifyPartitions(cur, producerID, epoch, tps[i:i+1])
		})
		if codes[i] == kerr.TransactionalIDNotFound.Code {
			codes[i] = kerr.InvalidProducerIDMapping.Code
		}
	}
	return codes
}

// addPartitionsBatched answers AddPartitionsToTxn v4+, the brokers' form
// (KIP-890): several transactions in one request, each answered by
// AddForLeader. Results come per transaction.
func (c *Coordinator) addPartitionsBatched(req *kmsg.AddPartitionsToTxnRequest) *kmsg.AddPartitionsToTxnResponse {
	resp := kmsg.NewPtrAddPartitionsToTxnResponse()
	resp.Version = req.Version
	for _, t := range req.Transactions {
		var tps []TopicPartition
		for _, tt := range t.Topics {
			for _, p := range tt.Partitions {
				tps = append(tps, TopicPartition{Topic: tt.Topic, Partition: p})
			}
		}
		codes := c.AddForLeader(t.TransactionalID, t.ProducerID, t.ProducerEpoch, tps, t.VerifyOnly)
		r := kmsg.NewAddPartitionsToTxnResponseTransaction()
		r.TransactionalID = t.TransactionalID
		i := 0
		for _, tt := range t.Topics {
			rt := kmsg.NewAddPartitionsToTxnResponseTransactionTopic()
			rt.Topic = tt.Topic
			for _, p := range tt.Partitions {
				rp := kmsg.NewAddPartitionsToTxnResponseTransactionTopicPartition()
				rp.Partition, rp.ErrorCode = p, codes[i]
				i++
				rt.Partitions = append(rt.Partitions, rp)
			}
			r.Topics = append(r.Topics, rt)
		}
		resp.Transactions = append(resp.Transactions, r)
	}
	return resp
}

// AddOffsetsToTxn adds the group's __consumer_offsets partition to the
// transaction, so that its TxnOffsetCommit is ended by the transaction's
// marker.
func (c *Coordinator) AddOffsetsToTxn(_ context.Context, req *kmsg.AddOffsetsToTxnRequest) *kmsg.AddOffsetsToTxnResponse {
	resp := kmsg.NewPtrAddOffsetsToTxnResponse()
	tp := TopicPartition{Topic: OffsetsTopic, Partition: c.cfg.GroupPartition(req.Group)}
	resp.ErrorCode = c.with(req.TransactionalID, false, func(o op, cur *Metadata) int16 {
		code, _ := c.apply(o, AddPartitions(cur, req.ProducerID, req.ProducerEpoch, []TopicPartition{tp}, c.nowMs()))
		return code
	})
	if resp.ErrorCode == kerr.TransactionalIDNotFound.Code {
		resp.ErrorCode = kerr.InvalidProducerIDMapping.Code
	}
	if resp.ErrorCode == kerr.ProducerFenced.Code && req.Version < 2 {
		resp.ErrorCode = kerr.InvalidProducerEpoch.Code
	}
	return resp
}

// EndTxn commits or aborts. The answer comes once the prepare record is
// committed to __transaction_state (the decision cannot be lost from
// then on) and the markers go on in the background, as in Kafka; the
// producer's next request on the transactional id waits up to BusyWaitMs
// for them (awaitFinish). With MarkerWaitMs set, EndTxn itself waits that
// long for the markers, so a read_committed consumer sees the transaction
// right after.
func (c *Coordinator) EndTxn(ctx context.Context, req *kmsg.EndTxnRequest) *kmsg.EndTxnResponse {
	resp := kmsg.NewPtrEndTxnResponse()
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	var done <-chan struct{}
	resp.ErrorCode = c.with(req.TransactionalID, false, func(o op, cur *Metadata) int16 {
		d := EndTxn(cur, EndRequest{ProducerID: req.ProducerID, Epoch: req.ProducerEpoch, Commit: req.Commit, TV2: req.Version >= 5}, c.newID(), c.nowMs())
		var code int16
		code, done = c.apply(o, d)
		if code == 0 {
			resp.ProducerID, resp.ProducerEpoch = d.Next.ProducerID, d.Next.ProducerEpoch
		}
		return code
	})
	if resp.ErrorCode == kerr.TransactionalIDNotFound.Code {
		resp.ErrorCode = kerr.InvalidProducerIDMapping.Code
	}
	if resp.ErrorCode == kerr.ProducerFenced.Code && req.Version < 2 {
		resp.ErrorCode = kerr.InvalidProducerEpoch.Code
	}
	if done != nil && c.cfg.MarkerWaitMs > 0 {
		t := time.NewTimer(ms(c.cfg.MarkerWaitMs))
		defer t.Stop()
		select {
		case <-done:
		case <-t.C:
		case <-ctx.Done():
		}
	}
	return resp
}

// FindCoordinator answers CoordinatorType 1 (transactions): the leader of
// the transactional id's __transaction_state partition, creating the topic
// on first use.
func (c *Coordinator) FindCoordinator(ctx context.Context, req *kmsg.FindCoordinatorRequest) *kmsg.FindCoordinatorResponse {
	resp := kmsg.NewPtrFindCoordinatorResponse()
	keys := req.CoordinatorKeys
	if req.Version < 4 {
		keys = []string{req.CoordinatorKey}
	}
	var ensured error
	if c.md.Image().Topic(StateTopic) == nil {
		if ensured = c.log.EnsureTopic(ctx); ensured != nil {
			c.logger.Warn(fmt.Sprintf("Could not create %s: %v", StateTopic, ensured))
		}
	}
	for _, key := range keys {
		rc := kmsg.NewFindCoordinatorResponseCoordinator()
		rc.Key, rc.NodeID, rc.Port = key, -1, -1
		c.locate(key, ensured, &rc)
		resp.Coordinators = append(resp.Coordinators, rc)
	}
	if req.Version < 4 && len(resp.Coordinators) == 1 {
		rc := resp.Coordinators[0]
		resp.ErrorCode, resp.ErrorMessage = rc.ErrorCode, rc.ErrorMessage
		resp.NodeID, resp.Host, resp.Port = rc.NodeID, rc.Host, rc.Port
		resp.Coordinators = nil
	}
	return resp
}

func (c *Coordinator) locate(key string, ensured error, rc *kmsg.FindCoordinatorResponseCoordinator) {
	unavailable := func(msg string) {
		rc.ErrorCode = kerr.CoordinatorNotAvailable.Code
		rc.ErrorMessage = &msg
	}
	if ensured != nil {
		unavailable(ensured.Error())
		return
	}
	b, msg := group.CoordinatorFor(c.md.Image(), StateTopic, key)
	if msg != "" {
		unavailable(msg)
		return
	}
	rc.NodeID, rc.Host, rc.Port = b.ID, b.Host, b.Port
}

// DescribeTransactions answers from the transactional ids this node
// coordinates.
func (c *Coordinator) DescribeTransactions(_ context.Context, req *kmsg.DescribeTransactionsRequest) *kmsg.DescribeTransactionsResponse {
	resp := kmsg.NewPtrDescribeTransactionsResponse()
	for _, id := range req.TransactionalIDs {
		ts := kmsg.NewDescribeTransactionsResponseTransactionState()
		ts.TransactionalID = id
		ts.ProducerID, ts.ProducerEpoch, ts.StartTimestamp = -1, -1, -1
		o, code := c.lookup(id, false)
		if code == 0 {
			c.mu.Lock()
			m := o.e.view()
			c.mu.Unlock()
			if m == nil {
				code = kerr.TransactionalIDNotFound.Code
			} else {
				ts.State = m.State.String()
				ts.TimeoutMillis = m.TimeoutMs
				ts.StartTimestamp = m.StartMs
				ts.ProducerID, ts.ProducerEpoch = m.ProducerID, m.ProducerEpoch
				for _, tp := range m.Partitions {
					if n := len(ts.Topics); n > 0 && ts.Topics[n-1].Topic == tp.Topic {
						ts.Topics[n-1].Partitions = append(ts.Topics[n-1].Partitions, tp.Partition)
						continue
					}
					tt := kmsg.NewDescribeTransactionsResponseTransactionStateTopic()
					tt.Topic, tt.Partitions = tp.Topic, []int32{tp.Partition}
					ts.Topics = append(ts.Topics, tt)
				}
			}
		}
		ts.ErrorCode = code
		resp.TransactionStates = append(resp.TransactionStates, ts)
	}
	return resp
}

// ListTransactions lists the transactional ids this node coordinates,
// filtered by state names, producer ids and (v1+) minimum running time.
func (c *Coordinator) ListTransactions(_ context.Context, req *kmsg.ListTransactionsRequest) *kmsg.ListTransactionsResponse {
	resp := kmsg.NewPtrListTransactionsResponse()
	states := map[string]bool{}
	for _, s := range req.StateFilters {
		known := false
		for _, n := range stateNames {
			known = known || n == s
		}
		if !known {
			resp.UnknownStateFilters = append(resp.UnknownStateFilters, s)
			continue
		}
		states[s] = true
	}
	pids := map[int64]bool{}
	for _, p := range req.ProducerIDFilters {
		pids[p] = true
	}
	now := c.nowMs()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, st := range c.parts {
		if st.loading {
			resp.ErrorCode = kerr.CoordinatorLoadInProgress.Code
			return resp
		}
	}
	for id, e := range c.txns {
		m := e.view()
		if m == nil || len(states) > 0 && !states[m.State.String()] || len(pids) > 0 && !pids[m.ProducerID] {
			continue
		}
		if req.DurationFilterMillis > 0 && (m.State != Ongoing || now-m.StartMs < req.DurationFilterMillis) {
			continue
		}
		ts := kmsg.NewListTransactionsResponseTransactionState()
		ts.TransactionalID, ts.ProducerID, ts.TransactionState = id, m.ProducerID, m.State.String()
		resp.TransactionStates = append(resp.TransactionStates, ts)
	}
	sort.Slice(resp.TransactionStates, func(i, j int) bool {
		return resp.TransactionStates[i].TransactionalID < resp.TransactionStates[j].TransactionalID
	})
	return resp
}
