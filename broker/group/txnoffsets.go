package group

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TxnOffsetsLog is an OffsetsLog that can also hold offsets committed
// inside transactions (TxnOffsetCommit): they are appended as a
// transactional batch of the producer and count only once the
// transaction's COMMIT marker reaches the partition. Without it
// TxnOffsetCommit answers UNSUPPORTED_VERSION.
type TxnOffsetsLog interface {
	// AppendTxn writes records as a transactional batch of producerID at
	// epoch, with acks=all; errors as Append's.
	AppendTxn(ctx context.Context, partition int32, producerID int64, epoch int16, records []Record) error
	// ReplayTxn is Replay that understands transactions: records of
	// committed transactions reach fn at their marker, those of aborted
	// ones never do, and those of transactions still open at the log end
	// reach open with their producer id.
	ReplayTxn(ctx context.Context, partition int32, fn func(key, value []byte) error, open func(producerID int64, key, value []byte) error) error
}

// txnKey names the pending offsets of one producer on one offsets
// partition.
type txnKey struct {
	partition  int32
	producerID int64
}

// TxnOffsetCommit stores offsets inside a transaction: they are written
// to __consumer_offsets with the producer's id and epoch and become the
// group's committed offsets when the transaction commits (CompleteTxn).
// The member and generation are checked as for OffsetCommit when given
// (v3+).
func (c *Coordinator) TxnOffsetCommit(_ context.Context, req *kmsg.TxnOffsetCommitRequest) *kmsg.TxnOffsetCommitResponse {
	resp := kmsg.NewPtrTxnOffsetCommitResponse()
	resp.Version = req.Version
	var codes []*int16
	for _, t := range req.Topics {
		rt := kmsg.NewTxnOffsetCommitResponseTopic()
		rt.Topic = t.Topic
		rt.Partitions = make([]kmsg.TxnOffsetCommitResponseTopicPartition, len(t.Partitions))
		for j, p := range t.Partitions {
			rt.Partitions[j] = kmsg.NewTxnOffsetCommitResponseTopicPartition()
			rt.Partitions[j].Partition = p.Partition
		}
		resp.Topics = append(resp.Topics, rt)
	}
	for i := range resp.Topics {
		for j := range resp.Topics[i].Partitions {
			codes = append(codes, &resp.Topics[i].Partitions[j].ErrorCode)
		}
	}
	setAll := func(code int16) {
		for _, c := range codes {
			*c = code
		}
	}
	tlog, ok := c.log.(TxnOffsetsLog)
	switch {
	case !ok:
		setAll(codeUnsupportedVersion)
		return resp
	case req.Group == "":
		setAll(codeInvalidGroupID)
		return resp
	}
	p, unlock, code := c.lockOwner(req.Group)
	if code != codeNone {
		setAll(code)
		return resp
	}
	defer unlock()
	token := c.partitions[p].token
	if g := c.groups[req.Group]; g != nil && (req.MemberID != "" || req.Generation >= 0) {
		if _, code := g.checkMember(req.MemberID, req.InstanceID); code != codeNone {
			c.mu.Unlock()
			setAll(code)
			return resp
		}
		if req.Generation != g.generation {
			c.mu.Unlock()
			setAll(codeIllegalGeneration)
			return resp
		}
	}
	now := c.clock.Now().UnixMilli()
	im := c.md.Image()
	var records []Record
	var slots []commitSlot
	k := 0
	for _, t := range req.Topics {
		for _, tp := range t.Partitions {
			rc := codes[k]
			k++
			switch {
			case im.Partition(t.Topic, tp.Partition) == nil:
				*rc = codeUnknownTopicOrPartition
				continue
			case tp.Metadata != nil && len(*tp.Metadata) > int(c.cfg.OffsetMetadataMaxBytes):
				*rc = codeOffsetMetadataTooLarge
				continue
			}
			o := committedOffset{offset: tp.Offset, leaderEpoch: -1, commitTimestamp: now}
			if req.Version >= 2 {
				o.leaderEpoch = tp.LeaderEpoch
			}
			if tp.Metadata != nil {
				o.metadata = *tp.Metadata
			}
			key := topicPartition{topic: t.Topic, partition: tp.Partition}
			slots = append(slots, commitSlot{tp: key, offset: o, code: rc})
			records = append(records, offsetCommitRecord(req.Group, key, o))
		}
	}
	c.mu.Unlock()
	if len(records) == 0 {
		return resp
	}
	ctx, cancel := context.WithTimeout(c.ctx, msDuration(c.cfg.OffsetsCommitTimeoutMs))
	err := tlog.AppendTxn(ctx, p, req.ProducerID, req.ProducerEpoch, records)
	cancel()
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		code := appendErrorCode(err)
		for _, s := range slots {
			*s.code = code
		}
		return resp
	}
	if st := c.partitions[p]; st == nil || st.token != token {
		return resp
	}
	for _, s := range slots {
		c.addTxnOffsetLocked(txnKey{partition: p, producerID: req.ProducerID}, req.Group, s.tp, s.offset)
	}
	return resp
}

func (c *Coordinator) addTxnOffsetLocked(k txnKey, group string, tp topicPartition, o committedOffset) {
	if c.txnPending == nil {
		c.txnPending = map[txnKey]map[string]map[topicPartition]committedOffset{}
	}
	byGroup := c.txnPending[k]
	if byGroup == nil {
		byGroup = map[string]map[topicPartition]committedOffset{}
		c.txnPending[k] = byGroup
	}
	offs := byGroup[group]
	if offs == nil {
		offs = map[topicPartition]committedOffset{}
		byGroup[group] = offs
	}
	offs[tp] = o
}

// txnOffsetPendingLocked reports whether group has an offset for tp
// committed inside a transaction that has not ended yet.
func (c *Coordinator) txnOffsetPendingLocked(group string, tp topicPartition) bool {
	for _, byGroup := range c.txnPending {
		if _, ok := byGroup[group][tp]; ok {
			return true
		}
	}
	return false
}

// CompleteTxn applies the end of a producer's transaction to offsets
// partition p, once its marker is in the partition's log: on commit the
// offsets it committed become the groups' committed offsets, on abort
// they are forgotten. The node calls it after WriteTxnMarkers wrote a
// marker to __consumer_offsets.
func (c *Coordinator) CompleteTxn(partition int32, producerID int64, commit bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := txnKey{partition: partition, producerID: producerID}
	byGroup := c.txnPending[k]
	delete(c.txnPending, k)
	if (!commit && !c.cfg.Unsafe.KeepAbortedOffsets) || c.partitions[partition] == nil {
		return
	}
	im := c.md.Image()
	for id, offs := range byGroup {
		g := c.groups[id]
		if g == nil {
			g = newGroup(id, partition, c.clock.Now())
			c.groups[id] = g
		}
		for tp, o := range offs {
			// A topic no longer in the metadata keeps no offsets
			// (dropDeletedTopicOffsets); one created again under the
			// same name is not told apart here.
			if im.Topic(tp.topic) != nil {
				g.offsets[tp] = o
			}
		}
	}
}

// dropPendingLocked forgets the pending transactional offsets of p.
func (c *Coordinator) dropPendingLocked(p int32) {
	for k := range c.txnPending {
		if k.partition == p {
			delete(c.txnPending, k)
		}
	}
}

// replay loads partition p, transactions understood when the log can.
func (c *Coordinator) replay(ctx context.Context, p int32, loaded *loadedPartition) error {
	tlog, ok := c.log.(TxnOffsetsLog)
	if !ok {
		return c.log.Replay(ctx, p, loaded.apply)
	}
	loaded.open = map[int64]*loadedPartition{}
	return tlog.ReplayTxn(ctx, p, loaded.apply, func(pid int64, key, value []byte) error {
		l := loaded.open[pid]
		if l == nil {
			l = newLoadedPartition(p, loaded.logger)
			loaded.open[pid] = l
		}
		if err := l.applyRecord(key, value); err != nil {
			loaded.skipped++
			loaded.logger.Warn(fmt.Sprintf("Skipping unreadable transactional record in %s-%d: %v", OffsetsTopic, p, err))
		}
		return nil
	})
}

// installPendingLocked makes the offsets of transactions still open in
// the loaded partition pending again.
func (c *Coordinator) installPendingLocked(l *loadedPartition) {
	for pid, open := range l.open {
		for id, offs := range open.offsets {
			for tp, o := range offs {
				c.addTxnOffsetLocked(txnKey{partition: l.partition, producerID: pid}, id, tp, o)
			}
		}
	}
}
