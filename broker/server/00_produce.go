package server

import (
	"context"
	"fmt"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/faultline/faultline/broker/metadata"
	"github.com/faultline/faultline/broker/storage"
	"github.com/faultline/faultline/internal/gostack"
)

// Produce: v3-v11
//
// Behaviour:
//   - Only record batches (magic 2, v3+) are served; message sets (v0-v2)
//     are not.
//   - Acks must be 0, 1 or -1; anything else is INVALID_REQUIRED_ACKS on
//     every partition.
//   - A topic or partition missing from the metadata image is
//     UNKNOWN_TOPIC_OR_PARTITION (auto-creation is a Metadata matter) and
//     an empty records field is CORRUPT_MESSAGE; everything else, batch
//     validation and idempotence included, is Replicas.Produce's decision.
//   - Partitions are appended concurrently; ctx carries TimeoutMillis, and
//     Replicas answers REQUEST_TIMED_OUT when acks=-1 cannot be met in time.
//   - The produce requests of one connection are handled one after another
//     in arrival order, so an idempotent producer's pipelined batches reach
//     the log in sequence order.
//   - acks=0 gets no response; if any partition failed the connection is
//     closed instead, as Kafka does, so the client refreshes its metadata.
//   - v10+ (KIP-951): NOT_LEADER_OR_FOLLOWER and FENCED_LEADER_EPOCH carry
//     the current leader and its endpoint from the image.
//   - v12+ under transaction.version 2 (KIP-890 part 2): before a
//     transactional batch is appended, the leader asks the transaction's
//     coordinator to put the partition in the producer's transaction
//     (TxnAdder; all the request's partitions in one call, so one
//     __transaction_state write), unless the partition has that
//     producer's transaction open at that epoch already (every
//     transaction has its own epoch then), so a batch whose transaction has ended (its epoch fenced by
//     EndTxn v5 or a timeout) is refused instead of opening a transaction
//     nobody will end. A coordinator that is moving
//     or busy ending the previous transaction (NOT_COORDINATOR,
//     COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS,
//     CONCURRENT_TRANSACTIONS) answers NOT_ENOUGH_REPLICAS, which
//     producers retry, as Kafka's AddPartitionsToTxnManager does; other
//     refusals (PRODUCER_FENCED, INVALID_PRODUCER_EPOCH, ...) are passed on.
//   - Below that, with transaction.partition.verification.enable (KIP-890
//     part 1, default true), the first transactional batch of a
//     transaction on a partition is appended only once the coordinator
//     confirms the client added the partition (AddPartitionsToTxn v4
//     VerifyOnly): a produce delayed past its transaction's end gets
//     INVALID_TXN_STATE (or the producer's fencing error) instead of
//     opening a transaction nobody ends. Errors map as above.
//
// Version notes: v3 transactional id, record batches; v5 LogStartOffset;
// v8 per-record errors and ErrorMessage; v9 flexible; v10-v11 leader
// hints (v11: the client may ask for them); v12 implicit transaction
// partitions (same wire as v11); v13 (topic ids) is not served.

func init() {
	register(api{key: 0, min: 3, max: 12, serial: true, needs: needMetadata | needReplicas, handle: handleProduce, fail: failProduce})
}

func handleProduce(s *Server, r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.ProduceRequest)
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	resp.Topics = make([]kmsg.ProduceResponseTopic, len(req.Topics))
	for i := range req.Topics {
		rt := kmsg.NewProduceResponseTopic()
		rt.Topic = req.Topics[i].Topic
		rt.Partitions = make([]kmsg.ProduceResponseTopicPartition, len(req.Topics[i].Partitions))
		for j := range rt.Partitions {
			rp := kmsg.NewProduceResponseTopicPartition()
			rp.Partition = req.Topics[i].Partitions[j].Partition
			rt.Partitions[j] = rp
		}
		resp.Topics[i] = rt
	}

	if req.Acks != 0 && req.Acks != 1 && req.Acks != -1 {
		for i := range resp.Topics {
			for j := range resp.Topics[i].Partitions {
				resp.Topics[i].Partitions[j].ErrorCode = kerr.InvalidRequiredAcks.Code
				r.noteError(kerr.InvalidRequiredAcks.Code)
			}
		}
		return resp, nil
	}

	ctx, cancel := withTimeoutMs(r.ctx, req.TimeoutMillis)
	defer cancel()
	img := s.backend.Metadata.Image()
	refused := s.addToTxn(ctx, req, img)
	var wg sync.WaitGroup
	for i := range req.Topics {
		t := &req.Topics[i]
		for j := range t.Partitions {
			p := &t.Partitions[j]
			rp := &resp.Topics[i].Partitions[j]
			switch {
			case img.Partition(t.Topic, p.Partition) == nil:
				rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
				continue
			case len(p.Records) == 0:
				rp.ErrorCode = kerr.CorruptMessage.Code
				continue
			}
			if code := refused[[2]int{i, j}]; code != 0 {
				rp.ErrorCode = code
				continue
			}
			produce := func() {
				res := s.backend.Replicas.Produce(ctx, t.Topic, p.Partition, p.Records, req.Acks)
				rp.ErrorCode, rp.BaseOffset, rp.LogAppendTime, rp.LogStartOffset = res.ErrorCode, res.BaseOffset, res.LogAppendTime, res.LogStartOffset
				if res.ErrorMessage != "" {
					msg := res.ErrorMessage
					rp.ErrorMessage = &msg
				}
			}
			if len(req.Topics) == 1 && len(t.Partitions) == 1 {
				produce()
				continue
			}
			wg.Add(1)
			go func() {
				gostack.Reserve()
				defer wg.Done()
				defer func() {
					if p := recover(); p != nil {
						rp.ErrorCode = kerr.UnknownServerError.Code
						_ = s.bug(p, "producing to "+t.Topic)
					}
				}()
				produce()
			}()
		}
	}
	wg.Wait()

	failed := false
	leaders := map[int32]bool{}
	for i := range resp.Topics {
		for j := range resp.Topics[i].Partitions {
			rp := &resp.Topics[i].Partitions[j]
			if rp.ErrorCode == 0 {
				continue
			}
			failed = true
			r.noteError(rp.ErrorCode)
			rp.BaseOffset, rp.LogStartOffset = -1, -1
			if req.Version >= 10 && (rp.ErrorCode == kerr.NotLeaderForPartition.Code || rp.ErrorCode == kerr.FencedLeaderEpoch.Code) {
				if p := img.Partition(resp.Topics[i].Topic, rp.Partition); p != nil && p.Leader >= 0 {
					rp.CurrentLeader.LeaderID, rp.CurrentLeader.LeaderEpoch = p.Leader, p.LeaderEpoch
					leaders[p.Leader] = true
				}
			}
		}
	}
	for id := range leaders {
		if b, ok := s.broker(img, id); ok {
			pb := kmsg.NewProduceResponseBroker()
			pb.NodeID, pb.Host, pb.Port, pb.Rack = b.ID, b.Host, b.Port, rackPtr(b.Rack)
			resp.Brokers = append(resp.Brokers, pb)
		}
	}
	if req.Acks == 0 {
		if failed {
			return nil, fmt.Errorf("acks=0 produce failed on at least one partition")
		}
		return nil, nil
	}
	return resp, nil
}

// addToTxn puts the partitions of a Produce v12+'s transactional batches
// into their producer's transaction at the coordinator first, under
// transaction.version 2 (KIP-890 part 2), all of them in one call per
// producer (one __transaction_state write). It returns the error code of
// each refused partition by its [topic, partition] index in the request;
// the others may be appended (or are not transactional, or the request
// does not use the feature).
//
// Otherwise, with VerifyTxnPartitions (KIP-890 part 1), a transactional
// batch that would open its producer's transaction on the partition is
// appended only once the coordinator confirms the partition is in that
// transaction.
//
// Either way only the first batch of a transaction on a partition goes to
// the coordinator, as in Kafka: one whose producer's open transaction on
// the partition has this epoch (under transaction.version 2 every
// transaction has its own) is in already.
func (s *Server) addToTxn(ctx context.Context, req *kmsg.ProduceRequest, img *metadata.Image) map[[2]int]int16 {
	if req.TransactionID == nil || s.backend.TxnAdder == nil || s.backend.Txns == nil {
		return nil
	}
	implicit := req.Version >= 12 && s.tv2()
	if !implicit && !s.backend.VerifyTxnPartitions {
		return nil
	}
	type producer struct {
		id    int64
		epoch int16
	}
	// adds are a producer's partitions to add, with their [topic,
	// partition] index in the request; order keeps the request's order.
	type adds struct {
		slots [][2]int
		tps   []storage.TopicPartition
	}
	var order []producer
	pending := map[producer]*adds{}
	st, _ := s.backend.Replicas.(TxnState)
	for i := range req.Topics {
		t := &req.Topics[i]
		for j := range t.Partitions {
			p := &t.Partitions[j]
			if img.Partition(t.Topic, p.Partition) == nil {
				continue
			}
			h, err := storage.ParseBatchHeader(p.Records)
			if err != nil || !h.IsTransactional() {
				continue // the replica's validation judges it
			}
			if st != nil && st.InTransaction(t.Topic, p.Partition, h.ProducerID, h.ProducerEpoch) {
				continue
			}
			k := producer{h.ProducerID, h.ProducerEpoch}
			a := pending[k]
			if a == nil {
				a = &adds{}
				pending[k] = a
				order = append(order, k)
			}
			a.slots = append(a.slots, [2]int{i, j})
			a.tps = append(a.tps, storage.TopicPartition{Topic: t.Topic, Partition: p.Partition})
		}
	}
	refused := map[[2]int]int16{}
	for _, k := range order {
		a := pending[k]
		codes := s.backend.TxnAdder.AddTxnPartitions(ctx, *req.TransactionID, k.id, k.epoch, a.tps, !implicit)
		for n, slot := range a.slots {
			code := kerr.CoordinatorNotAvailable.Code
			if n < len(codes) {
				code = codes[n]
			}
			if coordinatorBusy(code) {
				code = kerr.NotEnoughReplicas.Code
			}
			if code != 0 {
				refused[slot] = code
			}
		}
	}
	return refused
}

// coordinatorBusy reports whether a transaction coordinator's answer to a
// leader adding (or verifying) a partition says to come back later: it is
// moving (NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_
// PROGRESS) or ending the producer's previous transaction
// (CONCURRENT_TRANSACTIONS). Each request maps it to the error its
// clients retry.
func coordinatorBusy(code int16) bool {
	switch code {
	case kerr.NotCoordinator.Code, kerr.CoordinatorNotAvailable.Code, kerr.CoordinatorLoadInProgress.Code, kerr.ConcurrentTransactions.Code:
		return true
	}
	return false
}

func failProduce(req kmsg.Request, code int16) kmsg.Response {
	preq := req.(*kmsg.ProduceRequest)
	resp := preq.ResponseKind().(*kmsg.ProduceResponse)
	for _, t := range preq.Topics {
		rt := kmsg.NewProduceResponseTopic()
		rt.Topic, rt.TopicID = t.Topic, t.TopicID
		for _, p := range t.Partitions {
			rp := kmsg.NewProduceResponseTopicPartition()
			rp.Partition, rp.ErrorCode, rp.BaseOffset, rp.LogStartOffset = p.Partition, code, -1, -1
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}
