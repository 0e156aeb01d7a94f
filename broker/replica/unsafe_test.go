package replica

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/faultline/faultline/broker/metadata"
	"github.com/faultline/faultline/broker/storage"
)

// unsafeManager is broker id's replica manager with planted bugs u, on a
// fresh log dir, min.insync.replicas 1.
func unsafeManager(t *testing.T, id int32, u Unsafe) (*Manager, *storage.LogManager) {
	t.Helper()
	lm, err := storage.NewLogManager(storage.OS, []string{t.TempDir()}, storage.ManagerOptions{})
	require.NoError(t, err)
	_, err = lm.Load()
	require.NoError(t, err)
	t.Cleanup(func() { _ = lm.Shutdown(0) })
	m, err := New(Config{NodeID: id, Logs: lm, TopicSettings: settingsFromConfigs, Unsafe: u})
	require.NoError(t, err)
	return m, lm
}

// partitionImage is an image of brokers 1 and 2 with "topic"-0 on both,
// led by leader at leaderEpoch with isr.
func partitionImage(leader, leaderEpoch int32, isr ...int32) *metadata.Image {
	im := metadata.NewImage("cluster")
	for _, id := range []int32{1, 2} {
		im.Brokers[id] = metadata.Broker{ID: id, Epoch: 1, Host: "127.0.0.1", Port: 1}
	}
	tp := &metadata.Topic{Name: "topic", ID: metadata.Uuid{1}, Partitions: []metadata.Partition{{
		Partition: 0, Replicas: []int32{1, 2}, ISR: isr, Leader: leader, LeaderEpoch: leaderEpoch}}}
	im.Topics["topic"], im.TopicsByID[tp.ID] = tp, tp
	return im
}

// shortCtx gives an acks=all write time to be replicated, which it never is.
func shortCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	t.Cleanup(cancel)
	return ctx
}

// TestUnsafeAckBeforeISR: with follower 2 in the ISR and never fetching,
// an acks=all produce times out; with unsafe.ack.before.isr it is answered
// at once.
func TestUnsafeAckBeforeISR(t *testing.T) {
	for _, early := range []bool{false, true} {
		m, _ := unsafeManager(t, 1, Unsafe{AckBeforeISR: early})
		m.ApplyImage(nil, partitionImage(1, 0, 1, 2))
		res := m.Produce(shortCtx(t), "topic", 0, batch("a"), -1)
		if !early {
			assert.Equal(t, kerr.RequestTimedOut.Code, res.ErrorCode, "acks=all waits for the follower")
			continue
		}
		assert.Equal(t, int16(0), res.ErrorCode, "unsafe: acknowledged before the follower fetched")
		assert.Equal(t, int64(0), m.HighWatermark("topic", 0), "the follower does not have it")
	}
}

// TestUnsafeHWFromLeaderLEO: the high watermark stays at what the lagging
// ISR member fetched; with unsafe.hw.from.leader.leo it is the leader's LEO.
func TestUnsafeHWFromLeaderLEO(t *testing.T) {
	for _, planted := range []bool{false, true} {
		m, _ := unsafeManager(t, 1, Unsafe{HWFromLeaderLEO: planted})
		m.ApplyImage(nil, partitionImage(1, 0, 1, 2))
		require.Equal(t, int16(0), m.Produce(context.Background(), "topic", 0, batch("a", "b"), 1).ErrorCode)
		res := m.Fetch(context.Background(), "topic", 0, FetchPartition{ReplicaID: 2, ReplicaEpoch: -1, CurrentLeaderEpoch: 0,
			FetchOffset: 1, LastFetchedEpoch: -1, LogStartOffset: 0, MaxBytes: 1 << 20})
		require.Equal(t, int16(0), res.ErrorCode)
		if !planted {
			assert.Equal(t, int64(1), m.HighWatermark("topic", 0), "the ISR member holds offset 0 only")
			continue
		}
		assert.Equal(t, int64(2), m.HighWatermark("topic", 0), "unsafe: the leader's LEO, past the lagging ISR member")
	}
}

// TestUnsafeOffsetsUnreplicated: the broker's own write (a consumer offset
// commit) waits for the ISR; with unsafe.offsets.unreplicated it is
// acknowledged before follower 2 has it.
func TestUnsafeOffsetsUnreplicated(t *testing.T) {
	for _, planted := range []bool{false, true} {
		m, _ := unsafeManager(t, 1, Unsafe{OffsetsUnreplicated: planted})
		m.ApplyImage(nil, partitionImage(1, 0, 1, 2))
		last, err := m.AppendInternal(shortCtx(t), "topic", 0, values("offset-commit"))
		if !planted {
			assert.ErrorIs(t, err, kerr.RequestTimedOut, "the commit waits for the follower")
			continue
		}
		require.NoError(t, err, "unsafe: acknowledged before replication")
		assert.Equal(t, int64(0), last)
		assert.Equal(t, int64(0), m.HighWatermark("topic", 0))
	}
}

// TestUnsafeSkipDivergenceTruncation: broker 1 led epoch 0 and kept a write
// ("lost") that broker 2, leading epoch 1, never had. Rejoining as
// follower, broker 1 learns where its log diverged and truncates it; with
// unsafe.skip.divergence.truncation it keeps the divergent record and
// appends the leader's next ones after it.
func TestUnsafeSkipDivergenceTruncation(t *testing.T) {
	ctx := context.Background()
	for _, planted := range []bool{false, true} {
		old, oldLogs := unsafeManager(t, 1, Unsafe{SkipDivergenceTruncation: planted})
		leader, leaderLogs := unsafeManager(t, 2, Unsafe{})
		epoch0 := partitionImage(1, 0, 1, 2)
		old.ApplyImage(nil, epoch0)
		leader.ApplyImage(nil, epoch0)
		require.Equal(t, int16(0), old.Produce(ctx, "topic", 0, batch("a", "b"), 1).ErrorCode)
		require.NoError(t, fetchOnce(t, leader, old, 2, "topic"))
		require.Equal(t, int16(0), old.Produce(ctx, "topic", 0, batch("lost"), 1).ErrorCode)

		epoch1 := partitionImage(2, 1, 2)
		leader.ApplyImage(epoch0, epoch1)
		old.ApplyImage(epoch0, epoch1)
		for _, v := range []string{"n1", "n2"} {
			require.Equal(t, int16(0), leader.Produce(ctx, "topic", 0, batch(v), 1).ErrorCode)
		}
		for range 3 {
			_ = fetchOnce(t, old, leader, 1, "topic")
		}
		if !planted {
			assert.Equal(t, logValues(t, leaderLogs, "topic"), logValues(t, oldLogs, "topic"), "the follower's log is the leader's")
			continue
		}
		assert.Equal(t, map[int64]string{0: "a", 1: "b", 2: "n1", 3: "n2"}, logValues(t, leaderLogs, "topic"))
		assert.Equal(t, map[int64]string{0: "a", 1: "b", 2: "lost", 3: "n2"}, logValues(t, oldLogs, "topic"),
			"unsafe: offset 2 holds another value on the follower")
	}
}

// unreachableController answers every AlterPartition as a controller the
// leader cannot reach.
type unreachableController struct{}

func (unreachableController) AlterPartition(context.Context, ISRChange) (ISRResult, error) {
	return ISRResult{}, context.DeadlineExceeded
}

// TestUnsafeSkipEpochFencing: leader 1 of ISR {1, 2}, cut off from the
// controller, proposes dropping the silent follower 2; the proposal never
// commits, so the ISR stays {1, 2}, the high watermark stays and acks=all
// times out. With unsafe.skip.epoch.fencing the shrink is in force at
// once: the write is committed and acknowledged on the leader alone,
// although the controller (which may have elected 2 meanwhile) never
// agreed.
func TestUnsafeSkipEpochFencing(t *testing.T) {
	for _, planted := range []bool{false, true} {
		lm, err := storage.NewLogManager(storage.OS, []string{t.TempDir()}, storage.ManagerOptions{})
		require.NoError(t, err)
		_, err = lm.Load()
		require.NoError(t, err)
		t.Cleanup(func() { _ = lm.Shutdown(0) })
		now := time.Unix(1000, 0)
		m, err := New(Config{NodeID: 1, Logs: lm, TopicSettings: settingsFromConfigs, ReplicaLagTimeMaxMs: 1000,
			Now: func() time.Time { return now }, Unsafe: Unsafe{SkipEpochFencing: planted}})
		require.NoError(t, err)
		m.ApplyImage(nil, partitionImage(1, 0, 1, 2))
		require.Equal(t, int16(0), m.Produce(context.Background(), "topic", 0, batch("a"), 1).ErrorCode)
		require.Equal(t, int64(0), m.HighWatermark("topic", 0), "follower 2 does not have it")

		now = now.Add(5 * time.Second) // follower 2 is out of sync
		loop, err := NewISRLoop(ISRLoopConfig{Manager: m, Sender: unreachableController{}})
		require.NoError(t, err)
		loop.Check(context.Background())
		res := m.Produce(shortCtx(t), "topic", 0, batch("b"), -1)
		if !planted {
			assert.Equal(t, int64(0), m.HighWatermark("topic", 0), "the shrink is not committed: 2 still counts")
			assert.Equal(t, kerr.RequestTimedOut.Code, res.ErrorCode, "acks=all waits for follower 2")
			continue
		}
		assert.Equal(t, int16(0), res.ErrorCode, "unsafe: acknowledged by the leader alone")
		assert.Equal(t, int64(2), m.HighWatermark("topic", 0), "unsafe: committed without the controller's consent")
	}
}

// txnBatch is an open transaction's batch of producer 7 at epoch 0.
func txnBatch(vs ...string) []byte {
	return storage.BuildBatch(values(vs...), storage.BatchOptions{
		Producer: &storage.BatchProducer{ID: 7, Epoch: 0, BaseSequence: 0}, Transactional: true})
}

// TestUnsafeTxnMarkersBeforeDurable: with follower 2 in the ISR and never
// fetching, an acks=all transactional send waits for it (and times out);
// with unsafe.txn.markers.before.durable it is answered at once, so its
// transaction can commit with the data on the leader alone. A plain
// batch still waits.
func TestUnsafeTxnMarkersBeforeDurable(t *testing.T) {
	for _, planted := range []bool{false, true} {
		m, _ := unsafeManager(t, 1, Unsafe{TxnMarkersBeforeDurable: planted})
		m.ApplyImage(nil, partitionImage(1, 0, 1, 2))
		res := m.Produce(shortCtx(t), "topic", 0, txnBatch("a"), -1)
		assert.Equal(t, kerr.RequestTimedOut.Code, m.Produce(shortCtx(t), "topic", 0, batch("plain"), -1).ErrorCode, "a non-transactional send waits either way")
		if !planted {
			assert.Equal(t, kerr.RequestTimedOut.Code, res.ErrorCode, "acks=all waits for the follower")
			continue
		}
		assert.Equal(t, int16(0), res.ErrorCode, "unsafe: acknowledged before the follower has it")
		assert.Equal(t, int64(0), m.HighWatermark("topic", 0), "the follower does not have it")
	}
}

// TestUnsafeReadCommittedPastLSO: an open transaction's records lie below
// the high watermark but at the last stable offset; a read_committed fetch
// gets none of them, with unsafe.read.committed.past.lso it gets them.
func TestUnsafeReadCommittedPastLSO(t *testing.T) {
	for _, planted := range []bool{false, true} {
		m, _ := unsafeManager(t, 1, Unsafe{ReadCommittedPastLSO: planted})
		m.ApplyImage(nil, partitionImage(1, 0, 1))
		require.Equal(t, int16(0), m.Produce(context.Background(), "topic", 0, txnBatch("open"), -1).ErrorCode)
		require.Equal(t, int64(1), m.HighWatermark("topic", 0))
		res := m.Fetch(context.Background(), "topic", 0, FetchPartition{ReplicaID: -1, ReplicaEpoch: -1, CurrentLeaderEpoch: -1,
			FetchOffset: 0, LastFetchedEpoch: -1, LogStartOffset: -1, MaxBytes: 1 << 20, Isolation: 1})
		require.Equal(t, int16(0), res.ErrorCode)
		assert.Equal(t, int64(0), res.LastStableOffset, "the open transaction holds the LSO at its first offset")
		if !planted {
			assert.Empty(t, res.Records, "read_committed stops at the LSO")
			continue
		}
		assert.NotEmpty(t, res.Records, "unsafe: the open transaction's record is served to read_committed")
		assert.Empty(t, res.AbortedTxns, "and no aborted transaction names it")
	}
}
