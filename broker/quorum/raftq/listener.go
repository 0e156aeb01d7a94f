package raftq

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"
)

// SnapshotMagic opens a connection to the controller listener that asks for
// the quorum's newest metadata snapshot: the answer is its length (8 bytes,
// big endian, 0 when there is none) and its bytes (DecodeSnapshot parses
// them). Observers ask for it when the metadata log they fetch starts after
// the offset they need.
const SnapshotMagic = "FLSNAP01"

// headTimeout bounds the wait for the first bytes of an accepted
// connection.
const headTimeout = 10 * time.Second

// ControllerListener is a voter's controller listener: raft connections,
// snapshot requests and Kafka requests share it. It reads the first 8 bytes
// of each accepted connection once and hands the connection on, those bytes
// included: Magic to the raft transport, SnapshotMagic to the quorum's
// newest snapshot, anything else (a Kafka request is at least 12 bytes, so
// a Kafka client never leaves it waiting) to Accept, for the Kafka server.
type ControllerListener struct {
	net.Listener
	tr     *TCPTransport
	q      *Quorum
	logger *slog.Logger

	conns  chan net.Conn
	closed chan struct{}
	once   sync.Once
	failed chan struct{}
	err    error
}

// NewControllerListener serves ln's connections: raft ones on tr, snapshot
// requests from q.
func NewControllerListener(ln net.Listener, tr *TCPTransport, q *Quorum, logger *slog.Logger) *ControllerListener {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	l := &ControllerListener{Listener: ln, tr: tr, q: q, logger: logger,
		conns: make(chan net.Conn), closed: make(chan struct{}), failed: make(chan struct{})}
	go l.acceptLoop()
	return l
}

func (l *ControllerListener) acceptLoop() {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				time.Sleep(5 * time.Millisecond)
				continue
			}
			l.err = err
			close(l.failed)
			return
		}
		go l.route(c)
	}
}

func (l *ControllerListener) route(c net.Conn) {
	conn, head, err := readHead(c, headTimeout)
	if err != nil {
		l.logger.Debug("Dropped a controller listener connection", "remote", c.RemoteAddr(), "err", err)
		_ = c.Close()
		return
	}
	switch head {
	case Magic:
		_ = l.tr.ServeConn(conn)
	case SnapshotMagic:
		if err := serveSnapshot(conn, l.q); err != nil {
			l.logger.Debug("Failed to send a metadata snapshot", "remote", c.RemoteAddr(), "err", err)
		}
	default:
		select {
		case l.conns <- conn:
		case <-l.closed:
			_ = conn.Close()
		}
	}
}

// Accept returns the next Kafka connection.
func (l *ControllerListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	case <-l.failed:
		return nil, l.err
	}
}

// Close stops accepting; raft connections close with the transport.
func (l *ControllerListener) Close() error {
	var err error
	l.once.Do(func() {
		close(l.closed)
		err = l.Listener.Close()
	})
	return err
}

// readHead waits up to timeout for the first 8 bytes of c (the length of
// Magic and SnapshotMagic) and returns a connection that yields every byte
// again, those 8 included.
func readHead(c net.Conn, timeout time.Duration) (net.Conn, string, error) {
	br := bufio.NewReader(c)
	if err := c.SetReadDeadline(time.Now().Add(timeout)); err != nil {
		return c, "", fmt.Errorf("read the first bytes: %w", err)
	}
	head, err := br.Peek(len(Magic))
	if rerr := c.SetReadDeadline(time.Time{}); rerr != nil && err == nil {
		err = rerr
	}
	if err != nil {
		return c, "", fmt.Errorf("read the first %d bytes: %w", len(Magic), err)
	}
	return &peekedConn{Conn: c, r: br}, string(head), nil
}

// peekedConn reads through the buffer that holds the peeked bytes.
type peekedConn struct {
	net.Conn
	r *bufio.Reader
}

func (p *peekedConn) Read(b []byte) (int, error) { return p.r.Read(b) }

// serveSnapshot answers a snapshot request with q's newest snapshot.
func serveSnapshot(c net.Conn, q *Quorum) error {
	defer c.Close()
	_, data := q.LatestSnapshot()
	if err := c.SetWriteDeadline(time.Now().Add(time.Minute)); err != nil {
		return err
	}
	var size [8]byte
	binary.BigEndian.PutUint64(size[:], uint64(len(data)))
	if _, err := c.Write(size[:]); err != nil {
		return err
	}
	_, err := c.Write(data)
	return err
}

// DialFunc opens a connection, as net.Dialer.DialContext does.
type DialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// fetchSnapshot asks the controller listener at addr for the newest
// metadata snapshot; nil when the controller has none.
func fetchSnapshot(ctx context.Context, dial DialFunc, addr string) ([]byte, error) {
	if dial == nil {
		d := net.Dialer{Timeout: 5 * time.Second}
		dial = d.DialContext
	}
	c, err := dial(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(dl)
	}
	if _, err := io.WriteString(c, SnapshotMagic); err != nil {
		return nil, err
	}
	var size [8]byte
	if _, err := io.ReadFull(c, size[:]); err != nil {
		return nil, fmt.Errorf("snapshot from %s: %w", addr, err)
	}
	n := binary.BigEndian.Uint64(size[:])
	if n > snapshotBytesMax {
		return nil, fmt.Errorf("snapshot from %s: %d bytes, more than %d", addr, n, snapshotBytesMax)
	}
	if n == 0 {
		return nil, nil
	}
	data := make([]byte, n)
	if _, err := io.ReadFull(c, data); err != nil {
		return nil, fmt.Errorf("snapshot from %s: %w", addr, err)
	}
	return data, nil
}
