package server

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync/atomic"
	"time"

	"github.com/faultline/faultline/internal/gostack"
)

// slot is one request's place in its connection's response order.
type slot struct {
	done chan struct{} // closed when out/closeConn are final
	out  []byte        // the encoded response frame; nil sends nothing
	// closeConn closes the connection once the responses before this one
	// are written.
	closeConn bool
}

// conn is one client connection. Its reader decodes requests and starts a
// handler goroutine per request (serial ones it handles itself); its
// writer sends the responses strictly in request order (kgo matches them
// by correlation id in order), waiting for a slow handler while later ones
// finish.
type conn struct {
	s        *Server
	nc       net.Conn
	remote   string
	ctx      context.Context
	cancel   context.CancelFunc
	pending  chan *slot
	stopping atomic.Bool
}

func newConn(s *Server, nc net.Conn) *conn {
	ctx, cancel := context.WithCancel(context.Background())
	return &conn{
		s:       s,
		nc:      nc,
		remote:  nc.RemoteAddr().String(),
		ctx:     ctx,
		cancel:  cancel,
		pending: make(chan *slot, s.opts.MaxInFlightPerConn),
	}
}

func (c *conn) run() {
	defer c.s.connDone(c)
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		c.writeLoop()
	}()
	c.readLoop()
	<-writerDone
	c.cancel()
	_ = c.nc.Close()
}

// stopReading makes the reader stop after the request it is reading, so
// that the requests already read are answered and the connection closes
// (graceful shutdown).
func (c *conn) stopReading() {
	c.stopping.Store(true)
	_ = c.nc.SetReadDeadline(time.Now())
}

func (c *conn) forceClose() {
	c.cancel()
	_ = c.nc.Close()
}

func (c *conn) closed(reason string) {
	c.s.metrics.closed.WithLabelValues(reason).Inc()
}

func (c *conn) readLoop() {
	defer close(c.pending)
	defer func() {
		if p := recover(); p != nil {
			_ = c.s.bug(p, "reading from "+c.remote)
			c.closed("bug")
		}
	}()
	var (
		br      = bufio.NewReaderSize(c.nc, 64<<10)
		sizeBuf [4]byte
		maxSize = c.s.opts.MaxRequestBytes
		idle    = c.s.opts.IdleTimeout
	)
	for {
		if idle > 0 {
			_ = c.nc.SetReadDeadline(time.Now().Add(idle))
		}
		if c.stopping.Load() {
			c.closed("shutdown")
			return
		}
		frame, size, err := readFrame(br, &sizeBuf, maxSize)
		if err != nil {
			c.readFailed(err, size, maxSize)
			return
		}
		c.s.metrics.bytesIn.Add(float64(size) + 4)
		arrived := time.Now()
		r, err := c.s.decodeRequest(frame)
		if err != nil {
			c.s.log.Warn(fmt.Sprintf("Closing connection from %s: invalid request", c.remote), "err", err)
			c.closed("invalid_request")
			return
		}
		r.remote = c.remote
		sl := &slot{done: make(chan struct{})}
		c.pending <- sl
		if r.api.serial {
			// In order, and the connection is not read further until it is
			// done (Kafka handles every request this way).
			c.handle(r, sl, arrived)
		} else {
			go func() {
				gostack.Reserve()
				c.handle(r, sl, arrived)
			}()
		}
	}
}

func (c *conn) readFailed(err error, size, maxSize int32) {
	var ne net.Error
	switch {
	case c.ctx.Err() != nil:
		// The writer closed the connection and counted why.
	case c.stopping.Load():
		c.closed("shutdown")
	case errors.Is(err, errFrameTooLarge):
		c.s.log.Warn(fmt.Sprintf("Closing connection from %s: invalid receive (size = %d larger than socket.request.max.bytes %d)", c.remote, size, maxSize))
		c.closed("frame_too_large")
	case errors.Is(err, errFrameTooSmall):
		c.s.log.Warn(fmt.Sprintf("Closing connection from %s: invalid receive (size = %d smaller than a request header)", c.remote, size))
		c.closed("invalid_request")
	case errors.As(err, &ne) && ne.Timeout():
		c.s.log.Debug(fmt.Sprintf("Closing idle connection from %s", c.remote))
		c.closed("idle")
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, net.ErrClosed):
		c.closed("client")
		c.cancel() // nobody will read the answers: end long polls now
	default:
		c.s.log.Debug(fmt.Sprintf("Closing connection from %s", c.remote), "err", err)
		c.closed("client")
		c.cancel()
	}
}

func (c *conn) handle(r *request, sl *slot, arrived time.Time) {
	defer close(sl.done)
	defer func() {
		if p := recover(); p != nil {
			_ = c.s.bug(p, "answering "+r.api.name)
			sl.out, sl.closeConn = nil, true
		}
	}()
	r.ctx = c.ctx
	resp, err := c.s.serveRequest(r)
	m := c.s.apiM[r.header.key]
	m.requests.Inc()
	if len(r.errors) > 0 {
		c.s.metrics.countErrors(r.api.name, r.errors)
	}
	if err != nil {
		c.s.log.Warn(fmt.Sprintf("Closing connection from %s after %s v%d", c.remote, r.api.name, r.header.version), "client_id", r.clientID(), "err", err)
		c.closed("handler")
		sl.closeConn = true
		m.latency.Observe(time.Since(arrived).Seconds())
		return
	}
	if resp != nil {
		sl.out = appendResponse(nil, r.header.correlationID, resp)
	}
	m.latency.Observe(time.Since(arrived).Seconds())
}

func (c *conn) writeLoop() {
	bw := bufio.NewWriterSize(c.nc, 64<<10)
	failed := false
	fail := func() {
		failed = true
		c.cancel()
		_ = c.nc.Close()
	}
	for sl := range c.pending {
		if failed {
			continue // drain so the reader never blocks
		}
		select {
		case <-sl.done:
		default:
			if bw.Flush() != nil {
				fail()
				continue
			}
			<-sl.done
		}
		if sl.closeConn {
			_ = bw.Flush()
			fail()
			continue
		}
		if sl.out != nil {
			if _, err := bw.Write(sl.out); err != nil {
				fail()
				continue
			}
			c.s.metrics.bytesOut.Add(float64(len(sl.out)))
		}
		if len(c.pending) == 0 && bw.Flush() != nil {
			fail()
		}
	}
	if !failed {
		_ = bw.Flush()
	}
}
