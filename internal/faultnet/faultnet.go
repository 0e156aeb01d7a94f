package faultnet

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"time"
)

// ErrCut is what a dial across a cut link returns.
var ErrCut = errors.New("faultnet: link cut")

// Switch routes the connections between nodes. The zero value is not
// usable; build one with New.
type Switch struct {
	mu    sync.Mutex
	addrs map[string]int32
	cut   map[link]bool
	delay map[link]time.Duration
	conns map[*conn]struct{}
}

// link is an unordered pair of node ids.
type link struct{ a, b int32 }

func mkLink(a, b int32) link {
	if a > b {
		a, b = b, a
	}
	return link{a, b}
}

// New returns a switch with every link up.
func New() *Switch {
	return &Switch{addrs: map[string]int32{}, cut: map[link]bool{}, delay: map[link]time.Duration{}, conns: map[*conn]struct{}{}}
}

// Register names the node listening on each address ("host:port"), so that
// a dial to it crosses the link between the dialer and id. Dials to
// addresses nobody registered pass through untouched.
func (s *Switch) Register(id int32, addrs ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, a := range addrs {
		s.addrs[a] = id
	}
}

// Dialer returns the dial function of node from.
func (s *Switch) Dialer(from int32) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		s.mu.Lock()
		to, known := s.addrs[addr]
		l := mkLink(from, to)
		cut := known && from != to && s.cut[l]
		s.mu.Unlock()
		if cut {
			// Refuse after a short wait, as a dropped SYN would time out,
			// so that a retrying node does not spin.
			t := time.NewTimer(50 * time.Millisecond)
			defer t.Stop()
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-t.C:
			}
			return nil, cutError(addr, to, from)
		}
		var d net.Dialer
		c, err := d.DialContext(ctx, network, addr)
		if err != nil || !known || from == to {
			return c, err
		}
		wc := &conn{Conn: c, s: s, l: l}
		s.mu.Lock()
		if s.cut[l] { // cut while dialing
			s.mu.Unlock()
			_ = c.Close()
			return nil, cutError(addr, to, from)
		}
		s.conns[wc] = struct{}{}
		s.mu.Unlock()
		return wc, nil
	}
}

func cutError(addr string, to, from int32) error {
	return fmt.Errorf("dial %s (node %d) from node %d: %w", addr, to, from, ErrCut)
}

// Cut takes the link between a and b down in both directions.
func (s *Switch) Cut(a, b int32) {
	s.mu.Lock()
	l := mkLink(a, b)
	s.cut[l] = true
	var closing []*conn
	for c := range s.conns {
		if c.l == l {
			closing = append(closing, c)
		}
	}
	s.mu.Unlock()
	for _, c := range closing {
		_ = c.Close()
	}
}

// Partition cuts every link between nodes on different sides; links
// within a side stay as they are.
func (s *Switch) Partition(sides ...[]int32) {
	for i, side := range sides {
		for _, other := range sides[i+1:] {
			for _, a := range side {
				for _, b := range other {
					s.Cut(a, b)
				}
			}
		}
	}
}

// Isolate cuts id from every node in others.
func (s *Switch) Isolate(id int32, others ...int32) {
	for _, o := range others {
		if o != id {
			s.Cut(id, o)
		}
	}
}

// Delay holds every write across the link between a and b for d (zero
// removes the delay).
func (s *Switch) Delay(a, b int32, d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if d <= 0 {
		delete(s.delay, mkLink(a, b))
		return
	}
	s.delay[mkLink(a, b)] = d
}

// Heal brings every link back up and removes every delay.
func (s *Switch) Heal() {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.cut)
	clear(s.delay)
}

// Cuts lists the links that are down, each as [low, high], sorted.
func (s *Switch) Cuts() [][2]int32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out [][2]int32
	for l, down := range s.cut {
		if down {
			out = append(out, [2]int32{l.a, l.b})
		}
	}
	slices.SortFunc(out, func(x, y [2]int32) int {
		if x[0] != y[0] {
			return int(x[0] - y[0])
		}
		return int(x[1] - y[1])
	})
	return out
}

// conn is a connection across a registered link.
type conn struct {
	net.Conn
	s    *Switch
	l    link
	once sync.Once
}

func (c *conn) Write(p []byte) (int, error) {
	c.s.mu.Lock()
	d := c.s.delay[c.l]
	c.s.mu.Unlock()
	if d > 0 {
		time.Sleep(d)
	}
	return c.Conn.Write(p)
}

func (c *conn) Close() error {
	var err error
	c.once.Do(func() {
		c.s.mu.Lock()
		delete(c.s.conns, c)
		c.s.mu.Unlock()
		err = c.Conn.Close()
	})
	return err
}
