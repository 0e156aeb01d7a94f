package workloads

import (
	"context"
	"encoding/binary"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// received reads what a listener's one connection receives, until EOF.
func received(t *testing.T, ln net.Listener) <-chan []byte {
	t.Helper()
	out := make(chan []byte, 64)
	go func() {
		defer close(out)
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		buf := make([]byte, 1024)
		for {
			n, err := c.Read(buf)
			if n > 0 {
				out <- append([]byte(nil), buf[:n]...)
			}
			if err != nil {
				return
			}
		}
	}()
	return out
}

// gated is a connection through a new Gate to a loopback listener, and
// what the listener receives.
func gated(t *testing.T) (*Gate, net.Conn, <-chan []byte) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	got := received(t, ln)
	g := &Gate{}
	c, err := g.Dial(context.Background(), "tcp", ln.Addr().String())
	require.NoError(t, err)
	return g, c, got
}

func next(t *testing.T, ch <-chan []byte, within time.Duration) (string, bool) {
	t.Helper()
	select {
	case b, ok := <-ch:
		return string(b), ok
	case <-time.After(within):
		return "", false
	}
}

// TestGateHoldsWritesWhilePausedAndDeliversThemInOrder: a paused gate's
// connections accept writes without sending them; on resume they arrive,
// in order, before anything written later, and a connection closed while
// it held bytes delivers them before it closes.
func TestGateHoldsWritesWhilePausedAndDeliversThemInOrder(t *testing.T) {
	g, c, got := gated(t)
	_, err := c.Write([]byte("a"))
	require.NoError(t, err)
	s, ok := next(t, got, 5*time.Second)
	require.True(t, ok)
	assert.Equal(t, "a", s, "an open gate passes writes through")

	g.Pause()
	for _, w := range []string{"b", "c"} {
		n, err := c.Write([]byte(w))
		require.NoError(t, err, "a paused connection accepts the write")
		assert.Equal(t, 1, n)
	}
	// The client's deadline passes while the bytes are held; they were
	// accepted before it, so they still go out.
	require.NoError(t, c.SetWriteDeadline(time.Now().Add(-time.Second)))
	_, ok = next(t, got, 200*time.Millisecond)
	assert.False(t, ok, "nothing reaches the peer while paused")

	require.NoError(t, c.Close(), "closing while paused waits for the held bytes")
	g.Resume()
	var all string
	for {
		s, ok := next(t, got, 5*time.Second)
		if !ok {
			break
		}
		all += s
	}
	assert.Equal(t, "bc", all, "held bytes delivered in order, then the close")
	_, err = c.Write([]byte("d"))
	assert.ErrorIs(t, err, net.ErrClosed)
	_, err = c.Read(make([]byte, 1))
	assert.Error(t, err)
}

// TestGateOpenIsAPlainConnection: never paused, a gated connection reads
// and writes as the connection under it, and closes at once.
func TestGateOpenIsAPlainConnection(t *testing.T) {
	_, c, got := gated(t)
	_, err := c.Write([]byte("x"))
	require.NoError(t, err)
	s, _ := next(t, got, 5*time.Second)
	assert.Equal(t, "x", s)
	require.NoError(t, c.Close())
	_, ok := next(t, got, 5*time.Second)
	assert.False(t, ok, "the peer sees the close")

}

// frame is a Kafka request frame of api key with body, as a client
// writes it: the size, then the header's api key.
func frame(key uint16, body string) []byte {
	b := binary.BigEndian.AppendUint32(nil, uint32(2+len(body)))
	b = binary.BigEndian.AppendUint16(b, key)
	return append(b, body...)
}

// TestGatePausesAtTheNextProduce: armed, the gate lets other requests
// through and pauses at the first Produce request, which it holds with
// everything after it, even a frame written in two pieces, until it
// resumes.
func TestGatePausesAtTheNextProduce(t *testing.T) {
	g, c, got := gated(t)
	g.PauseAtProduce()
	metadata := frame(3, "meta")
	_, err := c.Write(metadata)
	require.NoError(t, err)
	s, ok := next(t, got, 5*time.Second)
	require.True(t, ok)
	assert.Equal(t, string(metadata), s, "not a Produce: through")

	// A frame whose body starts like a Produce header is no Produce: the
	// gate counts frame lengths.
	tricky := frame(3, string(frame(0, "x")))
	_, err = c.Write(tricky[:5])
	require.NoError(t, err)
	_, err = c.Write(tricky[5:])
	require.NoError(t, err)
	s, _ = next(t, got, 5*time.Second)
	for len(s) < len(tricky) {
		more, ok := next(t, got, 5*time.Second)
		require.True(t, ok)
		s += more
	}
	assert.Equal(t, string(tricky), s)

	produce, after := frame(0, "records"), frame(26, "end")
	_, err = c.Write(produce)
	require.NoError(t, err)
	_, err = c.Write(after)
	require.NoError(t, err)
	_, ok = next(t, got, 200*time.Millisecond)
	assert.False(t, ok, "the Produce and what follows are held")
	g.Resume()
	var all string
	for len(all) < len(produce)+len(after) {
		s, ok := next(t, got, 5*time.Second)
		require.True(t, ok)
		all += s
	}
	assert.Equal(t, string(produce)+string(after), all)
}

// FuzzGateFrameTracking: whatever bytes a client writes, in whatever
// pieces, tracking request frames never panics nor loses its place: well
// formed frames written in two pieces anywhere are told Produce or not as
// when written whole.
func FuzzGateFrameTracking(f *testing.F) {
	f.Add([]byte("junk"), uint16(0), uint16(3), 3)
	f.Add([]byte{0, 0, 0, 0, 0, 0}, uint16(1), uint16(0), 7)
	f.Fuzz(func(t *testing.T, body []byte, k1, k2 uint16, cut int) {
		var c gatedConn
		c.startsProduce(body) // arbitrary bytes: no panic
		c = gatedConn{}
		stream := append(frame(k1, string(body)), frame(k2, "b")...)
		cut = min(max(cut, 0), len(stream))
		got := c.startsProduce(stream[:cut])
		got = c.startsProduce(stream[cut:]) || got
		assert.Equal(t, k1 == 0 || k2 == 0, got)
		assert.Zero(t, c.frameLeft)
		assert.Empty(t, c.header)
	})
}
