package node

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/faultline/faultline/broker/quorum"
)

// TestClusterOneController runs Kafka's one-controller layout: a single
// controller-only voter and three broker-only nodes. The controller runs
// the raft quorum alone; the brokers register with it, follow the metadata
// log, replicate an RF 3 topic with acks=all, and DescribeQuorum names the
// controller as leader with the brokers as observers.
func TestClusterOneController(t *testing.T) {
	props := clusterProps(t, 1, nil)
	props[0]["process.roles"] = "controller"
	props[0]["listeners"] = strings.Split(props[0]["listeners"], ",")[1]
	nodes := startClusterProps(t, withBrokers(t, props, 3))
	assert.Contains(t, nodes[0].logs.String(), "Kafka controller 1 is ready to serve requests")
	for _, c := range nodes[1:] {
		assert.Contains(t, c.logs.String(), "Registered broker "+strconv.Itoa(int(c.id))+" with controller quorum")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds(nodes[1:])...), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DefaultProduceTopic("one"),
		kgo.RecordRetries(100), kgo.RetryBackoffFn(func(int) time.Duration { return 20 * time.Millisecond }))
	require.NoError(t, err)
	defer cl.Close()
	resp, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 3, map[string]*string{"min.insync.replicas": new("2")}, "one")
	require.NoError(t, err)
	require.NoError(t, resp.Err)
	for i := range 20 {
		require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Value: []byte(strconv.Itoa(i))}).FirstErr())
	}
	p, ok := partitionState(nodes[0], "one", 0)
	require.True(t, ok)
	assert.Len(t, p.ISR, 3)

	req := kmsg.NewPtrDescribeQuorumRequest()
	rt := kmsg.NewDescribeQuorumRequestTopic()
	rt.Topic = quorum.MetadataTopic
	rt.Partitions = append(rt.Partitions, kmsg.NewDescribeQuorumRequestTopicPartition())
	req.Topics = append(req.Topics, rt)
	dq := nodes[0].node.controller.HandleDescribeQuorum(ctx, req)
	require.Len(t, dq.Topics, 1)
	dp := dq.Topics[0].Partitions[0]
	assert.Equal(t, int16(0), dp.ErrorCode)
	assert.Equal(t, int32(1), dp.LeaderID)
	require.Len(t, dp.CurrentVoters, 1)
	var observers []int32
	for _, o := range dp.Observers {
		observers = append(observers, o.ReplicaID)
	}
	assert.ElementsMatch(t, []int32{2, 3, 4}, observers)
}
