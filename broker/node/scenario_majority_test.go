package node

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/faultline/faultline/broker/metadata"
)

// Seed 003, "Multiple Broker Failures" and "Committed Data Loss (Unclean
// Election)": two or three of a partition's three replicas die together.
// Every scenario runs on the seed topology of scenario_helpers_test.go
// (controllers 1, 2, 3; brokers 4, 5, 6 holding the RF 3 partition) and
// checks each replica's own log, not only what the leader serves.

// majorityOffline is how long a leaderless partition is watched to stay
// leaderless: three session timeouts, so that every fencing and every
// election the controller could still make has had its chance.
const majorityOffline = 3 * testSessionMs * time.Millisecond

// majorityKillAll crashes every given broker at the same moment.
func (s *seedCluster) majorityKillAll(ids ...int32) {
	s.t.Helper()
	var wg sync.WaitGroup
	for _, id := range ids {
		c := s.node(id)
		require.NotNil(s.t, c.node, "node %d is running", id)
		n := c.node
		c.node = nil
		wg.Go(n.kill)
	}
	wg.Wait()
}

// majorityStaysOffline checks, for majorityOffline, that the committed
// partition has no leader and keeps the ISR it had, and that every running
// broker of ask answers Metadata with LEADER_NOT_AVAILABLE and no leader.
func (s *seedCluster) majorityStaysOffline(topic string, isr []int32, ask ...int32) {
	s.t.Helper()
	deadline := time.Now().Add(majorityOffline)
	for i := 0; i < 1000 && time.Now().Before(deadline); i++ {
		if p, ok := s.partition(topic); ok {
			require.Equal(s.t, metadata.NoLeader, p.Leader, "%s-0 stays without a leader", topic)
			require.Equal(s.t, isr, p.ISR, "%s-0 keeps its last ISR", topic)
		}
		for _, id := range ask {
			code, leader, err := s.metadataOf(id, topic)
			require.NoError(s.t, err)
			require.Equal(s.t, kerr.LeaderNotAvailable.Code, code, "broker %d answers LEADER_NOT_AVAILABLE for %s-0", id, topic)
			require.Equal(s.t, int32(-1), leader, "broker %d names no leader for %s-0", id, topic)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestSeedMajorityFailureSurvivorInISR is "Majority Failure, Scenario A":
// the leader and one follower of a fully in-sync partition die at once.
// The survivor, in the ISR, becomes leader with a bumped leader epoch and
// ISR [survivor]; with min.insync.replicas=1 it takes acks=all writes and
// no acknowledged record is lost. A second topic on the same brokers with
// min.insync.replicas=2 gets the same leader and ISR but refuses acks=all
// writes with NOT_ENOUGH_REPLICAS (the seed's "ISR size = 1" problem),
// while acks=1 writes still succeed there.
func TestSeedMajorityFailureSurvivorInISR(t *testing.T) {
	s := startSeedCluster(t, nil)
	one, two := "majority-a", "majority-a-minisr2"
	minISR2 := "2"
	before := s.createTopic(one, nil)
	beforeTwo := s.createTopic(two, map[string]*string{"min.insync.replicas": &minISR2})
	leader := before.Leader
	followers := without(before.Replicas, leader)
	dead, survivor := []int32{leader, followers[0]}, followers[1]

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl := s.client(kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordRetries(1000))
	first := valueRange("a", 0, 200)
	requireAcked(t, produceAll(ctx, cl, one, first), "before the failure")
	requireAcked(t, produceAll(ctx, cl, two, valueRange("b", 0, 20)), "before the failure, min.insync.replicas=2")

	s.majorityKillAll(dead...)
	after := s.waitPartition(one, "the survivor leads alone", func(p metadata.Partition) bool {
		return p.Leader == survivor && slices.Equal(p.ISR, []int32{survivor})
	}, 15*time.Second)
	assert.Greater(t, after.LeaderEpoch, before.LeaderEpoch, "the election bumped the leader epoch")
	afterTwo := s.waitPartition(two, "the survivor leads alone", func(p metadata.Partition) bool {
		return p.Leader == survivor && slices.Equal(p.ISR, []int32{survivor})
	}, 15*time.Second)
	assert.GreaterOrEqual(t, afterTwo.LeaderEpoch, beforeTwo.LeaderEpoch)

	// No acknowledged record is lost: the survivor's own log has them all.
	s.waitReplicaValues(survivor, one, first, 10*time.Second)

	// min.insync.replicas=1: acks=all writes succeed on the ISR of one.
	second := valueRange("a", 200, 300)
	requireAcked(t, produceAll(ctx, cl, one, second), "after the failure")
	want := slices.Concat(first, second)
	s.waitReplicaValues(survivor, one, want, 10*time.Second)
	_, hw := s.replicaLog(survivor, one)
	assert.Equal(t, int64(len(want)), hw, "every record is committed on the survivor")

	// min.insync.replicas=2: acks=all is refused before anything is
	// written, acks=1 is not.
	var code int16
	require.Eventually(t, func() bool {
		var err error
		code, _, err = s.rawProduce(survivor, two, -1, "refused", time.Second)
		return err == nil && code != kerr.NotLeaderForPartition.Code
	}, 10*time.Second, 50*time.Millisecond, "broker %d serves %s-0 as leader", survivor, two)
	assert.Equal(t, kerr.NotEnoughReplicas.Code, code, "acks=all under min.insync.replicas is NOT_ENOUGH_REPLICAS")
	// (rawProduce's client stamps its own acks=all on the request, so the
	// acks=1 write goes through a client configured for it.)
	leaderAcks := s.client(kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite(), kgo.RecordRetries(1000))
	rec, err := leaderAcks.ProduceSync(ctx, &kgo.Record{Topic: two, Value: []byte("acks-1")}).First()
	require.NoError(t, err, "acks=1 writes go on")
	assert.Equal(t, int64(20), rec.Offset, "the refused acks=all write was never appended")
	shortCtx, shortCancel := context.WithTimeout(ctx, 3*time.Second)
	defer shortCancel()
	err = s.client(kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordRetries(3)).ProduceSync(shortCtx, &kgo.Record{Topic: two, Value: []byte("client")}).FirstErr()
	assert.ErrorIs(t, err, kerr.NotEnoughReplicas, "a client's acks=all write to %s fails", two)
	got, _ := s.replicaLog(survivor, two)
	assert.Equal(t, append(valueRange("b", 0, 20), "acks-1"), got, "no refused acks=all write is in the survivor's log")
}

// majorityLagging builds seed 003's "Committed Data Loss" starting point on
// a new topic with the given configs: offsets 0-980 on all three replicas,
// then one follower cut off from the leader until the ISR shrinks without
// it, then offsets 981-1000 written with acks=all to the two-member ISR.
// It returns the partition as committed then, the lagging follower, and
// the acknowledged values (value i at offset i).
func (s *seedCluster) majorityLagging(ctx context.Context, topic string, configs map[string]*string) (metadata.Partition, int32, []string) {
	s.t.Helper()
	before := s.createTopic(topic, configs)
	leader := before.Leader
	lagging := without(before.Replicas, leader)[1]
	cl := s.client(kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordRetries(1000))
	synced := valueRange("committed", 0, 981)
	requireAcked(s.t, produceAll(ctx, cl, topic, synced), "offsets 0-980")
	for _, r := range before.Replicas {
		s.waitReplicaValues(r, topic, synced, 10*time.Second)
	}

	// The follower loses its link to the leader only: it keeps its
	// controller session, so it stays a live, unfenced replica that is
	// simply out of sync. As in Kafka, a follower that stopped fetching
	// only leaves the ISR once it is behind the leader's log end for
	// replica.lag.time.max.ms: the acks=all writes of offsets 981-1000
	// wait for that shrink, then commit on the two-member ISR.
	s.sw.Cut(leader, lagging)
	tail := valueRange("committed", 981, 1001)
	requireAcked(s.t, produceAll(ctx, cl, topic, tail), "offsets 981-1000")
	shrunk := s.waitPartition(topic, "the ISR shrunk without the cut-off follower", func(p metadata.Partition) bool {
		return len(p.ISR) == 2 && !slices.Contains(p.ISR, lagging)
	}, 15*time.Second)
	require.Equal(s.t, leader, shrunk.Leader, "the leader keeps leading")
	acked := slices.Concat(synced, tail)
	for _, r := range shrunk.ISR {
		s.waitReplicaValues(r, topic, acked, 10*time.Second)
		_, hw := s.replicaLog(r, topic)
		if r == leader {
			require.Equal(s.t, int64(1001), hw, "offsets 0-1000 are committed")
		}
	}
	got, _ := s.replicaLog(lagging, topic)
	require.Equal(s.t, synced, got, "the out-of-sync follower stopped at offset 980")
	return shrunk, lagging, acked
}

// TestSeedMajorityFailureOutOfSyncSurvivorStaysOffline is "Majority
// Failure, Scenario B" with unclean.leader.election.enable=false: both ISR
// members die and the only survivor is out of sync. The partition goes
// offline and stays offline (no leader, LEADER_NOT_AVAILABLE from the
// survivor, produce refused) rather than lose the committed offsets
// 981-1000. When the last ISR member comes back it leads again with every
// acknowledged record; the out-of-sync broker then catches up and rejoins,
// and so does the other old ISR member.
func TestSeedMajorityFailureOutOfSyncSurvivorStaysOffline(t *testing.T) {
	s := startSeedCluster(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	topic := "majority-b-clean"
	no := "false"
	shrunk, lagging, acked := s.majorityLagging(ctx, topic, map[string]*string{"unclean.leader.election.enable": &no})

	s.majorityKillAll(shrunk.ISR...)
	offline := s.waitPartition(topic, "no leader", func(p metadata.Partition) bool {
		return p.Leader == metadata.NoLeader
	}, 15*time.Second)
	require.Len(t, offline.ISR, 1, "the last ISR member stays in the ISR")
	last := offline.ISR[0]
	require.Contains(t, shrunk.ISR, last, "the ISR never takes in the out-of-sync follower")
	s.majorityStaysOffline(topic, offline.ISR, lagging)
	code, _, err := s.rawProduce(lagging, topic, -1, "refused", time.Second)
	require.NoError(t, err)
	assert.Equal(t, kerr.NotLeaderForPartition.Code, code, "the out-of-sync survivor refuses writes")
	got, _ := s.replicaLog(lagging, topic)
	assert.Equal(t, acked[:981], got, "the survivor's log is untouched")

	// The last ISR member comes back first and leads with every
	// acknowledged record; the link it lost to the lagging follower is
	// back too.
	s.sw.Heal()
	s.restart(last)
	back := s.waitPartition(topic, "the last ISR member leads again", func(p metadata.Partition) bool {
		return p.Leader == last
	}, 20*time.Second)
	assert.Greater(t, back.LeaderEpoch, offline.LeaderEpoch)
	s.waitReplicaValues(last, topic, acked, 10*time.Second)
	s.waitPartition(topic, "the out-of-sync follower rejoined the ISR", func(p metadata.Partition) bool {
		return p.Leader == last && slices.Contains(p.ISR, lagging)
	}, 20*time.Second)
	s.waitReplicaValues(lagging, topic, acked, 10*time.Second)

	other := without(shrunk.ISR, last)[0]
	s.restart(other)
	s.waitPartition(topic, "all three replicas in the ISR", func(p metadata.Partition) bool {
		return p.Leader == last && len(p.ISR) == 3
	}, 20*time.Second)
	cl := s.client(kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordRetries(1000))
	more := valueRange("after", 0, 10)
	requireAcked(t, produceAll(ctx, cl, topic, more), "after the recovery")
	want := slices.Concat(acked, more)
	for _, r := range back.Replicas {
		s.waitReplicaValues(r, topic, want, 10*time.Second)
	}
}

// TestSeedMajorityFailureUncleanElectionLosesCommitted is "Committed Data
// Loss (Unclean Election)": the same failure with
// unclean.leader.election.enable=true. The out-of-sync survivor is elected
// with ISR [itself] and the committed offsets 981-1000 it never had are
// lost; writes resume from offset 981. The old ISR members, back, truncate
// their own logs to the new leader's (losing the same offsets) and rejoin.
func TestSeedMajorityFailureUncleanElectionLosesCommitted(t *testing.T) {
	s := startSeedCluster(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	topic := "majority-b-unclean"
	yes := "true"
	shrunk, lagging, acked := s.majorityLagging(ctx, topic, map[string]*string{"unclean.leader.election.enable": &yes})

	s.majorityKillAll(shrunk.ISR...)
	unclean := s.waitPartition(topic, "the out-of-sync survivor elected", func(p metadata.Partition) bool {
		return p.Leader == lagging
	}, 15*time.Second)
	assert.Equal(t, []int32{lagging}, unclean.ISR, "the unclean leader's ISR is itself")
	assert.Greater(t, unclean.LeaderEpoch, shrunk.LeaderEpoch)

	cl := s.client(kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordRetries(1000))
	resumed := valueRange("unclean", 0, 20)
	rec, err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte(resumed[0])}).First()
	require.NoError(t, err, "writes resume on the unclean leader")
	assert.Equal(t, int64(981), rec.Offset, "the new leader's log ends at offset 980: offsets 981-1000 are lost")
	requireAcked(t, produceAll(ctx, cl, topic, resumed[1:]), "writes to the unclean leader")
	want := slices.Concat(acked[:981], resumed)
	s.waitReplicaValues(lagging, topic, want, 10*time.Second)
	code, offset, err := s.rawProduce(lagging, topic, -1, "probe", 5*time.Second)
	require.NoError(t, err)
	require.Equal(t, int16(0), code)
	assert.Equal(t, int64(len(want)), offset)
	want = append(want, "probe")

	s.sw.Heal()
	for _, r := range shrunk.ISR {
		s.restart(r)
	}
	s.waitPartition(topic, "the old ISR members rejoined", func(p metadata.Partition) bool {
		return p.Leader == lagging && len(p.ISR) == 3
	}, 20*time.Second)
	for _, r := range shrunk.Replicas {
		s.waitReplicaValues(r, topic, want, 10*time.Second)
		got, _ := s.replicaLog(r, topic)
		for _, v := range acked[981:] {
			assert.NotContains(t, got, v, "replica %d lost committed %s", r, v)
		}
	}
}

// TestSeedAllReplicasDownLastISRFirstBack is "All Replicas Down": every
// broker of the partition dies. The partition is offline (no leader in the
// committed state, the ISR keeps its last member, a client's produce
// fails). The broker that was last in the ISR restarts first: it is
// elected with ISR [itself] and serves every acknowledged record. The two
// others restart, follow, catch up, and the ISR expands to all three.
func TestSeedAllReplicasDownLastISRFirstBack(t *testing.T) {
	s := startSeedCluster(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	topic := "all-down"
	before := s.createTopic(topic, nil)
	cl := s.client(kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordRetries(1000))
	acked := valueRange("acked", 0, 300)
	requireAcked(t, produceAll(ctx, cl, topic, acked), "before the failure")

	s.majorityKillAll(seedBrokers...)
	offline := s.waitPartition(topic, "no leader", func(p metadata.Partition) bool {
		return p.Leader == metadata.NoLeader
	}, 15*time.Second)
	require.Len(t, offline.ISR, 1, "the last ISR member stays in the ISR")
	last := offline.ISR[0]
	s.majorityStaysOffline(topic, offline.ISR)
	shortCtx, shortCancel := context.WithTimeout(ctx, 2*time.Second)
	defer shortCancel()
	err := s.client(kgo.RequiredAcks(kgo.AllISRAcks())).ProduceSync(shortCtx, &kgo.Record{Topic: topic, Value: []byte("lost")}).FirstErr()
	assert.Error(t, err, "no broker takes the write")

	s.restart(last)
	back := s.waitPartition(topic, "the first broker back leads", func(p metadata.Partition) bool {
		return p.Leader == last
	}, 20*time.Second)
	assert.Equal(t, []int32{last}, back.ISR)
	assert.Greater(t, back.LeaderEpoch, before.LeaderEpoch)
	s.waitReplicaValues(last, topic, acked, 10*time.Second)
	// The broker's own image follows the controller's a fetch later.
	require.Eventually(t, func() bool {
		p, ok := partitionState(s.node(last), topic, 0)
		return ok && p.Leader == last
	}, 10*time.Second, 10*time.Millisecond, "broker %d's image has it lead", last)
	code, leader, err := s.metadataOf(last, topic)
	require.NoError(t, err)
	assert.Equal(t, int16(0), code)
	assert.Equal(t, last, leader)
	more := valueRange("back", 0, 20)
	requireAcked(t, produceAll(ctx, cl, topic, more), "after the first broker is back")

	for _, r := range without(before.Replicas, last) {
		s.restart(r)
	}
	s.waitPartition(topic, "the ISR expanded to all three", func(p metadata.Partition) bool {
		return p.Leader == last && len(p.ISR) == 3
	}, 20*time.Second)
	want := slices.Concat(acked, more)
	for _, r := range before.Replicas {
		s.waitReplicaValues(r, topic, want, 10*time.Second)
	}
}

// TestSeedAllReplicasDownOutOfISRFirstBackWaits is the other order of "All
// Replicas Down": the seed's "first replica to restart ... controller
// elects it" holds for the broker that was last in the ISR (or with
// unclean election). With unclean.leader.election.enable=false (the
// default) a broker that had already left the ISR comes back first and is
// NOT elected: the partition stays offline, its Metadata answers
// LEADER_NOT_AVAILABLE, until the last ISR member returns and leads with
// every acknowledged record; then the early broker follows and rejoins.
func TestSeedAllReplicasDownOutOfISRFirstBackWaits(t *testing.T) {
	s := startSeedCluster(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	topic := "all-down-wait"
	before := s.createTopic(topic, nil)
	cl := s.client(kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordRetries(1000))
	acked := valueRange("acked", 0, 300)
	requireAcked(t, produceAll(ctx, cl, topic, acked), "before the failure")

	s.majorityKillAll(seedBrokers...)
	offline := s.waitPartition(topic, "no leader", func(p metadata.Partition) bool {
		return p.Leader == metadata.NoLeader
	}, 15*time.Second)
	require.Len(t, offline.ISR, 1)
	last := offline.ISR[0]
	early := without(before.Replicas, last)[0]

	s.restart(early)
	require.Eventually(t, func() bool {
		ac := s.activeController()
		return ac != nil && ac.node.publisher.Image().Live(early)
	}, 15*time.Second, 10*time.Millisecond, "broker %d registered and unfenced", early)
	s.majorityStaysOffline(topic, offline.ISR, early)
	got, _ := s.replicaLog(early, topic)
	assert.Equal(t, acked, got, "the early broker's own log is untouched")

	s.restart(last)
	back := s.waitPartition(topic, "the last ISR member leads", func(p metadata.Partition) bool {
		return p.Leader == last
	}, 20*time.Second)
	assert.Greater(t, back.LeaderEpoch, before.LeaderEpoch)
	s.waitReplicaValues(last, topic, acked, 10*time.Second)
	s.waitPartition(topic, "the early broker rejoined the ISR", func(p metadata.Partition) bool {
		return p.Leader == last && slices.Contains(p.ISR, early)
	}, 20*time.Second)
	more := valueRange("back", 0, 20)
	requireAcked(t, produceAll(ctx, cl, topic, more), "after the recovery")
	s.waitReplicaValues(early, topic, slices.Concat(acked, more), 10*time.Second)
}
