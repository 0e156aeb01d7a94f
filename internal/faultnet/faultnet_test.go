package faultnet

import (
	"context"
	"io"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// echoServer accepts connections and echoes what it reads.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(c, c); _ = c.Close() }()
		}
	}()
	return ln.Addr().String()
}

func roundTrip(t *testing.T, c net.Conn) error {
	t.Helper()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write([]byte("ping")); err != nil {
		return err
	}
	buf := make([]byte, 4)
	_, err := io.ReadFull(c, buf)
	return err
}

func TestCutClosesAndRefusesUntilHealed(t *testing.T) {
	addr := echoServer(t)
	s := New()
	s.Register(2, addr)
	ctx := context.Background()

	c, err := s.Dialer(1)(ctx, "tcp", addr)
	require.NoError(t, err)
	require.NoError(t, roundTrip(t, c))

	s.Cut(2, 1)
	assert.Equal(t, [][2]int32{{1, 2}}, s.Cuts())
	assert.Error(t, roundTrip(t, c), "the open connection across the cut is closed")
	_, err = s.Dialer(1)(ctx, "tcp", addr)
	assert.ErrorIs(t, err, ErrCut)

	// Other links are untouched: node 3 still reaches node 2.
	c3, err := s.Dialer(3)(ctx, "tcp", addr)
	require.NoError(t, err)
	require.NoError(t, roundTrip(t, c3))

	s.Heal()
	assert.Empty(t, s.Cuts())
	c, err = s.Dialer(1)(ctx, "tcp", addr)
	require.NoError(t, err)
	require.NoError(t, roundTrip(t, c))
}

func TestPartitionCutsAcrossSidesOnly(t *testing.T) {
	s := New()
	s.Partition([]int32{1, 2}, []int32{3, 4, 5})
	assert.Equal(t, [][2]int32{{1, 3}, {1, 4}, {1, 5}, {2, 3}, {2, 4}, {2, 5}}, s.Cuts())
	s.Heal()
	s.Isolate(3, 1, 2, 3, 4)
	assert.Equal(t, [][2]int32{{1, 3}, {2, 3}, {3, 4}}, s.Cuts())
}

func TestDialAcrossCutHonoursContext(t *testing.T) {
	s := New()
	s.Register(2, "127.0.0.1:1")
	s.Cut(1, 2)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := s.Dialer(1)(ctx, "tcp", "127.0.0.1:1")
	assert.ErrorIs(t, err, context.Canceled)
}

func TestDelayHoldsWrites(t *testing.T) {
	addr := echoServer(t)
	s := New()
	s.Register(2, addr)
	s.Delay(1, 2, 100*time.Millisecond)
	c, err := s.Dialer(1)(context.Background(), "tcp", addr)
	require.NoError(t, err)
	start := time.Now()
	require.NoError(t, roundTrip(t, c))
	assert.GreaterOrEqual(t, time.Since(start), 100*time.Millisecond)
	s.Delay(1, 2, 0)
	start = time.Now()
	require.NoError(t, roundTrip(t, c))
	assert.Less(t, time.Since(start), 2*time.Second, "no delay once removed")
}

func TestUnregisteredAddressesPassThrough(t *testing.T) {
	addr := echoServer(t)
	s := New()
	s.Cut(1, 2)
	c, err := s.Dialer(1)(context.Background(), "tcp", addr)
	require.NoError(t, err)
	require.NoError(t, roundTrip(t, c))
}
