package raftq

import (
	"sync"
	"time"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// Fault is what the in-memory network does to messages from one node to
// another.
type Fault struct {
	Drop  bool          // lose every message
	Delay time.Duration // deliver each message this much later
}

// MemNetwork connects in-process quorums for tests. Every message is
// marshalled and unmarshalled on the way, as on a real network, so that
// nodes never share memory. Faults between any two nodes (by node id) cut
// or slow one direction.
type MemNetwork struct {
	mu     sync.Mutex
	nodes  map[uint64]*memTransport
	faults map[[2]uint64]Fault
	timers sync.WaitGroup
}

// NewMemNetwork returns a network without faults.
func NewMemNetwork() *MemNetwork {
	return &MemNetwork{nodes: map[uint64]*memTransport{}, faults: map[[2]uint64]Fault{}}
}

// Transport returns the transport of node nodeID; a node restarted on the
// network takes a new one.
func (n *MemNetwork) Transport(nodeID int32) Transport {
	return &memTransport{net: n, id: RaftID(nodeID)}
}

// SetFault sets the fault on messages from one node to another (a zero
// Fault clears it).
func (n *MemNetwork) SetFault(from, to int32, f Fault) {
	n.mu.Lock()
	defer n.mu.Unlock()
	key := [2]uint64{RaftID(from), RaftID(to)}
	if f == (Fault{}) {
		delete(n.faults, key)
		return
	}
	n.faults[key] = f
}

// Partition drops every message between nodes of different groups; nodes
// in no group keep talking to everyone.
func (n *MemNetwork) Partition(groups ...[]int32) {
	for i, g := range groups {
		for j, h := range groups {
			if i == j {
				continue
			}
			for _, a := range g {
				for _, b := range h {
					n.SetFault(a, b, Fault{Drop: true})
				}
			}
		}
	}
}

// Heal clears every fault.
func (n *MemNetwork) Heal() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.faults = map[[2]uint64]Fault{}
}

// Wait waits for delayed deliveries in flight.
func (n *MemNetwork) Wait() { n.timers.Wait() }

type memTransport struct {
	net *MemNetwork
	id  uint64
	mu  sync.Mutex
	r   Receiver
}

func (t *memTransport) Start(r Receiver) error {
	t.mu.Lock()
	t.r = r
	t.mu.Unlock()
	t.net.mu.Lock()
	t.net.nodes[t.id] = t
	t.net.mu.Unlock()
	return nil
}

func (t *memTransport) receiver() Receiver {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.r
}

func (t *memTransport) Send(msgs []*raftpb.Message) {
	self := t.receiver()
	for _, m := range msgs {
		to := m.GetTo()
		snap := m.GetType() == raftpb.MsgSnap
		b, err := proto.Marshal(m)
		t.net.mu.Lock()
		dst := t.net.nodes[to]
		f := t.net.faults[[2]uint64{t.id, to}]
		t.net.mu.Unlock()
		if err != nil || dst == nil || f.Drop {
			if snap && self != nil {
				self.ReportSnapshot(to, true)
			}
			continue
		}
		deliver := func() {
			var cp raftpb.Message
			if proto.Unmarshal(b, &cp) != nil {
				return
			}
			if r := dst.receiver(); r != nil {
				r.Receive(&cp)
			}
		}
		if f.Delay > 0 {
			t.net.timers.Add(1)
			time.AfterFunc(f.Delay, func() {
				defer t.net.timers.Done()
				deliver()
			})
		} else {
			deliver()
		}
		if snap && self != nil {
			self.ReportSnapshot(to, false)
		}
	}
}

func (t *memTransport) Close() error {
	t.net.mu.Lock()
	if t.net.nodes[t.id] == t {
		delete(t.net.nodes, t.id)
	}
	t.net.mu.Unlock()
	t.mu.Lock()
	t.r = nil
	t.mu.Unlock()
	return nil
}
