package controller

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/faultline/faultline/broker/lifecycle"
	"github.com/faultline/faultline/broker/quorum"
)

func createOverKafka(t *testing.T, addr string, name string) *kmsg.CreateTopicsResponse {
	t.Helper()
	tr := kgoTransport(t, map[int32]string{0: addr}, nil)
	req := createReq(topic(name, 2, 1))
	req.TimeoutMillis = int32(testWait.Milliseconds())
	resp, err := tr.Send(context.Background(), req)
	require.NoError(t, err)
	return resp.(*kmsg.CreateTopicsResponse)
}

// TestForwarderThroughStandby: a client creates topics through a node whose
// controller is standing by; its lifecycle.Forwarder sends them to the active
// controller over the Kafka protocol, and decides them locally once its
// own controller is active.
func TestForwarderThroughStandby(t *testing.T) {
	log := newSharedLog(t, 1)
	c1 := newClusterController(t, 1, log.view(1), nil)
	c2 := newClusterController(t, 2, log.view(2), nil)
	// Broker 1 joins once and never heartbeats again: sessions must
	// outlive the test.
	runExpiry(t, c1, testHeartbeat, time.Hour)
	runExpiry(t, c2, testHeartbeat, time.Hour)
	joinBroker(t, c1, 1)
	// Controller listeners answer for their own controller only.
	voters := map[int32]string{1: serveKafka(t, dispatch(c1, nil)), 2: serveKafka(t, dispatch(c2, nil))}
	// Node 2's broker listener forwards, starting with the wrong controller.
	fwd := &lifecycle.Forwarder{Local: c2, Transport: kgoTransport(t, map[int32]string{2: voters[2], 1: voters[1]}, func() quorum.LeaderAndEpoch {
		return quorum.LeaderAndEpoch{LeaderID: 2, Epoch: 1}
	})}
	broker2 := serveKafka(t, dispatch(c2, fwd))

	assert.Equal(t, kerr.NotController.Code, c2.CreateTopics(context.Background(), createReq(topic("direct", 1, 1))).Topics[0].ErrorCode)
	resp := createOverKafka(t, broker2, "orders")
	require.Zero(t, resp.Topics[0].ErrorCode, kerr.ErrorForCode(resp.Topics[0].ErrorCode))
	assert.Equal(t, int32(2), resp.Topics[0].NumPartitions)
	require.NotNil(t, c1.Image().Topic("orders"), "created by the active controller")

	pid := fwd.InitProducerID(context.Background(), kmsg.NewPtrInitProducerIDRequest())
	assert.Zero(t, pid.ErrorCode)
	assert.GreaterOrEqual(t, pid.ProducerID, int64(0))

	// Failover to 2: the same node now decides locally.
	log.setLeader(2, 2)
	resp = createOverKafka(t, broker2, "events")
	require.Zero(t, resp.Topics[0].ErrorCode, kerr.ErrorForCode(resp.Topics[0].ErrorCode))
	assert.True(t, c2.Active())

	// A broker-only node without hints tries the controllers in turn.
	only := &lifecycle.Forwarder{Transport: kgoTransport(t, voters, nil)}
	cr := only.CreateTopics(context.Background(), createReq(topic("logs", 1, 1)))
	require.Zero(t, cr.Topics[0].ErrorCode, kerr.ErrorForCode(cr.Topics[0].ErrorCode))
	names := c1.Image().TopicNames()
	assert.True(t, slices.Equal([]string{"events", "logs", "orders"}, names), "%v", names)
	dq := only.DescribeQuorum(context.Background(), describeReq(quorum.MetadataTopic, 0))
	assert.Equal(t, int32(2), dq.Topics[0].Partitions[0].LeaderID, "DescribeQuorum is answered by the quorum leader")
}

// TestForwarderGivesUp: with no controller reachable the request fails
// with REQUEST_TIMED_OUT within its own timeout.
func TestForwarderGivesUp(t *testing.T) {
	log := newSharedLog(t, 1)
	standby := newClusterController(t, 2, log.view(2), nil)
	runExpiry(t, standby, testHeartbeat, testSession)
	fwd := &lifecycle.Forwarder{Local: standby, Transport: kgoTransport(t, map[int32]string{1: serveKafka(t, dispatch(standby, nil))}, nil)}
	req := createReq(topic("orders", 1, 1))
	req.TimeoutMillis = 200
	resp := fwd.CreateTopics(context.Background(), req)
	require.Len(t, resp.Topics, 1)
	assert.Equal(t, kerr.NotController.Code, resp.Topics[0].ErrorCode, "the last answer was NOT_CONTROLLER")

	dead := &lifecycle.Forwarder{Transport: kgoTransport(t, map[int32]string{1: "127.0.0.1:1"}, nil)}
	d := kmsg.NewPtrDeleteTopicsRequest()
	d.TimeoutMillis = 200
	d.TopicNames = []string{"orders"}
	dr := dead.DeleteTopics(context.Background(), d)
	require.Len(t, dr.Topics, 1)
	assert.Equal(t, kerr.RequestTimedOut.Code, dr.Topics[0].ErrorCode)
}
