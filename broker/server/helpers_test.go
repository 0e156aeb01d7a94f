package server

import (
	"context"
	"encoding/binary"
	"io"
	"log/slog"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// testServer is a Server on 127.0.0.1:0 backed by a fakeCluster.
type testServer struct {
	srv  *Server
	fake *fakeCluster
	addr string
	reg  *prometheus.Registry
}

func startServer(t testing.TB, opts Options, tweak func(*Backend)) *testServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	host, portStr, err := net.SplitHostPort(ln.Addr().String())
	require.NoError(t, err)
	port, err := strconv.Atoi(portStr)
	require.NoError(t, err)
	fake := newFakeCluster(1, host, int32(port))
	b := fake.backend()
	if tweak != nil {
		tweak(&b)
	}
	reg := prometheus.NewRegistry()
	srv, err := New(opts, b, slog.New(slog.DiscardHandler), reg)
	require.NoError(t, err)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	})
	return &testServer{srv: srv, fake: fake, addr: ln.Addr().String(), reg: reg}
}

func (ts *testServer) client(t testing.TB, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(ts.addr)}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	return cl
}

// rawConn speaks the protocol by hand, to send what no client would.
type rawConn struct {
	net.Conn
	t    testing.TB
	corr int32
	fmt  *kmsg.RequestFormatter
}

func dial(t testing.TB, addr string) *rawConn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	require.NoError(t, c.SetDeadline(time.Now().Add(20*time.Second)))
	return &rawConn{Conn: c, t: t, fmt: kmsg.NewRequestFormatter(kmsg.FormatterClientID("raw"))}
}

// send writes req and returns its correlation id.
func (c *rawConn) send(req kmsg.Request) int32 {
	c.t.Helper()
	c.corr++
	_, err := c.Write(c.fmt.AppendRequest(nil, req, c.corr))
	require.NoError(c.t, err)
	return c.corr
}

// readFrame returns the next response's correlation id and body (after the
// header tag buffer when the response is flexible).
func (c *rawConn) readResponse(resp kmsg.Response) (int32, error) {
	var size [4]byte
	if _, err := io.ReadFull(c, size[:]); err != nil {
		return 0, err
	}
	buf := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(c, buf); err != nil {
		return 0, err
	}
	corr := int32(binary.BigEndian.Uint32(buf))
	body := buf[4:]
	if resp.IsFlexible() && resp.Key() != apiKeyApiVersions {
		body = body[1:]
	}
	return corr, resp.ReadFrom(body)
}

// roundTrip sends req and decodes its response at the same version.
func (c *rawConn) roundTrip(req kmsg.Request) kmsg.Response {
	c.t.Helper()
	corr := c.send(req)
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	got, err := c.readResponse(resp)
	require.NoError(c.t, err)
	require.Equal(c.t, corr, got)
	return resp
}

// expectClosed asserts the server closes the connection without sending
// anything more.
func (c *rawConn) expectClosed() {
	c.t.Helper()
	var b [1]byte
	n, err := c.Read(b[:])
	require.Equal(c.t, 0, n)
	require.ErrorIs(c.t, err, io.EOF)
}

// frame builds a raw request frame: header fields, then body bytes.
func frame(key, version int16, corr int32, body []byte) []byte {
	b := binary.BigEndian.AppendUint32(nil, 0)
	b = binary.BigEndian.AppendUint16(b, uint16(key))
	b = binary.BigEndian.AppendUint16(b, uint16(version))
	b = binary.BigEndian.AppendUint32(b, uint32(corr))
	b = binary.BigEndian.AppendUint16(b, 0xFFFF) // null client id
	b = append(b, body...)
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	return b
}

// recordBatch builds a v2 record batch of n records with values of size
// bytes (not CRC-valid: the fake does not check CRCs).
func recordBatch(n, size int) []byte {
	var recs []byte
	for i := range n {
		var r []byte
		r = append(r, 0)                        // attributes
		r = binary.AppendVarint(r, 0)           // timestamp delta
		r = binary.AppendVarint(r, int64(i))    // offset delta
		r = binary.AppendVarint(r, -1)          // null key
		r = binary.AppendVarint(r, int64(size)) // value length
		r = append(r, make([]byte, size)...)    // value
		r = binary.AppendVarint(r, 0)           // headers
		recs = binary.AppendVarint(recs, int64(len(r)))
		recs = append(recs, r...)
	}
	rb := kmsg.RecordBatch{Magic: 2, LastOffsetDelta: int32(n - 1), ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1, NumRecords: int32(n), Records: recs}
	out := rb.AppendTo(nil)
	binary.BigEndian.PutUint32(out[8:], uint32(len(out)-12))
	return out
}

// metricValue returns the value of the series of family name whose label
// values are labels (in order): a counter's or gauge's value, a
// histogram's sample count.
func metricValue(t testing.TB, ts *testServer, name string, labels ...string) float64 {
	t.Helper()
	families, err := ts.reg.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	series:
		for _, m := range f.GetMetric() {
			if len(m.GetLabel()) != len(labels) {
				continue
			}
			for i, l := range m.GetLabel() {
				if l.GetValue() != labels[i] {
					continue series
				}
			}
			switch {
			case m.GetCounter() != nil:
				return m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				return m.GetGauge().GetValue()
			case m.GetHistogram() != nil:
				return float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return 0
}

// openConns is the number of connections the server is still serving.
func openConns(s *Server) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}
