package agent

import (
	"container/heap"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"sync"
	"time"

	"github.com/mdlayher/netlink"
)

// The delay queue is the fallback of delay, jitter and reordering on a
// kernel without netem: a netfilter rule hands every IPv4 packet arriving
// at the node on its interface to a netfilter queue (the xt NFQUEUE target
// through nft_compat), and a process of the agent's holds each one until
// its time has come, then lets it in (an accept verdict). Arrivals, not
// departures, as the loss fallback drops arrivals: a packet held on its
// way out stays charged to its sending socket, and TCP's small-queue limit
// then throttles the sender to a trickle, where netem's qdisc lets go of
// the socket. The queue fails open (a full queue lets packets pass) and
// the rule bypasses the queue when no process listens, so a dead agent
// never cuts the node off.
//
// This file is the decision core and the wire format; delayqueue_run.go
// is the process and the rule.

// delayQueueNum is the netfilter queue the agent's rule and process share.
const delayQueueNum = 4207

// delayPlan decides when a packet that arrived at a given time may leave:
// its delay, less or more by up to the jitter (drawn uniformly), or at once
// for the Reorder share of packets, which so overtake the delayed ones.
type delayPlan struct {
	n   Netem
	rng *rand.Rand
}

// due is the time a packet arriving at arrival leaves.
func (p delayPlan) due(arrival time.Time) time.Time {
	if p.n.Reorder > 0 && p.rng.Float64()*100 < p.n.Reorder {
		return arrival
	}
	d := p.n.Delay
	if p.n.Jitter > 0 {
		d += time.Duration(p.rng.Int64N(int64(2*p.n.Jitter)+1)) - p.n.Jitter
	}
	return arrival.Add(max(d, 0))
}

// heldPacket is a packet the queue holds: its id in the kernel's queue,
// when it may leave, and its arrival order (which breaks ties, so that
// packets due at once leave in the order they came).
type heldPacket struct {
	id  uint32
	due time.Time
	seq uint64
}

// held is the packets waiting, earliest due first.
type held []heldPacket

func (h held) Len() int { return len(h) }
func (h held) Less(i, j int) bool {
	if !h[i].due.Equal(h[j].due) {
		return h[i].due.Before(h[j].due)
	}
	return h[i].seq < h[j].seq
}
func (h held) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *held) Push(x any)   { *h = append(*h, x.(heldPacket)) }
func (h *held) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// delayState is the queue's pure state: packets arrive, and at any time the
// ones due leave.
type delayState struct {
	plan delayPlan
	h    held
	seq  uint64
}

// arrive holds packet id, arrived at now.
func (s *delayState) arrive(id uint32, now time.Time) {
	s.seq++
	heap.Push(&s.h, heldPacket{id: id, due: s.plan.due(now), seq: s.seq})
}

// release returns the ids due at now, in the order they leave, and the time
// the next one is due (zero when none waits).
func (s *delayState) release(now time.Time) (ids []uint32, next time.Time) {
	for s.h.Len() > 0 && !s.h[0].due.After(now) {
		ids = append(ids, heap.Pop(&s.h).(heldPacket).id)
	}
	if s.h.Len() > 0 {
		next = s.h[0].due
	}
	return ids, next
}

// drain returns every id held, in the order they would have left.
func (s *delayState) drain() []uint32 {
	var ids []uint32
	for s.h.Len() > 0 {
		ids = append(ids, heap.Pop(&s.h).(heldPacket).id)
	}
	return ids
}

// The nfnetlink queue interface (linux/netfilter/nfnetlink_queue.h): a
// stable ABI. Values inside attributes are in network byte order.
const (
	netlinkNetfilter = 12 // NETLINK_NETFILTER

	nfnlSubsysQueue = 3
	nfqnlMsgPacket  = 0
	nfqnlMsgVerdict = 1
	nfqnlMsgConfig  = 2

	nfqaPacketHdr  = 1
	nfqaVerdictHdr = 2

	nfqaCfgCmd         = 1
	nfqaCfgParams      = 2
	nfqaCfgQueueMaxlen = 3
	nfqaCfgMask        = 4
	nfqaCfgFlags       = 5

	nfqaCfgFFailOpen = 1
	nfqnlCfgCmdBind  = 1
	nfqnlCopyMeta    = 1

	nfAccept = 1

	// delayQueueMaxLen is how many packets the kernel holds for the
	// queue; past it the queue fails open.
	delayQueueMaxLen = 20000

	// nfqFlagBypass is xt_NFQUEUE's flag that lets packets pass while no
	// process listens on the queue.
	nfqFlagBypass = 0x01
)

// nfgenHeader is struct nfgenmsg: family, version 0, the queue number.
func nfgenHeader(queue uint16) []byte {
	b := []byte{0 /* AF_UNSPEC */, 0, 0, 0}
	binary.BigEndian.PutUint16(b[2:], queue)
	return b
}

// queueMsgType is the netlink message type of a queue message.
func queueMsgType(msg int) netlink.HeaderType {
	return netlink.HeaderType(nfnlSubsysQueue<<8 | msg)
}

// bindRequests are the messages that bind the process to queue: the bind
// command, metadata only (the packet's bytes are never copied out), the
// queue's length, and fail-open.
func bindRequests(queue uint16) ([]netlink.Message, error) {
	cmd := netlink.NewAttributeEncoder()
	cmd.ByteOrder = binary.BigEndian
	cmd.Bytes(nfqaCfgCmd, []byte{nfqnlCfgCmdBind, 0, 0, 0})
	bind, err := cmd.Encode()
	if err != nil {
		return nil, err
	}
	params := netlink.NewAttributeEncoder()
	params.ByteOrder = binary.BigEndian
	params.Bytes(nfqaCfgParams, []byte{0, 0, 0, 0, nfqnlCopyMeta})
	params.Uint32(nfqaCfgQueueMaxlen, delayQueueMaxLen)
	params.Uint32(nfqaCfgMask, nfqaCfgFFailOpen)
	params.Uint32(nfqaCfgFlags, nfqaCfgFFailOpen)
	conf, err := params.Encode()
	if err != nil {
		return nil, err
	}
	hdr := netlink.Header{Type: queueMsgType(nfqnlMsgConfig), Flags: netlink.Request | netlink.Acknowledge}
	return []netlink.Message{
		{Header: hdr, Data: append(nfgenHeader(queue), bind...)},
		{Header: hdr, Data: append(nfgenHeader(queue), conf...)},
	}, nil
}

// verdictMessage accepts packet id of queue.
func verdictMessage(queue uint16, id uint32) netlink.Message {
	v := make([]byte, 8)
	binary.BigEndian.PutUint32(v, nfAccept)
	binary.BigEndian.PutUint32(v[4:], id)
	ae := netlink.NewAttributeEncoder()
	ae.Bytes(nfqaVerdictHdr, v)
	attrs, _ := ae.Encode() // one fixed-size attribute: cannot fail
	return netlink.Message{
		Header: netlink.Header{Type: queueMsgType(nfqnlMsgVerdict), Flags: netlink.Request},
		Data:   append(nfgenHeader(queue), attrs...),
	}
}

// errNotPacket means a message is not a queued packet (the caller skips it).
var errNotPacket = errors.New("not a queued packet")

// packetID reads the kernel's id of a queued packet from its message.
func packetID(m netlink.Message) (uint32, error) {
	if m.Header.Type != queueMsgType(nfqnlMsgPacket) {
		return 0, errNotPacket
	}
	if len(m.Data) < 4 {
		return 0, fmt.Errorf("queued packet: %d bytes, shorter than its nfgenmsg", len(m.Data))
	}
	ad, err := netlink.NewAttributeDecoder(m.Data[4:])
	if err != nil {
		return 0, fmt.Errorf("queued packet: %w", err)
	}
	for ad.Next() {
		if ad.Type() != nfqaPacketHdr {
			continue
		}
		b := ad.Bytes()
		if len(b) < 4 {
			return 0, fmt.Errorf("queued packet: header of %d bytes", len(b))
		}
		return binary.BigEndian.Uint32(b), nil
	}
	if err := ad.Err(); err != nil {
		return 0, fmt.Errorf("queued packet: %w", err)
	}
	return 0, errors.New("queued packet: no packet header")
}

// nfqueueInfo is the xt_NFQUEUE target's revision 3 info (struct
// xt_NFQ_info_v3, host byte order, padded to 8 bytes as xtables aligns
// it): the queue, one queue in all, bypass when nobody listens.
func nfqueueInfo(queue uint16) []byte {
	b := make([]byte, 8)
	binary.NativeEndian.PutUint16(b[0:], queue)
	binary.NativeEndian.PutUint16(b[2:], 1)
	binary.NativeEndian.PutUint16(b[4:], nfqFlagBypass)
	return b
}

// queueConn is what the delay queue needs of a netlink connection.
type queueConn interface {
	Receive() ([]netlink.Message, error)
	Send(netlink.Message) (netlink.Message, error)
}

// maxReceiveErrors is how many receive errors in a row end the queue.
const maxReceiveErrors = 100

// serveDelayQueue holds the packets arriving on conn as plan says until ctx
// ends, then lets every packet still held go at once. The receiver and the
// releaser share the state under mu; now is the clock.
func serveDelayQueue(ctx context.Context, conn queueConn, queue uint16, plan delayPlan, now func() time.Time) error {
	var mu sync.Mutex
	st := &delayState{plan: plan}
	wake := make(chan struct{}, 1)
	// accept lets ids go; a verdict that fails does not keep the others
	// held (the kernel drops what it holds when the queue closes).
	accept := func(ids []uint32) error {
		var errs []error
		for _, id := range ids {
			if _, err := conn.Send(verdictMessage(queue, id)); err != nil {
				errs = append(errs, fmt.Errorf("delay queue: verdict on packet %d: %w", id, err))
			}
		}
		return errors.Join(errs...)
	}
	// acceptHeld lets every packet still held go, as the queue ends.
	acceptHeld := func() error {
		mu.Lock()
		ids := st.drain()
		mu.Unlock()
		return accept(ids)
	}
	recvErr := make(chan error, 1)
	go func() {
		failed := 0
		for {
			msgs, err := conn.Receive()
			if err != nil {
				// The kernel's answer to a failed verdict (a packet it
				// no longer holds) arrives here too and is no reason to
				// stop; a closed or broken socket is.
				if failed++; ctx.Err() != nil || errors.Is(err, os.ErrClosed) || errors.Is(err, net.ErrClosed) || failed > maxReceiveErrors {
					recvErr <- err
					return
				}
				continue
			}
			failed = 0
			mu.Lock()
			t := now()
			for _, m := range msgs {
				if id, err := packetID(m); err == nil {
					st.arrive(id, t)
				}
			}
			mu.Unlock()
			select {
			case wake <- struct{}{}:
			default:
			}
		}
	}()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		mu.Lock()
		ids, next := st.release(now())
		mu.Unlock()
		if err := accept(ids); err != nil {
			return err
		}
		wait := time.Hour
		if !next.IsZero() {
			wait = max(next.Sub(now()), 0)
		}
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			return acceptHeld()
		case err := <-recvErr:
			return errors.Join(fmt.Errorf("delay queue: receive: %w", err), acceptHeld())
		case <-wake:
		case <-timer.C:
		}
	}
}
