package replica

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCanTransition(t *testing.T) {
	assert.True(t, CanTransition(NonExistentReplica, NewReplica))
	assert.True(t, CanTransition(NewReplica, OnlineReplica))
	assert.True(t, CanTransition(OnlineFetchingReplica, OnlineReplica))
	assert.True(t, CanTransition(OfflineReplica, TruncatingLog))
	assert.True(t, CanTransition(TruncatingLog, OnlineFetchingReplica))
	assert.True(t, CanTransition(DeletingReplica, NonExistentReplica))
	assert.False(t, CanTransition(NonExistentReplica, OnlineReplica))
	assert.False(t, CanTransition(DeletingReplica, OnlineReplica))
	assert.False(t, CanTransition(TruncatingLog, OnlineReplica))
	assert.Equal(t, "OnlineFetchingReplica", OnlineFetchingReplica.String())
}

// step is one event fed to a leader State.
type step struct {
	append   int64 // leader LEO after an append (0: none)
	fetch    int32 // follower id (0: none)
	offset   int64 // its fetch offset
	now      int64
	isr      []int32 // a committed ISR change (nil: none)
	wantHW   int64
	wantMove bool
}

func TestStateHighWatermark(t *testing.T) {
	tests := []struct {
		name     string
		replicas []int32
		isr      []int32
		minISR   int
		leo, hw  int64
		steps    []step
	}{
		{
			name: "single replica follows the log end", replicas: []int32{1}, isr: []int32{1}, minISR: 1,
			steps: []step{{append: 5, wantHW: 5, wantMove: true}, {append: 9, wantHW: 9, wantMove: true}},
		},
		{
			name: "min over the ISR", replicas: []int32{1, 2, 3}, isr: []int32{1, 2, 3}, minISR: 2,
			steps: []step{
				{append: 10, wantHW: 0},
				{fetch: 2, offset: 10, wantHW: 0},
				{fetch: 3, offset: 4, wantHW: 4, wantMove: true},
				{fetch: 3, offset: 10, wantHW: 10, wantMove: true},
			},
		},
		{
			name: "out of sync replica does not hold it back", replicas: []int32{1, 2, 3}, isr: []int32{1, 2}, minISR: 1,
			steps: []step{{append: 10}, {fetch: 2, offset: 10, wantHW: 10, wantMove: true}},
		},
		{
			name: "frozen below effective min ISR", replicas: []int32{1, 2, 3}, isr: []int32{1}, minISR: 2,
			steps: []step{
				{append: 10, wantHW: 0},
				{isr: []int32{1, 2}, wantHW: 0},
				{fetch: 2, offset: 7, wantHW: 7, wantMove: true},
			},
		},
		{
			name: "effective min ISR is capped by replication factor", replicas: []int32{1}, isr: []int32{1}, minISR: 3,
			steps: []step{{append: 3, wantHW: 3, wantMove: true}},
		},
		{
			name: "never backwards", replicas: []int32{1, 2}, isr: []int32{1}, minISR: 1, leo: 10, hw: 10,
			steps: []step{{isr: []int32{1, 2}, wantHW: 10}, {fetch: 2, offset: 3, wantHW: 10}},
		},
		{
			name: "shrink lets it advance", replicas: []int32{1, 2}, isr: []int32{1, 2}, minISR: 1,
			steps: []step{{append: 10, wantHW: 0}, {isr: []int32{1}, wantHW: 10, wantMove: true}},
		},
		{
			name: "loaded high watermark is clamped to the log", replicas: []int32{1, 2}, isr: []int32{1, 2}, minISR: 1, leo: 5, hw: 8,
			steps: []step{{fetch: 2, offset: 5, wantHW: 5}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := NewLeaderState(1, 3, 7, tc.replicas, tc.isr, tc.minISR, tc.leo, tc.hw, 0)
			for i, st := range tc.steps {
				var moved bool
				switch {
				case st.append > 0:
					moved = s.Appended(st.append)
				case st.fetch != 0:
					moved = s.FollowerFetched(st.fetch, st.offset, st.now)
				case st.isr != nil:
					moved = s.SetISR(st.isr, s.PartitionEpoch+1)
				}
				assert.Equal(t, st.wantHW, s.HW, "step %d", i)
				assert.Equal(t, st.wantMove, moved, "step %d", i)
			}
		})
	}
}

func TestStateShrinkExpand(t *testing.T) {
	const lag = 30000
	s := NewLeaderState(1, 3, 7, []int32{1, 2, 3}, []int32{1, 2, 3}, 2, 100, 100, 0)
	assert.Nil(t, s.ShrinkISR(lag, lag), "a new leader gives followers a full lag period")
	s.Appended(110)
	s.FollowerFetched(2, 110, 1000)
	s.FollowerFetched(3, 105, 1000)
	assert.Equal(t, int64(105), s.HW)
	// At 31000, 3 last caught up at 0 (it never reached the LEO): out.
	assert.Equal(t, []int32{1, 2}, s.ShrinkISR(31000, lag))
	// 3 catches up with the LEO it saw at the previous fetch: caught up as
	// of that fetch.
	s.FollowerFetched(3, 110, 20000)
	assert.Nil(t, s.ShrinkISR(31000, lag))
	assert.Equal(t, int64(110), s.HW)

	s.SetISR([]int32{1, 2}, 8)
	assert.True(t, s.UnderReplicated())
	assert.Equal(t, []int32{3}, s.CaughtUp())
	assert.Equal(t, []int32{1, 2, 3}, s.ExpandISR())
	assert.False(t, s.UnderMinISR())
	s.SetISR([]int32{1}, 9)
	assert.True(t, s.UnderMinISR())
	assert.True(t, s.HWFrozen())
}

func TestStateExpandNeedsEpochStart(t *testing.T) {
	// A replica behind the new epoch's start offset may not join even if it
	// reached the (old) high watermark.
	s := NewLeaderState(1, 3, 7, []int32{1, 2}, []int32{1}, 1, 50, 40, 0)
	s.FollowerFetched(2, 45, 10)
	assert.Nil(t, s.CaughtUp())
	s.FollowerFetched(2, 50, 20)
	assert.Equal(t, []int32{2}, s.CaughtUp())
	assert.False(t, s.FollowerFetched(99, 50, 30), "fetches from non-replicas are ignored")
}

func TestStateOffsetsAvailable(t *testing.T) {
	st := NewLeaderState(1, 1, 1, []int32{1, 2}, []int32{1, 2}, 1, 5, 2, 0)
	assert.False(t, st.OffsetsAvailable(), "HW 2 below the epoch start 5")
	st.Appended(7)
	st.FollowerFetched(2, 5, 1)
	assert.Equal(t, int64(5), st.HW)
	assert.True(t, st.OffsetsAvailable(), "HW at the epoch start")
	assert.True(t, NewLeaderState(1, 1, 1, []int32{1}, []int32{1}, 1, 5, 2, 0).OffsetsAvailable(), "a lone leader's HW is its log end")
}

func TestStateMaximalISR(t *testing.T) {
	st := NewLeaderState(1, 0, 0, []int32{1, 2, 3}, []int32{1, 2}, 1, 0, 0, 0)
	st.Appended(10)
	st.FollowerFetched(2, 10, 1)
	st.FollowerFetched(3, 10, 1)
	require.Equal(t, int64(10), st.HW)
	require.Equal(t, []int32{1, 2, 3}, st.ExpandISR())

	st.Propose(st.ExpandISR())
	assert.Equal(t, []int32{1, 2, 3}, st.MaximalISR())
	st.Appended(12)
	assert.False(t, st.FollowerFetched(2, 12, 2), "replica 3 may be in the ISR the controller holds")
	assert.Equal(t, int64(10), st.HW)
	assert.True(t, st.ProposalRefused(), "a refusal that committed nothing frees the high watermark")
	assert.Equal(t, int64(12), st.HW)

	// A pending shrink keeps counting the member it removes.
	st.Propose([]int32{1})
	assert.Equal(t, []int32{1, 2}, st.MaximalISR())
	st.Appended(14)
	assert.False(t, st.FollowerFetched(3, 14, 3))
	assert.Equal(t, int64(12), st.HW, "replica 2 holds the HW until the shrink commits")

	// An ISR at the same partition epoch (an image repeating it) leaves the
	// change pending; a new partition epoch settles it.
	st.SetISR([]int32{1, 2}, 0)
	assert.Equal(t, []int32{1}, st.PendingISR)
	assert.True(t, st.SetISR([]int32{1}, 1))
	assert.Nil(t, st.PendingISR)
	assert.Equal(t, int64(14), st.HW)
}

// TestLowWatermark: the smallest log start among the leader, the maximal
// ISR's followers and any follower that fetched lately, unknown (-1)
// until each of those reported one; a follower out of the ISR that has
// not fetched within the live window does not hold it back.
func TestLowWatermark(t *testing.T) {
	s := NewLeaderState(1, 3, 0, []int32{1, 2, 3}, []int32{1, 2}, 1, 100, 100, 0)
	assert.Equal(t, int64(-1), s.LowWatermark(60, 0, 1000), "follower 2 has not reported")
	assert.True(t, s.FollowerLogStart(2, 40))
	assert.False(t, s.FollowerLogStart(2, 40), "unchanged")
	assert.False(t, s.FollowerLogStart(9, 40), "not a replica")
	assert.Equal(t, int64(40), s.LowWatermark(60, 0, 1000))
	assert.True(t, s.FollowerLogStart(2, 60))
	assert.Equal(t, int64(60), s.LowWatermark(60, 0, 1000), "follower 3 is out of the ISR and never fetched")
	assert.Equal(t, int64(50), s.LowWatermark(50, 0, 1000))

	s.FollowerFetched(3, 10, 5000)
	assert.Equal(t, int64(-1), s.LowWatermark(60, 5500, 1000), "follower 3 fetches: it counts once it reports")
	s.FollowerLogStart(3, 20)
	assert.Equal(t, int64(20), s.LowWatermark(60, 5500, 1000))
	assert.Equal(t, int64(60), s.LowWatermark(60, 9000, 1000), "follower 3 stopped fetching")
	s.PendingISR = []int32{1, 2, 3}
	assert.Equal(t, int64(20), s.LowWatermark(60, 9000, 1000), "a pending ISR member counts")
}
