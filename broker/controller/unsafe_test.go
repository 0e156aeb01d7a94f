package controller

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/faultline/faultline/broker/metadata"
)

// partitionOn gives s topic "t" with one partition on replicas 1, 2, 3,
// led by 1 with isr (unclean.leader.election.enable false).
func partitionOn(t *testing.T, s *ClusterState, isr ...int32) {
	t.Helper()
	id := metadata.Uuid{5}
	s.Image = mustApply(t, s.Image, &metadata.TopicRecord{Name: "t", TopicID: id},
		&metadata.PartitionRecord{TopicID: id, Replicas: []int32{1, 2, 3}, ISR: isr, Leader: 1})
}

// TestUnsafeElectAnyReplica: when leader 1 is fenced, broker 2 is live but
// out of the ISR {1, 3}, so 3 leads; with unsafe.elect.any.replica broker 2,
// first in replica order, is elected although unclean election is off.
func TestUnsafeElectAnyReplica(t *testing.T) {
	for _, planted := range []bool{false, true} {
		s := cluster(t, 1, 2, 3)
		s.Unsafe.ElectAnyReplica = planted
		partitionOn(t, s, 1, 3)
		res, err := s.FenceBroker(1)
		require.NoError(t, err)
		p := res.Image.Partition("t", 0)
		if !planted {
			assert.Equal(t, int32(3), p.Leader)
			assert.Equal(t, []int32{3}, p.ISR)
			continue
		}
		assert.Equal(t, int32(2), p.Leader, "unsafe: a replica outside the ISR leads")
		assert.Equal(t, []int32{2}, p.ISR)
	}
}

// TestUnsafeUncleanRestartKeepsISR: broker 2 registers a new incarnation
// (it restarted, perhaps after losing its unflushed tail) and leaves every
// ISR until it catches up again; with unsafe.unclean.restart.keeps.isr it
// stays in the ISR of its old incarnation, electable as soon as it is
// unfenced.
func TestUnsafeUncleanRestartKeepsISR(t *testing.T) {
	for _, planted := range []bool{false, true} {
		s := cluster(t, 1, 2, 3)
		s.Unsafe.UncleanRestartKeepsISR = planted
		partitionOn(t, s, 1, 2, 3)
		_, res, err := s.RegisterBroker(BrokerRegistration{BrokerID: 2, IncarnationID: metadata.Uuid{0xcc}})
		require.NoError(t, err)
		p := res.Image.Partition("t", 0)
		if !planted {
			assert.Equal(t, []int32{1, 3}, p.ISR)
			continue
		}
		assert.Equal(t, []int32{1, 2, 3}, p.ISR, "unsafe: the restarted broker is still in the ISR")
	}
}

// TestUnsafeUncleanRestartRegistersAtOnce: a new incarnation that names no
// clean shutdown waits for the old one's session to expire
// (DUPLICATE_BROKER_REGISTRATION), which fences the old one out of its
// ISRs first; with unsafe.unclean.restart.keeps.isr it is let in at once.
func TestUnsafeUncleanRestartRegistersAtOnce(t *testing.T) {
	for _, planted := range []bool{false, true} {
		clk := newClock()
		log := newSharedLog(t, 1)
		c := newClusterController(t, 1, log.view(1), clk.now)
		c.cfg.Unsafe.UncleanRestartKeepsISR = planted
		clusterMode(c, 9*time.Second)
		ctx := context.Background()
		require.Zero(t, c.HandleBrokerRegistration(ctx, regReq(1, 1, -1)).ErrorCode)
		clk.advance(time.Second)
		resp := c.HandleBrokerRegistration(ctx, regReq(1, 2, -1))
		if !planted {
			assert.Equal(t, kerr.DuplicateBrokerRegistration.Code, resp.ErrorCode)
			continue
		}
		assert.Zero(t, resp.ErrorCode, "unsafe: the new incarnation is taken for the old one")
		assert.Equal(t, metadata.Uuid{2}, c.Image().Brokers[1].IncarnationID)
	}
}
