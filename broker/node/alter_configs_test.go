package node

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/faultline/faultline/broker/storage"
)

// TestClusterAlterConfigs changes a topic's configs through a node that is
// not the active controller, and sees every broker act on them: every
// replica's log takes the new cleanup.policy, a leader refuses acks=all
// writes once min.insync.replicas exceeds the ISR, and takes them again
// once the legacy AlterConfigs leaves that override out; a value the log
// would refuse is refused by the controller.
func TestClusterAlterConfigs(t *testing.T) {
	nodes := startCluster(t, 3, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	via := notController(t, nodes)
	cl, err := kgo.NewClient(kgo.SeedBrokers(via.node.Addr().String()), kgo.DefaultProduceTopic("cfg"),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DisableIdempotentWrite(), kgo.RecordRetries(0))
	require.NoError(t, err)
	defer cl.Close()
	adm := kadm.NewClient(cl)
	created, err := adm.CreateTopic(ctx, 1, 3, nil, "cfg")
	require.NoError(t, err)
	require.NoError(t, created.Err)
	require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Value: []byte("before")}).FirstErr())

	// Straight to the node that is not the controller: it forwards.
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeTopic, "cfg"
	four, compact := "4", "compact"
	res.Configs = []kmsg.IncrementalAlterConfigsRequestResourceConfig{
		{Name: "min.insync.replicas", Op: kmsg.IncrementalAlterConfigOpSet, Value: &four},
		{Name: "cleanup.policy", Op: kmsg.IncrementalAlterConfigOpAppend, Value: &compact},
	}
	req.Resources = append(req.Resources, res)
	kresp, err := cl.Broker(int(via.id)).Request(ctx, req)
	require.NoError(t, err)
	iresp := kresp.(*kmsg.IncrementalAlterConfigsResponse)
	require.Len(t, iresp.Resources, 1)
	require.Zero(t, iresp.Resources[0].ErrorCode, "%v", iresp.Resources[0].ErrorMessage)

	require.Eventually(t, func() bool {
		for _, c := range nodes {
			l, ok := c.node.logs.GetLog(storage.TopicPartition{Topic: "cfg", Partition: 0})
			if !ok || !l.Config().Compacts() {
				return false
			}
		}
		return true
	}, 30*time.Second, 10*time.Millisecond, "every replica's log, leader's and followers', compacts now")
	described, err := adm.DescribeTopicConfigs(ctx, "cfg")
	require.NoError(t, err)
	rc, err := described.On("cfg", nil)
	require.NoError(t, err)
	values := map[string]kadm.Config{}
	for _, c := range rc.Configs {
		values[c.Key] = c
	}
	require.NotNil(t, values["min.insync.replicas"].Value)
	assert.Equal(t, "4", *values["min.insync.replicas"].Value)
	assert.Equal(t, kmsg.ConfigSourceDynamicTopicConfig, values["min.insync.replicas"].Source)
	require.NotNil(t, values["cleanup.policy"].Value)
	assert.Equal(t, "delete,compact", *values["cleanup.policy"].Value)

	err = cl.ProduceSync(ctx, &kgo.Record{Key: []byte("k"), Value: []byte("refused")}).FirstErr()
	assert.ErrorIs(t, err, kerr.NotEnoughReplicas, "the leader applies min.insync.replicas 4 to an ISR of 3")

	// The legacy request replaces the overrides: min.insync.replicas and
	// cleanup.policy go back to the defaults.
	hour := "3600000"
	altered, err := adm.AlterTopicConfigsState(ctx, []kadm.AlterConfig{{Name: "retention.ms", Value: &hour}}, "cfg")
	require.NoError(t, err)
	require.NoError(t, altered[0].Err)
	require.Eventually(t, func() bool {
		err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("after")}).FirstErr()
		return err == nil
	}, 30*time.Second, 50*time.Millisecond, "acks=all writes are taken again")
	for _, c := range nodes {
		require.Eventually(t, func() bool {
			cfgs := c.node.publisher.Image().Topic("cfg").Configs
			return len(cfgs) == 1 && cfgs["retention.ms"] == hour
		}, 30*time.Second, 10*time.Millisecond)
	}

	// A value one key's check allows but the log refuses (an index of
	// fewer than 4 entries) is refused before any broker sees it.
	sixteen := "16"
	refused, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "segment.index.bytes", Value: &sixteen}}, "cfg")
	require.NoError(t, err)
	require.Len(t, refused, 1)
	assert.ErrorIs(t, refused[0].Err, kerr.InvalidConfig)

	// Broker configs come from server.properties only.
	brokerAltered, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Name: "log.retention.ms", Value: &hour}})
	require.NoError(t, err)
	require.NotEmpty(t, brokerAltered)
	assert.ErrorIs(t, brokerAltered[0].Err, kerr.InvalidRequest)
}
