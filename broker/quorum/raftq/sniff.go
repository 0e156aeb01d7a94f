package raftq

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"time"
)

// SniffRaft tells a raft connection from a Kafka one on a shared listener:
// it waits up to timeout for the first 8 bytes and reports whether they are
// Magic. The returned connection yields every byte again, those 8
// included: pass it to (*TCPTransport).ServeConn when isRaft, to the Kafka
// request loop otherwise. A Kafka request is at least 12 bytes long, so a
// Kafka client never leaves SniffRaft waiting.
func SniffRaft(c net.Conn, timeout time.Duration) (conn net.Conn, isRaft bool, err error) {
	br := bufio.NewReader(c)
	if err := c.SetReadDeadline(time.Now().Add(timeout)); err != nil {
		return c, false, fmt.Errorf("sniff connection: %w", err)
	}
	head, err := br.Peek(len(Magic))
	if rerr := c.SetReadDeadline(time.Time{}); rerr != nil && err == nil {
		err = rerr
	}
	pc := &peekedConn{Conn: c, r: br}
	if err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() && len(head) < len(Magic) {
			return pc, false, fmt.Errorf("sniff connection: fewer than %d bytes in %v", len(Magic), timeout)
		}
		return pc, false, fmt.Errorf("sniff connection: %w", err)
	}
	return pc, string(head) == Magic, nil
}

// peekedConn reads through the buffer that holds the peeked bytes.
type peekedConn struct {
	net.Conn
	r *bufio.Reader
}

func (p *peekedConn) Read(b []byte) (int, error) { return p.r.Read(b) }
