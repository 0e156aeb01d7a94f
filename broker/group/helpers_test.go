package group

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/faultline/faultline/broker/metadata"
)

// fakeClock only moves when a test advances it; due timers then run on the
// advancing goroutine, in deadline order.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	seq    int
	timers map[int]*fakeTimer
}

type fakeTimer struct {
	c  *fakeClock
	id int
	at time.Time
	f  func()
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Unix(1_700_000_000, 0), timers: map[int]*fakeTimer{}}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) AfterFunc(d time.Duration, f func()) Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seq++
	t := &fakeTimer{c: c, id: c.seq, at: c.now.Add(d), f: f}
	c.timers[t.id] = t
	return t
}

func (t *fakeTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	_, ok := t.c.timers[t.id]
	delete(t.c.timers, t.id)
	return ok
}

// Advance moves time forward by d, running every timer that falls due,
// including timers those callbacks schedule within the window.
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	end := c.now.Add(d)
	c.mu.Unlock()
	for {
		c.mu.Lock()
		var next *fakeTimer
		for _, t := range c.timers {
			if !t.at.After(end) && (next == nil || t.at.Before(next.at) || t.at.Equal(next.at) && t.id < next.id) {
				next = t
			}
		}
		if next == nil {
			c.now = end
			c.mu.Unlock()
			return
		}
		delete(c.timers, next.id)
		c.now = next.at
		c.mu.Unlock()
		next.f()
	}
}

// fakeSource is a metadata.Source whose image tests replace.
type fakeSource struct {
	im atomic.Pointer[metadata.Image]
}

func (s *fakeSource) Image() *metadata.Image { return s.im.Load() }

// testImage has broker 1 (and 2), __consumer_offsets with 50 partitions led
// by leader, and topic "t" with 3 partitions.
func testImage(leader int32) *metadata.Image {
	im := &metadata.Image{
		ClusterID: "test",
		Brokers: map[int32]metadata.Broker{
			1: {ID: 1, Host: "broker1", Port: 9092},
			2: {ID: 2, Host: "broker2", Port: 9093},
		},
		Topics:     map[string]*metadata.Topic{},
		TopicsByID: map[metadata.Uuid]*metadata.Topic{},
	}
	addTopic(im, OffsetsTopic, metadata.Uuid{1}, 50, leader)
	addTopic(im, "t", metadata.Uuid{2}, 3, leader)
	return im
}

func addTopic(im *metadata.Image, name string, id metadata.Uuid, partitions int, leader int32) {
	t := &metadata.Topic{Name: name, ID: id}
	for p := range partitions {
		t.Partitions = append(t.Partitions, metadata.Partition{Partition: int32(p), Replicas: []int32{leader}, ISR: []int32{leader}, Leader: leader})
	}
	im.Topics[name] = t
	im.TopicsByID[id] = t
}

// memLog is an in-memory __consumer_offsets.
type memLog struct {
	mu       sync.Mutex
	parts    map[int32][]Record
	failNext error
	ensured  int
	onEnsure func()
	// replayGate, when set, blocks Replay until it is closed.
	replayGate chan struct{}
	// discard drops appended records (benchmarks).
	discard bool
	// hang makes Append wait for its context to end.
	hang bool
}

func newMemLog() *memLog { return &memLog{parts: map[int32][]Record{}} }

func (l *memLog) EnsureTopic(context.Context) error {
	l.mu.Lock()
	l.ensured++
	f := l.onEnsure
	l.mu.Unlock()
	if f != nil {
		f()
	}
	return nil
}

func (l *memLog) Append(ctx context.Context, p int32, records []Record) error {
	l.mu.Lock()
	hang := l.hang
	l.mu.Unlock()
	if hang {
		<-ctx.Done()
		return fmt.Errorf("append: %w", ctx.Err())
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.failNext; err != nil {
		l.failNext = nil
		return err
	}
	if l.discard {
		return nil
	}
	l.parts[p] = append(l.parts[p], records...)
	return nil
}

func (l *memLog) Replay(ctx context.Context, p int32, fn func(key, value []byte) error) error {
	l.mu.Lock()
	gate := l.replayGate
	l.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	l.mu.Lock()
	recs := append([]Record(nil), l.parts[p]...)
	l.mu.Unlock()
	for _, r := range recs {
		if err := fn(r.Key, r.Value); err != nil {
			return err
		}
	}
	return nil
}

func (l *memLog) records(p int32) []Record {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Record(nil), l.parts[p]...)
}

func (l *memLog) fail(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.failNext = err
}

var errBoom = errors.New("disk on fire")

type harness struct {
	t     testing.TB
	c     *Coordinator
	clock *fakeClock
	log   *memLog
	src   *fakeSource
	cfg   Config
	round int
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func newHarness(t testing.TB, initialDelayMs int64) *harness {
	t.Helper()
	h := &harness{t: t, clock: newFakeClock(), log: newMemLog(), src: &fakeSource{}}
	h.src.im.Store(testImage(1))
	h.cfg = DefaultConfig()
	h.cfg.NodeID = 1
	h.cfg.GroupInitialRebalanceDelayMs = initialDelayMs
	h.cfg.Clock = h.clock
	h.cfg.Logger = quietLogger()
	h.start()
	return h
}

// start builds a coordinator on the harness's log and waits for it to load.
func (h *harness) start() {
	h.t.Helper()
	c, err := New(h.cfg, h.log, h.src)
	require.NoError(h.t, err)
	h.t.Cleanup(c.Close)
	h.c = c
	c.ApplyImage(nil, h.src.Image())
	h.waitLoaded()
}

func (h *harness) waitLoaded() {
	h.t.Helper()
	require.Eventually(h.t, func() bool {
		h.c.mu.Lock()
		defer h.c.mu.Unlock()
		for _, st := range h.c.partitions {
			if st.loading {
				return false
			}
		}
		return len(h.c.partitions) > 0
	}, 5*time.Second, time.Millisecond)
}

func joinReq(group, memberID string) *kmsg.JoinGroupRequest {
	r := kmsg.NewPtrJoinGroupRequest()
	r.Version = 9
	r.Group = group
	r.MemberID = memberID
	r.SessionTimeoutMillis = 10000
	r.RebalanceTimeoutMillis = 60000
	r.ProtocolType = "consumer"
	p := kmsg.NewJoinGroupRequestProtocol()
	p.Name = "range"
	p.Metadata = []byte("sub-" + memberID)
	r.Protocols = []kmsg.JoinGroupRequestProtocol{p}
	return r
}

// joinAsync sends a JoinGroup that may park; read the answer from the
// channel.
func (h *harness) joinAsync(req *kmsg.JoinGroupRequest) <-chan *kmsg.JoinGroupResponse {
	ch := make(chan *kmsg.JoinGroupResponse, 1)
	go func() { ch <- h.c.JoinGroup(context.Background(), req) }()
	return ch
}

func (h *harness) syncAsync(group, memberID string, gen int32, assign map[string]string) <-chan *kmsg.SyncGroupResponse {
	req := kmsg.NewPtrSyncGroupRequest()
	req.Version = 5
	req.Group = group
	req.MemberID = memberID
	req.Generation = gen
	for id, a := range assign {
		ga := kmsg.NewSyncGroupRequestGroupAssignment()
		ga.MemberID = id
		ga.MemberAssignment = []byte(a)
		req.GroupAssignment = append(req.GroupAssignment, ga)
	}
	ch := make(chan *kmsg.SyncGroupResponse, 1)
	go func() { ch <- h.c.SyncGroup(context.Background(), req) }()
	return ch
}

func recv[T any](t testing.TB, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(5 * time.Second):
		require.FailNow(t, "no answer within 5s")
		var zero T
		return zero
	}
}

func noAnswer[T any](t testing.TB, ch <-chan T) {
	t.Helper()
	select {
	case v := <-ch:
		require.FailNow(t, "unexpected answer", "%+v", v)
	default:
	}
}

// memberID gets a member id through the MEMBER_ID_REQUIRED round trip.
func (h *harness) memberID(group string) string {
	h.t.Helper()
	r := recv(h.t, h.joinAsync(joinReq(group, "")))
	require.Equal(h.t, codeMemberIDRequired, r.ErrorCode)
	require.NotEmpty(h.t, r.MemberID)
	return r.MemberID
}

// awaitParked waits until n members of group have a parked JoinGroup.
func (h *harness) awaitParked(group string, n int) {
	h.t.Helper()
	require.Eventually(h.t, func() bool {
		h.c.mu.Lock()
		defer h.c.mu.Unlock()
		g := h.c.groups[group]
		if g == nil {
			return false
		}
		k := 0
		for _, m := range g.members {
			if m.joinWait != nil {
				k++
			}
		}
		return k == n
	}, 5*time.Second, time.Millisecond)
}

func (h *harness) awaitSyncParked(group string, n int) {
	h.t.Helper()
	require.Eventually(h.t, func() bool {
		h.c.mu.Lock()
		defer h.c.mu.Unlock()
		g := h.c.groups[group]
		if g == nil {
			return false
		}
		k := 0
		for _, m := range g.members {
			if m.syncWait != nil {
				k++
			}
		}
		return k == n
	}, 5*time.Second, time.Millisecond)
}

func (h *harness) heartbeat(group, memberID string, gen int32) int16 {
	req := kmsg.NewPtrHeartbeatRequest()
	req.Version = 4
	req.Group = group
	req.MemberID = memberID
	req.Generation = gen
	return h.c.Heartbeat(context.Background(), req).ErrorCode
}

func (h *harness) describe(group string) kmsg.DescribeGroupsResponseGroup {
	h.t.Helper()
	req := kmsg.NewPtrDescribeGroupsRequest()
	req.Version = 5
	req.Groups = []string{group}
	resp := h.c.DescribeGroups(context.Background(), req)
	require.Len(h.t, resp.Groups, 1)
	return resp.Groups[0]
}

func (h *harness) commit(group, memberID string, gen int32, topic string, offsets map[int32]int64) map[int32]int16 {
	h.t.Helper()
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version = 8
	req.Group = group
	req.MemberID = memberID
	req.Generation = gen
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = topic
	ps := make([]int32, 0, len(offsets))
	for p := range offsets {
		ps = append(ps, p)
	}
	sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
	for _, p := range ps {
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition = p
		rp.Offset = offsets[p]
		rp.LeaderEpoch = 7
		md := "md"
		rp.Metadata = &md
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	resp := h.c.OffsetCommit(context.Background(), req)
	out := map[int32]int16{}
	for _, t := range resp.Topics {
		require.Equal(h.t, topic, t.Topic)
		for _, p := range t.Partitions {
			out[p.Partition] = p.ErrorCode
		}
	}
	return out
}

// fetch returns the committed offsets of topic's partitions 0..2 (v7).
func (h *harness) fetch(group, topic string) (map[int32]int64, int16) {
	h.t.Helper()
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Version = 7
	req.Group = group
	rt := kmsg.NewOffsetFetchRequestTopic()
	rt.Topic = topic
	rt.Partitions = []int32{0, 1, 2}
	req.Topics = []kmsg.OffsetFetchRequestTopic{rt}
	resp := h.c.OffsetFetch(context.Background(), req)
	out := map[int32]int64{}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			require.Equal(h.t, codeNone, p.ErrorCode)
			out[p.Partition] = p.Offset
		}
	}
	return out, resp.ErrorCode
}
