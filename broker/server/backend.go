package server

import (
	"context"
	"net"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/faultline/faultline/broker/metadata"
	"github.com/faultline/faultline/broker/replica"
	"github.com/faultline/faultline/broker/storage"
)

// Backend is everything the request handlers need from the rest of the
// broker. The node package wires the real implementations; tests may wire
// fakes. The server does I/O (sockets, framing, dispatch) and leaves every
// decision to these components.
type Backend struct {
	NodeID     int32
	ClusterID  string
	Metadata   metadata.Source
	Controller Controller
	Replicas   Replicas
	Groups     Groups
	// Txns is the transaction coordinator (broker/txn); nil leaves the
	// transactional APIs unserved and InitProducerId idempotent only.
	Txns Transactions
	// TxnMarkers writes transaction markers to the partitions this broker
	// leads (WriteTxnMarkers); *replica.Manager is one.
	TxnMarkers TxnMarkers
	// TxnAdder adds partitions to transactions at their coordinator,
	// wherever it is (KIP-890 part 2). With it and TransactionVersion 2,
	// the broker finalizes the transaction.version feature at 2: a
	// transactional Produce v12+ adds its partition and a TxnOffsetCommit
	// v5+ its group's offsets partition, so clients send neither
	// AddPartitionsToTxn nor AddOffsetsToTxn, and end every transaction
	// with EndTxn v5 (an epoch bump each).
	TxnAdder TxnAdder
	// TransactionVersion is the transaction.version feature level this
	// broker finalizes (0: none advertised; 2 needs TxnAdder).
	TransactionVersion int16
	// VerifyTxnPartitions is transaction.partition.verification.enable
	// (KIP-890 part 1): a transactional batch of a client that adds its
	// partitions itself (Produce below v12, or transaction.version below
	// 2) that opens its transaction on a partition is appended only once
	// the coordinator confirms the partition is in that transaction.
	// Needs TxnAdder.
	VerifyTxnPartitions bool
	// Listener names the advertised endpoint of this broker for clients,
	// used when the metadata image does not list this node yet.
	AdvertisedHost string
	AdvertisedPort int32
	// AutoCreateTopics mirrors auto.create.topics.enable.
	AutoCreateTopics bool
	// Configs answers DescribeConfigs for brokers and topics.
	Configs ConfigSource
	// MaxRequestBytes mirrors socket.request.max.bytes.
	MaxRequestBytes int32
	// ClientContext, when set, decorates the context of group requests with
	// the client's id and host (group member ids are "<client id>-<uuid>",
	// and DescribeGroups reports both); the node wires group.WithClient.
	ClientContext func(ctx context.Context, clientID, host string) context.Context
	// ControllerAPIs serves the controller's own RPCs (broker registration
	// and heartbeats, AlterPartition, DescribeQuorum) on a controller
	// listener; nil on a listener that does not serve them.
	ControllerAPIs ControllerAPIs
	// LogDirs describes this broker's log dirs (DescribeLogDirs);
	// *storage.LogManager is it.
	LogDirs LogDirs
}

// LogDirs lists the broker's log dirs with their partitions.
type LogDirs interface {
	DescribeDirs() []storage.DirDescription
}

// QuorumDescriber answers DescribeQuorum; a broker's Controller (the
// forwarder) implements it by forwarding the request to the quorum leader.
type QuorumDescriber interface {
	DescribeQuorum(ctx context.Context, req *kmsg.DescribeQuorumRequest) *kmsg.DescribeQuorumResponse
}

type describeQuorumFunc func(ctx context.Context, req *kmsg.DescribeQuorumRequest) *kmsg.DescribeQuorumResponse

func (f describeQuorumFunc) DescribeQuorum(ctx context.Context, req *kmsg.DescribeQuorumRequest) *kmsg.DescribeQuorumResponse {
	return f(ctx, req)
}

// quorumDescriber is who serves DescribeQuorum here: the controller's own
// RPCs on a controller listener, else a forwarding Controller, else nobody.
func (b *Backend) quorumDescriber() QuorumDescriber {
	if b.ControllerAPIs != nil {
		return describeQuorumFunc(b.ControllerAPIs.HandleDescribeQuorum)
	}
	if q, ok := b.Controller.(QuorumDescriber); ok {
		return q
	}
	return nil
}

// ControllerAPIs is the active controller's side of the KRaft RPCs
// (broker/controller implements it). Each method takes the decoded request
// and returns a complete response; the server sets the version.
type ControllerAPIs interface {
	HandleBrokerRegistration(ctx context.Context, req *kmsg.BrokerRegistrationRequest) *kmsg.BrokerRegistrationResponse
	HandleBrokerHeartbeat(ctx context.Context, req *kmsg.BrokerHeartbeatRequest) *kmsg.BrokerHeartbeatResponse
	HandleAlterPartition(ctx context.Context, req *kmsg.AlterPartitionRequest) *kmsg.AlterPartitionResponse
	HandleDescribeQuorum(ctx context.Context, req *kmsg.DescribeQuorumRequest) *kmsg.DescribeQuorumResponse
}

// Controller makes metadata changes. In a single-node cluster it is the local
// controller; in a cluster it forwards to the active controller. Responses are
// filled in completely (per-topic errors included); the server only sets the
// response version.
type Controller interface {
	CreateTopics(ctx context.Context, req *kmsg.CreateTopicsRequest) *kmsg.CreateTopicsResponse
	DeleteTopics(ctx context.Context, req *kmsg.DeleteTopicsRequest) *kmsg.DeleteTopicsResponse
	CreatePartitions(ctx context.Context, req *kmsg.CreatePartitionsRequest) *kmsg.CreatePartitionsResponse
	// ElectLeaders runs preferred or unclean leader elections (KIP-460).
	ElectLeaders(ctx context.Context, req *kmsg.ElectLeadersRequest) *kmsg.ElectLeadersResponse
	// IncrementalAlterConfigs and AlterConfigs change topic configs.
	IncrementalAlterConfigs(ctx context.Context, req *kmsg.IncrementalAlterConfigsRequest) *kmsg.IncrementalAlterConfigsResponse
	AlterConfigs(ctx context.Context, req *kmsg.AlterConfigsRequest) *kmsg.AlterConfigsResponse
	// InitProducerID allocates a producer id for an idempotent (non
	// transactional) producer.
	InitProducerID(ctx context.Context, req *kmsg.InitProducerIDRequest) *kmsg.InitProducerIDResponse
}

// Replicas is the partition layer of this broker: *replica.Manager is it.
// Replica decides, in its own types; the handlers decode kmsg requests into
// them and encode the answers back.
type Replicas interface {
	// Produce appends records (one or more v2 batches as sent by the client)
	// to the partition this broker leads and returns once the acks are
	// satisfied (0: at once, 1: after the local append, -1: once the high
	// watermark passes the batch), or with an error code. acks is 0, 1 or
	// -1: handleProduce answers any other value itself. ctx carries the
	// request's timeout.
	Produce(ctx context.Context, topic string, partition int32, records []byte, acks int16) replica.ProduceResult
	// Fetch reads from a partition without waiting. It returns whole
	// batches totalling at most req.MaxBytes, except that a first batch
	// larger than that is returned whole (Kafka's minOneMessage); the
	// server trims the records of every partition but the response's first
	// to its byte budgets.
	Fetch(ctx context.Context, topic string, partition int32, req replica.FetchPartition) replica.FetchResult
	// Changed returns a channel that is closed the next time readable data
	// of any partition grows (LEO or high watermark), for long polling.
	Changed() <-chan struct{}
	// ListOffset answers ListOffsets for one partition: timestamp -2 is the
	// earliest offset, -1 the latest (high watermark, or LSO for
	// read_committed), -3 the record with the largest timestamp (ListOffsets
	// v7+), otherwise the first offset whose timestamp is >= it.
	ListOffset(ctx context.Context, topic string, partition int32, currentLeaderEpoch int32, timestamp int64, isolation int8) (offset int64, ts int64, leaderEpoch int32, errCode int16)
	// DeleteRecords advances a partition's log start offset to offset
	// (-1: the high watermark) and returns the low watermark once the
	// replicas that may lead followed, with an error code and message.
	DeleteRecords(ctx context.Context, topic string, partition int32, offset int64) (lowWatermark int64, errCode int16, msg string)
	// OffsetForLeaderEpoch answers where leaderEpoch ended on this leader.
	OffsetForLeaderEpoch(ctx context.Context, topic string, partition int32, currentLeaderEpoch, leaderEpoch int32) (epoch int32, endOffset int64, errCode int16)
}

var _ Replicas = (*replica.Manager)(nil)

// Groups is the consumer-group coordinator (broker/group). Each method takes
// the decoded request and returns a complete response; the server sets the
// response version.
type Groups interface {
	FindCoordinator(ctx context.Context, req *kmsg.FindCoordinatorRequest) *kmsg.FindCoordinatorResponse
	JoinGroup(ctx context.Context, req *kmsg.JoinGroupRequest) *kmsg.JoinGroupResponse
	SyncGroup(ctx context.Context, req *kmsg.SyncGroupRequest) *kmsg.SyncGroupResponse
	Heartbeat(ctx context.Context, req *kmsg.HeartbeatRequest) *kmsg.HeartbeatResponse
	LeaveGroup(ctx context.Context, req *kmsg.LeaveGroupRequest) *kmsg.LeaveGroupResponse
	OffsetCommit(ctx context.Context, req *kmsg.OffsetCommitRequest) *kmsg.OffsetCommitResponse
	OffsetFetch(ctx context.Context, req *kmsg.OffsetFetchRequest) *kmsg.OffsetFetchResponse
	DescribeGroups(ctx context.Context, req *kmsg.DescribeGroupsRequest) *kmsg.DescribeGroupsResponse
	ListGroups(ctx context.Context, req *kmsg.ListGroupsRequest) *kmsg.ListGroupsResponse
	DeleteGroups(ctx context.Context, req *kmsg.DeleteGroupsRequest) *kmsg.DeleteGroupsResponse
	OffsetDelete(ctx context.Context, req *kmsg.OffsetDeleteRequest) *kmsg.OffsetDeleteResponse
}

// Transactions is the transaction coordinator. Each method takes the
// decoded request and returns a complete response; the server sets the
// version.
type Transactions interface {
	// FindCoordinator answers CoordinatorType 1 (transactional ids).
	FindCoordinator(ctx context.Context, req *kmsg.FindCoordinatorRequest) *kmsg.FindCoordinatorResponse
	// InitProducerID answers requests that carry a transactional id.
	InitProducerID(ctx context.Context, req *kmsg.InitProducerIDRequest) *kmsg.InitProducerIDResponse
	AddPartitionsToTxn(ctx context.Context, req *kmsg.AddPartitionsToTxnRequest) *kmsg.AddPartitionsToTxnResponse
	AddOffsetsToTxn(ctx context.Context, req *kmsg.AddOffsetsToTxnRequest) *kmsg.AddOffsetsToTxnResponse
	EndTxn(ctx context.Context, req *kmsg.EndTxnRequest) *kmsg.EndTxnResponse
	DescribeTransactions(ctx context.Context, req *kmsg.DescribeTransactionsRequest) *kmsg.DescribeTransactionsResponse
	ListTransactions(ctx context.Context, req *kmsg.ListTransactionsRequest) *kmsg.ListTransactionsResponse
}

// TxnAdder puts partitions, or a consumer group's offsets partition,
// into a producer's ongoing transaction at the transaction's coordinator
// (on this broker or another) and answers with error codes, 0 for each
// partition that is in. A transaction that has ended is not reopened by a
// producer epoch it has fenced: under transaction.version 2 every
// transaction has its own epoch.
//
// AddTxnPartitions takes every partition of one Produce request that
// needs it at once (one __transaction_state write, as Kafka's brokers
// batch them per coordinator) and answers a code per partition, in order.
// With verifyOnly it only asks whether each partition is in the
// producer's open transaction (KIP-890 part 1, AddPartitionsToTxn v4
// VerifyOnly): 0 when it is, INVALID_TXN_STATE when it is not.
type TxnAdder interface {
	AddTxnPartitions(ctx context.Context, transactionalID string, producerID int64, epoch int16, partitions []storage.TopicPartition, verifyOnly bool) []int16
	AddTxnOffsets(ctx context.Context, transactionalID string, producerID int64, epoch int16, group string) int16
}

// TxnState is what KIP-890 part 1 asks of the replicas (*replica.Manager
// has it): whether a producer, at an epoch, has a transaction open on a
// partition, so that only the first batch of a transaction on a partition
// is verified with the coordinator.
type TxnState interface {
	InTransaction(topic string, partition int32, producerID int64, epoch int16) bool
}

// ProducerStates is what DescribeProducers asks of the replicas
// (*replica.Manager has it): the producers a partition this broker leads
// remembers, or the partition's error code.
type ProducerStates interface {
	Producers(topic string, partition int32) ([]storage.ProducerState, int16)
}

var _ ProducerStates = (*replica.Manager)(nil)

// TxnMarkers writes transaction markers to partitions this broker leads
// and waits until each is replicated (acks=all); codes[i] answers
// markers[i].
type TxnMarkers interface {
	WriteTxnMarkers(ctx context.Context, markers []replica.TxnMarker) []int16
}

var _ TxnMarkers = (*replica.Manager)(nil)

// TxnOffsets is the part of the group coordinator that takes offsets
// committed inside a transaction (TxnOffsetCommit).
type TxnOffsets interface {
	TxnOffsetCommit(ctx context.Context, req *kmsg.TxnOffsetCommitRequest) *kmsg.TxnOffsetCommitResponse
}

// ConfigEntry is one configuration value as DescribeConfigs reports it.
type ConfigEntry struct {
	Name      string
	Value     *string
	ReadOnly  bool
	IsDefault bool
	Sensitive bool
	Source    int8 // kmsg ConfigSource: 1 topic, 4 static broker, 5 default
}

// ConfigSource answers DescribeConfigs.
type ConfigSource interface {
	BrokerConfigs() []ConfigEntry
	// TopicConfigs returns the effective configs of a topic, false if the
	// topic does not exist.
	TopicConfigs(topic string) ([]ConfigEntry, bool)
}

// groupCtx is the context of a group request: the request's own, decorated
// by Backend.ClientContext with the client id and host when wired.
func (s *Server) groupCtx(r *request) context.Context {
	if s.backend.ClientContext == nil {
		return r.ctx
	}
	host, _, err := net.SplitHostPort(r.remote)
	if err != nil {
		host = r.remote
	}
	return s.backend.ClientContext(r.ctx, r.clientID(), host)
}
