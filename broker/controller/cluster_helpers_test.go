package controller

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/faultline/faultline/broker/lifecycle"
	"github.com/faultline/faultline/broker/metadata"
	"github.com/faultline/faultline/broker/quorum"
	"github.com/faultline/faultline/broker/quorum/quorumtest"
	"github.com/faultline/faultline/broker/storage"
)

func regReq(id int32, incarnation byte, previousEpoch int64) *kmsg.BrokerRegistrationRequest {
	r := kmsg.NewPtrBrokerRegistrationRequest()
	r.Version = 4
	r.BrokerID, r.ClusterID, r.IncarnationID, r.PreviousBrokerEpoch = id, "cluster", [16]byte{incarnation}, previousEpoch
	r.Listeners = []kmsg.BrokerRegistrationRequestListener{{Name: "PLAINTEXT", Host: "localhost", Port: uint16(9090 + id)}}
	return r
}

func hbReq(id int32, epoch, offset int64, wantFence, wantShutdown bool) *kmsg.BrokerHeartbeatRequest {
	r := kmsg.NewPtrBrokerHeartbeatRequest()
	r.BrokerID, r.BrokerEpoch, r.CurrentMetadataOffset, r.WantFence, r.WantShutdown = id, epoch, offset, wantFence, wantShutdown
	return r
}

// clusterMode sets the session timeout RunExpiry would set, without its
// loop.
func clusterMode(c *Controller, sessionTimeout time.Duration) {
	c.sessionTimeoutMs.Store(sessionTimeout.Milliseconds())
}

// joinBroker registers and unfences broker id through the handlers.
func joinBroker(t testing.TB, c *Controller, id int32) int64 {
	t.Helper()
	ctx := context.Background()
	r := c.HandleBrokerRegistration(ctx, regReq(id, byte(id), -1))
	require.Zero(t, r.ErrorCode, kerr.ErrorForCode(r.ErrorCode))
	h := c.HandleBrokerHeartbeat(ctx, hbReq(id, r.BrokerEpoch, 1<<40, false, false))
	require.Zero(t, h.ErrorCode)
	require.False(t, h.IsFenced)
	return r.BrokerEpoch
}

func isNoOp(r metadata.Record) bool { return r.Key() == metadata.KeyNoOp }

// runExpiry runs c's expiry loop for the test's duration.
func runExpiry(t *testing.T, c *Controller, interval, session time.Duration) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = c.RunExpiry(ctx, interval, session)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
}

// feed returns a publisher following the metadata log, as an observing
// broker's would.
func feed(t *testing.T, q quorum.Quorum) *metadata.Publisher {
	t.Helper()
	pub := metadata.NewPublisher(metadata.NewImage("cluster"))
	cancel, err := quorum.FeedPublisher(q, pub)
	require.NoError(t, err)
	t.Cleanup(cancel)
	return pub
}

func newLifecycle(t *testing.T, id int32, incarnation byte, tr lifecycle.ControllerTransport, pub *metadata.Publisher) *lifecycle.Manager {
	t.Helper()
	lc, err := lifecycle.New(lifecycle.Config{
		BrokerID: id, ClusterID: "cluster", IncarnationID: metadata.Uuid{byte(id), incarnation}, PreviousBrokerEpoch: -1,
		Listeners:         []metadata.Endpoint{{Name: "PLAINTEXT", Host: "localhost", Port: uint16(9090 + id)}},
		HeartbeatInterval: testHeartbeat, MetadataOffset: func() int64 { return pub.Image().Offset }, Transport: tr,
	})
	require.NoError(t, err)
	t.Cleanup(lc.Close)
	return lc
}

func kgoTransport(t *testing.T, voters map[int32]string, leader func() quorum.LeaderAndEpoch) *lifecycle.KgoTransport {
	t.Helper()
	tr, err := lifecycle.NewKgoTransport(lifecycle.KgoTransportConfig{Voters: voters, Leader: leader, ClientID: "test", DialTimeout: time.Second})
	require.NoError(t, err)
	t.Cleanup(tr.Close)
	return tr
}

func waitState(t *testing.T, lc *lifecycle.Manager, s lifecycle.BrokerState) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testWait)
	defer cancel()
	require.NoError(t, lc.WaitForState(ctx, s))
}

func fenceRecords(log *sharedLog, id int32) int {
	return log.count(func(r metadata.Record) bool {
		f, ok := r.(*metadata.FenceBrokerRecord)
		return ok && f.ID == id
	})
}

// sharedLog is one metadata log (a Local quorum) seen by several
// controllers, with the quorum leader switched by the test: a failover
// without Raft. Every controller's view appends only while it leads.
type sharedLog struct {
	local  *quorumtest.Local
	leader atomic.Int64 // node id << 32 | epoch
	// failAppends makes that many appends fail as if the commit timed out.
	failAppends atomic.Int32
	// records collects every committed record in order.
	mu      sync.Mutex
	records []metadata.Record
}

func newSharedLog(t testing.TB, leader int32) *sharedLog {
	t.Helper()
	lm, err := storage.NewLogManager(storage.OS, []string{t.TempDir()}, storage.ManagerOptions{})
	require.NoError(t, err)
	_, err = lm.Load()
	require.NoError(t, err)
	local, err := quorumtest.OpenLocal(quorumtest.LocalConfig{NodeID: leader, Logs: lm})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = local.Close()
		_ = lm.Shutdown(0)
	})
	s := &sharedLog{local: local}
	s.setLeader(leader, 1)
	cancel, err := local.Subscribe(func(b quorum.Batch) error {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.records = append(s.records, b.Records...)
		return nil
	})
	require.NoError(t, err)
	t.Cleanup(cancel)
	return s
}

func (s *sharedLog) setLeader(id int32, epoch int32) {
	s.leader.Store(int64(id)<<32 | int64(uint32(epoch)))
}

func (s *sharedLog) currentLeader() quorum.LeaderAndEpoch {
	v := s.leader.Load()
	return quorum.LeaderAndEpoch{LeaderID: int32(v >> 32), Epoch: int32(uint32(v))}
}

// count returns how many committed records match.
func (s *sharedLog) count(match func(metadata.Record) bool) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, r := range s.records {
		if match(r) {
			n++
		}
	}
	return n
}

// view is node id's quorum.Quorum over the shared log.
func (s *sharedLog) view(id int32) quorum.Quorum { return &logView{s: s, id: id} }

type logView struct {
	s  *sharedLog
	id int32
}

func (v *logView) Append(ctx context.Context, recs []metadata.Record) (int64, error) {
	if v.s.currentLeader().LeaderID != v.id {
		return 0, quorum.ErrNotLeader
	}
	if v.s.failAppends.Add(-1) >= 0 {
		return 0, context.DeadlineExceeded
	}
	return v.s.local.Append(ctx, recs)
}

func (v *logView) Subscribe(fn func(quorum.Batch) error) (func(), error) {
	return v.s.local.Subscribe(fn)
}

func (v *logView) Leader() quorum.LeaderAndEpoch { return v.s.currentLeader() }

func (v *logView) Describe() quorum.Description {
	d := v.s.local.Describe()
	l := v.s.currentLeader()
	d.LeaderID, d.LeaderEpoch = l.LeaderID, l.Epoch
	return d
}

// clock is a settable clock for sessions.
type clock struct{ ms atomic.Int64 }

func newClock() *clock {
	c := &clock{}
	c.ms.Store(1_000_000)
	return c
}

func (c *clock) now() time.Time { return time.UnixMilli(c.ms.Load()) }

func (c *clock) advance(d time.Duration) { c.ms.Add(d.Milliseconds()) }

// newClusterController starts controller id over q.
func newClusterController(t testing.TB, id int32, q quorum.Quorum, now func() time.Time) *Controller {
	t.Helper()
	if now == nil {
		now = time.Now
	}
	c, err := New(Config{NodeID: id, ClusterID: "cluster", Defaults: Defaults{NumPartitions: 3, ReplicationFactor: 3},
		Rand: rand.New(rand.NewPCG(uint64(id), 7)), Now: now, Cluster: true}, q)
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return c
}

// dispatch serves the requests a controller listener serves.
func dispatch(c *Controller, fwd *lifecycle.Forwarder) func(ctx context.Context, req kmsg.Request) kmsg.Response {
	return func(ctx context.Context, req kmsg.Request) kmsg.Response {
		switch r := req.(type) {
		case *kmsg.BrokerRegistrationRequest:
			return c.HandleBrokerRegistration(ctx, r)
		case *kmsg.BrokerHeartbeatRequest:
			return c.HandleBrokerHeartbeat(ctx, r)
		case *kmsg.AlterPartitionRequest:
			return c.HandleAlterPartition(ctx, r)
		case *kmsg.DescribeQuorumRequest:
			return c.HandleDescribeQuorum(ctx, r)
		}
		var sc interface {
			CreateTopics(context.Context, *kmsg.CreateTopicsRequest) *kmsg.CreateTopicsResponse
			InitProducerID(context.Context, *kmsg.InitProducerIDRequest) *kmsg.InitProducerIDResponse
		} = c
		if fwd != nil {
			sc = fwd
		}
		switch r := req.(type) {
		case *kmsg.CreateTopicsRequest:
			return sc.CreateTopics(ctx, r)
		case *kmsg.InitProducerIDRequest:
			return sc.InitProducerID(ctx, r)
		}
		return nil
	}
}

// directTransport calls a controller's handlers in process.
type directTransport struct{ c *Controller }

func (d directTransport) Send(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	if resp := dispatch(d.c, nil)(ctx, req); resp != nil {
		return resp, nil
	}
	return nil, fmt.Errorf("no handler for key %d", req.Key())
}

// servedKeys are the API keys the test listener advertises.
var servedKeys = []int16{18, 19, 22, 55, 56, 62, 63}

// serveKafka is a minimal Kafka protocol listener for tests: it frames
// requests, answers ApiVersions itself and hands the other keys to handle.
// (The real controller listener is broker/server.)
func serveKafka(t testing.TB, handle func(context.Context, kmsg.Request) kmsg.Response) string {
	addr, _ := startKafka(t, handle)
	return addr
}

// startKafka is serveKafka with a stop function (idempotent) that closes
// the listener and every connection.
func startKafka(t testing.TB, handle func(context.Context, kmsg.Request) kmsg.Response) (string, func()) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var wg sync.WaitGroup
	var mu sync.Mutex
	conns := map[net.Conn]struct{}{}
	closed := false
	var once sync.Once
	stop := func() {
		once.Do(func() {
			_ = ln.Close()
			mu.Lock()
			closed = true
			for c := range conns {
				_ = c.Close()
			}
			mu.Unlock()
			wg.Wait()
		})
	}
	t.Cleanup(stop)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			if closed {
				mu.Unlock()
				_ = nc.Close()
				return
			}
			conns[nc] = struct{}{}
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer nc.Close()
				_ = serveConn(nc, handle)
			}()
		}
	}()
	return ln.Addr().String(), stop
}

func serveConn(nc net.Conn, handle func(context.Context, kmsg.Request) kmsg.Response) error {
	r := bufio.NewReader(nc)
	var wmu sync.Mutex
	for {
		var size int32
		if err := binary.Read(r, binary.BigEndian, &size); err != nil {
			return err
		}
		if size < 8 || size > 1<<24 {
			return errors.New("bad frame size")
		}
		frame := make([]byte, size)
		if _, err := io.ReadFull(r, frame); err != nil {
			return err
		}
		key := int16(binary.BigEndian.Uint16(frame))
		version := int16(binary.BigEndian.Uint16(frame[2:]))
		corr := binary.BigEndian.Uint32(frame[4:])
		body := frame[8:]
		if len(body) < 2 {
			return errors.New("short header")
		}
		if n := int16(binary.BigEndian.Uint16(body)); n > 0 {
			body = body[2+int(n):]
		} else {
			body = body[2:]
		}
		req := kmsg.RequestForKey(key)
		if req == nil {
			return fmt.Errorf("unknown key %d", key)
		}
		req.SetVersion(version)
		if req.IsFlexible() {
			var err error
			if body, err = skipHeaderTags(body); err != nil {
				return err
			}
		}
		if err := req.ReadFrom(body); err != nil {
			return fmt.Errorf("key %d v%d: %w", key, version, err)
		}
		go func() {
			var resp kmsg.Response
			if av, ok := req.(*kmsg.ApiVersionsRequest); ok {
				resp = apiVersions(av)
			} else {
				resp = handle(context.Background(), req)
			}
			if resp == nil {
				_ = nc.Close()
				return
			}
			resp.SetVersion(version)
			out := binary.BigEndian.AppendUint32(make([]byte, 4, 64), corr)
			if resp.IsFlexible() && key != 18 {
				out = append(out, 0)
			}
			out = resp.AppendTo(out)
			binary.BigEndian.PutUint32(out, uint32(len(out)-4))
			wmu.Lock()
			defer wmu.Unlock()
			_, _ = nc.Write(out)
		}()
	}
}

func skipHeaderTags(b []byte) ([]byte, error) {
	n, l := binary.Uvarint(b)
	if l <= 0 {
		return nil, errors.New("bad tag count")
	}
	b = b[l:]
	for range n {
		_, l := binary.Uvarint(b)
		if l <= 0 {
			return nil, errors.New("bad tag")
		}
		b = b[l:]
		size, l := binary.Uvarint(b)
		if l <= 0 || uint64(len(b)-l) < size {
			return nil, errors.New("bad tag size")
		}
		b = b[l+int(size):]
	}
	return b, nil
}

func apiVersions(req *kmsg.ApiVersionsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.ApiVersionsResponse)
	for _, k := range servedKeys {
		ak := kmsg.NewApiVersionsResponseApiKey()
		ak.ApiKey, ak.MinVersion, ak.MaxVersion = k, 0, kmsg.RequestForKey(k).MaxVersion()
		resp.ApiKeys = append(resp.ApiKeys, ak)
	}
	return resp
}
