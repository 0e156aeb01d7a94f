package node

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/faultline/faultline/broker/metadata"
	"github.com/faultline/faultline/broker/storage"
)

// powerLoss drops what a real disk would not hold after a power cut of a
// stopped node under Kafka's default flush policy: every batch of topic's
// partition 0 at or past the recovery point its log dir checkpointed (the
// rest was never fsynced), and the indexes, which recovery rebuilds. It
// returns how many batches were dropped.
func (s *seedCluster) powerLoss(id int32, topic string) int {
	s.t.Helper()
	c := s.node(id)
	require.Nil(s.t, c.node, "node %d is stopped", id)
	dir := c.props["log.dirs"]
	tp := storage.TopicPartition{Topic: topic, Partition: 0}
	points, err := storage.ReadOffsetCheckpoint(storage.OS, filepath.Join(dir, storage.RecoveryPointCheckpointFile))
	require.NoError(s.t, err)
	recoveryPoint := points[tp]
	pdir := filepath.Join(dir, fmt.Sprintf("%s-0", topic))
	entries, err := os.ReadDir(pdir)
	require.NoError(s.t, err)
	dropped := 0
	for _, e := range entries {
		path := filepath.Join(pdir, e.Name())
		switch {
		case strings.HasSuffix(e.Name(), ".index"), strings.HasSuffix(e.Name(), ".timeindex"):
			require.NoError(s.t, os.Remove(path))
		case strings.HasSuffix(e.Name(), ".log"):
			data, err := os.ReadFile(path)
			require.NoError(s.t, err)
			keep := 0
			require.NoError(s.t, storage.ForEachBatch(data, func(h storage.BatchHeader, batch []byte) error {
				if h.NextOffset() <= recoveryPoint {
					keep += len(batch)
				} else {
					dropped++
				}
				return nil
			}))
			require.NoError(s.t, os.Truncate(path, int64(keep)))
		}
	}
	return dropped
}

// ackedOnEveryReplica creates topic with min.insync.replicas=2 (RF 3,
// Kafka's default flush policy) and writes 50 acks=all records, held by
// every replica's own log when it returns.
func (s *seedCluster) ackedOnEveryReplica(topic string) (metadata.Partition, []string) {
	s.t.Helper()
	minISR := "2"
	p := s.createTopic(topic, map[string]*string{"min.insync.replicas": &minISR})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl := s.client(kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordRetries(1000))
	defer cl.Close()
	acked := valueRange("acked", 0, 50)
	requireAcked(s.t, produceAll(ctx, cl, topic, acked), "acks=all writes")
	for _, r := range p.Replicas {
		s.waitReplicaValues(r, topic, acked, 30*time.Second)
	}
	return p, acked
}

// TestSeedFollowerPowerLossThenLeaderDeath is KIP-966's case under Kafka's
// default flush policy (no fsync before an acknowledgement) with
// min.insync.replicas=2: a follower loses its unflushed tail to a power
// cut and restarts without the clean-shutdown marker, cut off from the
// leader so it cannot catch up; then the leader dies. The restarted
// follower must not be elected from the ISR it was in before the crash
// (its registration took it out), so the third replica leads and every
// acknowledged record is still there.
func TestSeedFollowerPowerLossThenLeaderDeath(t *testing.T) {
	s := startSeedCluster(t, nil)
	p, acked := s.ackedOnEveryReplica("power")

	leader := p.Leader
	// The follower the controller would pick first: the first replica in
	// replica order other than the leader.
	others := without(p.Replicas, leader)
	victim, third := others[0], others[1]
	oldEpoch := s.activeController().node.publisher.Image().Brokers[victim].Epoch

	s.kill(victim)
	require.Positive(t, s.powerLoss(victim, "power"), "the power cut drops the follower's unflushed tail")
	s.sw.Cut(victim, leader)
	s.restart(victim)
	restarted := s.waitPartition("power", "the restarted follower registered and out of the ISR", func(p metadata.Partition) bool {
		b := s.activeController().node.publisher.Image().Brokers[victim]
		return b.Epoch > oldEpoch && !slices.Contains(p.ISR, victim)
	}, 30*time.Second)
	t.Logf("after the follower's restart: leader %d ISR %v", restarted.Leader, restarted.ISR)

	s.kill(leader)
	after := s.waitPartition("power", "a new leader", func(p metadata.Partition) bool {
		return p.Leader >= 0 && p.Leader != leader
	}, 30*time.Second)
	require.Equal(t, third, after.Leader, "the replica that kept every acknowledged record leads")
	s.waitReplicaValues(third, "power", acked, 30*time.Second)
	s.sw.Heal()
	s.waitReplicaValues(victim, "power", acked, 30*time.Second)
}

// TestSeedLeaderPowerLossQuickRestart: the leader loses its unflushed tail
// to a power cut and comes back before its old session expired, so the
// committed image still names it leader of the partition in the old epoch.
// It must not act on that leadership with its shorter log (its followers
// would truncate to it): every acknowledged record survives, on whichever
// replica leads next.
func TestSeedLeaderPowerLossQuickRestart(t *testing.T) {
	s := startSeedCluster(t, nil)
	p, acked := s.ackedOnEveryReplica("power")
	leader := p.Leader

	s.kill(leader)
	require.Positive(t, s.powerLoss(leader, "power"), "the power cut drops the leader's unflushed tail")
	s.restart(leader)
	after := s.waitPartition("power", "a leader with a full ISR again", func(p metadata.Partition) bool {
		return p.Leader >= 0 && len(p.ISR) == 3
	}, 60*time.Second)
	t.Logf("after the leader's restart: leader %d epoch %d ISR %v", after.Leader, after.LeaderEpoch, after.ISR)
	for _, r := range p.Replicas {
		s.waitReplicaValues(r, "power", acked, 30*time.Second)
	}
}

// TestSeedLeaderDiskFailureStopsItAndMovesLeadership: the leader's disk
// answers EIO to every write of the partition. The produce that hit it is
// refused with KAFKA_STORAGE_ERROR (never acknowledged), the log dir goes
// offline and the broker stops with an error naming the dir, rather than
// serve from memory; its controlled shutdown moves the leadership to
// another ISR member, which holds every acknowledged record and takes new
// writes. Restarted on a healed disk, the broker recovers (its failed dir
// has no clean-shutdown marker) and catches up.
func TestSeedLeaderDiskFailureStopsItAndMovesLeadership(t *testing.T) {
	s := startSeedCluster(t, nil)
	efs := map[int32]*storage.ErrorFS{}
	for _, id := range seedBrokers {
		efs[id] = storage.NewErrorFS(storage.OS)
		c := s.node(id)
		c.fs = efs[id]
		s.kill(id)
		s.restart(id)
	}
	p, acked := s.ackedOnEveryReplica("disk")
	leader := p.Leader
	efs[leader].Inject(storage.Rule{Op: storage.OpWrite, Path: "disk-0"})

	code, _, err := s.rawProduce(leader, "disk", -1, "refused", 5*time.Second)
	require.NoError(t, err)
	require.Equal(t, kerr.KafkaStorageError.Code, code, "the write that hit EIO is not acknowledged: %v", kerr.ErrorForCode(code))
	n := s.node(leader).node
	select {
	case <-n.Done():
	case <-time.After(30 * time.Second):
		require.FailNow(t, "the broker whose only log dir failed keeps running")
	}
	require.Error(t, n.Err())
	require.Contains(t, n.Err().Error(), "log dir")
	require.Contains(t, s.node(leader).logs.String(), "is offline: stopped serving its")
	s.node(leader).node = nil

	after := s.waitPartition("disk", "a new leader", func(p metadata.Partition) bool {
		return p.Leader >= 0 && p.Leader != leader
	}, 30*time.Second)
	code, _, err = s.rawProduce(after.Leader, "disk", -1, "after", 10*time.Second)
	require.NoError(t, err)
	require.Zero(t, code, "the new leader takes writes: %v", kerr.ErrorForCode(code))
	want := append(slices.Clone(acked), "after")
	s.waitReplicaValues(after.Leader, "disk", want, 30*time.Second)

	efs[leader].Clear()
	s.restart(leader)
	s.waitReplicaValues(leader, "disk", want, 30*time.Second)
}

// TestSeedCorruptFollowerRepairsFromLeader: while a follower is down, a bit
// flips in a batch in the middle of its log and its tail is torn. Its
// recovery cuts the log at the corrupt batch (nothing corrupt is ever
// served), and it fetches the rest again from the leader: its log ends up
// holding every acknowledged record, and it rejoins the ISR.
func TestSeedCorruptFollowerRepairsFromLeader(t *testing.T) {
	s := startSeedCluster(t, nil)
	p, acked := s.ackedOnEveryReplica("corrupt")
	victim := without(p.Replicas, p.Leader)[0]
	s.kill(victim)
	segment := filepath.Join(s.node(victim).props["log.dirs"], "corrupt-0", "00000000000000000000.log")
	data, err := os.ReadFile(segment)
	require.NoError(t, err)
	data[len(data)/2] ^= 0x04
	require.NoError(t, os.WriteFile(segment, data[:len(data)-7], 0o644))

	s.restart(victim)
	require.Contains(t, s.node(victim).logs.String(), "Found invalid bytes", "recovery found the corruption")
	s.waitReplicaValues(victim, "corrupt", acked, 30*time.Second)
	s.waitPartition("corrupt", "the repaired follower back in the ISR", func(p metadata.Partition) bool {
		return slices.Contains(p.ISR, victim)
	}, 30*time.Second)
}
