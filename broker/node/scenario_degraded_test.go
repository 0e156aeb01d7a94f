package node

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/faultline/faultline/broker/metadata"
)

// TestSeedDegradedFailover is seed 003's "Degraded Failover (ISR
// Shrinks)": replicas [L, F1, F2], ISR [L, F1] because F2 lags (cut off
// from the other two replicas, not from the controllers),
// min.insync.replicas=2. L dies: the controller elects F1 with ISR [F1];
// acks=all writes fail with NOT_ENOUGH_REPLICAS while reads keep working
// (up to the high watermark F1 knew, frozen below min.insync.replicas as
// in Kafka 4; the latest offset is OFFSET_NOT_AVAILABLE meanwhile);
// once F2 reaches F1 again it catches up and rejoins (ISR [F1, F2]) and
// writes resume. No acknowledged record is lost.
func TestSeedDegradedFailover(t *testing.T) {
	s := startSeedCluster(t, nil)
	minISR := "2"
	before := s.createTopic("degraded", map[string]*string{"min.insync.replicas": &minISR})
	leader := before.Leader
	f1, f2 := without(before.Replicas, leader)[0], without(before.Replicas, leader)[1]
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl := s.client(kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordRetries(1000))
	acked := valueRange("d", 0, 100)
	requireAcked(t, produceAll(ctx, cl, "degraded", acked), "in sync")

	// F2 falls behind: cut from the leader (and from F1, so that it stays
	// behind after the failover), it leaves the ISR once it is
	// replica.lag.time.max.ms behind the leader's log end.
	s.sw.Cut(leader, f2)
	s.sw.Cut(f1, f2)
	lagging := valueRange("d", 100, 150)
	requireAcked(t, produceAll(ctx, cl, "degraded", lagging), "while F2 lags")
	acked = append(acked, lagging...)
	shrunk := s.waitPartition("degraded", "ISR [L, F1]", func(p metadata.Partition) bool {
		return len(p.ISR) == 2 && !slices.Contains(p.ISR, f2)
	}, 15*time.Second)
	require.Equal(t, leader, shrunk.Leader)

	s.kill(leader)
	after := s.waitPartition("degraded", "F1 leads with ISR [F1]", func(p metadata.Partition) bool {
		return p.Leader == f1 && slices.Equal(p.ISR, []int32{f1})
	}, 15*time.Second)
	assert.Greater(t, after.LeaderEpoch, shrunk.LeaderEpoch)

	// Writes are refused; nothing acknowledged is lost and reads work.
	var code int16
	require.Eventually(t, func() bool {
		var err error
		code, _, err = s.rawProduce(f1, "degraded", -1, "refused", time.Second)
		return err == nil && code != kerr.NotLeaderForPartition.Code
	}, 10*time.Second, 50*time.Millisecond, "broker %d serves degraded-0 as leader", f1)
	assert.Equal(t, kerr.NotEnoughReplicas.Code, code, "acks=all under min.insync.replicas is NOT_ENOUGH_REPLICAS")
	// Nothing acknowledged is lost: F1's own log has every record. Reads
	// go on up to F1's high watermark, which is what it had learned as a
	// follower: as in Kafka 4 (KIP-966), the high watermark does not move
	// while the ISR is below min.insync.replicas, so the tail committed
	// under the old leader but not yet known committed by F1 becomes
	// readable once F2 rejoins.
	// Until then F1's high watermark is below the start of its epoch (its
	// log end when elected), and the latest offset is OFFSET_NOT_AVAILABLE
	// (KIP-207) rather than an end below one clients already saw.
	own, ownHW := s.replicaLog(f1, "degraded")
	assert.Equal(t, acked, own, "F1's own log holds every acknowledged record, and no refused one")
	reader := s.client()
	if ownHW < int64(len(acked)) {
		ends, err := kadm.NewClient(reader).ListEndOffsets(ctx, "degraded")
		require.NoError(t, err)
		end, ok := ends.Lookup("degraded", 0)
		require.True(t, ok)
		assert.ErrorIs(t, end.Err, kerr.OffsetNotAvailable, "the latest offset of F1 at high watermark %d", ownHW)
	}
	got := readFirst(ctx, t, reader, "degraded", ownHW)
	assert.Len(t, got, int(ownHW), "reads serve everything below F1's high watermark")
	for _, v := range acked[:ownHW] {
		assert.True(t, got[v], "acknowledged %s readable on the new leader", v)
	}

	// F2 reaches F1 again, catches up and rejoins; writes resume.
	s.sw.Heal()
	s.waitPartition("degraded", "ISR [F1, F2]", func(p metadata.Partition) bool {
		return p.Leader == f1 && len(p.ISR) == 2 && slices.Contains(p.ISR, f2)
	}, 20*time.Second)
	resumed := valueRange("d", 150, 200)
	requireAcked(t, produceAll(ctx, cl, "degraded", resumed), "after F2 rejoined")
	acked = append(acked, resumed...)
	s.waitReplicaValues(f1, "degraded", acked, 10*time.Second)
	s.waitReplicaValues(f2, "degraded", acked, 10*time.Second)
	got = readAllFrom(t, s.brokerAddrs(f1), "degraded")
	assert.Len(t, got, len(acked), "every acknowledged record is readable once the ISR is back to two")
}
