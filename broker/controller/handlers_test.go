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

func regReq(id int32, incarnation byte, previousEpoch int64) *kmsg.BrokerRegistrationRequest {
	r := kmsg.NewPtrBrokerRegistrationRequest()
	r.Version = 4
	r.BrokerID, r.ClusterID, r.IncarnationID, r.PreviousBrokerEpoch = id, "cluster", [16]byte{incarnation}, previousEpoch
	r.Listeners = []kmsg.BrokerRegistrationRequestListener{{Name: "PLAINTEXT", Host: "localhost", Port: uint16(9090 + id)}}
	return r
}

func hbReq(id int32, epoch, offset int64, wantFence, wantShutdown bool) *kmsg.BrokerHeartbeatRequest {
	r := kmsg.NewPtrBrokerHeartbeatRequest()
	r.BrokerID, r.BrokerEpoch, r.CurrentMetadataOffset, r.WantFence, r.WantShutdown = id, epoch, offset, wantFence, wantShutdown
	return r
}

// clusterMode sets the session timeout RunExpiry would set, without its
// loop.
func clusterMode(c *Controller, sessionTimeout time.Duration) {
	c.sessionTimeoutMs.Store(sessionTimeout.Milliseconds())
}

// joinBroker registers and unfences broker id through the handlers.
func joinBroker(t testing.TB, c *Controller, id int32) int64 {
	t.Helper()
	ctx := context.Background()
	r := c.HandleBrokerRegistration(ctx, regReq(id, byte(id), -1))
	require.Zero(t, r.ErrorCode, kerr.ErrorForCode(r.ErrorCode))
	h := c.HandleBrokerHeartbeat(ctx, hbReq(id, r.BrokerEpoch, 1<<40, false, false))
	require.Zero(t, h.ErrorCode)
	require.False(t, h.IsFenced)
	return r.BrokerEpoch
}

func isNoOp(r metadata.Record) bool { return r.Key() == metadata.KeyNoOp }

func TestHandleBrokerRegistration(t *testing.T) {
	clk := newClock()
	log := newSharedLog(t, 1)
	c := newClusterController(t, 1, log.view(1), clk.now)
	clusterMode(c, 9*time.Second)
	ctx := context.Background()

	var first, second int64
	steps := []struct {
		name    string
		req     func() *kmsg.BrokerRegistrationRequest
		before  func()
		want    *kerr.Error
		inspect func(epoch int64)
	}{
		{name: "new broker", req: func() *kmsg.BrokerRegistrationRequest { return regReq(1, 1, -1) },
			inspect: func(e int64) { first = e; assert.GreaterOrEqual(t, e, int64(0)) }},
		{name: "same incarnation again keeps its epoch", req: func() *kmsg.BrokerRegistrationRequest { return regReq(1, 1, -1) },
			inspect: func(e int64) { assert.Equal(t, first, e) }},
		{name: "other incarnation while the session is alive", req: func() *kmsg.BrokerRegistrationRequest { return regReq(1, 2, -1) },
			before: func() { clk.advance(8 * time.Second) }, want: kerr.DuplicateBrokerRegistration},
		{name: "other incarnation naming the registered epoch as previous", req: func() *kmsg.BrokerRegistrationRequest { return regReq(1, 2, first) },
			inspect: func(e int64) { second = e; assert.Greater(t, e, first) }},
		{name: "third incarnation while the second's session is alive", req: func() *kmsg.BrokerRegistrationRequest { return regReq(1, 3, -1) },
			want: kerr.DuplicateBrokerRegistration},
		{name: "third incarnation after the session expired", req: func() *kmsg.BrokerRegistrationRequest { return regReq(1, 3, -1) },
			before: func() { clk.advance(9*time.Second + time.Millisecond) }, inspect: func(e int64) { assert.Greater(t, e, second) }},
		{name: "wrong cluster id", req: func() *kmsg.BrokerRegistrationRequest {
			r := regReq(2, 1, -1)
			r.ClusterID = "other"
			return r
		}, want: kerr.InconsistentClusterID},
		{name: "negative broker id", req: func() *kmsg.BrokerRegistrationRequest { return regReq(-1, 1, -1) }, want: kerr.InvalidRegistration},
	}
	for _, s := range steps {
		if s.before != nil {
			s.before()
		}
		resp := c.HandleBrokerRegistration(ctx, s.req())
		if s.want != nil {
			assert.Equal(t, s.want.Code, resp.ErrorCode, "%s: got %v", s.name, kerr.ErrorForCode(resp.ErrorCode))
			assert.Equal(t, int64(-1), resp.BrokerEpoch, s.name)
			continue
		}
		require.Zero(t, resp.ErrorCode, "%s: %v", s.name, kerr.ErrorForCode(resp.ErrorCode))
		s.inspect(resp.BrokerEpoch)
	}
	b := c.Image().Brokers[1]
	assert.Equal(t, metadata.Uuid{3}, b.IncarnationID)
	assert.True(t, b.Fenced, "a new registration starts fenced")
	assert.Equal(t, 3, log.count(func(r metadata.Record) bool { return r.Key() == metadata.KeyRegisterBroker }), "one record per new incarnation")
}

func TestHandleBrokerHeartbeat(t *testing.T) {
	log := newSharedLog(t, 1)
	c := newClusterController(t, 1, log.view(1), newClock().now)
	clusterMode(c, 9*time.Second)
	ctx := context.Background()
	reg := c.HandleBrokerRegistration(ctx, regReq(2, 1, -1))
	require.Zero(t, reg.ErrorCode)
	e := reg.BrokerEpoch

	steps := []struct {
		name                       string
		req                        *kmsg.BrokerHeartbeatRequest
		code                       *kerr.Error
		caughtUp, fenced, shutdown bool
	}{
		{"unknown broker", hbReq(9, 0, 100, false, false), kerr.BrokerIDNotRegistered, false, true, false},
		{"stale broker epoch", hbReq(2, e+100, 100, false, false), kerr.StaleBrokerEpoch, false, true, false},
		{"behind its registration", hbReq(2, e, e-1, false, false), nil, false, true, false},
		{"caught up but wants to stay fenced", hbReq(2, e, e, true, false), nil, true, true, false},
		{"caught up and ready: unfenced", hbReq(2, e, e, false, false), nil, true, false, false},
		{"wants to be fenced again", hbReq(2, e, e, true, false), nil, true, true, false},
		{"unfenced again", hbReq(2, e, e, false, false), nil, true, false, false},
		{"controlled shutdown of a broker leading nothing", hbReq(2, e, e, false, true), nil, true, false, true},
	}
	for _, s := range steps {
		resp := c.HandleBrokerHeartbeat(ctx, s.req)
		want := int16(0)
		if s.code != nil {
			want = s.code.Code
		}
		assert.Equal(t, want, resp.ErrorCode, "%s: got %v", s.name, kerr.ErrorForCode(resp.ErrorCode))
		assert.Equal(t, []bool{s.caughtUp, s.fenced, s.shutdown}, []bool{resp.IsCaughtUp, resp.IsFenced, resp.ShouldShutdown}, s.name)
	}
}

func TestHandlersNotController(t *testing.T) {
	log := newSharedLog(t, 1)
	c1 := newClusterController(t, 1, log.view(1), nil)
	c2 := newClusterController(t, 2, log.view(2), nil)
	clusterMode(c1, time.Second)
	clusterMode(c2, time.Second)
	ctx := context.Background()
	joinBroker(t, c1, 1)

	nc := kerr.NotController.Code
	assert.Equal(t, nc, c2.HandleBrokerRegistration(ctx, regReq(2, 2, -1)).ErrorCode)
	hb := c2.HandleBrokerHeartbeat(ctx, hbReq(1, 0, 0, false, false))
	assert.Equal(t, nc, hb.ErrorCode)
	assert.True(t, hb.IsFenced, "an error answer keeps IsFenced's default")
	assert.Equal(t, nc, c2.HandleAlterPartition(ctx, kmsg.NewPtrAlterPartitionRequest()).ErrorCode)
	dq := c2.HandleDescribeQuorum(ctx, describeReq(quorum.MetadataTopic, 0))
	p := dq.Topics[0].Partitions[0]
	assert.Equal(t, kerr.NotLeaderForPartition.Code, p.ErrorCode)
	assert.Equal(t, int32(1), p.LeaderID, "the follower names the leader it knows")
	assert.Equal(t, nc, c2.CreateTopics(ctx, createReq(topic("t", 1, 1))).Topics[0].ErrorCode)

	// Failover: 2 leads epoch 2. 1 stops deciding; 2 decides once its NoOp
	// is committed.
	noops := log.count(isNoOp)
	log.setLeader(2, 2)
	assert.False(t, c2.Active(), "not active before its NoOp")
	assert.Equal(t, nc, c1.HandleBrokerHeartbeat(ctx, hbReq(1, 0, 0, false, false)).ErrorCode)
	r := c2.HandleBrokerRegistration(ctx, regReq(2, 2, -1))
	require.Zero(t, r.ErrorCode)
	assert.True(t, c2.Active())
	assert.Equal(t, noops+1, log.count(isNoOp), "one NoOp on winning leadership")
	c2.HandleBrokerHeartbeat(ctx, hbReq(2, r.BrokerEpoch, 1<<40, false, false))
	assert.Equal(t, noops+1, log.count(isNoOp), "and no more within the epoch")
	assert.Equal(t, nc, c1.CreateTopics(ctx, createReq(topic("t", 1, 1))).Topics[0].ErrorCode)
}

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

func TestHandleAlterPartition(t *testing.T) {
	log := newSharedLog(t, 1)
	c := newClusterController(t, 1, log.view(1), nil)
	clusterMode(c, time.Second)
	ctx := context.Background()
	epochs := map[int32]int64{}
	for id := int32(1); id <= 3; id++ {
		epochs[id] = joinBroker(t, c, id)
	}
	require.Zero(t, c.CreateTopics(ctx, createReq(topic("orders", 1, 3))).Topics[0].ErrorCode)
	p0 := *c.Image().Partition("orders", 0)
	tid := c.Image().Topic("orders").ID
	leader := p0.Leader
	var other int32
	for _, r := range p0.Replicas {
		if r != leader {
			other = r
			break
		}
	}

	// alter builds a request at version v from the partition's current state.
	alter := func(v int16, mutate func(*kmsg.AlterPartitionRequest, *kmsg.AlterPartitionRequestTopicPartition), isr ...int32) *kmsg.AlterPartitionResponse {
		p := c.Image().Partition("orders", 0)
		req := kmsg.NewPtrAlterPartitionRequest()
		req.Version, req.BrokerID, req.BrokerEpoch = v, leader, epochs[leader]
		rp := kmsg.NewAlterPartitionRequestTopicPartition()
		rp.Partition, rp.LeaderEpoch, rp.PartitionEpoch, rp.NewISR = 0, p.LeaderEpoch, p.PartitionEpoch, isr
		if v >= 3 {
			for _, id := range isr {
				rp.NewEpochISR = append(rp.NewEpochISR, kmsg.AlterPartitionRequestTopicPartitionNewEpochISR{BrokerID: id, BrokerEpoch: epochs[id]})
			}
		}
		req.Topics = []kmsg.AlterPartitionRequestTopic{{Topic: "orders", TopicID: tid, Partitions: []kmsg.AlterPartitionRequestTopicPartition{rp}}}
		if mutate != nil {
			mutate(req, &req.Topics[0].Partitions[0])
		}
		return c.HandleAlterPartition(ctx, req)
	}

	cases := []struct {
		name   string
		v      int16
		mutate func(*kmsg.AlterPartitionRequest, *kmsg.AlterPartitionRequestTopicPartition)
		isr    []int32
		want   *kerr.Error
	}{
		{name: "v2 shrink by topic id", v: 2, isr: []int32{leader, other}},
		{name: "stale partition epoch", v: 2, isr: []int32{leader}, want: kerr.InvalidUpdateVersion,
			mutate: func(_ *kmsg.AlterPartitionRequest, p *kmsg.AlterPartitionRequestTopicPartition) { p.PartitionEpoch-- }},
		{name: "older leader epoch", v: 2, isr: []int32{leader}, want: kerr.FencedLeaderEpoch,
			mutate: func(_ *kmsg.AlterPartitionRequest, p *kmsg.AlterPartitionRequestTopicPartition) { p.LeaderEpoch-- }},
		{name: "sender's broker epoch is stale", v: 2, isr: []int32{leader}, want: kerr.StaleBrokerEpoch,
			mutate: func(r *kmsg.AlterPartitionRequest, _ *kmsg.AlterPartitionRequestTopicPartition) { r.BrokerEpoch++ }},
		{name: "v0 expand by topic name", v: 0, isr: p0.Replicas},
		{name: "v0 unknown topic name", v: 0, isr: []int32{leader}, want: kerr.UnknownTopicOrPartition,
			mutate: func(r *kmsg.AlterPartitionRequest, _ *kmsg.AlterPartitionRequestTopicPartition) {
				r.Topics[0].Topic = "nope"
			}},
		{name: "v3 member with a stale broker epoch", v: 3, isr: []int32{leader, other}, want: kerr.IneligibleReplica,
			mutate: func(_ *kmsg.AlterPartitionRequest, p *kmsg.AlterPartitionRequestTopicPartition) {
				p.NewEpochISR[1].BrokerEpoch--
			}},
		{name: "v3 shrink with broker epochs", v: 3, isr: []int32{leader}},
	}
	for _, tc := range cases {
		before := *c.Image().Partition("orders", 0)
		resp := alter(tc.v, tc.mutate, tc.isr...)
		require.Zero(t, resp.ErrorCode, tc.name)
		sp := resp.Topics[0].Partitions[0]
		after := *c.Image().Partition("orders", 0)
		if tc.want != nil {
			assert.Equal(t, tc.want.Code, sp.ErrorCode, "%s: got %v", tc.name, kerr.ErrorForCode(sp.ErrorCode))
			assert.Equal(t, before, after, "%s: a refused change changes nothing", tc.name)
			continue
		}
		require.Zero(t, sp.ErrorCode, "%s: %v", tc.name, kerr.ErrorForCode(sp.ErrorCode))
		assert.ElementsMatch(t, tc.isr, after.ISR, tc.name)
		assert.Equal(t, after.ISR, sp.ISR, tc.name)
		assert.Equal(t, before.PartitionEpoch+1, sp.PartitionEpoch, "%s: an ISR change bumps the partition epoch", tc.name)
		assert.Equal(t, before.LeaderEpoch, sp.LeaderEpoch, "%s: and not the leader epoch", tc.name)
		assert.Equal(t, leader, sp.LeaderID, tc.name)
	}
}
