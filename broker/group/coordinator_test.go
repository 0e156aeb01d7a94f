package group

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/faultline/faultline/broker/config"
	"github.com/faultline/faultline/broker/metadata"
)

// stableSingle drives one member through join and sync and returns its id
// and generation.
func stableSingle(t *testing.T, h *harness, group string) (string, int32) {
	t.Helper()
	id := h.memberID(group)
	j := recv(t, h.joinAsync(joinReq(group, id)))
	require.Equal(t, codeNone, j.ErrorCode)
	s := recv(t, h.syncAsync(group, id, j.Generation, map[string]string{id: "assign-" + id}))
	require.Equal(t, codeNone, s.ErrorCode)
	return id, j.Generation
}

func TestSingleMemberLifecycle(t *testing.T) {
	h := newHarness(t, 0)
	id := h.memberID("g1")

	j := recv(t, h.joinAsync(joinReq("g1", id)))
	require.Equal(t, codeNone, j.ErrorCode)
	assert.Equal(t, int32(1), j.Generation)
	assert.Equal(t, id, j.MemberID)
	assert.Equal(t, id, j.LeaderID)
	require.NotNil(t, j.Protocol)
	assert.Equal(t, "range", *j.Protocol)
	require.NotNil(t, j.ProtocolType)
	assert.Equal(t, "consumer", *j.ProtocolType)
	require.Len(t, j.Members, 1)
	assert.Equal(t, []byte("sub-"+id), j.Members[0].ProtocolMetadata)
	assert.Equal(t, "CompletingRebalance", h.describe("g1").State)
	assert.Equal(t, codeNone, h.heartbeat("g1", id, 1), "a heartbeat between join and sync is fine")

	s := recv(t, h.syncAsync("g1", id, 1, map[string]string{id: "p0,p1,p2"}))
	require.Equal(t, codeNone, s.ErrorCode)
	assert.Equal(t, []byte("p0,p1,p2"), s.MemberAssignment)
	assert.Equal(t, codeNone, h.heartbeat("g1", id, 1))

	d := h.describe("g1")
	assert.Equal(t, "Stable", d.State)
	assert.Equal(t, "consumer", d.ProtocolType)
	assert.Equal(t, "range", d.Protocol)
	require.Len(t, d.Members, 1)
	assert.Equal(t, []byte("p0,p1,p2"), d.Members[0].MemberAssignment)

	// The assignment was written before SyncGroup answered.
	recs := h.log.records(h.c.PartitionFor("g1"))
	require.Len(t, recs, 1)
	var k kmsg.GroupMetadataKey
	require.NoError(t, k.ReadFrom(recs[0].Key))
	assert.Equal(t, int16(2), k.Version)
	var v kmsg.GroupMetadataValue
	require.NoError(t, v.ReadFrom(recs[0].Value))
	assert.Equal(t, int32(1), v.Generation)
	require.Len(t, v.Members, 1)
	assert.Equal(t, []byte("p0,p1,p2"), v.Members[0].Assignment)

	errs := h.commit("g1", id, 1, "t", map[int32]int64{0: 10, 2: 30})
	assert.Equal(t, map[int32]int16{0: codeNone, 2: codeNone}, errs)
	offs, code := h.fetch("g1", "t")
	require.Equal(t, codeNone, code)
	assert.Equal(t, map[int32]int64{0: 10, 1: -1, 2: 30}, offs)
}

func TestThreeMembersWithInitialDelay(t *testing.T) {
	h := newHarness(t, 3000)
	ids := []string{h.memberID("g3"), h.memberID("g3"), h.memberID("g3")}
	var joins []<-chan *kmsg.JoinGroupResponse
	for _, id := range ids {
		joins = append(joins, h.joinAsync(joinReq("g3", id)))
		h.awaitParked("g3", len(joins))
	}
	// Each new member extends the initial delay once more.
	h.clock.Advance(3 * time.Second)
	for _, j := range joins {
		noAnswer(t, j)
	}
	h.clock.Advance(3 * time.Second)
	var leader string
	resps := map[string]*kmsg.JoinGroupResponse{}
	for i, ch := range joins {
		r := recv(t, ch)
		require.Equal(t, codeNone, r.ErrorCode)
		assert.Equal(t, int32(1), r.Generation)
		assert.Equal(t, ids[i], r.MemberID)
		leader = r.LeaderID
		resps[r.MemberID] = r
	}
	for id, r := range resps {
		if id == leader {
			assert.Len(t, r.Members, 3, "the leader gets the member list")
		} else {
			assert.Empty(t, r.Members, "followers get no member list")
		}
	}

	// Followers park in SyncGroup until the leader's assignment is written.
	assign := map[string]string{ids[0]: "a0", ids[1]: "a1", ids[2]: "a2"}
	var followers []<-chan *kmsg.SyncGroupResponse
	var followerIDs []string
	for _, id := range ids {
		if id != leader {
			followers = append(followers, h.syncAsync("g3", id, 1, nil))
			followerIDs = append(followerIDs, id)
		}
	}
	h.awaitSyncParked("g3", 2)
	ls := recv(t, h.syncAsync("g3", leader, 1, assign))
	require.Equal(t, codeNone, ls.ErrorCode)
	assert.Equal(t, []byte(assign[leader]), ls.MemberAssignment)
	for i, ch := range followers {
		s := recv(t, ch)
		require.Equal(t, codeNone, s.ErrorCode)
		assert.Equal(t, []byte(assign[followerIDs[i]]), s.MemberAssignment)
	}
	assert.Equal(t, "Stable", h.describe("g3").State)
}

// threeStable brings three members to a Stable generation 1 with no
// initial delay: the first completes alone, the others force a second
// round. It returns the ids and the generation.
func threeStable(t *testing.T, h *harness, group string) ([]string, int32) {
	t.Helper()
	ids := []string{h.memberID(group), h.memberID(group), h.memberID(group)}
	return ids, rebalance(t, h, group, ids)
}

// rebalance makes every member in ids (re)join and sync and returns the new
// generation.
func rebalance(t *testing.T, h *harness, group string, ids []string) int32 {
	t.Helper()
	h.round++
	var joins []<-chan *kmsg.JoinGroupResponse
	for _, id := range ids {
		r := joinReq(group, id)
		// New metadata makes every rejoin start a rebalance, whatever
		// order the joins arrive in.
		r.Protocols[0].Metadata = fmt.Appendf(nil, "sub-%s-%d", id, h.round)
		joins = append(joins, h.joinAsync(r))
	}
	var gen int32
	var leader string
	for _, ch := range joins {
		r := recv(t, ch)
		require.Equal(t, codeNone, r.ErrorCode)
		gen, leader = r.Generation, r.LeaderID
	}
	assign := map[string]string{}
	for _, id := range ids {
		assign[id] = "a-" + id
	}
	var syncs []<-chan *kmsg.SyncGroupResponse
	for _, id := range ids {
		if id != leader {
			syncs = append(syncs, h.syncAsync(group, id, gen, nil))
		}
	}
	syncs = append(syncs, h.syncAsync(group, leader, gen, assign))
	for _, ch := range syncs {
		require.Equal(t, codeNone, recv(t, ch).ErrorCode)
	}
	require.Equal(t, "Stable", h.describe(group).State)
	return gen
}

func TestRebalanceOnJoinLeaveAndExpiry(t *testing.T) {
	h := newHarness(t, 0)
	a, gen := stableSingle(t, h, "g")
	require.Equal(t, int32(1), gen)

	// A new member joining moves the group to PreparingRebalance; the old
	// member learns it from its heartbeat and rejoins.
	b := h.memberID("g")
	jb := h.joinAsync(joinReq("g", b))
	h.awaitParked("g", 1)
	assert.Equal(t, "PreparingRebalance", h.describe("g").State)
	assert.Equal(t, codeRebalanceInProgress, h.heartbeat("g", a, 1))
	ja := h.joinAsync(joinReq("g", a))
	ra, rb := recv(t, ja), recv(t, jb)
	require.Equal(t, codeNone, ra.ErrorCode)
	require.Equal(t, codeNone, rb.ErrorCode)
	assert.Equal(t, int32(2), ra.Generation)
	assert.Equal(t, a, ra.LeaderID, "the leader stays the leader")
	assert.Len(t, ra.Members, 2)
	gen = rebalanceSync(t, h, "g", a, []string{a, b}, 2)

	// The old generation is fenced now.
	assert.Equal(t, codeIllegalGeneration, h.heartbeat("g", a, 1))

	// b leaves: a rebalances alone.
	lreq := kmsg.NewPtrLeaveGroupRequest()
	lreq.Version = 3
	lreq.Group = "g"
	lm := kmsg.NewLeaveGroupRequestMember()
	lm.MemberID = b
	unknown := kmsg.NewLeaveGroupRequestMember()
	unknown.MemberID = "nobody"
	lreq.Members = []kmsg.LeaveGroupRequestMember{lm, unknown}
	lresp := h.c.LeaveGroup(context.Background(), lreq)
	require.Equal(t, codeNone, lresp.ErrorCode)
	require.Len(t, lresp.Members, 2)
	assert.Equal(t, codeNone, lresp.Members[0].ErrorCode)
	assert.Equal(t, codeUnknownMemberID, lresp.Members[1].ErrorCode)
	assert.Equal(t, codeRebalanceInProgress, h.heartbeat("g", a, gen))
	gen = rebalance(t, h, "g", []string{a})
	assert.Equal(t, int32(3), gen)

	// c joins; then a stops heartbeating and expires after its session
	// timeout (10 s) while c keeps heartbeating.
	c := h.memberID("g")
	jc := h.joinAsync(joinReq("g", c))
	h.awaitParked("g", 1)
	ja = h.joinAsync(joinReq("g", a))
	require.Equal(t, codeNone, recv(t, jc).ErrorCode)
	require.Equal(t, codeNone, recv(t, ja).ErrorCode)
	gen = rebalanceSync(t, h, "g", a, []string{a, c}, 4)
	for range 4 {
		h.clock.Advance(3 * time.Second)
		code := h.heartbeat("g", c, gen)
		if code == codeRebalanceInProgress {
			break
		}
		require.Equal(t, codeNone, code)
	}
	assert.Equal(t, "PreparingRebalance", h.describe("g").State)
	assert.Equal(t, codeUnknownMemberID, h.heartbeat("g", a, gen), "the expired member is gone")
	gen = rebalance(t, h, "g", []string{c})
	assert.Equal(t, int32(5), gen)
	d := h.describe("g")
	require.Len(t, d.Members, 1)
	assert.Equal(t, c, d.Members[0].MemberID)

	// The last member leaving (v0 LeaveGroup) empties the group.
	l0 := kmsg.NewPtrLeaveGroupRequest()
	l0.Group = "g"
	l0.MemberID = c
	assert.Equal(t, codeNone, h.c.LeaveGroup(context.Background(), l0).ErrorCode)
	d = h.describe("g")
	assert.Equal(t, "Empty", d.State)
	assert.Empty(t, d.Members)
}

// rebalanceSync sends SyncGroup for members that already have their join
// answers for generation gen.
func rebalanceSync(t *testing.T, h *harness, group, leader string, ids []string, gen int32) int32 {
	t.Helper()
	assign := map[string]string{}
	for _, id := range ids {
		assign[id] = "a-" + id
	}
	var syncs []<-chan *kmsg.SyncGroupResponse
	for _, id := range ids {
		if id != leader {
			syncs = append(syncs, h.syncAsync(group, id, gen, nil))
		}
	}
	syncs = append(syncs, h.syncAsync(group, leader, gen, assign))
	for _, ch := range syncs {
		require.Equal(t, codeNone, recv(t, ch).ErrorCode)
	}
	return gen
}

func TestMemberThatDoesNotRejoinIsRemovedAtRebalanceTimeout(t *testing.T) {
	h := newHarness(t, 0)
	ids, gen := threeStable(t, h, "g")
	// Two members rejoin, the third does not: after the rebalance timeout
	// (60 s) the join completes without it. Heartbeats keep it alive, so
	// it is the rebalance timeout, not the session, that removes it.
	changed := joinReq("g", ids[0])
	changed.Protocols[0].Metadata = []byte("new subscription")
	j0 := h.joinAsync(changed)
	h.awaitParked("g", 1)
	j1 := h.joinAsync(joinReq("g", ids[1]))
	h.awaitParked("g", 2)
	for range 6 {
		h.clock.Advance(9 * time.Second)
		assert.Equal(t, codeRebalanceInProgress, h.heartbeat("g", ids[2], gen))
	}
	noAnswer(t, j0)
	h.clock.Advance(7 * time.Second)
	r0, r1 := recv(t, j0), recv(t, j1)
	require.Equal(t, codeNone, r0.ErrorCode)
	require.Equal(t, codeNone, r1.ErrorCode)
	assert.Equal(t, gen+1, r0.Generation)
	assert.Equal(t, codeUnknownMemberID, h.heartbeat("g", ids[2], gen+1))
}

func TestErrors(t *testing.T) {
	h := newHarness(t, 0)
	id, gen := stableSingle(t, h, "g")

	assert.Equal(t, codeIllegalGeneration, h.heartbeat("g", id, gen+1))
	assert.Equal(t, codeUnknownMemberID, h.heartbeat("g", "stranger", gen))
	assert.Equal(t, codeUnknownMemberID, h.heartbeat("nogroup", id, gen))
	assert.Equal(t, codeInvalidGroupID, h.heartbeat("", id, gen))

	s := recv(t, h.syncAsync("g", id, gen+1, nil))
	assert.Equal(t, codeIllegalGeneration, s.ErrorCode)
	s = recv(t, h.syncAsync("g", "stranger", gen, nil))
	assert.Equal(t, codeUnknownMemberID, s.ErrorCode)

	assert.Equal(t, map[int32]int16{0: codeIllegalGeneration}, h.commit("g", id, gen+5, "t", map[int32]int64{0: 1}))
	assert.Equal(t, map[int32]int16{0: codeUnknownMemberID}, h.commit("g", "stranger", gen, "t", map[int32]int64{0: 1}))
	assert.Equal(t, map[int32]int16{0: codeUnknownMemberID}, h.commit("g", "", -1, "t", map[int32]int64{0: 1}),
		"a simple commit into a group with members")
	assert.Equal(t, map[int32]int16{0: codeNone, 7: codeUnknownTopicOrPartition}, h.commit("g", id, gen, "t", map[int32]int64{0: 1, 7: 1}))
	assert.Equal(t, map[int32]int16{0: codeUnknownTopicOrPartition}, h.commit("g", id, gen, "nope", map[int32]int64{0: 1}))
	assert.Equal(t, map[int32]int16{0: codeIllegalGeneration}, h.commit("fresh", "m", 3, "t", map[int32]int64{0: 1}),
		"a generation for a group that does not exist")

	// Session timeouts outside group.min/max.session.timeout.ms.
	for _, ms := range []int32{5999, 1800001} {
		r := joinReq("g2", "")
		r.SessionTimeoutMillis = ms
		assert.Equal(t, codeInvalidSessionTimeout, recv(t, h.joinAsync(r)).ErrorCode, "session timeout %d", ms)
	}
	// Joining with an id the group never handed out.
	assert.Equal(t, codeUnknownMemberID, recv(t, h.joinAsync(joinReq("g", "made-up"))).ErrorCode)
	assert.Equal(t, codeUnknownMemberID, recv(t, h.joinAsync(joinReq("g-none", "made-up"))).ErrorCode)
	// A protocol the members do not share.
	bad := joinReq("g", "")
	bad.Protocols[0].Name = "roundrobin"
	assert.Equal(t, codeInconsistentGroupProtocol, recv(t, h.joinAsync(bad)).ErrorCode)
	bad = joinReq("g", "")
	bad.ProtocolType = "connect"
	assert.Equal(t, codeInconsistentGroupProtocol, recv(t, h.joinAsync(bad)).ErrorCode)
	empty := joinReq("g4", "")
	empty.Protocols = nil
	assert.Equal(t, codeInconsistentGroupProtocol, recv(t, h.joinAsync(empty)).ErrorCode)
	// v3 JoinGroup gets no MEMBER_ID_REQUIRED round trip.
	old := joinReq("g5", "")
	old.Version = 3
	r := recv(t, h.joinAsync(old))
	assert.Equal(t, codeNone, r.ErrorCode)
	assert.NotEmpty(t, r.MemberID)
}

func TestSimpleCommitAndFetchAll(t *testing.T) {
	h := newHarness(t, 0)
	assert.Equal(t, map[int32]int16{1: codeNone}, h.commit("simple", "", -1, "t", map[int32]int64{1: 42}))
	assert.Equal(t, "Empty", h.describe("simple").State)

	// Topics null (v2+): every committed partition.
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Version = 5
	req.Group = "simple"
	resp := h.c.OffsetFetch(context.Background(), req)
	require.Equal(t, codeNone, resp.ErrorCode)
	require.Len(t, resp.Topics, 1)
	assert.Equal(t, "t", resp.Topics[0].Topic)
	require.Len(t, resp.Topics[0].Partitions, 1)
	p := resp.Topics[0].Partitions[0]
	assert.Equal(t, int32(1), p.Partition)
	assert.Equal(t, int64(42), p.Offset)
	assert.Equal(t, int32(7), p.LeaderEpoch)
	require.NotNil(t, p.Metadata)
	assert.Equal(t, "md", *p.Metadata)

	// v8: several groups, one unknown.
	req8 := kmsg.NewPtrOffsetFetchRequest()
	req8.Version = 8
	for _, g := range []string{"simple", "unknown"} {
		rg := kmsg.NewOffsetFetchRequestGroup()
		rg.Group = g
		rt := kmsg.NewOffsetFetchRequestGroupTopic()
		rt.Topic = "t"
		rt.Partitions = []int32{1}
		rg.Topics = []kmsg.OffsetFetchRequestGroupTopic{rt}
		req8.Groups = append(req8.Groups, rg)
	}
	resp8 := h.c.OffsetFetch(context.Background(), req8)
	require.Len(t, resp8.Groups, 2)
	assert.Equal(t, int64(42), resp8.Groups[0].Topics[0].Partitions[0].Offset)
	assert.Equal(t, int64(-1), resp8.Groups[1].Topics[0].Partitions[0].Offset)
	assert.Equal(t, codeNone, resp8.Groups[1].ErrorCode)

	// v10 names topics by id.
	req10 := kmsg.NewPtrOffsetFetchRequest()
	req10.Version = 10
	rg := kmsg.NewOffsetFetchRequestGroup()
	rg.Group = "simple"
	req10.Groups = []kmsg.OffsetFetchRequestGroup{rg}
	resp10 := h.c.OffsetFetch(context.Background(), req10)
	require.Len(t, resp10.Groups[0].Topics, 1)
	assert.Equal(t, [16]byte{2}, resp10.Groups[0].Topics[0].TopicID)
}

func TestCommitWaitsForTheLog(t *testing.T) {
	h := newHarness(t, 0)
	h.log.fail(errBoom)
	assert.Equal(t, map[int32]int16{0: codeCoordinatorNotAvailable}, h.commit("g", "", -1, "t", map[int32]int64{0: 5}))
	offs, _ := h.fetch("g", "t")
	assert.Equal(t, int64(-1), offs[0], "a failed append changes nothing")

	h.log.fail(ErrNotLeader)
	assert.Equal(t, map[int32]int16{0: codeNotCoordinator}, h.commit("g", "", -1, "t", map[int32]int64{0: 5}))
	assert.Equal(t, map[int32]int16{0: codeNone}, h.commit("g", "", -1, "t", map[int32]int64{0: 6}))
	offs, _ = h.fetch("g", "t")
	assert.Equal(t, int64(6), offs[0])
}

func TestSyncFailsWhenAssignmentCannotBeWritten(t *testing.T) {
	h := newHarness(t, 0)
	id := h.memberID("g")
	j := recv(t, h.joinAsync(joinReq("g", id)))
	require.Equal(t, codeNone, j.ErrorCode)
	h.log.fail(errBoom)
	s := recv(t, h.syncAsync("g", id, j.Generation, map[string]string{id: "x"}))
	assert.Equal(t, codeCoordinatorNotAvailable, s.ErrorCode)
	assert.Equal(t, "PreparingRebalance", h.describe("g").State, "the group rebalances again")
	assert.Empty(t, h.log.records(h.c.PartitionFor("g")))
	// Rejoining completes the next generation.
	gen := rebalance(t, h, "g", []string{id})
	assert.Equal(t, int32(2), gen)
}

func TestRestartReplaysTheLog(t *testing.T) {
	h := newHarness(t, 0)
	ids, gen := threeStable(t, h, "g")
	for _, id := range ids {
		require.Equal(t, codeNone, h.heartbeat("g", id, gen))
	}
	require.Equal(t, map[int32]int16{0: codeNone, 1: codeNone}, h.commit("g", ids[0], gen, "t", map[int32]int64{0: 100, 1: 200}))
	require.Equal(t, map[int32]int16{1: codeNone}, h.commit("g", ids[1], gen, "t", map[int32]int64{1: 250}))
	require.Equal(t, map[int32]int16{2: codeNone}, h.commit("simple", "", -1, "t", map[int32]int64{2: 9}))
	h.c.mu.Lock()
	leader := h.c.groups["g"].leader
	h.c.mu.Unlock()
	before := h.describe("g")
	h.c.Close()

	h.start()
	offs, code := h.fetch("g", "t")
	require.Equal(t, codeNone, code)
	assert.Equal(t, map[int32]int64{0: 100, 1: 250, 2: -1}, offs)
	offs, _ = h.fetch("simple", "t")
	assert.Equal(t, map[int32]int64{0: -1, 1: -1, 2: 9}, offs)
	after := h.describe("g")
	assert.Equal(t, before, after, "same state, protocol, members and assignments")
	for _, id := range ids {
		assert.Equal(t, codeNone, h.heartbeat("g", id, gen), "members keep their generation across the failover")
	}
	h.c.mu.Lock()
	assert.Equal(t, leader, h.c.groups["g"].leader)
	assert.Equal(t, gen, h.c.groups["g"].generation)
	h.c.mu.Unlock()
	// The next rebalance continues the generation sequence.
	assert.Equal(t, gen+1, rebalance(t, h, "g", ids))
}

func TestRestartAfterGroupEmptied(t *testing.T) {
	h := newHarness(t, 0)
	id, _ := stableSingle(t, h, "g")
	l := kmsg.NewPtrLeaveGroupRequest()
	l.Version = 1
	l.Group = "g"
	l.MemberID = id
	require.Equal(t, codeNone, h.c.LeaveGroup(context.Background(), l).ErrorCode)
	p := h.c.PartitionFor("g")
	require.Eventually(t, func() bool { return len(h.log.records(p)) == 2 }, 5*time.Second, time.Millisecond,
		"the empty generation is written")
	h.c.Close()
	h.start()
	d := h.describe("g")
	assert.Equal(t, "Empty", d.State)
	h.c.mu.Lock()
	assert.Equal(t, int32(2), h.c.groups["g"].generation)
	h.c.mu.Unlock()
}

func TestSessionExpiryOfLoneMember(t *testing.T) {
	h := newHarness(t, 0)
	id, gen := stableSingle(t, h, "g")
	h.clock.Advance(9 * time.Second)
	require.Equal(t, codeNone, h.heartbeat("g", id, gen))
	h.clock.Advance(9 * time.Second)
	require.Equal(t, codeNone, h.heartbeat("g", id, gen), "heartbeats push the deadline")
	h.clock.Advance(11 * time.Second)
	assert.Equal(t, codeUnknownMemberID, h.heartbeat("g", id, gen))
	assert.Equal(t, "Empty", h.describe("g").State)
}

func TestPendingMemberExpires(t *testing.T) {
	h := newHarness(t, 0)
	a, gen := stableSingle(t, h, "g")
	b := h.memberID("g")
	h.c.mu.Lock()
	assert.Contains(t, h.c.groups["g"].pending, b)
	h.c.mu.Unlock()
	h.clock.Advance(5 * time.Second)
	require.Equal(t, codeNone, h.heartbeat("g", a, gen))
	h.clock.Advance(6 * time.Second)
	h.c.mu.Lock()
	assert.NotContains(t, h.c.groups["g"].pending, b)
	h.c.mu.Unlock()
	assert.Equal(t, codeNone, h.heartbeat("g", a, gen), "a pending member never joined, so no rebalance")
}

func TestStaticMemberRejoinsWithoutRebalance(t *testing.T) {
	h := newHarness(t, 0)
	leader, _ := stableSingle(t, h, "s")

	inst := "instance-1"
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
	require.Equal(t, codeNone, rs.ErrorCode, "static members skip MEMBER_ID_REQUIRED")
	require.Equal(t, codeNone, rl.ErrorCode)
	first := rs.MemberID
	gen := rebalanceSync(t, h, "s", leader, []string{leader, first}, rl.Generation)

	// The instance restarts and joins with no member id: it takes over its
	// old place without a rebalance, and its old id is fenced.
	rn := recv(t, h.joinAsync(static("")))
	require.Equal(t, codeNone, rn.ErrorCode)
	assert.NotEqual(t, first, rn.MemberID)
	assert.Equal(t, gen, rn.Generation)
	s := recv(t, h.syncAsync("s", rn.MemberID, gen, nil))
	require.Equal(t, codeNone, s.ErrorCode)
	assert.Equal(t, []byte("a-"+first), s.MemberAssignment, "the new id inherits the assignment")
	assert.Equal(t, "Stable", h.describe("s").State)
	assert.Equal(t, codeNone, h.heartbeat("s", leader, gen))
	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Version = 4
	hb.Group = "s"
	hb.MemberID = first
	hb.Generation = gen
	hb.InstanceID = &inst
	assert.Equal(t, codeFencedInstanceID, h.c.Heartbeat(context.Background(), hb).ErrorCode)

	// Static leave by instance id; a wrong member id for it is fenced.
	l := kmsg.NewPtrLeaveGroupRequest()
	l.Version = 4
	l.Group = "s"
	wrong := kmsg.NewLeaveGroupRequestMember()
	wrong.InstanceID = &inst
	wrong.MemberID = first
	right := kmsg.NewLeaveGroupRequestMember()
	right.InstanceID = &inst
	l.Members = []kmsg.LeaveGroupRequestMember{wrong, right}
	lr := h.c.LeaveGroup(context.Background(), l)
	require.Len(t, lr.Members, 2)
	assert.Equal(t, codeFencedInstanceID, lr.Members[0].ErrorCode)
	assert.Equal(t, codeNone, lr.Members[1].ErrorCode)
	assert.Equal(t, codeRebalanceInProgress, h.heartbeat("s", leader, gen))
}

func TestNotCoordinatorAndLoading(t *testing.T) {
	h := newHarness(t, 0)
	require.Equal(t, map[int32]int16{0: codeNone}, h.commit("g", "", -1, "t", map[int32]int64{0: 3}))

	// Leadership moves to broker 2.
	h.src.im.Store(testImage(2))
	h.c.ApplyImage(nil, h.src.Image())
	assert.Equal(t, codeNotCoordinator, recv(t, h.joinAsync(joinReq("g", ""))).ErrorCode)
	assert.Equal(t, codeNotCoordinator, h.heartbeat("g", "m", 1))
	_, code := h.fetch("g", "t")
	assert.Equal(t, codeNotCoordinator, code)
	assert.Equal(t, map[int32]int16{0: codeNotCoordinator}, h.commit("g", "", -1, "t", map[int32]int64{0: 4}))
	assert.Equal(t, codeNotCoordinator, h.describe("g").ErrorCode)

	// Back to us, with a slow replay.
	gate := make(chan struct{})
	h.log.mu.Lock()
	h.log.replayGate = gate
	h.log.mu.Unlock()
	h.src.im.Store(testImage(1))
	h.c.ApplyImage(nil, h.src.Image())
	assert.Equal(t, codeCoordinatorLoadInProgress, h.heartbeat("g", "m", 1))
	_, code = h.fetch("g", "t")
	assert.Equal(t, codeCoordinatorLoadInProgress, code)
	lg := h.c.ListGroups(context.Background(), kmsg.NewPtrListGroupsRequest())
	assert.Equal(t, codeCoordinatorLoadInProgress, lg.ErrorCode)
	close(gate)
	h.waitLoaded()
	offs, code := h.fetch("g", "t")
	require.Equal(t, codeNone, code)
	assert.Equal(t, int64(3), offs[0], "the offset came back from the log")
}

func TestReplayErrorIsRetried(t *testing.T) {
	h := newHarness(t, 0)
	require.Equal(t, map[int32]int16{0: codeNone}, h.commit("g", "", -1, "t", map[int32]int64{0: 3}))
	h.c.Close()
	fl := &flakyReplay{memLog: h.log, failures: 1}
	c, err := New(h.cfg, fl, h.src)
	require.NoError(t, err)
	t.Cleanup(c.Close)
	h.c = c
	c.OnPartitionLeadership(c.PartitionFor("g"), true)
	require.Eventually(t, func() bool { return fl.calls.Load() >= 1 }, 5*time.Second, time.Millisecond)
	require.Eventually(t, func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.partitions[c.PartitionFor("g")].retry != nil
	}, 5*time.Second, time.Millisecond)
	assert.Equal(t, codeCoordinatorLoadInProgress, h.heartbeat("g", "m", 1))
	h.clock.Advance(time.Second)
	h.waitLoaded()
	offs, _ := h.fetch("g", "t")
	assert.Equal(t, int64(3), offs[0])
}

type flakyReplay struct {
	*memLog
	failures int32
	calls    atomic.Int32
}

func (f *flakyReplay) Replay(ctx context.Context, p int32, fn func(key, value []byte) error) error {
	if f.calls.Add(1) <= f.failures {
		return errBoom
	}
	return f.memLog.Replay(ctx, p, fn)
}

func TestListAndDescribeGroups(t *testing.T) {
	h := newHarness(t, 0)
	stableSingle(t, h, "stable-group")
	require.Equal(t, map[int32]int16{0: codeNone}, h.commit("empty-group", "", -1, "t", map[int32]int64{0: 1}))

	req := kmsg.NewPtrListGroupsRequest()
	req.Version = 5
	resp := h.c.ListGroups(context.Background(), req)
	require.Equal(t, codeNone, resp.ErrorCode)
	require.Len(t, resp.Groups, 2)
	assert.Equal(t, "empty-group", resp.Groups[0].Group)
	assert.Equal(t, "Empty", resp.Groups[0].GroupState)
	assert.Equal(t, "stable-group", resp.Groups[1].Group)
	assert.Equal(t, "consumer", resp.Groups[1].ProtocolType)
	assert.Equal(t, "classic", resp.Groups[1].GroupType)

	req.StatesFilter = []string{"stable"}
	resp = h.c.ListGroups(context.Background(), req)
	require.Len(t, resp.Groups, 1)
	assert.Equal(t, "stable-group", resp.Groups[0].Group)
	req.StatesFilter = nil
	req.TypesFilter = []string{"consumer"}
	assert.Empty(t, h.c.ListGroups(context.Background(), req).Groups)

	d := kmsg.NewPtrDescribeGroupsRequest()
	d.Version = 6
	d.Groups = []string{"missing"}
	dr := h.c.DescribeGroups(context.Background(), d)
	assert.Equal(t, codeGroupIDNotFound, dr.Groups[0].ErrorCode)
	d.Version = 5
	dr = h.c.DescribeGroups(context.Background(), d)
	assert.Equal(t, codeNone, dr.Groups[0].ErrorCode)
	assert.Equal(t, "Dead", dr.Groups[0].State)
}

func TestFindCoordinator(t *testing.T) {
	h := newHarness(t, 0)
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.Version = 3
	req.CoordinatorKey = "my-group"
	resp := h.c.FindCoordinator(context.Background(), req)
	assert.Equal(t, codeNone, resp.ErrorCode)
	assert.Equal(t, int32(1), resp.NodeID)
	assert.Equal(t, "broker1", resp.Host)
	assert.Equal(t, int32(9092), resp.Port)

	// Batched keys (v4+); partition 12 of my-group led by broker 2.
	im := testImage(1)
	im.Topics[OffsetsTopic].Partitions[12].Leader = 2
	im.Topics[OffsetsTopic].Partitions[4].Leader = -1
	h.src.im.Store(im)
	req.Version = 4
	req.CoordinatorKeys = []string{"my-group", "abc", "hello"}
	resp = h.c.FindCoordinator(context.Background(), req)
	require.Len(t, resp.Coordinators, 3)
	assert.Equal(t, "my-group", resp.Coordinators[0].Key)
	assert.Equal(t, int32(2), resp.Coordinators[0].NodeID)
	assert.Equal(t, "broker2", resp.Coordinators[0].Host)
	assert.Equal(t, codeCoordinatorNotAvailable, resp.Coordinators[1].ErrorCode, "abc's partition 4 has no leader")
	assert.Equal(t, int32(-1), resp.Coordinators[1].NodeID)
	assert.Equal(t, int32(1), resp.Coordinators[2].NodeID)

	req.CoordinatorType = 1
	resp = h.c.FindCoordinator(context.Background(), req)
	assert.Equal(t, codeCoordinatorNotAvailable, resp.Coordinators[0].ErrorCode)
	assert.Equal(t, 0, h.log.ensured, "the topic existed all along")
}

func TestFindCoordinatorCreatesTheOffsetsTopic(t *testing.T) {
	h := newHarness(t, 0)
	im := testImage(1)
	delete(im.Topics, OffsetsTopic)
	h.src.im.Store(im)
	h.log.onEnsure = func() { h.src.im.Store(testImage(1)) }
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.Version = 2
	req.CoordinatorKey = "g"
	resp := h.c.FindCoordinator(context.Background(), req)
	assert.Equal(t, 1, h.log.ensured)
	assert.Equal(t, codeNone, resp.ErrorCode)
	assert.Equal(t, int32(1), resp.NodeID)

	// Creation still under way: the client is told to retry.
	h.log.onEnsure = nil
	h.src.im.Store(im)
	resp = h.c.FindCoordinator(context.Background(), req)
	assert.Equal(t, 2, h.log.ensured)
	assert.Equal(t, codeCoordinatorNotAvailable, resp.ErrorCode)
}

func TestConfigValidation(t *testing.T) {
	cfg := DefaultConfig()
	cfg.GroupMaxSessionTimeoutMs = 10
	_, err := New(cfg, newMemLog(), &fakeSource{})
	assert.ErrorContains(t, err, "group.max.session.timeout.ms")
	_, err = New(DefaultConfig(), nil, &fakeSource{})
	assert.Error(t, err)
}

// TestDefaultsAreTheBrokerConfigDefaults compares the coordinator's
// defaults with what broker/config parses for a server.properties that sets
// none of the group keys.
func TestDefaultsAreTheBrokerConfigDefaults(t *testing.T) {
	bc, _, err := config.FromMap(map[string]string{
		"process.roles": "broker,controller", "node.id": "1", "controller.quorum.voters": "1@localhost:9093",
		"listeners": "PLAINTEXT://localhost:9092,CONTROLLER://localhost:9093", "controller.listener.names": "CONTROLLER",
	})
	require.NoError(t, err)
	want := Config{
		OffsetsTopicNumPartitions:    bc.OffsetsTopicNumPartitions,
		GroupInitialRebalanceDelayMs: bc.GroupInitialRebalanceDelayMs,
		GroupMinSessionTimeoutMs:     bc.GroupMinSessionTimeoutMs,
		GroupMaxSessionTimeoutMs:     bc.GroupMaxSessionTimeoutMs,
		GroupMaxSize:                 bc.GroupMaxSize,
		OffsetMetadataMaxBytes:       bc.OffsetMetadataMaxBytes,
		OffsetsCommitTimeoutMs:       bc.OffsetsCommitTimeoutMs,
		LoadRetryBackoffMs:           1000,
	}
	assert.Equal(t, want, DefaultConfig())

	var filled Config
	filled.fillDefaults()
	assert.NotNil(t, filled.Clock)
	assert.NotNil(t, filled.Logger)
	filled.Clock, filled.Logger = nil, nil
	want.GroupInitialRebalanceDelayMs = 0 // zero is a setting here, not "unset"
	assert.Equal(t, want, filled)
}

func TestLeaderEpochChangeReloads(t *testing.T) {
	h := newHarness(t, 0)
	require.Equal(t, map[int32]int16{0: codeNone}, h.commit("g", "", -1, "t", map[int32]int64{0: 1}))
	// Another leader wrote to the partition while we were not looking.
	p := h.c.PartitionFor("g")
	rec := offsetCommitRecord("g", topicPartition{topic: "t", partition: 0}, committedOffset{offset: 99, leaderEpoch: -1})
	require.NoError(t, h.log.Append(context.Background(), p, []Record{rec}))

	h.c.ApplyImage(nil, h.src.Image())
	offs, _ := h.fetch("g", "t")
	assert.Equal(t, int64(1), offs[0], "the same leader epoch does not reload")

	im := testImage(1)
	for i := range im.Topics[OffsetsTopic].Partitions {
		im.Topics[OffsetsTopic].Partitions[i].LeaderEpoch = 1
	}
	h.src.im.Store(im)
	h.c.ApplyImage(nil, im)
	h.waitLoaded()
	offs, _ = h.fetch("g", "t")
	assert.Equal(t, int64(99), offs[0], "a new leader epoch reloads the partition")
}

func TestAbandonedMemberIDLeavesNoGroup(t *testing.T) {
	h := newHarness(t, 0)
	h.memberID("ghost")
	h.c.mu.Lock()
	require.Contains(t, h.c.groups, "ghost")
	h.c.mu.Unlock()
	h.clock.Advance(11 * time.Second)
	h.c.mu.Lock()
	assert.NotContains(t, h.c.groups, "ghost")
	h.c.mu.Unlock()
	assert.Empty(t, h.c.ListGroups(context.Background(), kmsg.NewPtrListGroupsRequest()).Groups)
}

// TestDeletedTopicLosesItsOffsets: once the metadata shows topic t gone,
// or back under a new id, the groups' offsets of it are removed and
// tombstoned (a failover replays no offset of it), and a transaction's
// pending offset of it is forgotten; another topic's offsets stay.
func TestDeletedTopicLosesItsOffsets(t *testing.T) {
	for _, recreated := range []bool{false, true} {
		h := newHarness(t, 0)
		h.c.log = txnMemLog{h.log}
		prev := h.src.Image()
		addTopic(prev, "u", metadata.Uuid{3}, 3, 1)
		h.c.ApplyImage(nil, prev)
		require.Equal(t, map[int32]int16{0: codeNone, 2: codeNone}, h.commit("simple", "", -1, "t", map[int32]int64{0: 5, 2: 9}))
		require.Equal(t, map[int32]int16{1: codeNone}, h.commit("simple", "", -1, "u", map[int32]int64{1: 4}))
		txn := kmsg.NewPtrTxnOffsetCommitRequest()
		txn.Version, txn.TransactionalID, txn.Group, txn.ProducerID, txn.Generation = 3, "tx", "simple", 7, -1
		txn.Topics = []kmsg.TxnOffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.TxnOffsetCommitRequestTopicPartition{{Partition: 1, Offset: 3, LeaderEpoch: -1}}}}
		require.Zero(t, h.c.TxnOffsetCommit(context.Background(), txn).Topics[0].Partitions[0].ErrorCode)

		next := testImage(1)
		addTopic(next, "u", metadata.Uuid{3}, 3, 1)
		delete(next.Topics, "t")
		delete(next.TopicsByID, metadata.Uuid{2})
		if recreated {
			addTopic(next, "t", metadata.Uuid{9}, 3, 1)
		}
		h.src.im.Store(next)
		h.c.ApplyImage(prev, next)
		require.Eventually(t, func() bool {
			offs, _ := h.fetch("simple", "t")
			return offs[0] == -1 && offs[2] == -1
		}, 5*time.Second, time.Millisecond, "recreated=%v", recreated)
		p := h.c.PartitionFor("simple")
		h.c.CompleteTxn(p, 7, true)
		offs, _ := h.fetch("simple", "t")
		assert.Equal(t, map[int32]int64{0: -1, 1: -1, 2: -1}, offs, "the pending offset was forgotten with its topic")
		offs, _ = h.fetch("simple", "u")
		assert.Equal(t, int64(4), offs[1])

		h.c.Close()
		h.start()
		offs, _ = h.fetch("simple", "t")
		// (Partition 1's transactional record replays as committed in
		// this test log, which applies transactional batches at once.)
		assert.Equal(t, []int64{-1, -1}, []int64{offs[0], offs[2]}, "the tombstones replay")
		offs, _ = h.fetch("simple", "u")
		assert.Equal(t, int64(4), offs[1])
	}
}

// TestTopicDeletedWhileItsPartitionLoads: a topic deleted while the
// offsets partition holding its group reloads (a new leader epoch, the
// replay held) loses its offsets once the load is done; the replay does
// not bring them back.
func TestTopicDeletedWhileItsPartitionLoads(t *testing.T) {
	h := newHarness(t, 0)
	require.Equal(t, map[int32]int16{0: codeNone}, h.commit("simple", "", -1, "t", map[int32]int64{0: 5}))
	gate := make(chan struct{})
	h.log.mu.Lock()
	h.log.replayGate = gate
	h.log.mu.Unlock()
	reload := testImage(1)
	for i := range reload.Topics[OffsetsTopic].Partitions {
		reload.Topics[OffsetsTopic].Partitions[i].LeaderEpoch = 1
	}
	h.src.im.Store(reload)
	h.c.ApplyImage(nil, reload)
	gone := testImage(1)
	gone.Topics[OffsetsTopic] = reload.Topics[OffsetsTopic]
	delete(gone.Topics, "t")
	delete(gone.TopicsByID, metadata.Uuid{2})
	h.src.im.Store(gone)
	h.c.ApplyImage(reload, gone)
	close(gate)
	h.waitLoaded()
	require.Eventually(t, func() bool {
		offs, _ := h.fetch("simple", "t")
		return offs[0] == -1
	}, 5*time.Second, time.Millisecond, "the offset replayed during the deletion was dropped")
}

// TestPendingOffsetOfADeletedTopicIsNotApplied: a group that has only a
// transaction's pending offset of a topic deleted before the commit gets
// no offset of it.
func TestPendingOffsetOfADeletedTopicIsNotApplied(t *testing.T) {
	h := newHarness(t, 0)
	h.c.log = txnMemLog{h.log}
	txn := kmsg.NewPtrTxnOffsetCommitRequest()
	txn.Version, txn.TransactionalID, txn.Group, txn.ProducerID, txn.Generation = 3, "tx", "fresh", 7, -1
	txn.Topics = []kmsg.TxnOffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.TxnOffsetCommitRequestTopicPartition{{Partition: 1, Offset: 3, LeaderEpoch: -1}}}}
	require.Zero(t, h.c.TxnOffsetCommit(context.Background(), txn).Topics[0].Partitions[0].ErrorCode)
	gone := testImage(1)
	delete(gone.Topics, "t")
	delete(gone.TopicsByID, metadata.Uuid{2})
	h.src.im.Store(gone)
	h.c.CompleteTxn(h.c.PartitionFor("fresh"), 7, true)
	h.c.mu.Lock()
	defer h.c.mu.Unlock()
	require.NotNil(t, h.c.groups["fresh"])
	assert.Empty(t, h.c.groups["fresh"].offsets)
}
