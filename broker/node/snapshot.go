package node

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/faultline/faultline/broker/quorum/raftq"
)

// snapshotMagic opens a connection to the controller listener that asks for
// the quorum's newest metadata snapshot: the answer is its length (8 bytes,
// big endian, 0 when there is none) and its bytes (raftq.DecodeSnapshot
// parses them). Observers use it when the metadata log they fetch starts
// after the offset they need.
const snapshotMagic = "FLSNAP01"

// snapshotBytesMax bounds a snapshot an observer accepts.
const snapshotBytesMax = 1 << 30

// bufferedConn reads through a buffer that holds peeked bytes.
type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (b *bufferedConn) Read(p []byte) (int, error) { return b.r.Read(p) }

// sniffSnapshot tells a snapshot request from a Kafka connection; a Kafka
// request is at least 12 bytes long, so the peek never waits on a client.
func sniffSnapshot(c net.Conn) (net.Conn, bool, error) {
	br := bufio.NewReader(c)
	if err := c.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
		return c, false, err
	}
	head, err := br.Peek(len(snapshotMagic))
	if rerr := c.SetReadDeadline(time.Time{}); rerr != nil && err == nil {
		err = rerr
	}
	if err != nil {
		return c, false, err
	}
	return &bufferedConn{Conn: c, r: br}, string(head) == snapshotMagic, nil
}

// serveSnapshot answers a snapshot request with q's newest snapshot.
func serveSnapshot(c net.Conn, q *raftq.Quorum) error {
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
	if _, err := io.WriteString(c, snapshotMagic); err != nil {
		return nil, err
	}
	var size [8]byte
	if _, err := io.ReadFull(c, size[:]); err != nil {
		return nil, fmt.Errorf("snapshot from %s: %w", addr, err)
	}
	n := binary.BigEndian.Uint64(size[:])
	if n > snapshotBytesMax {
		return nil, errors.New("snapshot from " + addr + ": too large")
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
