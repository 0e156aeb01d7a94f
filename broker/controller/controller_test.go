package controller

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/faultline/faultline/broker/metadata"
	"github.com/faultline/faultline/broker/quorum"
	"github.com/faultline/faultline/broker/quorum/quorumtest"
	"github.com/faultline/faultline/broker/storage"
)

type node struct {
	lm  *storage.LogManager
	q   *quorumtest.Local
	pub *metadata.Publisher
	c   *Controller
}

func startNode(t *testing.T, dir string, incarnation byte) *node {
	t.Helper()
	lm, err := storage.NewLogManager(storage.OS, []string{dir}, storage.ManagerOptions{})
	require.NoError(t, err)
	_, err = lm.Load()
	require.NoError(t, err)
	q, err := quorumtest.OpenLocal(quorumtest.LocalConfig{NodeID: 1, Logs: lm})
	require.NoError(t, err)
	pub := metadata.NewPublisher(metadata.NewImage("cluster"))
	_, err = quorum.FeedPublisher(q, pub)
	require.NoError(t, err)
	c, err := New(Config{NodeID: 1, ClusterID: "cluster", Defaults: Defaults{NumPartitions: 3, ReplicationFactor: 1},
		Rand: rand.New(rand.NewPCG(1, 1))}, q)
	require.NoError(t, err)
	epoch, err := c.RegisterBroker(context.Background(), BrokerRegistration{BrokerID: 1, IncarnationID: metadata.Uuid{incarnation},
		Endpoints: []metadata.Endpoint{{Name: "PLAINTEXT", Host: "localhost", Port: 9092}}})
	require.NoError(t, err)
	reply, err := c.Heartbeat(context.Background(), Heartbeat{BrokerID: 1, BrokerEpoch: epoch, MetadataOffset: pub.Image().Offset})
	require.NoError(t, err)
	require.False(t, reply.IsFenced, "broker 1 unfenced by its first heartbeat")
	return &node{lm: lm, q: q, pub: pub, c: c}
}

// controlledShutdown heartbeats broker 1 wanting to shut down until the
// controller lets it.
func (n *node) controlledShutdown(t *testing.T) {
	t.Helper()
	epoch := n.pub.Image().Brokers[1].Epoch
	require.Eventually(t, func() bool {
		reply, err := n.c.Heartbeat(context.Background(), Heartbeat{BrokerID: 1, BrokerEpoch: epoch, MetadataOffset: n.pub.Image().Offset, WantShutDown: true})
		require.NoError(t, err)
		require.Zero(t, reply.ErrorCode)
		return reply.ShouldShutDown
	}, 10*time.Second, time.Millisecond, "the controller lets broker 1 shut down")
}

func (n *node) stop(t *testing.T) {
	n.c.Close()
	require.NoError(t, n.q.Close())
	require.NoError(t, n.lm.Shutdown(0))
}

func TestControllerSingleNodeRestart(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	n := startNode(t, dir, 1)
	im := n.pub.Image()
	assert.True(t, im.Live(1))
	assert.Equal(t, int32(1), im.ControllerID)
	assert.Equal(t, "localhost", im.Brokers[1].Host)

	resp := n.c.CreateTopics(ctx, createReq(topic("orders", -1, -1), topic("orders", 1, 1)))
	assert.Equal(t, kerr.InvalidRequest.Code, resp.Topics[0].ErrorCode, "duplicate in one request")
	resp = n.c.CreateTopics(ctx, createReq(topic("orders", -1, -1), topic("bad/name", 1, 1), topic("rf2", 1, 2)))
	assert.Equal(t, []int16{0, kerr.InvalidTopicException.Code, kerr.InvalidReplicationFactor.Code},
		[]int16{resp.Topics[0].ErrorCode, resp.Topics[1].ErrorCode, resp.Topics[2].ErrorCode})
	p := n.pub.Image().Partition("orders", 2)
	require.NotNil(t, p, "the image is published before CreateTopics returns")
	assert.Equal(t, int32(1), p.Leader)
	assert.Equal(t, int32(0), p.LeaderEpoch, "a new partition starts at leader epoch 0")

	resp = n.c.CreateTopics(ctx, createReq(topic("orders", 1, 1)))
	assert.Equal(t, kerr.TopicAlreadyExists.Code, resp.Topics[0].ErrorCode)

	cp := kmsg.NewPtrCreatePartitionsRequest()
	cp.Topics = []kmsg.CreatePartitionsRequestTopic{{Topic: "orders", Count: 4}}
	assert.Equal(t, int16(0), n.c.CreatePartitions(ctx, cp).Topics[0].ErrorCode)

	var pids []int64
	for range 3 {
		r := n.c.InitProducerID(ctx, kmsg.NewPtrInitProducerIDRequest())
		require.Equal(t, int16(0), r.ErrorCode)
		pids = append(pids, r.ProducerID)
	}
	assert.Equal(t, []int64{0, 1, 2}, pids)
	txn := kmsg.NewPtrInitProducerIDRequest()
	txn.TransactionalID = sp("t")
	assert.Equal(t, kerr.InvalidRequest.Code, n.c.InitProducerID(ctx, txn).ErrorCode)

	n.controlledShutdown(t)
	assert.Equal(t, metadata.NoLeader, n.pub.Image().Partition("orders", 0).Leader)
	n.stop(t)

	n = startNode(t, dir, 2)
	defer n.stop(t)
	im = n.pub.Image()
	require.NotNil(t, im.Topic("orders"))
	assert.Len(t, im.Topic("orders").Partitions, 4)
	assert.Equal(t, int32(1), im.Partition("orders", 0).Leader, "re-elected after the restart")
	assert.Greater(t, im.Partition("orders", 0).LeaderEpoch, p.LeaderEpoch)
	r := n.c.InitProducerID(ctx, kmsg.NewPtrInitProducerIDRequest())
	assert.Equal(t, int64(ProducerIDBlockSize), r.ProducerID, "ids never repeat across restarts")

	del := kmsg.NewPtrDeleteTopicsRequest()
	del.TopicNames = []string{"orders"}
	assert.Equal(t, int16(0), n.c.DeleteTopics(ctx, del).Topics[0].ErrorCode)
	assert.Nil(t, n.pub.Image().Topic("orders"))
	assert.Equal(t, n.c.Image().Offset, n.pub.Image().Offset)
}

func TestControllerCommitFailureFillsErrors(t *testing.T) {
	n := startNode(t, t.TempDir(), 1)
	require.NoError(t, n.q.Close())
	resp := n.c.CreateTopics(context.Background(), createReq(topic("a", 1, 1), topic("a.", 1, 9)))
	assert.Equal(t, kerr.UnknownServerError.Code, resp.Topics[0].ErrorCode)
	assert.Equal(t, kerr.InvalidReplicationFactor.Code, resp.Topics[1].ErrorCode, "decision errors are kept")
	require.NoError(t, n.lm.Shutdown(0))
}

func TestControllerFencesExpiredSessions(t *testing.T) {
	ctx := context.Background()
	n := startNode(t, t.TempDir(), 1)
	defer n.stop(t)
	now := time.Unix(1000, 0)
	n.c.cfg.Now = func() time.Time { return now }
	epoch2, err := n.c.RegisterBroker(ctx, BrokerRegistration{BrokerID: 2, IncarnationID: metadata.Uuid{7}})
	require.NoError(t, err)
	_, err = n.c.Heartbeat(ctx, Heartbeat{BrokerID: 2, BrokerEpoch: epoch2, MetadataOffset: n.c.Image().Offset})
	require.NoError(t, err)
	require.True(t, n.c.Image().Live(2))
	resp := n.c.CreateTopics(ctx, createReq(topic("two", 1, 2)))
	require.Equal(t, int16(0), resp.Topics[0].ErrorCode)

	now = now.Add(9 * time.Second)
	id, err := n.c.FenceExpiredBrokers(ctx, 9000)
	require.NoError(t, err)
	assert.Equal(t, int32(-1), id, "exactly the timeout is still alive")

	now = now.Add(time.Millisecond)
	id, err = n.c.FenceExpiredBrokers(ctx, 9000)
	require.NoError(t, err)
	assert.Equal(t, int32(2), id)
	im := n.pub.Image()
	assert.True(t, im.Brokers[2].Fenced)
	assert.NotContains(t, im.Partition("two", 0).ISR, int32(2))
	assert.Equal(t, int32(1), im.Partition("two", 0).Leader)
	id, err = n.c.FenceExpiredBrokers(ctx, 9000)
	require.NoError(t, err)
	assert.Equal(t, int32(-1), id, "broker 2 is fenced already; broker 1 heartbeated by the real clock, later than the fake one")
}

// follower is a quorum led by another node: appends are refused.
type follower struct{}

func (follower) Append(context.Context, []metadata.Record) (int64, error) {
	return 0, quorum.ErrNotLeader
}
func (follower) Subscribe(func(quorum.Batch) error) (func(), error) { return func() {}, nil }
func (follower) Leader() quorum.LeaderAndEpoch                      { return quorum.LeaderAndEpoch{LeaderID: 3, Epoch: 7} }
func (follower) Describe() quorum.Description                       { return quorum.Description{LeaderID: 3} }

func TestControllerNotLeader(t *testing.T) {
	ctx := context.Background()
	var q quorum.Quorum = follower{}
	c, err := New(Config{NodeID: 1, ClusterID: "c", Defaults: Defaults{NumPartitions: 1, ReplicationFactor: 1}}, q)
	require.NoError(t, err)
	defer c.Close()
	// No broker is registered, so creation fails on its own merits first.
	resp := c.CreateTopics(ctx, createReq(topic("t", 1, 1)))
	assert.Equal(t, kerr.InvalidReplicationFactor.Code, resp.Topics[0].ErrorCode)
	r := c.InitProducerID(ctx, kmsg.NewPtrInitProducerIDRequest())
	assert.Equal(t, kerr.NotController.Code, r.ErrorCode)
	assert.Equal(t, int64(-1), r.ProducerID)
	_, err = c.RegisterBroker(ctx, BrokerRegistration{BrokerID: 1})
	assert.ErrorIs(t, err, quorum.ErrNotLeader)
}
