package workloads

import (
	"context"
	"encoding/binary"
	"net"
	"sync"
	"time"
)

// Pausable is a client that can be paused as its process can be (a long
// garbage-collection pause, a frozen VM): what it sends while paused is
// held in flight, not lost, and reaches the brokers when it resumes. A
// client may pause at its worst moment rather than at once: the queue
// workload's pauses just as its next Produce request leaves it (a
// transaction's partition added, its records not yet sent). The
// harness pauses a crashed client instead of closing it (crash-clients
// with the zombie target) and lets a successor take over its identity
// meanwhile, so that the paused client comes back a zombie: a broker must
// fence whatever it sends from then on (its producer epoch is stale).
type Pausable interface {
	Pause()
	Resume()
}

// Gate holds the bytes written to the connections it dialed while it is
// paused and delivers them, in order, when it resumes, as a network that
// delays a paused process's last requests would. A connection closed
// while paused is closed once its held bytes are delivered (a socket's
// queued data goes out before its FIN). The zero Gate is open; use Dial
// as a client's dialer (kgo.Dialer).
type Gate struct {
	mu     sync.Mutex
	paused bool
	// armed pauses the gate at the next Produce request a connection
	// starts to write.
	armed bool
	conns map[*gatedConn]struct{}
}

// Pause starts holding every write.
func (g *Gate) Pause() {
	g.mu.Lock()
	g.paused = true
	g.mu.Unlock()
}

// PauseAtProduce pauses the gate when a connection starts writing a
// Produce request (Kafka API key 0), that request included: what was
// sent before it goes through.
func (g *Gate) PauseAtProduce() {
	g.mu.Lock()
	g.armed = true
	g.mu.Unlock()
}

// Resume delivers what was held and lets writes through again; it does
// not wait for the delivery.
func (g *Gate) Resume() {
	g.mu.Lock()
	g.paused, g.armed = false, false
	conns := make([]*gatedConn, 0, len(g.conns))
	for c := range g.conns {
		conns = append(conns, c)
	}
	g.mu.Unlock()
	for _, c := range conns {
		go c.release()
	}
}

func (g *Gate) isPaused() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.paused
}

// holds reports whether a write is held: the gate is paused, or armed and
// the write starts a Produce request (which pauses it).
func (g *Gate) holds(startsProduce bool) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.armed && startsProduce {
		g.paused, g.armed = true, false
	}
	return g.paused
}

func (g *Gate) forget(c *gatedConn) {
	g.mu.Lock()
	delete(g.conns, c)
	g.mu.Unlock()
}

// Dial dials a TCP connection whose writes pass through g.
func (g *Gate) Dial(ctx context.Context, network, host string) (net.Conn, error) {
	d := net.Dialer{Timeout: dialTimeout}
	nc, err := d.DialContext(ctx, network, host)
	if err != nil {
		return nil, err
	}
	c := &gatedConn{Conn: nc, g: g}
	g.mu.Lock()
	if g.conns == nil {
		g.conns = map[*gatedConn]struct{}{}
	}
	g.conns[c] = struct{}{}
	g.mu.Unlock()
	return c, nil
}

// gatedConn is one connection of a Gate. mu orders its writes: held bytes
// go out before any later write.
type gatedConn struct {
	net.Conn
	g       *Gate
	mu      sync.Mutex
	held    []byte
	closing bool // closed while holding bytes: close once they are out
	closed  bool
	// deadline is the write deadline the client set last (SetDeadline,
	// SetWriteDeadline), restored after held bytes are delivered under
	// their own; dmu makes setting a deadline and noting it one step, so
	// that a restore never puts back an older one over a newer.
	dmu      sync.Mutex
	deadline time.Time
	// frameLeft is how much of the request frame being written is still
	// to come after its size and API key, and header what was written of
	// those six bytes, so that a write can be told to start a Produce
	// request.
	frameLeft int64
	header    []byte
}

// startsProduce reports whether b, the next bytes written, starts a
// Produce request (completes the first six bytes of one: its size and API
// key), and moves past b in the frames written.
func (c *gatedConn) startsProduce(b []byte) bool {
	produce := false
	for len(b) > 0 {
		if c.frameLeft > 0 {
			n := min(int64(len(b)), c.frameLeft)
			c.frameLeft -= n
			b = b[n:]
			continue
		}
		take := min(6-len(c.header), len(b))
		c.header = append(c.header, b[:take]...)
		b = b[take:]
		if len(c.header) < 6 {
			break
		}
		if binary.BigEndian.Uint16(c.header[4:6]) == 0 {
			produce = true
		}
		c.frameLeft = max(0, int64(binary.BigEndian.Uint32(c.header[:4]))-2)
		c.header = c.header[:0]
	}
	return produce
}

// dialTimeout is franz-go's default dialer's timeout, which a client
// given Dial as its dialer would otherwise lose.
const dialTimeout = 10 * time.Second

// flushTimeout bounds the delivery of held bytes.
const flushTimeout = 10 * time.Second

// maxHeld bounds what one connection holds (a paused client sends a few
// requests at most); past it writes fail, as a full socket buffer's would
// time out.
const maxHeld = 64 << 20

func (c *gatedConn) Write(b []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || c.closing {
		return 0, net.ErrClosed
	}
	if c.g.holds(c.startsProduce(b)) {
		if len(c.held)+len(b) > maxHeld {
			return 0, errHeldTooMuch
		}
		c.held = append(c.held, b...)
		return len(b), nil
	}
	if err := c.flushLocked(); err != nil {
		return 0, err
	}
	return c.Conn.Write(b)
}

// flushLocked writes the held bytes. They were accepted long ago, so the
// write deadline the client set since does not apply to them: they get
// flushTimeout of their own, and the client's deadline is put back.
func (c *gatedConn) flushLocked() error {
	if len(c.held) == 0 {
		return nil
	}
	_ = c.Conn.SetWriteDeadline(time.Now().Add(flushTimeout))
	_, err := c.Conn.Write(c.held)
	c.held = nil
	c.dmu.Lock()
	_ = c.Conn.SetWriteDeadline(c.deadline)
	c.dmu.Unlock()
	return err
}

func (c *gatedConn) SetDeadline(t time.Time) error {
	c.dmu.Lock()
	defer c.dmu.Unlock()
	c.deadline = t
	return c.Conn.SetDeadline(t)
}

func (c *gatedConn) SetWriteDeadline(t time.Time) error {
	c.dmu.Lock()
	defer c.dmu.Unlock()
	c.deadline = t
	return c.Conn.SetWriteDeadline(t)
}

// release delivers the held bytes after a Resume, and completes a close
// that waited for them.
func (c *gatedConn) release() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	_ = c.flushLocked()
	if c.closing {
		c.closeLocked()
	}
}

func (c *gatedConn) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || c.closing {
		return nil
	}
	if len(c.held) > 0 && c.g.isPaused() {
		// Reads end now (the client is done with the connection); the
		// held requests still go out when the gate resumes.
		c.closing = true
		if tc, ok := c.Conn.(interface{ CloseRead() error }); ok {
			_ = tc.CloseRead()
		}
		return nil
	}
	_ = c.flushLocked()
	c.closeLocked()
	return nil
}

func (c *gatedConn) closeLocked() {
	c.closed = true
	c.g.forget(c)
	_ = c.Conn.Close()
}

type gateError string

func (e gateError) Error() string { return string(e) }

const errHeldTooMuch = gateError("paused connection holds more than 64 MiB")
