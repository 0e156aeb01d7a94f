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

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// Magic opens every raft connection, so that a listener shared with other
// protocols can recognize one by its first 8 bytes and hand it to
// (*TCPTransport).ServeConn. It is followed by the sender's node id (int32,
// big endian) and then by frames: a uint32 big-endian length and that many
// bytes of a protobuf raftpb.Message.
const Magic = "FLRAFT01"

// handshakeBytes is the size of Magic plus the sender id.
const handshakeBytes = len(Magic) + 4

// ErrBadFrame: bytes on a raft connection that are not a frame (or not a
// raft connection at all).
var ErrBadFrame = errors.New("bad raft frame")

// TCPConfig configures a TCPTransport.
type TCPConfig struct {
	NodeID int32
	// Voters maps every voter's node id to its raft address (host:port).
	Voters map[int32]string
	// ListenAddr is where to accept raft connections ("127.0.0.1:0" picks a
	// port); empty: do not listen, connections arrive through ServeConn.
	ListenAddr string
	Logger     *slog.Logger
	// QueueMessagesMax bounds each peer's send queue (default 1024); a
	// message that does not fit is dropped.
	QueueMessagesMax int
	// FrameBytesMax bounds one frame in both directions (default 64 MiB).
	FrameBytesMax int
	// DialTimeout (default 1 s) and WriteTimeout (default 5 s) bound one
	// dial and one write; BackoffMin (default 50 ms) and BackoffMax
	// (default 2 s) bound the wait between failed dials.
	DialTimeout  time.Duration
	WriteTimeout time.Duration
	BackoffMin   time.Duration
	BackoffMax   time.Duration
	// Dial opens connections to peers; nil uses net.Dialer. Tests put a
	// fault switch here to cut or slow the links between nodes.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
}

// TCPTransport sends raft messages over one persistent outgoing TCP
// connection per peer and receives them on connections peers open to it.
// Send never blocks: each peer has a bounded queue drained by its own
// goroutine, which dials (and redials with exponential backoff) the peer.
type TCPTransport struct {
	cfg    TCPConfig
	self   uint64
	logger *slog.Logger
	ln     net.Listener
	peers  map[uint64]*tcpPeer

	mu          sync.Mutex
	r           Receiver
	inbound     map[net.Conn]struct{}
	inboundFrom map[int32]net.Conn
	closed      bool

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

type tcpFrame struct {
	b    []byte
	snap bool
}

type tcpPeer struct {
	id    uint64
	addr  string
	queue chan tcpFrame
}

// NewTCPTransport validates cfg and, when ListenAddr is set, listens on it.
// Nothing is sent or received before Start.
func NewTCPTransport(cfg TCPConfig) (*TCPTransport, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.QueueMessagesMax <= 0 {
		cfg.QueueMessagesMax = 1024
	}
	if cfg.FrameBytesMax <= 0 {
		cfg.FrameBytesMax = 64 << 20
	}
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = time.Second
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = 5 * time.Second
	}
	if cfg.BackoffMin <= 0 {
		cfg.BackoffMin = 50 * time.Millisecond
	}
	if cfg.BackoffMax < cfg.BackoffMin {
		cfg.BackoffMax = max(2*time.Second, cfg.BackoffMin)
	}
	if _, ok := cfg.Voters[cfg.NodeID]; !ok {
		return nil, fmt.Errorf("raft transport: node %d is not among the voters %v", cfg.NodeID, cfg.Voters)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t := &TCPTransport{
		cfg:         cfg,
		self:        RaftID(cfg.NodeID),
		logger:      cfg.Logger,
		peers:       map[uint64]*tcpPeer{},
		inbound:     map[net.Conn]struct{}{},
		inboundFrom: map[int32]net.Conn{},
		ctx:         ctx,
		cancel:      cancel,
	}
	for id, addr := range cfg.Voters {
		if id == cfg.NodeID {
			continue
		}
		if _, _, err := net.SplitHostPort(addr); err != nil {
			cancel()
			return nil, fmt.Errorf("raft transport: voter %d address %q: %w", id, addr, err)
		}
		t.peers[RaftID(id)] = &tcpPeer{id: RaftID(id), addr: addr, queue: make(chan tcpFrame, cfg.QueueMessagesMax)}
	}
	if cfg.ListenAddr != "" {
		ln, err := net.Listen("tcp", cfg.ListenAddr)
		if err != nil {
			cancel()
			return nil, fmt.Errorf("raft transport: listen on %s: %w", cfg.ListenAddr, err)
		}
		t.ln = ln
	}
	return t, nil
}

// Addr is the listening address, nil when not listening.
func (t *TCPTransport) Addr() net.Addr {
	if t.ln == nil {
		return nil
	}
	return t.ln.Addr()
}

// Start implements Transport: it starts accepting and the per-peer senders.
func (t *TCPTransport) Start(r Receiver) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return errors.New("raft transport closed")
	}
	if t.r != nil {
		return errors.New("raft transport already started")
	}
	t.r = r
	if t.ln != nil {
		t.wg.Add(1)
		go t.accept()
	}
	for _, p := range t.peers {
		t.wg.Add(1)
		go t.sendLoop(p)
	}
	return nil
}

func (t *TCPTransport) accept() {
	defer t.wg.Done()
	for {
		c, err := t.ln.Accept()
		if err != nil {
			if t.ctx.Err() == nil {
				t.logger.Warn("Raft transport stopped accepting connections", "err", err)
			}
			return
		}
		t.wg.Add(1)
		go func() {
			defer t.wg.Done()
			_ = t.ServeConn(c)
		}()
	}
}

// ServeConn reads raft messages from an accepted connection until it fails
// or the transport closes, and closes it. The connection must start with
// Magic (a listener that peeked at the first bytes must hand over a
// connection that still yields them). It blocks; it returns the reason the
// connection ended.
func (t *TCPTransport) ServeConn(c net.Conn) error {
	t.mu.Lock()
	if t.closed || t.r == nil {
		t.mu.Unlock()
		_ = c.Close()
		return errors.New("raft transport not running")
	}
	t.inbound[c] = struct{}{}
	r := t.r
	t.mu.Unlock()
	defer func() {
		t.mu.Lock()
		delete(t.inbound, c)
		t.mu.Unlock()
		_ = c.Close()
	}()
	br := bufio.NewReaderSize(c, 64<<10)
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	from, err := readHandshake(br)
	if err != nil {
		t.logger.Warn("Rejected a raft connection", "remote", c.RemoteAddr().String(), "err", err)
		return err
	}
	if _, ok := t.cfg.Voters[from]; !ok || from == t.cfg.NodeID {
		t.logger.Warn(fmt.Sprintf("Rejected a raft connection from node %d, not a peer voter", from), "remote", c.RemoteAddr().String())
		return fmt.Errorf("%w: node %d is not a peer voter", ErrBadFrame, from)
	}
	_ = c.SetReadDeadline(time.Time{})
	// A peer keeps one connection to us: a new one means the old one is
	// dead (a peer that restarted, or a half-open connection left by a
	// partition), so it is closed rather than left to idle forever.
	t.mu.Lock()
	if old := t.inboundFrom[from]; old != nil {
		_ = old.Close()
	}
	t.inboundFrom[from] = c
	t.mu.Unlock()
	defer func() {
		t.mu.Lock()
		if t.inboundFrom[from] == c {
			delete(t.inboundFrom, from)
		}
		t.mu.Unlock()
	}()
	var hdr [4]byte
	for {
		m, err := readFrame(br, t.cfg.FrameBytesMax, &hdr)
		if err != nil {
			if t.ctx.Err() == nil && !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				t.logger.Info(fmt.Sprintf("Raft connection from node %d ended", from), "err", err)
			}
			return err
		}
		if m.GetTo() != t.self || m.GetFrom() != RaftID(from) {
			continue
		}
		r.Receive(m)
	}
}

// Send implements Transport. It marshals on the caller's goroutine (the raft
// goroutine) and queues the frames.
func (t *TCPTransport) Send(msgs []*raftpb.Message) {
	t.mu.Lock()
	r := t.r
	t.mu.Unlock()
	for _, m := range msgs {
		p := t.peers[m.GetTo()]
		if p == nil {
			continue
		}
		snap := m.GetType() == raftpb.MsgSnap
		b, err := appendFrame(nil, m, t.cfg.FrameBytesMax)
		if err != nil {
			t.logger.Warn(fmt.Sprintf("Dropped a raft message to node %d", NodeID(p.id)), "err", err)
			if snap && r != nil {
				r.ReportSnapshot(p.id, true)
			}
			continue
		}
		select {
		case p.queue <- tcpFrame{b: b, snap: snap}:
		default:
			if r != nil {
				r.ReportUnreachable(p.id)
				if snap {
					r.ReportSnapshot(p.id, true)
				}
			}
		}
	}
}

// sendLoop keeps a connection to p and writes its queue to it.
func (t *TCPTransport) sendLoop(p *tcpPeer) {
	defer t.wg.Done()
	backoff := t.cfg.BackoffMin
	for t.ctx.Err() == nil {
		c, err := t.dial(p)
		if err != nil {
			t.dropQueued(p)
			select {
			case <-t.ctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, t.cfg.BackoffMax)
			continue
		}
		backoff = t.cfg.BackoffMin
		err = t.writeLoop(p, c)
		_ = c.Close()
		if t.ctx.Err() == nil {
			t.logger.Info(fmt.Sprintf("Raft connection to node %d at %s failed", NodeID(p.id), p.addr), "err", err)
			t.dropQueued(p)
			t.r.ReportUnreachable(p.id)
		}
	}
}

func (t *TCPTransport) dial(p *tcpPeer) (net.Conn, error) {
	var c net.Conn
	var err error
	if t.cfg.Dial != nil {
		ctx, cancel := context.WithTimeout(t.ctx, t.cfg.DialTimeout)
		c, err = t.cfg.Dial(ctx, "tcp", p.addr)
		cancel()
	} else {
		d := net.Dialer{Timeout: t.cfg.DialTimeout}
		c, err = d.DialContext(t.ctx, "tcp", p.addr)
	}
	if err != nil {
		return nil, err
	}
	hs := make([]byte, 0, handshakeBytes)
	hs = append(hs, Magic...)
	hs = binary.BigEndian.AppendUint32(hs, uint32(t.cfg.NodeID))
	_ = c.SetWriteDeadline(time.Now().Add(t.cfg.WriteTimeout))
	if _, err := c.Write(hs); err != nil {
		_ = c.Close()
		return nil, err
	}
	return c, nil
}

// writeLoopBatchMax bounds how many queued frames go out per flush.
const writeLoopBatchMax = 256

func (t *TCPTransport) writeLoop(p *tcpPeer, c net.Conn) error {
	bw := bufio.NewWriterSize(c, 64<<10)
	// A goroutine that notices the peer closing: the peer never writes on
	// this connection, so a read returning means it is gone.
	gone := make(chan struct{})
	go func() {
		var b [1]byte
		_, _ = c.Read(b[:])
		close(gone)
	}()
	for {
		var f tcpFrame
		select {
		case <-t.ctx.Done():
			return t.ctx.Err()
		case <-gone:
			return errors.New("connection closed by the peer")
		case f = <-p.queue:
		}
		var snaps int
		_ = c.SetWriteDeadline(time.Now().Add(t.cfg.WriteTimeout))
		for i := 0; ; i++ {
			if f.snap {
				snaps++
			}
			if _, err := bw.Write(f.b); err != nil {
				t.reportSnaps(p, snaps, true)
				return err
			}
			if i == writeLoopBatchMax {
				break
			}
			select {
			case f = <-p.queue:
				continue
			default:
			}
			break
		}
		if err := bw.Flush(); err != nil {
			t.reportSnaps(p, snaps, true)
			return err
		}
		t.reportSnaps(p, snaps, false)
	}
}

func (t *TCPTransport) reportSnaps(p *tcpPeer, n int, failed bool) {
	for range n {
		t.r.ReportSnapshot(p.id, failed)
	}
}

// dropQueued empties p's queue while it has no connection: raft resends
// what matters, and stale heartbeats are worthless.
func (t *TCPTransport) dropQueued(p *tcpPeer) {
	for {
		select {
		case f := <-p.queue:
			if f.snap {
				t.r.ReportSnapshot(p.id, true)
			}
		default:
			return
		}
	}
}

// Close implements Transport.
func (t *TCPTransport) Close() error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil
	}
	t.closed = true
	t.cancel()
	if t.ln != nil {
		_ = t.ln.Close()
	}
	for c := range t.inbound {
		_ = c.Close()
	}
	t.mu.Unlock()
	t.wg.Wait()
	return nil
}

// appendFrame appends m as a frame.
func appendFrame(dst []byte, m *raftpb.Message, frameBytesMax int) ([]byte, error) {
	size := proto.Size(m)
	if size > frameBytesMax {
		return dst, fmt.Errorf("%w: message of %d bytes, at most %d", ErrBadFrame, size, frameBytesMax)
	}
	dst = binary.BigEndian.AppendUint32(dst, uint32(size))
	return proto.MarshalOptions{}.MarshalAppend(dst, m)
}

// readHandshake reads Magic and the sender's node id.
func readHandshake(r io.Reader) (int32, error) {
	var b [handshakeBytes]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		return 0, fmt.Errorf("read raft handshake: %w", err)
	}
	if string(b[:len(Magic)]) != Magic {
		return 0, fmt.Errorf("%w: magic %q", ErrBadFrame, b[:len(Magic)])
	}
	id := int32(binary.BigEndian.Uint32(b[len(Magic):]))
	if id < 0 {
		return 0, fmt.Errorf("%w: sender node id %d", ErrBadFrame, id)
	}
	return id, nil
}

// readFrame reads one frame. A length above frameBytesMax fails before
// anything is allocated; bytes that are not a raftpb.Message fail with
// ErrBadFrame.
func readFrame(r io.Reader, frameBytesMax int, hdr *[4]byte) (*raftpb.Message, error) {
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if uint64(n) > uint64(frameBytesMax) {
		return nil, fmt.Errorf("%w: frame of %d bytes, at most %d", ErrBadFrame, n, frameBytesMax)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, fmt.Errorf("%w: %w", ErrBadFrame, err)
	}
	var m raftpb.Message
	if err := proto.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadFrame, err)
	}
	return &m, nil
}
