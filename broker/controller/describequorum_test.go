package controller

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/faultline/faultline/broker/quorum"
)

func describeReq(topic string, partition int32) *kmsg.DescribeQuorumRequest {
	r := kmsg.NewPtrDescribeQuorumRequest()
	r.Topics = []kmsg.DescribeQuorumRequestTopic{{Topic: topic, Partitions: []kmsg.DescribeQuorumRequestTopicPartition{{Partition: partition}}}}
	return r
}

func TestHandleDescribeQuorum(t *testing.T) {
	log := newSharedLog(t, 1)
	c := newClusterController(t, 1, log.view(1), nil)
	clusterMode(c, time.Second)
	joinBroker(t, c, 1)
	ctx := context.Background()

	p := c.HandleDescribeQuorum(ctx, describeReq(quorum.MetadataTopic, 0)).Topics[0].Partitions[0]
	assert.Zero(t, p.ErrorCode)
	assert.Equal(t, int32(1), p.LeaderID)
	assert.Equal(t, int32(1), p.LeaderEpoch)
	assert.Equal(t, c.Image().Offset+1, p.HighWatermark, "HW is the end of the committed log")
	require.Len(t, p.CurrentVoters, 1)
	assert.Equal(t, p.HighWatermark, p.CurrentVoters[0].LogEndOffset)

	for _, tp := range []struct {
		topic string
		part  int32
	}{{"orders", 0}, {quorum.MetadataTopic, 1}} {
		p := c.HandleDescribeQuorum(ctx, describeReq(tp.topic, tp.part)).Topics[0].Partitions[0]
		assert.Equal(t, kerr.UnknownTopicOrPartition.Code, p.ErrorCode, tp.topic)
	}
}
