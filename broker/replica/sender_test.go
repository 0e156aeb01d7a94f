package replica

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/faultline/faultline/broker/metadata"
	"github.com/faultline/faultline/broker/storage"
)

// recordingClient answers AlterPartition with a fixed response.
type recordingClient struct {
	resp *kmsg.AlterPartitionResponse
	got  *kmsg.AlterPartitionRequest
}

func (c *recordingClient) Request(_ context.Context, req kmsg.Request) (kmsg.Response, error) {
	c.got = req.(*kmsg.AlterPartitionRequest)
	return c.resp, nil
}

func (c *recordingClient) Close() {}

// senderFixture is an image of brokers 1 (epoch 11) and 2 (epoch 22) and
// broker 1's proposal to make both the ISR of orders-3.
func senderFixture() (*metadata.Image, ISRChange) {
	im := metadata.NewImage("cluster")
	im.Brokers[1] = metadata.Broker{ID: 1, Epoch: 11}
	im.Brokers[2] = metadata.Broker{ID: 2, Epoch: 22}
	ch := ISRChange{TopicPartition: storage.TopicPartition{Topic: "orders", Partition: 3}, TopicID: metadata.Uuid{7},
		LeaderEpoch: 4, PartitionEpoch: 9, NewISR: []int32{1, 2}}
	return im, ch
}

func TestKafkaISRSender(t *testing.T) {
	im, ch := senderFixture()
	answer := func(code int16) *kmsg.AlterPartitionResponse {
		resp := kmsg.NewPtrAlterPartitionResponse()
		rt := kmsg.NewAlterPartitionResponseTopic()
		rt.TopidID = [16]byte{7}
		rp := kmsg.NewAlterPartitionResponseTopicPartition()
		rp.Partition, rp.ErrorCode, rp.LeaderID, rp.LeaderEpoch, rp.PartitionEpoch, rp.ISR = 3, code, 1, 4, 10, []int32{1, 2}
		rt.Partitions = append(rt.Partitions, rp)
		resp.Topics = append(resp.Topics, rt)
		return resp
	}
	cl := &recordingClient{resp: answer(0)}
	s := KafkaISRSender{BrokerID: 1, Image: func() *metadata.Image { return im },
		Controller: func(context.Context) (BrokerClient, error) { return cl, nil }}
	res, err := s.AlterPartition(context.Background(), ch)
	require.NoError(t, err)
	assert.Equal(t, ISRResult{LeaderEpoch: 4, PartitionEpoch: 10, ISR: []int32{1, 2}}, res)
	require.NotNil(t, cl.got)
	assert.Equal(t, int64(11), cl.got.BrokerEpoch)
	p := cl.got.Topics[0].Partitions[0]
	assert.Equal(t, [16]byte{7}, cl.got.Topics[0].TopicID)
	assert.Equal(t, int32(9), p.PartitionEpoch)
	assert.Equal(t, []kmsg.AlterPartitionRequestTopicPartitionNewEpochISR{{BrokerID: 1, BrokerEpoch: 11}, {BrokerID: 2, BrokerEpoch: 22}}, p.NewEpochISR)

	cl.resp = answer(kerr.InvalidUpdateVersion.Code)
	_, err = s.AlterPartition(context.Background(), ch)
	assert.ErrorIs(t, err, kerr.InvalidUpdateVersion)
}

// TestKafkaISRSenderUsesThisIncarnationsEpoch: a restarted broker's image
// still names its previous incarnation's epoch; the request carries the
// epoch this process registered with (-1 before it has), so the
// controller refuses an ISR change of a broker not registered again.
func TestKafkaISRSenderUsesThisIncarnationsEpoch(t *testing.T) {
	im, ch := senderFixture()
	cl := &recordingClient{resp: kmsg.NewPtrAlterPartitionResponse()}
	epoch := int64(-1)
	s := KafkaISRSender{BrokerID: 1, Image: func() *metadata.Image { return im }, BrokerEpoch: func() int64 { return epoch },
		Controller: func(context.Context) (BrokerClient, error) { return cl, nil }}
	_, _ = s.AlterPartition(context.Background(), ch)
	require.NotNil(t, cl.got)
	assert.Equal(t, int64(-1), cl.got.BrokerEpoch, "not registered yet: not the image's 11")
	epoch = 33
	_, _ = s.AlterPartition(context.Background(), ch)
	assert.Equal(t, int64(33), cl.got.BrokerEpoch)
}
