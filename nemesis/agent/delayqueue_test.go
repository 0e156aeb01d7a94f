package agent

import (
	"context"
	"encoding/binary"
	"math/rand/v2"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/mdlayher/netlink"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func testPlan(n Netem, seed uint64) delayPlan {
	return delayPlan{n: n, rng: rand.New(rand.NewPCG(seed, seed))}
}

func TestDelayStateHoldsEachPacketItsDelayInOrder(t *testing.T) {
	t0 := time.Unix(1000, 0)
	st := &delayState{plan: testPlan(Netem{Delay: 100 * time.Millisecond}, 1)}
	for i := range 5 {
		st.arrive(uint32(10+i), t0.Add(time.Duration(i)*10*time.Millisecond))
	}
	ids, next := st.release(t0.Add(99 * time.Millisecond))
	assert.Empty(t, ids, "nothing leaves before its delay")
	assert.Equal(t, t0.Add(100*time.Millisecond), next)
	ids, next = st.release(t0.Add(120 * time.Millisecond))
	assert.Equal(t, []uint32{10, 11, 12}, ids)
	assert.Equal(t, t0.Add(130*time.Millisecond), next)
	ids, next = st.release(t0.Add(time.Second))
	assert.Equal(t, []uint32{13, 14}, ids)
	assert.True(t, next.IsZero(), "none waits")
}

func TestDelayStatePacketsDueTogetherLeaveInArrivalOrder(t *testing.T) {
	t0 := time.Unix(1000, 0)
	st := &delayState{plan: testPlan(Netem{Delay: time.Millisecond}, 1)}
	for i := range 100 {
		st.arrive(uint32(i), t0)
	}
	ids, _ := st.release(t0.Add(time.Millisecond))
	require.Len(t, ids, 100)
	for i, id := range ids {
		assert.Equal(t, uint32(i), id)
	}
}

func TestDelayPlanJitterStaysWithinBounds(t *testing.T) {
	t0 := time.Unix(1000, 0)
	p := testPlan(Netem{Delay: 100 * time.Millisecond, Jitter: 25 * time.Millisecond}, 7)
	lo, hi := time.Hour, time.Duration(0)
	for range 2000 {
		d := p.due(t0).Sub(t0)
		lo, hi = min(lo, d), max(hi, d)
	}
	assert.GreaterOrEqual(t, lo, 75*time.Millisecond)
	assert.LessOrEqual(t, hi, 125*time.Millisecond)
	assert.Less(t, lo, 80*time.Millisecond, "the jitter is used down to near its bound")
	assert.Greater(t, hi, 120*time.Millisecond, "and up")
}

func TestDelayPlanReorderSendsItsShareAtOnce(t *testing.T) {
	t0 := time.Unix(1000, 0)
	p := testPlan(Netem{Delay: 50 * time.Millisecond, Reorder: 30}, 3)
	now := 0
	for range 10000 {
		if p.due(t0).Equal(t0) {
			now++
		}
	}
	assert.InDelta(t, 3000, now, 300, "about 30%% of the packets leave at once")
	// And those overtake the delayed ones.
	st := &delayState{plan: p}
	for i := range 50 {
		st.arrive(uint32(i), t0)
	}
	ids, _ := st.release(t0)
	assert.NotEmpty(t, ids)
	assert.Less(t, len(ids), 50)
}

func TestDelayStateDrainKeepsLeavingOrder(t *testing.T) {
	t0 := time.Unix(1000, 0)
	st := &delayState{plan: testPlan(Netem{Delay: time.Second}, 1)}
	st.arrive(1, t0.Add(2*time.Millisecond))
	st.arrive(2, t0)
	assert.Equal(t, []uint32{2, 1}, st.drain())
	assert.Empty(t, st.drain())
}

// packetMessage is a queued packet as the kernel sends it.
func packetMessage(t *testing.T, id uint32) netlink.Message {
	hdr := make([]byte, 7)
	binary.BigEndian.PutUint32(hdr, id)
	ae := netlink.NewAttributeEncoder()
	ae.Bytes(nfqaPacketHdr, hdr)
	ae.Bytes(10 /* NFQA_PAYLOAD, not asked for, skipped */, []byte{1, 2, 3})
	b, err := ae.Encode()
	require.NoError(t, err)
	return netlink.Message{Header: netlink.Header{Type: queueMsgType(nfqnlMsgPacket)}, Data: append(nfgenHeader(delayQueueNum), b...)}
}

func TestPacketIDReadsTheKernelsHeader(t *testing.T) {
	id, err := packetID(packetMessage(t, 0xdeadbeef))
	require.NoError(t, err)
	assert.Equal(t, uint32(0xdeadbeef), id)

	_, err = packetID(netlink.Message{Header: netlink.Header{Type: queueMsgType(nfqnlMsgConfig)}})
	assert.ErrorIs(t, err, errNotPacket)
	for _, data := range [][]byte{nil, {0, 0}, {0, 0, 0, 0}, {0, 0, 0, 0, 5, 0, 1, 0, 1}, {0, 0, 0, 0, 6, 0, 1, 0, 1, 2}} {
		_, err := packetID(netlink.Message{Header: netlink.Header{Type: queueMsgType(nfqnlMsgPacket)}, Data: data})
		assert.Error(t, err, "%v", data)
	}
}

func FuzzPacketID(f *testing.F) {
	f.Add([]byte{0, 0, 0x10, 0x6f, 11, 0, 1, 0, 0, 0, 0, 7, 8, 0, 3})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		_, _ = packetID(netlink.Message{Header: netlink.Header{Type: queueMsgType(nfqnlMsgPacket)}, Data: data})
	})
}

func TestVerdictMessageAcceptsThePacket(t *testing.T) {
	m := verdictMessage(delayQueueNum, 42)
	assert.Equal(t, queueMsgType(nfqnlMsgVerdict), m.Header.Type)
	assert.Equal(t, nfgenHeader(delayQueueNum), m.Data[:4])
	assert.Equal(t, uint16(delayQueueNum), binary.BigEndian.Uint16(m.Data[2:4]), "the queue, in network order")
	attrs, err := netlink.UnmarshalAttributes(m.Data[4:])
	require.NoError(t, err)
	require.Len(t, attrs, 1)
	assert.Equal(t, uint16(nfqaVerdictHdr), attrs[0].Type)
	assert.Equal(t, []byte{0, 0, 0, 1, 0, 0, 0, 42}, attrs[0].Data, "NF_ACCEPT, then the id, both big-endian")
}

func TestBindRequestsBindCopyMetaAndFailOpen(t *testing.T) {
	reqs, err := bindRequests(delayQueueNum)
	require.NoError(t, err)
	require.Len(t, reqs, 2)
	got := map[uint16][]byte{}
	for _, r := range reqs {
		assert.Equal(t, queueMsgType(nfqnlMsgConfig), r.Header.Type)
		assert.NotZero(t, r.Header.Flags&netlink.Acknowledge)
		attrs, err := netlink.UnmarshalAttributes(r.Data[4:])
		require.NoError(t, err)
		for _, a := range attrs {
			got[a.Type] = a.Data
		}
	}
	assert.Equal(t, []byte{nfqnlCfgCmdBind, 0, 0, 0}, got[nfqaCfgCmd])
	assert.Equal(t, byte(nfqnlCopyMeta), got[nfqaCfgParams][4], "no packet bytes are copied out")
	assert.Equal(t, uint32(nfqaCfgFFailOpen), binary.BigEndian.Uint32(got[nfqaCfgFlags]))
	assert.Equal(t, uint32(nfqaCfgFFailOpen), binary.BigEndian.Uint32(got[nfqaCfgMask]))
	assert.Equal(t, uint32(delayQueueMaxLen), binary.BigEndian.Uint32(got[nfqaCfgQueueMaxlen]))
}

func TestNfqueueInfoIsRevisionThreeWithBypass(t *testing.T) {
	b := nfqueueInfo(delayQueueNum)
	require.Len(t, b, 8, "xtables aligns the 6-byte struct to 8")
	assert.Equal(t, uint16(delayQueueNum), binary.NativeEndian.Uint16(b))
	assert.Equal(t, uint16(1), binary.NativeEndian.Uint16(b[2:]), "one queue")
	assert.Equal(t, uint16(nfqFlagBypass), binary.NativeEndian.Uint16(b[4:]))
}

// fakeQueue hands packets to serveDelayQueue and records its verdicts.
type fakeQueue struct {
	in       chan []netlink.Message
	mu       sync.Mutex
	verdicts []uint32
	at       []time.Time
}

func (q *fakeQueue) Receive() ([]netlink.Message, error) {
	m, ok := <-q.in
	if !ok {
		return nil, netErrClosed
	}
	return m, nil
}

func (q *fakeQueue) Send(m netlink.Message) (netlink.Message, error) {
	attrs, err := netlink.UnmarshalAttributes(m.Data[4:])
	if err != nil {
		return m, err
	}
	q.mu.Lock()
	q.verdicts = append(q.verdicts, binary.BigEndian.Uint32(attrs[0].Data[4:]))
	q.at = append(q.at, time.Now())
	q.mu.Unlock()
	return m, nil
}

func (q *fakeQueue) got() ([]uint32, []time.Time) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return append([]uint32(nil), q.verdicts...), append([]time.Time(nil), q.at...)
}

func TestServeDelayQueueAcceptsEachPacketNoSoonerThanItsDelay(t *testing.T) {
	q := &fakeQueue{in: make(chan []netlink.Message)}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const delay = 30 * time.Millisecond
	done := make(chan error, 1)
	go func() {
		done <- serveDelayQueue(ctx, q, delayQueueNum, testPlan(Netem{Delay: delay}, 1), time.Now)
	}()
	sent := map[uint32]time.Time{}
	for i := range 20 {
		id := uint32(i + 1)
		sent[id] = time.Now()
		q.in <- []netlink.Message{packetMessage(t, id)}
		time.Sleep(time.Millisecond)
	}
	require.Eventually(t, func() bool { ids, _ := q.got(); return len(ids) == 20 }, 5*time.Second, 5*time.Millisecond)
	ids, at := q.got()
	for i, id := range ids {
		assert.Equal(t, uint32(i+1), id, "in arrival order")
		assert.GreaterOrEqual(t, at[i].Sub(sent[id]), delay, "packet %d let go early", id)
	}
	cancel()
	require.NoError(t, <-done)
}

func TestServeDelayQueueLetsEverythingGoWhenItEnds(t *testing.T) {
	q := &fakeQueue{in: make(chan []netlink.Message)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- serveDelayQueue(ctx, q, delayQueueNum, testPlan(Netem{Delay: time.Hour}, 1), time.Now)
	}()
	q.in <- []netlink.Message{packetMessage(t, 1), packetMessage(t, 2), {Header: netlink.Header{Type: queueMsgType(nfqnlMsgConfig)}}}
	q.in <- []netlink.Message{packetMessage(t, 3)}
	time.Sleep(20 * time.Millisecond)
	ids, _ := q.got()
	assert.Empty(t, ids, "held for the hour")
	cancel()
	require.NoError(t, <-done)
	ids, _ = q.got()
	assert.Equal(t, []uint32{1, 2, 3}, ids, "every packet held is let go, none lost")
}

func TestServeDelayQueueEndsWhenTheSocketCloses(t *testing.T) {
	q := &fakeQueue{in: make(chan []netlink.Message)}
	done := make(chan error, 1)
	go func() {
		done <- serveDelayQueue(context.Background(), q, delayQueueNum, testPlan(Netem{Delay: time.Hour}, 1), time.Now)
	}()
	q.in <- []netlink.Message{packetMessage(t, 7)}
	close(q.in)
	select {
	case err := <-done:
		assert.ErrorIs(t, err, netErrClosed)
	case <-time.After(5 * time.Second):
		t.Fatal("the queue did not end")
	}
	ids, _ := q.got()
	assert.Equal(t, []uint32{7}, ids, "what it held was let go")
}

// netErrClosed is what a closed socket's Receive wraps.
var netErrClosed = net.ErrClosed

// TestIsDelayQueueKnowsItsOwnProcess: a pid file naming a process that is
// not the delay queue (this test, or a number no process has) is never
// taken for it, so healing never signals a stranger.
func TestIsDelayQueueKnowsItsOwnProcess(t *testing.T) {
	assert.False(t, isDelayQueue(os.Getpid()), "the test binary is no delay queue")
	assert.False(t, isDelayQueue(1<<22+7), "no process has this pid")
}
