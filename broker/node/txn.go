package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/faultline/faultline/broker/config"
	"github.com/faultline/faultline/broker/group"
	"github.com/faultline/faultline/broker/metadata"
	"github.com/faultline/faultline/broker/replica"
	"github.com/faultline/faultline/broker/server"
	"github.com/faultline/faultline/broker/storage"
	"github.com/faultline/faultline/broker/txn"
	"github.com/faultline/faultline/internal/gostack"
)

// startTxnCoordinator starts the transaction coordinator over
// __transaction_state; it follows the image after the replica manager and
// the group coordinator.
func (n *Node) startTxnCoordinator() error {
	cfg := n.cfg
	markers := &markerWriter{nodeID: cfg.NodeID, md: n.publisher, local: n.txnMarkers(),
		dialer: replica.KgoDialer{DialConn: n.dial}, listener: n.interBrokerListener(),
		logger: n.logger.With(ComponentKey, "TransactionMarkerChannelManager"), clients: map[string]replica.BrokerClient{}}
	tc, err := txn.New(txn.Config{
		NodeID:               cfg.NodeID,
		NumPartitions:        cfg.TransactionStateLogNumPartitions,
		MaxTimeoutMs:         cfg.TransactionMaxTimeoutMs,
		AbortIntervalMs:      cfg.TransactionAbortTimedOutTransactionCleanupIntervalMs,
		ExpirationMs:         cfg.TransactionalIDExpirationMs,
		ExpirationIntervalMs: cfg.TransactionRemoveExpiredTransactionCleanupIntervalMs,
		NewProducerID: func(ctx context.Context) (int64, error) {
			resp := n.forwarder.InitProducerID(ctx, kmsg.NewPtrInitProducerIDRequest())
			if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
				return -1, fmt.Errorf("allocate a producer id: %w", err)
			}
			return resp.ProducerID, nil
		},
		GroupPartition: n.groups.PartitionFor,
		Unsafe:         txnUnsafe(cfg),
		Logger:         n.logger.With(ComponentKey, "TransactionCoordinator"),
	}, &txnStateLog{cfg: cfg, md: n.publisher, controller: n.forwarder, replicas: n.replicas}, markers, n.publisher)
	if err != nil {
		return err
	}
	n.txns = tc
	n.txnPeers = markers
	cancel := n.publisher.Subscribe(tc.ApplyImage)
	n.pushStop("transaction coordinator", func(context.Context) error { cancel(); tc.Close(); markers.close(); return nil })
	return nil
}

// interBrokerListener is the listener name other brokers are reached on.
func (n *Node) interBrokerListener() string {
	if l := n.cfg.InterBrokerListenerName; l != "" && l == n.listenerCfg.Name {
		return l
	}
	return n.listenerCfg.Name
}

// txnStateLog is __transaction_state for the coordinator.
type txnStateLog struct {
	cfg        *config.Config
	md         metadata.Source
	controller server.Controller
	replicas   *replica.Manager
}

// EnsureTopic implements txn.StateLog with Kafka's defaults: 50
// partitions, RF min(transaction.state.log.replication.factor, live
// brokers), compacted, min.insync.replicas transaction.state.log.min.isr.
func (l *txnStateLog) EnsureTopic(ctx context.Context) error {
	im := l.md.Image()
	if im.Topic(txn.StateTopic) != nil {
		return nil
	}
	rf := min(l.cfg.TransactionStateLogReplicationFactor, max(int16(len(im.UnfencedBrokers())), 1))
	return createInternalTopic(ctx, l.controller, txn.StateTopic, l.cfg.TransactionStateLogNumPartitions, rf, map[string]string{
		"cleanup.policy":                 "compact",
		"compression.type":               "uncompressed",
		"min.insync.replicas":            strconv.Itoa(int(min(int32(rf), l.cfg.TransactionStateLogMinIsr))),
		"segment.bytes":                  strconv.Itoa(int(l.cfg.TransactionStateLogSegmentBytes)),
		"unclean.leader.election.enable": "false",
	})
}

// Append implements txn.StateLog.
func (l *txnStateLog) Append(ctx context.Context, timeout time.Duration, partition int32, key, value []byte) error {
	_, err := l.replicas.AppendInternal(replica.WaitBound(ctx, timeout), txn.StateTopic, partition, []storage.Record{{TimestampMs: timeNowMs(), Key: key, Value: value}})
	if err != nil && notLeader(err) {
		return fmt.Errorf("%w: %w", txn.ErrNotLeader, err)
	}
	return err
}

// Replay implements txn.StateLog, to the log end as the group coordinator
// does: a new leader's high watermark can lag what the old one committed.
func (l *txnStateLog) Replay(ctx context.Context, partition int32, fn func(key, value []byte) error) error {
	return replayToEnd(ctx, l.replicas, txn.StateTopic, partition, fn)
}

func notLeader(err error) bool {
	return errors.Is(err, kerr.NotLeaderForPartition) || errors.Is(err, kerr.UnknownTopicOrPartition) ||
		errors.Is(err, kerr.FencedLeaderEpoch) || errors.Is(err, kerr.NotEnoughReplicas) ||
		errors.Is(err, kerr.NotEnoughReplicasAfterAppend)
}

// createInternalTopic asks the controller for an internal topic; "already
// exists" is success.
func createInternalTopic(ctx context.Context, controller server.Controller, name string, partitions int32, rf int16, configs map[string]string) error {
	req := kmsg.NewPtrCreateTopicsRequest()
	t := kmsg.NewCreateTopicsRequestTopic()
	t.Topic, t.NumPartitions, t.ReplicationFactor = name, partitions, rf
	for k, v := range configs {
		c := kmsg.NewCreateTopicsRequestTopicConfig()
		c.Name = k
		c.Value = &v
		t.Configs = append(t.Configs, c)
	}
	req.Topics = append(req.Topics, t)
	req.TimeoutMillis = 30000
	resp := controller.CreateTopics(ctx, req)
	for _, rt := range resp.Topics {
		if err := kerr.ErrorForCode(rt.ErrorCode); err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
			msg := ""
			if rt.ErrorMessage != nil {
				msg = ": " + *rt.ErrorMessage
			}
			return fmt.Errorf("create %s: %w%s", name, err, msg)
		}
	}
	return nil
}

// markerWriter sends markers to partition leaders: through the local
// replica manager for the partitions this node leads, with WriteTxnMarkers
// to the others.
type markerWriter struct {
	nodeID   int32
	md       metadata.Source
	local    server.TxnMarkers
	dialer   replica.Dialer
	listener string
	logger   *slog.Logger

	mu      sync.Mutex
	clients map[string]replica.BrokerClient // by address
}

// WriteMarkers implements txn.MarkerWriter.
func (w *markerWriter) WriteMarkers(ctx context.Context, timeout time.Duration, m txn.Marker) []txn.TopicPartition {
	im := w.md.Image()
	byLeader := map[int32][]txn.TopicPartition{}
	var pending []txn.TopicPartition
	for _, tp := range m.Partitions {
		p := im.Partition(tp.Topic, tp.Partition)
		switch {
		case p == nil:
			// The topic is gone: nothing left to end.
		case p.Leader < 0:
			pending = append(pending, tp)
		default:
			byLeader[p.Leader] = append(byLeader[p.Leader], tp)
		}
	}
	if len(byLeader) == 1 {
		for leader, tps := range byLeader {
			return append(pending, w.writeTo(ctx, timeout, im, leader, m, tps)...)
		}
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for leader, tps := range byLeader {
		wg.Add(1)
		go func() {
			gostack.Reserve()
			defer wg.Done()
			left := w.writeTo(ctx, timeout, im, leader, m, tps)
			mu.Lock()
			pending = append(pending, left...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	return pending
}

// markerDone reports whether a partition's answer ends its marker: written,
// or refused for good (the topic is gone, or a newer epoch of the producer
// already wrote there).
func markerDone(code int16) bool {
	return code == 0 || code == kerr.UnknownTopicOrPartition.Code || code == kerr.InvalidProducerEpoch.Code
}

// writeTo writes m's markers for tps to their leader: in process when it
// is this node (a timer only if an append has to wait), with
// WriteTxnMarkers otherwise, within timeout either way.
func (w *markerWriter) writeTo(ctx context.Context, timeout time.Duration, im *metadata.Image, leader int32, m txn.Marker, tps []txn.TopicPartition) []txn.TopicPartition {
	if leader == w.nodeID {
		markers := make([]replica.TxnMarker, len(tps))
		for i, tp := range tps {
			markers[i] = replica.TxnMarker{Topic: tp.Topic, Partition: tp.Partition, ProducerID: m.ProducerID,
				ProducerEpoch: m.ProducerEpoch, Commit: m.Commit, CoordinatorEpoch: m.CoordinatorEpoch}
		}
		codes := w.local.WriteTxnMarkers(replica.WaitBound(ctx, timeout), markers)
		var left []txn.TopicPartition
		for i, tp := range tps {
			if !markerDone(codes[i]) {
				left = append(left, tp)
			}
		}
		return left
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	addr, ok := brokerAddr(im, leader, w.listener)
	if !ok {
		return tps
	}
	cl, err := w.client(ctx, leader, addr)
	if err != nil {
		w.logger.Warn(fmt.Sprintf("Cannot reach broker %d for transaction markers", leader), "err", err)
		return tps
	}
	req := kmsg.NewPtrWriteTxnMarkersRequest()
	rm := kmsg.NewWriteTxnMarkersRequestMarker()
	rm.ProducerID, rm.ProducerEpoch, rm.Committed, rm.CoordinatorEpoch = m.ProducerID, m.ProducerEpoch, m.Commit, m.CoordinatorEpoch
	for _, tp := range tps {
		if n := len(rm.Topics); n > 0 && rm.Topics[n-1].Topic == tp.Topic {
			rm.Topics[n-1].Partitions = append(rm.Topics[n-1].Partitions, tp.Partition)
			continue
		}
		rt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
		rt.Topic, rt.Partitions = tp.Topic, []int32{tp.Partition}
		rm.Topics = append(rm.Topics, rt)
	}
	req.Markers = append(req.Markers, rm)
	kresp, err := cl.Request(ctx, req)
	if err != nil {
		w.dropClient(addr)
		return tps
	}
	resp, ok := kresp.(*kmsg.WriteTxnMarkersResponse)
	if !ok {
		return tps
	}
	done := map[txn.TopicPartition]bool{}
	for _, mk := range resp.Markers {
		for _, t := range mk.Topics {
			for _, p := range t.Partitions {
				if markerDone(p.ErrorCode) {
					done[txn.TopicPartition{Topic: t.Topic, Partition: p.Partition}] = true
				}
			}
		}
	}
	var left []txn.TopicPartition
	for _, tp := range tps {
		if !done[tp] {
			left = append(left, tp)
		}
	}
	return left
}

func brokerAddr(im *metadata.Image, id int32, listener string) (string, bool) {
	b, ok := im.Brokers[id]
	if !ok {
		return "", false
	}
	host, port := b.Host, b.Port
	for _, e := range b.Endpoints {
		if e.Name == listener {
			host, port = e.Host, int32(e.Port)
		}
	}
	if host == "" || port <= 0 {
		return "", false
	}
	return net.JoinHostPort(host, strconv.Itoa(int(port))), true
}

func (w *markerWriter) client(ctx context.Context, id int32, addr string) (replica.BrokerClient, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if cl := w.clients[addr]; cl != nil {
		return cl, nil
	}
	cl, err := w.dialer.Dial(ctx, id, addr)
	if err != nil {
		return nil, err
	}
	w.clients[addr] = cl
	return cl, nil
}

func (w *markerWriter) dropClient(addr string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if cl := w.clients[addr]; cl != nil {
		cl.Close()
		delete(w.clients, addr)
	}
}

func (w *markerWriter) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for addr, cl := range w.clients {
		cl.Close()
		delete(w.clients, addr)
	}
}

// txnMarkers writes markers to the partitions this node leads and, for a
// __consumer_offsets partition, tells the group coordinator, so that the
// offsets a transaction committed count from its COMMIT marker on.
func (n *Node) txnMarkers() server.TxnMarkers {
	return nodeTxnMarkers{replicas: n.replicas, groups: n.groups}
}

type nodeTxnMarkers struct {
	replicas *replica.Manager
	groups   *group.Coordinator
}

func (t nodeTxnMarkers) WriteTxnMarkers(ctx context.Context, markers []replica.TxnMarker) []int16 {
	codes := t.replicas.WriteTxnMarkers(ctx, markers)
	for i, mk := range markers {
		if codes[i] == 0 && mk.Topic == group.OffsetsTopic && t.groups != nil {
			t.groups.CompleteTxn(mk.Partition, mk.ProducerID, mk.Commit)
		}
	}
	return codes
}

// txnAdder is server.TxnAdder (KIP-890 part 2): it puts a partition, or a
// group's offsets partition, into a producer's transaction at the
// transaction's coordinator, the leader of its __transaction_state
// partition: in process when that is this node, with AddPartitionsToTxn or
// AddOffsetsToTxn (v3) over the inter-broker listener otherwise.
type txnAdder struct {
	nodeID int32
	txns   *txn.Coordinator
	md     metadata.Source
	peers  *markerWriter // its broker clients
}

func (n *Node) txnAdder() server.TxnAdder {
	if n.txns == nil || n.txnPeers == nil {
		return nil
	}
	return txnAdder{nodeID: n.cfg.NodeID, txns: n.txns, md: n.publisher, peers: n.txnPeers}
}

// AddTxnPartitions implements server.TxnAdder: in process
// (txn.Coordinator.AddForLeader) when the coordinator is this node, else
// with AddPartitionsToTxn v4, the brokers' batched form (a broker
// connection sends the highest version both ends serve, so the request is
// built in that form). Either way one __transaction_state write at the
// coordinator for all of them.
func (a txnAdder) AddTxnPartitions(ctx context.Context, id string, producerID int64, epoch int16, partitions []storage.TopicPartition, verifyOnly bool) []int16 {
	if _, leader, code := a.coordinator(id); code == 0 && leader == a.nodeID {
		// The coordinator is this node: no request to build and read back.
		tps := make([]txn.TopicPartition, len(partitions))
		for i, tp := range partitions {
			tps[i] = txn.TopicPartition(tp)
		}
		return a.txns.AddForLeader(id, producerID, epoch, tps, verifyOnly)
	}
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	req.Version = 4
	tx := kmsg.NewAddPartitionsToTxnRequestTransaction()
	tx.TransactionalID, tx.ProducerID, tx.ProducerEpoch, tx.VerifyOnly = id, producerID, epoch, verifyOnly
	byTopic := map[string]int{}
	for _, tp := range partitions {
		i, ok := byTopic[tp.Topic]
		if !ok {
			tt := kmsg.NewAddPartitionsToTxnRequestTransactionTopic()
			tt.Topic = tp.Topic
			tx.Topics = append(tx.Topics, tt)
			i = len(tx.Topics) - 1
			byTopic[tp.Topic] = i
		}
		tx.Topics[i].Partitions = append(tx.Topics[i].Partitions, tp.Partition)
	}
	req.Transactions = append(req.Transactions, tx)
	codes := make([]int16, len(partitions))
	fill := func(code int16) []int16 {
		for i := range codes {
			codes[i] = code
		}
		return codes
	}
	resp, code := askCoordinator(ctx, a, id, req, (*txn.Coordinator).AddPartitionsToTxn)
	switch {
	case code != 0:
		return fill(code)
	case resp.ErrorCode != 0:
		return fill(resp.ErrorCode)
	}
	got := map[storage.TopicPartition]int16{}
	for _, r := range resp.Transactions {
		if r.TransactionalID != id {
			continue
		}
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				got[storage.TopicPartition{Topic: t.Topic, Partition: p.Partition}] = p.ErrorCode
			}
		}
	}
	for i, tp := range partitions {
		c, ok := got[tp]
		if !ok {
			c = kerr.CoordinatorNotAvailable.Code
		}
		codes[i] = c
	}
	return codes
}

// AddTxnOffsets implements server.TxnAdder.
func (a txnAdder) AddTxnOffsets(ctx context.Context, id string, producerID int64, epoch int16, group string) int16 {
	req := kmsg.NewPtrAddOffsetsToTxnRequest()
	req.Version = 3
	req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Group = id, producerID, epoch, group
	resp, code := askCoordinator(ctx, a, id, req, (*txn.Coordinator).AddOffsetsToTxn)
	if code != 0 {
		return code
	}
	return resp.ErrorCode
}

// coordinator finds the coordinator of transactional id id in the current
// image: the leader of its __transaction_state partition, or
// NOT_COORDINATOR when that has none.
func (a txnAdder) coordinator(id string) (*metadata.Image, int32, int16) {
	im := a.md.Image()
	p := im.Partition(txn.StateTopic, a.txns.PartitionFor(id))
	if p == nil || p.Leader < 0 {
		return im, -1, kerr.NotCoordinator.Code
	}
	return im, p.Leader, 0
}

// askCoordinator sends req to the coordinator of transactional id id:
// in process (local) when the leader of its __transaction_state partition
// is this node, over the inter-broker listener otherwise. A nonzero code
// when there is no answer of the request's kind (NOT_COORDINATOR: no
// leader known; COORDINATOR_NOT_AVAILABLE: unreachable, or a wrong
// answer).
func askCoordinator[Req kmsg.Request, Resp kmsg.Response](ctx context.Context, a txnAdder, id string, req Req,
	local func(*txn.Coordinator, context.Context, Req) Resp) (Resp, int16) {
	var none Resp
	im, leader, code := a.coordinator(id)
	switch {
	case code != 0:
		return none, code
	case leader == a.nodeID:
		return local(a.txns, ctx, req), 0
	}
	addr, ok := brokerAddr(im, leader, a.peers.listener)
	if !ok {
		return none, kerr.NotCoordinator.Code
	}
	cl, err := a.peers.client(ctx, leader, addr)
	if err != nil {
		return none, kerr.CoordinatorNotAvailable.Code
	}
	kresp, err := cl.Request(ctx, req)
	if err != nil {
		a.peers.dropClient(addr)
		return none, kerr.CoordinatorNotAvailable.Code
	}
	resp, ok := kresp.(Resp)
	if !ok {
		return none, kerr.CoordinatorNotAvailable.Code
	}
	return resp, 0
}
