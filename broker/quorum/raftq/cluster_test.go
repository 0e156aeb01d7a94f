package raftq

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/faultline/faultline/broker/metadata"
	"github.com/faultline/faultline/broker/quorum"
	"github.com/faultline/faultline/broker/storage"
)

// waitFor is the bound on every awaited condition; polls are tight.
const (
	waitFor   = 10 * time.Second
	pollEvery = 2 * time.Millisecond
)

// recorder collects the batches a subscriber receives.
type recorder struct {
	mu      sync.Mutex
	batches []quorum.Batch
}

func (r *recorder) add(b quorum.Batch) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.batches = append(r.batches, b)
	return nil
}

// records returns every record received, in order, and the offset after
// the last batch.
func (r *recorder) records() ([]metadata.Record, int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []metadata.Record
	end := int64(0)
	for _, b := range r.batches {
		out = append(out, b.Records...)
		end = b.LastOffset + 1
	}
	return out, end
}

func (r *recorder) snapshot() []quorum.Batch {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.batches)
}

// topic returns a record that always applies: a topic of its own.
func topic(n int) metadata.Record {
	var id metadata.Uuid
	binary.BigEndian.PutUint64(id[:], uint64(n)+1)
	return &metadata.TopicRecord{Name: fmt.Sprintf("t%d", n), TopicID: id}
}

type testCluster struct {
	t     testing.TB
	ids   []int32
	dirs  map[int32]string
	net   *MemNetwork
	addrs map[int32]string // TCP clusters
	nodes map[int32]*Quorum
	recs  map[int32]*recorder
	tweak func(*Config)
}

func newCluster(t testing.TB, n int, tcp bool, tweak func(*Config)) *testCluster {
	c := &testCluster{t: t, dirs: map[int32]string{}, nodes: map[int32]*Quorum{}, recs: map[int32]*recorder{}, tweak: tweak}
	for i := range n {
		id := int32(i + 1)
		c.ids = append(c.ids, id)
		c.dirs[id] = t.TempDir()
	}
	if tcp {
		c.addrs = map[int32]string{}
		for _, id := range c.ids {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			require.NoError(t, err)
			c.addrs[id] = ln.Addr().String()
			require.NoError(t, ln.Close())
		}
	} else {
		c.net = NewMemNetwork()
	}
	for _, id := range c.ids {
		c.start(id)
	}
	t.Cleanup(c.closeAll)
	return c
}

func (c *testCluster) voters() map[int32]string {
	v := map[int32]string{}
	for _, id := range c.ids {
		v[id] = "127.0.0.1:1"
		if c.addrs != nil {
			v[id] = c.addrs[id]
		}
	}
	return v
}

func (c *testCluster) config(id int32) Config {
	cfg := Config{
		NodeID:         id,
		Voters:         c.voters(),
		DataDir:        c.dirs[id],
		ClusterID:      "test-cluster",
		Logger:         slog.New(slog.NewTextHandler(testWriter{c.t}, &slog.HandlerOptions{Level: slog.LevelInfo})).With("node", id),
		TickInterval:   10 * time.Millisecond,
		ElectionTicks:  10,
		HeartbeatTicks: 1,
	}
	if c.net != nil {
		cfg.Transport = c.net.Transport(id)
	}
	if c.tweak != nil {
		c.tweak(&cfg)
	}
	return cfg
}

// start opens node id on its dir and subscribes a fresh recorder.
func (c *testCluster) start(id int32) {
	q, err := Open(c.config(id))
	require.NoError(c.t, err)
	rec := &recorder{}
	_, err = q.Subscribe(rec.add)
	require.NoError(c.t, err)
	c.nodes[id] = q
	c.recs[id] = rec
}

func (c *testCluster) stop(id int32) {
	if q := c.nodes[id]; q != nil {
		require.NoError(c.t, q.Close())
		delete(c.nodes, id)
	}
}

func (c *testCluster) closeAll() {
	for _, id := range c.ids {
		if q := c.nodes[id]; q != nil {
			_ = q.Close()
			delete(c.nodes, id)
		}
	}
	if c.net != nil {
		c.net.Wait()
	}
}

// leaderAmong waits until every node of ids agrees on one leader among
// ids, and returns it.
func (c *testCluster) leaderAmong(ids ...int32) int32 {
	c.t.Helper()
	var leader int32 = -1
	require.Eventually(c.t, func() bool {
		le := c.nodes[ids[0]].Leader()
		if le.LeaderID < 0 || !slices.Contains(ids, le.LeaderID) {
			return false
		}
		for _, id := range ids[1:] {
			if c.nodes[id].Leader() != le {
				return false
			}
		}
		leader = le.LeaderID
		return true
	}, waitFor, pollEvery, "no leader agreed among %v", ids)
	return leader
}

func (c *testCluster) live() []int32 {
	var out []int32
	for _, id := range c.ids {
		if c.nodes[id] != nil {
			out = append(out, id)
		}
	}
	return out
}

// appendN appends topics [from, from+n) one batch each through the leader
// of the live nodes.
func (c *testCluster) appendN(from, n int) {
	c.t.Helper()
	c.appendOn(c.live(), from, n)
}

// appendOn appends topics [from, from+n) through the leader among ids,
// retrying on ErrNotLeader (a leader that lost its term: the batch
// certainly was not committed).
func (c *testCluster) appendOn(ids []int32, from, n int) {
	c.t.Helper()
	for i := from; i < from+n; i++ {
		for attempt := 0; ; attempt++ {
			leader := c.leaderAmong(ids...)
			ctx, cancel := context.WithTimeout(context.Background(), waitFor)
			_, err := c.nodes[leader].Append(ctx, []metadata.Record{topic(i)})
			cancel()
			if errors.Is(err, quorum.ErrNotLeader) && attempt < 5 {
				c.t.Logf("append topic %d on %d: %v; retrying", i, leader, err)
				continue
			}
			require.NoError(c.t, err, "append topic %d on leader %d", i, leader)
			break
		}
	}
}

// delivered waits until every node of ids delivered batches up to the
// same offset, and returns each node's records.
func (c *testCluster) delivered(ids ...int32) map[int32][]metadata.Record {
	c.t.Helper()
	out := map[int32][]metadata.Record{}
	require.Eventually(c.t, func() bool {
		_, end := c.recs[ids[0]].records()
		for _, id := range ids {
			r, e := c.recs[id].records()
			if e != end {
				return false
			}
			out[id] = r
		}
		return true
	}, waitFor, pollEvery, "nodes %v did not reach the same offset", ids)
	return out
}

// converged waits until every node of ids delivered the same records up
// to the same offset, and returns them.
func (c *testCluster) converged(ids ...int32) []metadata.Record {
	c.t.Helper()
	var recs []metadata.Record
	require.Eventually(c.t, func() bool {
		first, end := c.recs[ids[0]].records()
		for _, id := range ids[1:] {
			r, e := c.recs[id].records()
			if e != end || len(r) != len(first) {
				return false
			}
		}
		recs = first
		return true
	}, waitFor, pollEvery, "nodes %v did not converge", ids)
	for _, id := range ids[1:] {
		r, _ := c.recs[id].records()
		require.Equal(c.t, recs, r, "node %d delivered other records than node %d", id, ids[0])
	}
	return recs
}

func topics(from, n int) []metadata.Record {
	var out []metadata.Record
	for i := from; i < from+n; i++ {
		out = append(out, topic(i))
	}
	return out
}

// snapshotFiles lists the snapshot files of a node.
func snapshotFiles(t testing.TB, dir string) []string {
	m, err := filepath.Glob(filepath.Join(dir, quorum.MetadataPartition.DirName(), "*"+snapshotSuffix))
	require.NoError(t, err)
	return m
}

// testWriter sends log lines to the test log, shown when a test fails.
type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// crash stops node id the way a power loss does: no final quorum-state
// write, no log manager shutdown (so no clean shutdown marker), and, when
// the node runs on an ErrorFS, every write not fsynced is lost.
func (c *testCluster) crash(id int32) {
	c.t.Helper()
	q := c.nodes[id]
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	q.stop()
	q.wg.Wait()
	require.NoError(c.t, q.tr.Close())
	q.ap.stop()
	if efs, ok := q.cfg.FS.(*storage.ErrorFS); ok {
		require.NoError(c.t, efs.Crash())
	}
	delete(c.nodes, id)
}
