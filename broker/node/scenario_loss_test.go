package node

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/faultline/faultline/broker/metadata"
)

// seedNodeIDs are the ids of every node of the seed cluster.
var seedNodeIDs = slices.Concat(seedControllers, seedBrokers)

// lossCreateTopicAt sends one CreateTopics request (one partition, RF 3)
// straight to addr (a controller listener: no forwarding, no client
// retries) and returns the topic's error code.
func lossCreateTopicAt(t *testing.T, addr, topic string, timeout time.Duration) (int16, error) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	require.NoError(t, err)
	defer cl.Close()
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = int32(timeout / time.Millisecond)
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, 1, 3
	req.Topics = append(req.Topics, rt)
	ctx, cancel := context.WithTimeout(context.Background(), timeout+10*time.Second)
	defer cancel()
	resp, err := cl.SeedBrokers()[0].Request(ctx, req)
	if err != nil {
		return 0, err
	}
	cr := resp.(*kmsg.CreateTopicsResponse)
	if len(cr.Topics) != 1 {
		return 0, fmt.Errorf("create topics response with %d topics", len(cr.Topics))
	}
	return cr.Topics[0].ErrorCode, nil
}

// lossNoBrokerFenced watches the active controller's image until stop is
// called and reports whether it ever showed one of the seed brokers fenced.
func lossNoBrokerFenced(s *seedCluster) (stop func() (fenced []int32)) {
	var seen atomic.Int64 // bit id set when broker id was seen fenced
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			if c := s.activeController(); c != nil {
				im := c.node.publisher.Image()
				for _, b := range seedBrokers {
					if !im.Live(b) {
						seen.Or(1 << b)
					}
				}
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	return func() []int32 {
		cancel()
		<-done
		var out []int32
		for _, b := range seedBrokers {
			if seen.Load()&(1<<b) != 0 {
				out = append(out, b)
			}
		}
		return out
	}
}

// TestSeedControllerIsolatedAndReplaced is seed 003's "Controller Itself
// Isolated": the active controller is cut off from every other node. The
// two other voters elect a new leader in a higher epoch within a few
// election timeouts (raft's ticks: 100 ms, 10 of them); the old one steps
// down (CheckQuorum) and never commits anything while cut off: a
// CreateTopics sent straight to its controller listener fails (while it
// still believes it leads, REQUEST_TIMED_OUT at the request's timeout, as
// Kafka's controller answers; once it stepped down, NOT_CONTROLLER) and
// the topic never appears anywhere, not even after the heal.
// Metadata changes go on through the new controller (a topic created
// through the brokers, acks=all writes), and no broker is fenced: they
// heartbeat the new controller. After the heal the old controller follows
// the new leader without disrupting it (PreVote) and its image catches up.
func TestSeedControllerIsolatedAndReplaced(t *testing.T) {
	s := startSeedCluster(t, nil)
	s.createTopic("ctl-before", nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl := s.client(kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordRetries(1000))
	requireAcked(t, produceAll(ctx, cl, "ctl-before", valueRange("before", 0, 20)), "acks=all writes")

	old := s.activeController()
	require.NotNil(t, old)
	oldID, oldEpoch := old.id, old.node.raft.Leader().Epoch
	stopWatch := lossNoBrokerFenced(s)

	s.sw.Isolate(oldID, without(seedNodeIDs, oldID)...)
	isolatedAt := time.Now()

	// Straight to the isolated controller: it may still believe it leads
	// for up to an election timeout, but it cannot commit.
	code, err := lossCreateTopicAt(t, old.node.ctrlListener.Addr().String(), "ctl-ghost", time.Second)
	require.NoError(t, err)
	assert.NotEqual(t, int16(0), code, "an isolated controller cannot commit a CreateTopics")
	t.Logf("CreateTopics on the isolated controller %d: %s", oldID, kerr.ErrorForCode(code))

	var replacement *clusterNode
	require.Eventually(t, func() bool {
		replacement = s.activeController()
		return replacement != nil && replacement.id != oldID
	}, 10*time.Second, 10*time.Millisecond, "another voter becomes the active controller")
	newEpoch := replacement.node.raft.Leader().Epoch
	t.Logf("controller %d active in epoch %d, %v after isolating controller %d (epoch %d)", replacement.id, newEpoch, time.Since(isolatedAt), oldID, oldEpoch)
	assert.Greater(t, newEpoch, oldEpoch, "the new controller leads in a higher epoch")

	require.Eventually(t, func() bool {
		return !old.node.controller.Active() && old.node.raft.Leader().LeaderID != oldID
	}, 5*time.Second, 10*time.Millisecond, "the isolated controller steps down")
	code, err = lossCreateTopicAt(t, old.node.ctrlListener.Addr().String(), "ctl-ghost", time.Second)
	require.NoError(t, err)
	assert.Equal(t, kerr.NotController.Code, code, "the stepped-down controller refuses CreateTopics")

	// The metadata goes on through the new controller.
	s.createTopic("ctl-during", nil)
	requireAcked(t, produceAll(ctx, cl, "ctl-before", valueRange("during", 0, 20)), "acks=all writes")
	requireAcked(t, produceAll(ctx, cl, "ctl-during", valueRange("new", 0, 20)), "acks=all writes")
	im := replacement.node.publisher.Image()
	for _, b := range seedBrokers {
		assert.True(t, im.Live(b), "broker %d still unfenced under the new controller", b)
	}
	assert.Nil(t, im.Topic("ctl-ghost"), "nothing the isolated controller took was committed")
	assert.Nil(t, old.node.publisher.Image().Topic("ctl-during"), "the isolated controller does not see the new topic yet")

	s.sw.Heal()
	require.Eventually(t, func() bool {
		l := old.node.raft.Leader()
		_, ok := partitionState(old, "ctl-during", 0)
		return l.LeaderID == replacement.id && ok
	}, 10*time.Second, 10*time.Millisecond, "the old controller follows the new leader and sees the topic created meanwhile")
	assert.False(t, old.node.controller.Active())
	assert.Equal(t, newEpoch, replacement.node.raft.Leader().Epoch, "the returning voter does not disrupt the leader (PreVote)")
	assert.Same(t, replacement, s.activeController())
	assert.Empty(t, stopWatch(), "no broker was fenced across the controller failover")

	requireAcked(t, produceAll(ctx, cl, "ctl-during", valueRange("after", 0, 5)), "acks=all writes")
	for _, id := range seedNodeIDs {
		assert.Nil(t, s.node(id).node.publisher.Image().Topic("ctl-ghost"), "node %d never sees the uncommitted topic", id)
	}
}

// TestSeedAcksOneUncommittedLoss is seed 003's "Uncommitted Data Loss
// (Expected)": 1000 acks=all records (offsets 0-999), then the leader is
// cut off from both followers (not from the controllers, so the ISR stays
// whole for replica.lag.time.max.ms) and takes an acks=1 write at offset
// 1000, answers success, and dies before anyone fetched it. The controller
// elects a follower from the ISR in a bumped epoch; offset 1000 is in no
// surviving log, the next write lands at 1000 with another value, every
// acks=all record survives, and the old leader, restarted, truncates its
// offset 1000 and rejoins the ISR.
func TestSeedAcksOneUncommittedLoss(t *testing.T) {
	s := startSeedCluster(t, nil)
	before := s.createTopic("ack1", nil)
	leader, followers := before.Leader, without(before.Replicas, before.Leader)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl := s.client(kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordRetries(1000))
	committed := valueRange("acked", 0, 1000)
	requireAcked(t, produceAll(ctx, cl, "ack1", committed), "acks=all writes")
	for _, f := range followers {
		s.waitReplicaValues(f, "ack1", committed, 10*time.Second)
	}

	for _, f := range followers {
		s.sw.Cut(leader, f)
	}
	code, off, err := s.rawProduce(leader, "ack1", 1, "unreplicated-1000", 2*time.Second)
	require.NoError(t, err)
	require.Equal(t, int16(0), code, "acks=1 is answered after the leader's own append")
	require.Equal(t, int64(1000), off)
	own, ownHW := s.replicaLog(leader, "ack1")
	require.Len(t, own, 1001)
	assert.Equal(t, "unreplicated-1000", own[1000], "the leader appended it")
	assert.Equal(t, int64(1000), ownHW, "but its high watermark never passed it")
	s.kill(leader)
	s.sw.Heal()

	after := s.waitPartition("ack1", "a follower elected", func(p metadata.Partition) bool {
		return p.Leader >= 0 && p.Leader != leader
	}, 15*time.Second)
	assert.Contains(t, followers, after.Leader, "the new leader comes from the ISR")
	assert.Greater(t, after.LeaderEpoch, before.LeaderEpoch)
	for _, f := range followers {
		values, _ := s.replicaLog(f, "ack1")
		assert.Equal(t, committed, values, "replica %d: every acks=all record, not offset 1000", f)
	}
	require.Eventually(t, func() bool {
		_, hw := s.replicaLog(after.Leader, "ack1")
		return hw == 1000
	}, 10*time.Second, 10*time.Millisecond, "the new leader's high watermark is 1000, its log end")
	code, off, err = s.rawProduce(after.Leader, "ack1", -1, "successor-1000", 5*time.Second)
	require.NoError(t, err)
	require.Equal(t, int16(0), code)
	assert.Equal(t, int64(1000), off, "offset 1000 is written again, with another value")

	s.restart(leader)
	want := append(slices.Clone(committed), "successor-1000")
	s.waitReplicaValues(leader, "ack1", want, 15*time.Second)
	s.waitPartition("ack1", "the old leader back in the ISR", func(p metadata.Partition) bool {
		return len(p.ISR) == 3
	}, 15*time.Second)
	for _, f := range followers {
		s.waitReplicaValues(f, "ack1", want, 10*time.Second)
	}
}

// TestSeedIsolatedLeaderCannotAckAll is the durability promise of acks=all
// with min.insync.replicas=2 across a partition: the partition leader is
// cut off from every other node. As in Kafka, it still believes it leads
// with the whole ISR (it cannot shrink the ISR without the controller), so
// an acks=all write straight to it is appended but never acknowledged: it
// ends with REQUEST_TIMED_OUT. The controller fences it and elects another
// ISR member in a bumped epoch; writes go on there. An acks=1 write to the
// isolated leader is acknowledged but gone after the heal, when the old
// leader truncates it as a follower of the new epoch; every acks=all
// acknowledged record is on all three replicas.
func TestSeedIsolatedLeaderCannotAckAll(t *testing.T) {
	s := startSeedCluster(t, nil)
	before := s.createTopic("isoleader", map[string]*string{"min.insync.replicas": new("2")})
	leader, followers := before.Leader, without(before.Replicas, before.Leader)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl := s.client(kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordRetries(1000))
	requireAcked(t, produceAll(ctx, cl, "isoleader", valueRange("before", 0, 50)), "acks=all writes")

	s.sw.Isolate(leader, without(seedNodeIDs, leader)...)
	code, _, err := s.rawProduce(leader, "isoleader", -1, "isolated-all", time.Second)
	require.NoError(t, err)
	assert.Equal(t, kerr.RequestTimedOut.Code, code, "the isolated leader cannot acknowledge an acks=all write: %s", kerr.ErrorForCode(code))

	after := s.waitPartition("isoleader", "another ISR member elected", func(p metadata.Partition) bool {
		return p.Leader >= 0 && p.Leader != leader
	}, 15*time.Second)
	assert.Contains(t, followers, after.Leader)
	assert.Greater(t, after.LeaderEpoch, before.LeaderEpoch)
	assert.NotContains(t, after.ISR, leader)
	ac := s.activeController()
	require.NotNil(t, ac)
	assert.False(t, ac.node.publisher.Image().Live(leader), "the controller fenced the isolated leader")

	// Past replica.lag.time.max.ms the isolated leader still cannot
	// acknowledge acks=all (its ISR shrink never reaches the controller);
	// acks=1 it takes, on its own log only.
	code, _, err = s.rawProduce(leader, "isoleader", -1, "isolated-all-late", time.Second)
	require.NoError(t, err)
	assert.Equal(t, kerr.RequestTimedOut.Code, code, "late acks=all on the isolated leader: %s", kerr.ErrorForCode(code))
	code, off, err := s.rawProduce(leader, "isoleader", 1, "isolated-one", time.Second)
	require.NoError(t, err)
	assert.Equal(t, int16(0), code, "the isolated old leader, unaware of the election, takes acks=1")
	assert.Equal(t, int64(52), off, "after before-0..49 and the two unacknowledged acks=all records")
	own, ownHW := s.replicaLog(leader, "isoleader")
	assert.Equal(t, slices.Concat(valueRange("before", 0, 50), []string{"isolated-all", "isolated-all-late", "isolated-one"}), own,
		"the isolated leader's own log holds what it was sent")
	assert.Equal(t, int64(50), ownHW, "its high watermark never passed the unacknowledged records")

	// Writes go on through the brokers that see the new leader.
	require.Eventually(t, func() bool {
		for _, f := range followers {
			if p, ok := partitionState(s.node(f), "isoleader", 0); !ok || p.Leader != after.Leader {
				return false
			}
		}
		return true
	}, 10*time.Second, 10*time.Millisecond, "the connected brokers see the new leader")
	majority := s.client(kgo.SeedBrokers(s.brokerAddrs(followers...)...), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordRetries(1000))
	requireAcked(t, produceAll(ctx, majority, "isoleader", valueRange("during", 0, 50)), "acks=all writes")

	s.sw.Heal()
	want := slices.Concat(valueRange("before", 0, 50), valueRange("during", 0, 50))
	s.waitReplicaValues(leader, "isoleader", want, 20*time.Second)
	s.waitPartition("isoleader", "the old leader back in the ISR", func(p metadata.Partition) bool {
		return len(p.ISR) == 3
	}, 20*time.Second)
	requireAcked(t, produceAll(ctx, cl, "isoleader", valueRange("after", 0, 10)), "acks=all writes")
	want = slices.Concat(want, valueRange("after", 0, 10))
	for _, id := range before.Replicas {
		s.waitReplicaValues(id, "isoleader", want, 10*time.Second)
	}
}
