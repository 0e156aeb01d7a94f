package testutil

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
)

// ResponseDropper loses the responses to chosen Kafka requests: while it is
// armed, the first response to a request with the watched API key is
// swallowed and its connection is closed, as if the network broke after the
// broker handled the request. Clients then retry on a new connection, which
// is how idempotent producers see duplicates.
type ResponseDropper struct {
	apiKey  int16
	armed   atomic.Int32
	dropped atomic.Int32
}

// NewResponseDropper watches requests with apiKey (0 for Produce).
func NewResponseDropper(apiKey int16) *ResponseDropper {
	return &ResponseDropper{apiKey: apiKey}
}

// Arm makes the next n responses to watched requests get lost.
func (d *ResponseDropper) Arm(n int32) { d.armed.Add(n) }

// Dropped returns how many responses were lost so far.
func (d *ResponseDropper) Dropped() int32 { return d.dropped.Load() }

// DialContext dials like net.Dialer and wraps the connection. It has the
// signature of kgo.Dialer's function.
func (d *ResponseDropper) DialContext(ctx context.Context, network, host string) (net.Conn, error) {
	var nd net.Dialer
	c, err := nd.DialContext(ctx, network, host)
	if err != nil {
		return nil, err
	}
	return &dropConn{Conn: c, d: d, keys: map[int32]int16{}}, nil
}

// errDropped is what the client reads from a connection whose response was
// dropped.
var errDropped = errors.New("testutil: connection closed after dropping a response")

// dropConn tracks the API key of every request written and reads whole
// response frames, so it can decide per response whether to deliver it.
type dropConn struct {
	net.Conn
	d *ResponseDropper

	mu   sync.Mutex
	keys map[int32]int16 // correlation id -> api key of requests in flight
	wbuf []byte          // request bytes not yet parsed into frames

	rbuf []byte // response bytes ready for the client
}

func (c *dropConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	c.wbuf = append(c.wbuf, p...)
	for len(c.wbuf) >= 4 {
		size := int(binary.BigEndian.Uint32(c.wbuf))
		if len(c.wbuf) < 4+size {
			break
		}
		if size >= 8 {
			key := int16(binary.BigEndian.Uint16(c.wbuf[4:]))
			corr := int32(binary.BigEndian.Uint32(c.wbuf[8:]))
			c.keys[corr] = key
		}
		c.wbuf = c.wbuf[4+size:]
	}
	c.mu.Unlock()
	return c.Conn.Write(p)
}

func (c *dropConn) Read(p []byte) (int, error) {
	for len(c.rbuf) == 0 {
		var hdr [8]byte
		if _, err := io.ReadFull(c.Conn, hdr[:]); err != nil {
			return 0, err
		}
		size := int(binary.BigEndian.Uint32(hdr[:]))
		if size < 4 || size > 1<<30 {
			return 0, fmt.Errorf("testutil: bad response size %d", size)
		}
		frame := make([]byte, 4+size)
		copy(frame, hdr[:])
		if _, err := io.ReadFull(c.Conn, frame[8:]); err != nil {
			return 0, err
		}
		corr := int32(binary.BigEndian.Uint32(hdr[4:]))
		c.mu.Lock()
		key, ok := c.keys[corr]
		delete(c.keys, corr)
		c.mu.Unlock()
		if ok && key == c.d.apiKey && c.d.take() {
			_ = c.Conn.Close()
			return 0, errDropped
		}
		c.rbuf = frame
	}
	n := copy(p, c.rbuf)
	c.rbuf = c.rbuf[n:]
	return n, nil
}

// take consumes one armed drop, if any.
func (d *ResponseDropper) take() bool {
	for {
		n := d.armed.Load()
		if n <= 0 {
			return false
		}
		if d.armed.CompareAndSwap(n, n-1) {
			d.dropped.Add(1)
			return true
		}
	}
}
