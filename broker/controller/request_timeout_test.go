package controller

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/faultline/faultline/broker/metadata"
	"github.com/faultline/faultline/broker/quorum"
)

// stuckLeader is a quorum this node leads but that commits nothing, as a
// leader cut off from the other voters before it steps down: appends wait
// until their context ends. Its committed log registers broker 1.
type stuckLeader struct{}

func (stuckLeader) Append(ctx context.Context, _ []metadata.Record) (int64, error) {
	<-ctx.Done()
	return 0, ctx.Err()
}

func (stuckLeader) Subscribe(fn func(quorum.Batch) error) (func(), error) {
	err := fn(quorum.Batch{BaseOffset: 0, LastOffset: 0, Epoch: 1, Records: []metadata.Record{
		&metadata.RegisterBrokerRecord{BrokerID: 1, BrokerEpoch: 0, Endpoints: []metadata.Endpoint{{Name: "PLAINTEXT", Host: "localhost", Port: 9092}}},
	}})
	return func() {}, err
}
func (stuckLeader) Leader() quorum.LeaderAndEpoch {
	return quorum.LeaderAndEpoch{LeaderID: 1, Epoch: 1}
}
func (stuckLeader) Describe() quorum.Description { return quorum.Description{LeaderID: 1} }

// TestAdminRequestsEndAtTheirTimeout: CreateTopics, DeleteTopics and
// CreatePartitions on a leader that cannot commit end after the request's
// TimeoutMillis with REQUEST_TIMED_OUT, even when the caller's context has
// no deadline (a client on the controller listener), as Kafka's controller
// bounds them by timeoutMs.
func TestAdminRequestsEndAtTheirTimeout(t *testing.T) {
	c, err := New(Config{NodeID: 1, ClusterID: "c", Defaults: Defaults{NumPartitions: 1, ReplicationFactor: 1}}, stuckLeader{})
	require.NoError(t, err)
	defer c.Close()
	require.True(t, c.Image().Live(1))
	ctx := context.Background()

	create := createReq(topic("t", 1, 1))
	create.TimeoutMillis = 50
	done := make(chan *kmsg.CreateTopicsResponse, 1)
	go func() { done <- c.CreateTopics(ctx, create) }()
	select {
	case resp := <-done:
		assert.Equal(t, kerr.RequestTimedOut.Code, resp.Topics[0].ErrorCode)
	case <-time.After(10 * time.Second):
		t.Fatal("CreateTopics on a leader that cannot commit never ended")
	}

	// c.mu is free again: the next requests are decided, and time out too.
	del := kmsg.NewPtrDeleteTopicsRequest()
	del.TopicNames, del.TimeoutMillis = []string{"t"}, 50
	assert.Equal(t, kerr.UnknownTopicOrPartition.Code, c.DeleteTopics(ctx, del).Topics[0].ErrorCode, "nothing was committed")
	create.TimeoutMillis = 50
	assert.Equal(t, kerr.RequestTimedOut.Code, c.CreateTopics(ctx, create).Topics[0].ErrorCode)
}
