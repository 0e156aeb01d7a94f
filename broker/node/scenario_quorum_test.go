package node

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/faultline/faultline/broker/metadata"
)

// TestSeedControllerMajorityLost: losing a majority of the controllers
// stops metadata changes, while the partition leaders keep serving reads
// and acks=all writes with the ISR they had. When a controller comes back
// the quorum commits again and metadata changes resume.
func TestSeedControllerMajorityLost(t *testing.T) {
	s := startSeedCluster(t, nil)
	before := s.createTopic("steady", nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl := s.client(kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordRetries(1000))
	acked := valueRange("q", 0, 50)
	requireAcked(t, produceAll(ctx, cl, "steady", acked), "with a quorum")

	active := s.activeController()
	require.NotNil(t, active)
	var down []int32
	for _, id := range seedControllers {
		if id != active.id && len(down) < 1 {
			down = append(down, id)
		}
	}
	down = append(down, active.id)
	s.majorityKillAll(down...)

	// No metadata change commits: a topic cannot be created.
	shortCtx, shortCancel := context.WithTimeout(ctx, 5*time.Second)
	resp, err := kadm.NewClient(s.client()).CreateTopic(shortCtx, 1, 3, nil, "blocked")
	shortCancel()
	assert.True(t, err != nil || resp.Err != nil, "no topic is created without a controller quorum")

	// The partition leader keeps taking acks=all writes on its ISR, and
	// every replica keeps replicating.
	during := valueRange("q", 50, 100)
	requireAcked(t, produceAll(ctx, cl, "steady", during), "without a controller quorum")
	acked = append(acked, during...)
	for _, r := range before.Replicas {
		s.waitReplicaValues(r, "steady", acked, 10*time.Second)
	}
	assert.Len(t, readAllFrom(t, s.brokerAddrs(), "steady"), len(acked), "reads go on")

	// One controller back makes a majority again: metadata changes resume.
	s.restart(down[0])
	require.Eventually(t, func() bool {
		c, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		r, err := kadm.NewClient(s.client()).CreateTopic(c, 1, 3, nil, "after")
		// A try that timed out may still have committed: then the topic
		// exists already.
		return err == nil && (r.Err == nil || errors.Is(r.Err, kerr.TopicAlreadyExists))
	}, 30*time.Second, 200*time.Millisecond, "a topic is created once a majority of controllers is back")
	p := s.waitPartition("steady", "the partition as before", func(p metadata.Partition) bool { return p.Leader >= 0 }, 10*time.Second)
	assert.Equal(t, before.Leader, p.Leader, "the partition leader never changed")
}

// TestSeedCommittedOffsetsSurviveCoordinatorDeath: __consumer_offsets
// replicates like any topic (RF 3 here), so the offsets a group committed
// are still there after its coordinator is killed: another broker takes
// over the group's __consumer_offsets partition and answers OffsetFetch
// with them.
func TestSeedCommittedOffsetsSurviveCoordinatorDeath(t *testing.T) {
	s := startSeedCluster(t, nil)
	s.createTopic("orders", nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	adm := kadm.NewClient(s.client())
	const group = "billing"
	offsets := kadm.Offsets{}
	offsets.Add(kadm.Offset{Topic: "orders", Partition: 0, At: 42, LeaderEpoch: -1})
	var coordinator int32 = -1
	require.Eventually(t, func() bool {
		r, err := adm.CommitOffsets(ctx, group, offsets)
		if err != nil || r.Error() != nil {
			return false
		}
		co := adm.FindGroupCoordinators(ctx, group)
		c, ok := co[group]
		if !ok || c.Err != nil {
			return false
		}
		coordinator = c.NodeID
		return true
	}, 30*time.Second, 100*time.Millisecond, "the group commits its offset")
	require.Contains(t, seedBrokers, coordinator)

	s.kill(coordinator)
	var got int64 = -1
	require.Eventually(t, func() bool {
		fetched, err := kadm.NewClient(s.client()).FetchOffsets(ctx, group)
		if err != nil || fetched.Error() != nil {
			return false
		}
		o, ok := fetched.Lookup("orders", 0)
		if !ok || o.Err != nil {
			return false
		}
		got = o.At
		co := adm.FindGroupCoordinators(ctx, group)
		return co[group].Err == nil && co[group].NodeID != coordinator
	}, 30*time.Second, 100*time.Millisecond, "a new coordinator answers OffsetFetch")
	assert.Equal(t, int64(42), got, "the committed offset survived its coordinator")
}
