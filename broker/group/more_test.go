package group

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func withProtocols(r *kmsg.JoinGroupRequest, names ...string) *kmsg.JoinGroupRequest {
	r.Protocols = nil
	for _, n := range names {
		p := kmsg.NewJoinGroupRequestProtocol()
		p.Name = n
		p.Metadata = []byte("md-" + n)
		r.Protocols = append(r.Protocols, p)
	}
	return r
}

func TestProtocolSelectionByVote(t *testing.T) {
	h := newHarness(t, 1000)
	prefs := [][]string{{"x", "y"}, {"y", "x", "z"}, {"y", "x"}}
	var joins []<-chan *kmsg.JoinGroupResponse
	for i, p := range prefs {
		first := recv(t, h.joinAsync(withProtocols(joinReq("vote", ""), p...)))
		require.Equal(t, codeMemberIDRequired, first.ErrorCode)
		id := first.MemberID
		joins = append(joins, h.joinAsync(withProtocols(joinReq("vote", id), p...)))
		h.awaitParked("vote", i+1)
	}
	h.clock.Advance(time.Second)
	h.clock.Advance(time.Second)
	for _, ch := range joins {
		r := recv(t, ch)
		require.Equal(t, codeNone, r.ErrorCode)
		require.NotNil(t, r.Protocol)
		assert.Equal(t, "y", *r.Protocol, "two of three members prefer y; z is not supported by all")
		for _, m := range r.Members {
			assert.Equal(t, []byte("md-y"), m.ProtocolMetadata, "the leader sees each member's metadata for y")
		}
	}
}

func TestRejoinDuringCompletingRebalance(t *testing.T) {
	h := newHarness(t, 0)
	a := h.memberID("g")
	ja := recv(t, h.joinAsync(joinReq("g", a)))
	require.Equal(t, codeNone, ja.ErrorCode)

	// The answer got lost and the member asks again: same answer, no new
	// generation.
	again := recv(t, h.joinAsync(joinReq("g", a)))
	require.Equal(t, codeNone, again.ErrorCode)
	assert.Equal(t, ja.Generation, again.Generation)
	assert.Len(t, again.Members, 1)

	// A commit between join and sync must wait for the assignment.
	assert.Equal(t, map[int32]int16{0: codeRebalanceInProgress}, h.commit("g", a, ja.Generation, "t", map[int32]int64{0: 1}))

	// New metadata during CompletingRebalance starts another generation.
	changed := joinReq("g", a)
	changed.Protocols[0].Metadata = []byte("other")
	r := recv(t, h.joinAsync(changed))
	require.Equal(t, codeNone, r.ErrorCode)
	assert.Equal(t, ja.Generation+1, r.Generation)

	// SyncGroup v5 checks the protocol the member believes in.
	req := kmsg.NewPtrSyncGroupRequest()
	req.Version = 5
	req.Group = "g"
	req.MemberID = a
	req.Generation = r.Generation
	req.Protocol = ptr("roundrobin")
	assert.Equal(t, codeInconsistentGroupProtocol, h.c.SyncGroup(context.Background(), req).ErrorCode)
}

func TestLeaderThatNeverSyncsIsRemoved(t *testing.T) {
	h := newHarness(t, 0)
	ids, gen := threeStable(t, h, "g")
	leader := h.currentLeader("g")
	// Everyone rejoins; only the followers sync.
	h.round++
	var joins []<-chan *kmsg.JoinGroupResponse
	for _, id := range ids {
		r := joinReq("g", id)
		r.Protocols[0].Metadata = []byte("v2-" + id)
		joins = append(joins, h.joinAsync(r))
	}
	for _, ch := range joins {
		require.Equal(t, codeNone, recv(t, ch).ErrorCode)
	}
	var syncs []<-chan *kmsg.SyncGroupResponse
	for _, id := range ids {
		if id != leader {
			syncs = append(syncs, h.syncAsync("g", id, gen+1, nil))
		}
	}
	h.awaitSyncParked("g", 2)
	// The rebalance timeout (60 s) passes without the leader's SyncGroup;
	// it heartbeats all along, so only the sync timeout can remove it.
	for range 6 {
		h.clock.Advance(9 * time.Second)
		require.Equal(t, codeNone, h.heartbeat("g", leader, gen+1))
	}
	h.clock.Advance(7 * time.Second)
	for _, ch := range syncs {
		assert.Equal(t, codeRebalanceInProgress, recv(t, ch).ErrorCode)
	}
	assert.Equal(t, codeUnknownMemberID, h.heartbeat("g", leader, gen+1))
	assert.Equal(t, "PreparingRebalance", h.describe("g").State)
}

func (h *harness) currentLeader(group string) string {
	h.c.mu.Lock()
	defer h.c.mu.Unlock()
	return h.c.groups[group].leader
}

func TestCanceledJoinAnswers(t *testing.T) {
	h := newHarness(t, 0)
	a, _ := stableSingle(t, h, "g")
	b := h.memberID("g")
	ctx, cancel := context.WithCancel(context.Background())
	ch := make(chan *kmsg.JoinGroupResponse, 1)
	go func() { ch <- h.c.JoinGroup(ctx, joinReq("g", b)) }()
	h.awaitParked("g", 1)
	cancel()
	r := recv(t, ch)
	assert.Equal(t, codeRebalanceInProgress, r.ErrorCode)
	assert.Equal(t, int16(9), r.Version)
	// The member stays in the rebalance; a's rejoin completes it.
	require.Equal(t, codeNone, recv(t, h.joinAsync(joinReq("g", a))).ErrorCode)
}

func TestReplayAppliesTombstonesAndSkipsGarbage(t *testing.T) {
	h := newHarness(t, 0)
	p := h.c.PartitionFor("g")
	require.Equal(t, p, h.c.PartitionFor("gone0"), "both groups share a partition for this test")
	v := kmsg.NewGroupMetadataValue()
	v.ProtocolType = "consumer"
	v.Generation = 4
	tp := func(i int32) topicPartition { return topicPartition{topic: "t", partition: i} }
	groupRec := groupMetadataRecord("gone0", &v)
	recs := []Record{
		offsetCommitRecord("g", tp(0), committedOffset{offset: 1, leaderEpoch: -1}),
		offsetCommitRecord("g", tp(1), committedOffset{offset: 2, leaderEpoch: -1}),
		{Key: offsetCommitRecord("g", tp(1), committedOffset{}).Key}, // tombstone
		groupRec,
		{Key: groupRec.Key}, // tombstone
		{Key: []byte{0}, Value: []byte{1}},
		{Key: []byte{0, 1, 0, 50}, Value: []byte{0}},                                         // truncated key
		{Key: []byte{0, 7, 0, 1, 'x'}, Value: []byte{0, 0}},                                  // not a classic record
		{Key: offsetCommitRecord("g", tp(2), committedOffset{}).Key, Value: []byte{0, 3, 1}}, // bad value
	}
	require.NoError(t, h.log.Append(context.Background(), p, recs))
	h.c.Close()
	h.start()
	offs, code := h.fetch("g", "t")
	require.Equal(t, codeNone, code)
	assert.Equal(t, map[int32]int64{0: 1, 1: -1, 2: -1}, offs)
	assert.Equal(t, "Dead", h.describe("gone0").State, "the tombstone deleted the group")
}

func TestMoreErrors(t *testing.T) {
	h := newHarness(t, 0)
	big := make([]byte, 4097)
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Group = "g"
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = "t"
	rp := kmsg.NewOffsetCommitRequestTopicPartition()
	md := string(big)
	rp.Metadata = &md
	rt.Partitions = []kmsg.OffsetCommitRequestTopicPartition{rp}
	req.Topics = []kmsg.OffsetCommitRequestTopic{rt}
	assert.Equal(t, codeOffsetMetadataTooLarge, h.c.OffsetCommit(context.Background(), req).Topics[0].Partitions[0].ErrorCode)

	// v10 names topics by id.
	req.Version = 10
	req.Topics[0].Partitions[0].Metadata = nil
	req.Topics[0].TopicID = [16]byte{9}
	resp := h.c.OffsetCommit(context.Background(), req)
	assert.Equal(t, codeUnknownTopicID, resp.Topics[0].Partitions[0].ErrorCode)
	assert.Equal(t, [16]byte{9}, resp.Topics[0].TopicID)
	req.Topics[0].TopicID = [16]byte{2}
	assert.Equal(t, codeNone, h.c.OffsetCommit(context.Background(), req).Topics[0].Partitions[0].ErrorCode)

	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.Version = 6
	fc.CoordinatorType = 2
	fc.CoordinatorKeys = []string{"share"}
	assert.Equal(t, codeInvalidRequest, h.c.FindCoordinator(context.Background(), fc).Coordinators[0].ErrorCode)

	// Group-level errors go into each partition before OffsetFetch v2.
	h.src.im.Store(testImage(2))
	h.c.ApplyImage(nil, h.src.Image())
	of := kmsg.NewPtrOffsetFetchRequest()
	of.Version = 1
	of.Group = "g"
	ot := kmsg.NewOffsetFetchRequestTopic()
	ot.Topic = "t"
	ot.Partitions = []int32{0}
	of.Topics = []kmsg.OffsetFetchRequestTopic{ot}
	ofr := h.c.OffsetFetch(context.Background(), of)
	assert.Equal(t, codeNotCoordinator, ofr.Topics[0].Partitions[0].ErrorCode)
	assert.Equal(t, int64(-1), ofr.Topics[0].Partitions[0].Offset)

	// JoinGroup v0 has no rebalance timeout: the session timeout is used.
	h.src.im.Store(testImage(1))
	h.c.ApplyImage(nil, h.src.Image())
	h.waitLoaded()
	j := joinReq("v0", "")
	j.Version = 0
	j.RebalanceTimeoutMillis = 0
	r := recv(t, h.joinAsync(j))
	require.Equal(t, codeNone, r.ErrorCode)
	h.c.mu.Lock()
	assert.Equal(t, int32(10000), h.c.groups["v0"].members[r.MemberID].rebalanceTimeoutMs)
	h.c.mu.Unlock()
}

func TestAppendIsBoundedByCommitTimeout(t *testing.T) {
	h := newHarness(t, 0)
	h.c.Close()
	h.cfg.OffsetsCommitTimeoutMs = 20
	h.start()
	h.log.mu.Lock()
	h.log.hang = true
	h.log.mu.Unlock()
	assert.Equal(t, map[int32]int16{0: codeCoordinatorNotAvailable}, h.commit("g", "", -1, "t", map[int32]int64{0: 1}))
}

func TestStaticReplacementSurvivesFailover(t *testing.T) {
	h := newHarness(t, 0)
	leader, _ := stableSingle(t, h, "s")
	inst := "i"
	static := func(memberID string) *kmsg.JoinGroupRequest {
		r := joinReq("s", memberID)
		r.InstanceID = &inst
		r.Protocols[0].Metadata = []byte("static-sub")
		return r
	}
	js := h.joinAsync(static(""))
	h.awaitParked("s", 1)
	jl := h.joinAsync(joinReq("s", leader))
	rs, rl := recv(t, js), recv(t, jl)
	require.Equal(t, codeNone, rs.ErrorCode)
	gen := rebalanceSync(t, h, "s", leader, []string{leader, rs.MemberID}, rl.Generation)

	rn := recv(t, h.joinAsync(static("")))
	require.Equal(t, codeNone, rn.ErrorCode)
	p := h.c.PartitionFor("s")
	require.Eventually(t, func() bool { return len(h.log.records(p)) == 3 }, 5*time.Second, time.Millisecond,
		"the replacement is written")
	h.c.Close()
	h.start()
	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Group = "s"
	hb.Generation = gen
	hb.InstanceID = &inst
	hb.MemberID = rn.MemberID
	assert.Equal(t, codeNone, h.c.Heartbeat(context.Background(), hb).ErrorCode)
	hb.MemberID = rs.MemberID
	assert.Equal(t, codeFencedInstanceID, h.c.Heartbeat(context.Background(), hb).ErrorCode)
}
