package raftq

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faultline/faultline/broker/metadata"
	"github.com/faultline/faultline/broker/quorum"
	"github.com/faultline/faultline/broker/storage"
)

func TestThreeVotersElectOneLeaderAndReplicate(t *testing.T) {
	c := newCluster(t, 3, false, nil)
	leader := c.leaderAmong(c.ids...)
	le := c.nodes[leader].Leader()
	assert.Positive(t, le.Epoch)

	ctx := context.Background()
	var lasts []int64
	for i := range 10 {
		last, err := c.nodes[leader].Append(ctx, []metadata.Record{topic(2 * i), topic(2*i + 1)})
		require.NoError(t, err)
		lasts = append(lasts, last)
	}
	for i := 1; i < len(lasts); i++ {
		assert.Equal(t, lasts[i-1]+2, lasts[i], "one batch of two records takes two offsets")
	}
	recs := c.converged(c.ids...)
	assert.Equal(t, topics(0, 20), recs)

	// The leader's own subscriber saw each append as one batch ending at
	// the offset Append returned.
	var ends []int64
	for _, b := range c.recs[leader].snapshot() {
		if len(b.Records) > 0 {
			ends = append(ends, b.LastOffset)
		}
	}
	assert.Equal(t, lasts, ends)

	for _, id := range c.ids {
		if id == leader {
			continue
		}
		_, err := c.nodes[id].Append(ctx, []metadata.Record{topic(99)})
		assert.ErrorIs(t, err, quorum.ErrNotLeader)
		assert.Contains(t, err.Error(), "node "+strconv.Itoa(int(leader))+" leads")
	}

	d := c.nodes[leader].Describe()
	assert.Equal(t, leader, d.LeaderID)
	assert.Equal(t, le.Epoch, d.LeaderEpoch)
	require.Len(t, d.Voters, 3)
	require.Eventually(t, func() bool {
		d = c.nodes[leader].Describe()
		for _, v := range d.Voters {
			if v.LogEndOffset != d.HighWatermark {
				return false
			}
		}
		return d.HighWatermark == lasts[len(lasts)-1]+1
	}, waitFor, pollEvery, "every voter caught up to the high watermark: %+v", d)
}

func TestLeaderCloseElectsNewLeaderAndAppendsContinue(t *testing.T) {
	c := newCluster(t, 3, false, nil)
	old := c.leaderAmong(c.ids...)
	oldEpoch := c.nodes[old].Leader().Epoch
	c.appendN(0, 5)
	c.stop(old)

	start := time.Now()
	leader := c.leaderAmong(c.live()...)
	t.Logf("new leader %d elected %v after closing %d", leader, time.Since(start), old)
	assert.NotEqual(t, old, leader)
	assert.Greater(t, c.nodes[leader].Leader().Epoch, oldEpoch)
	c.appendN(5, 5)
	assert.Equal(t, topics(0, 10), c.converged(c.live()...))

	// The old leader comes back and catches up.
	c.start(old)
	c.appendN(10, 1)
	assert.Equal(t, topics(0, 11), c.converged(c.ids...))
}

func TestIsolatedLeaderCannotCommitAndLosesItsTail(t *testing.T) {
	c := newCluster(t, 3, false, nil)
	old := c.leaderAmong(c.ids...)
	c.appendN(0, 3)
	c.converged(c.ids...)
	var rest []int32
	for _, id := range c.ids {
		if id != old {
			rest = append(rest, id)
		}
	}
	c.net.Partition([]int32{old}, rest)

	// The isolated leader cannot commit: the append times out (its entry
	// stays an uncommitted tail) or it already stepped down.
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	_, err := c.nodes[old].Append(ctx, []metadata.Record{topic(1000)})
	cancel()
	require.Error(t, err)
	assert.True(t, errors.Is(err, context.DeadlineExceeded) || errors.Is(err, quorum.ErrNotLeader), "got %v", err)

	leader := c.leaderAmong(rest...)
	assert.NotEqual(t, old, leader)
	c.appendOn(rest, 3, 4)
	assert.Equal(t, topics(0, 7), c.converged(rest...))
	require.Eventually(t, func() bool { return c.nodes[old].Leader().LeaderID != old }, waitFor, pollEvery,
		"CheckQuorum makes the isolated leader step down")
	_, err = c.nodes[old].Append(context.Background(), []metadata.Record{topic(1001)})
	assert.ErrorIs(t, err, quorum.ErrNotLeader)

	c.net.Heal()
	assert.Equal(t, topics(0, 7), c.converged(c.ids...), "the old leader replaced its uncommitted tail")
	require.Eventually(t, func() bool {
		return c.nodes[old].log.LogEndOffset() == c.nodes[leader].log.LogEndOffset()
	}, waitFor, pollEvery)
	assert.Equal(t, c.nodes[leader].Leader(), c.nodes[old].Leader())
}

// TestStepDownEndsWaitingAppends: an Append waiting on a leader that loses
// its quorum ends with ErrNotLeader when CheckQuorum makes it step down,
// as Kafka's controller answers NOT_CONTROLLER on resignation, instead of
// waiting (without a deadline) until the network heals.
func TestStepDownEndsWaitingAppends(t *testing.T) {
	c := newCluster(t, 3, false, nil)
	old := c.leaderAmong(c.ids...)
	c.appendN(0, 2)
	c.converged(c.ids...)
	var rest []int32
	for _, id := range c.ids {
		if id != old {
			rest = append(rest, id)
		}
	}
	c.net.Partition([]int32{old}, rest)
	done := make(chan error, 1)
	go func() {
		_, err := c.nodes[old].Append(context.Background(), []metadata.Record{topic(1000)})
		done <- err
	}()
	select {
	case err := <-done:
		assert.ErrorIs(t, err, quorum.ErrNotLeader)
	case <-time.After(waitFor):
		t.Fatalf("the Append on the isolated leader still waits %s later", waitFor)
	}
	c.net.Heal()
}

func TestRestartAllRecoversCommittedRecords(t *testing.T) {
	c := newCluster(t, 3, false, nil)
	c.leaderAmong(c.ids...)
	c.appendN(0, 30)
	c.converged(c.ids...)
	var epoch int32
	for _, id := range c.ids {
		epoch = max(epoch, c.nodes[id].Leader().Epoch)
	}
	c.closeAll()
	for _, id := range c.ids {
		st, found, err := readQuorumState(osFS(), filepath.Join(c.dirs[id], quorum.MetadataPartition.DirName()))
		require.NoError(t, err)
		require.True(t, found, "node %d wrote %s", id, QuorumStateFile)
		assert.Equal(t, uint64(epoch), st.Term)
	}

	for _, id := range c.ids {
		c.start(id)
	}
	// Every voter replays the committed records from its own disk, before
	// any leader exists.
	for _, id := range c.ids {
		recs, _ := c.recs[id].records()
		assert.LessOrEqual(t, len(recs), 30)
	}
	leader := c.leaderAmong(c.ids...)
	assert.Greater(t, c.nodes[leader].Leader().Epoch, epoch, "epochs only grow across restarts")
	c.appendN(30, 2)
	assert.Equal(t, topics(0, 32), c.converged(c.ids...))
}

func TestSnapshotThenRestartReplaysSnapshotAndTail(t *testing.T) {
	c := newCluster(t, 3, false, func(cfg *Config) {
		cfg.SnapshotIntervalRecords = 10
		cfg.CompactionLagEntries = 2
		cfg.SegmentBytes = 1024
	})
	c.leaderAmong(c.ids...)
	c.appendN(0, 25)
	c.converged(c.ids...)
	for _, id := range c.ids {
		require.Eventually(t, func() bool { return c.nodes[id].log.LogStartOffset() >= 20 }, waitFor, pollEvery,
			"node %d compacted its log behind a snapshot", id)
		assert.NotEmpty(t, snapshotFiles(t, c.dirs[id]))
		assert.LessOrEqual(t, len(snapshotFiles(t, c.dirs[id])), snapshotsKept)
	}
	// An observer behind the log start loads the snapshot, then reads on.
	q := c.nodes[c.ids[0]]
	_, _, err := q.ReadCommitted(10, 0, 1<<20)
	assert.ErrorIs(t, err, storage.ErrOffsetOutOfRange)
	h, data := q.LatestSnapshot()
	sh, snapRecs, err := DecodeSnapshot(data)
	require.NoError(t, err)
	assert.Equal(t, h, sh)
	observed := slices.Clone(snapRecs)
	for off, hw := h.EndOffset, int64(-1); off != hw; {
		var raw []byte
		raw, hw, err = q.ReadCommitted(10, off, 1<<20)
		require.NoError(t, err)
		batches, err := DecodeBatches(raw)
		require.NoError(t, err)
		require.NotEmpty(t, batches, "a read below the high watermark returns a batch")
		assert.Equal(t, off, batches[0].BaseOffset)
		for _, b := range batches {
			observed = append(observed, b.Records...)
			off = b.LastOffset + 1
		}
	}
	assert.Equal(t, topics(0, 25), imageTopics(t, observed))
	_, hw, err := q.ReadCommitted(10, q.log.HighWatermark(), 1<<20)
	require.NoError(t, err)
	d := q.Describe()
	require.Len(t, d.Observers, 1, "the reader is listed as an observer")
	assert.Equal(t, int32(10), d.Observers[0].ReplicaID)
	assert.Equal(t, hw, d.Observers[0].LogEndOffset)
	assert.Positive(t, d.Observers[0].LastCaughtUpTimestamp)
	_, _, err = q.ReadCommitted(c.ids[1], hw, 1<<20)
	require.NoError(t, err)
	assert.Len(t, q.Describe().Observers, 1, "a voter is no observer")

	c.closeAll()
	for _, id := range c.ids {
		c.start(id)
	}
	for _, id := range c.ids {
		h, data := c.nodes[id].LatestSnapshot()
		require.NotNil(t, data)
		batches := c.recs[id].snapshot()
		require.NotEmpty(t, batches)
		assert.Equal(t, int64(0), batches[0].BaseOffset, "replay starts with the snapshot")
		assert.Equal(t, h.EndOffset-1, batches[0].LastOffset)
		assert.GreaterOrEqual(t, c.nodes[id].log.LogStartOffset(), h.EndOffset, "the log before the snapshot is gone")
	}
	c.leaderAmong(c.ids...)
	c.appendN(25, 3)
	for _, id := range c.ids {
		pub := metadata.NewPublisher(metadata.NewImage("test-cluster"))
		_, err := quorum.FeedPublisher(c.nodes[id], pub)
		require.NoError(t, err)
		require.Eventually(t, func() bool { return len(pub.Image().Topics) == 28 }, waitFor, pollEvery)
		for i := range 28 {
			assert.NotNil(t, pub.Image().Topic(topic(i).(*metadata.TopicRecord).Name))
		}
	}
}

func TestLaggingFollowerInstallsLeaderSnapshot(t *testing.T) {
	c := newCluster(t, 3, false, func(cfg *Config) {
		cfg.SnapshotIntervalRecords = 5
		cfg.CompactionLagEntries = 1
	})
	leader := c.leaderAmong(c.ids...)
	c.appendN(0, 2)
	c.converged(c.ids...)
	lagging := c.ids[0]
	if lagging == leader {
		lagging = c.ids[1]
	}
	var others []int32
	for _, id := range c.ids {
		if id != lagging {
			others = append(others, id)
		}
	}
	c.net.Partition([]int32{lagging}, others)
	c.appendOn(others, 2, 20)
	leader = c.leaderAmong(others...)
	require.Eventually(t, func() bool { return c.nodes[leader].log.LogStartOffset() > 10 }, waitFor, pollEvery)
	c.net.Heal()
	for id, recs := range c.delivered(c.ids...) {
		assert.Equal(t, topics(0, 22), imageTopics(t, recs), "node %d", id)
	}
	h, _ := c.nodes[lagging].LatestSnapshot()
	assert.Positive(t, h.EndOffset, "the lagging follower installed a snapshot")
	assert.Equal(t, h.EndOffset, c.nodes[lagging].log.LogStartOffset(), "its log restarted at the snapshot's end")
	// The follower's subscriber got the snapshot as one batch that moved
	// its image from 2 topics to the snapshot's.
	var jump *quorum.Batch
	for _, b := range c.recs[lagging].snapshot() {
		if b.LastOffset == h.EndOffset-1 && len(b.Records) > 1 {
			jump = &b
		}
	}
	require.NotNil(t, jump, "a batch ending at the snapshot's end")
	// The follower restarts from the installed snapshot.
	c.stop(lagging)
	c.start(lagging)
	c.appendN(22, 1)
	for id, recs := range c.delivered(c.ids...) {
		assert.Equal(t, topics(0, 23), imageTopics(t, recs), "node %d", id)
	}
}

// imageTopics folds records into an image and lists its topics as records,
// in name order of creation index: it compares what subscribers built,
// whatever batches (live or snapshot delta) brought it.
func imageTopics(t *testing.T, recs []metadata.Record) []metadata.Record {
	t.Helper()
	im, err := metadata.NewImage("c").ApplyBatch(0, recs)
	require.NoError(t, err)
	var out []metadata.Record
	for i := 0; len(out) < len(im.Topics); i++ {
		r := topic(i).(*metadata.TopicRecord)
		tp := im.Topic(r.Name)
		require.NotNil(t, tp, "topic %s", r.Name)
		out = append(out, &metadata.TopicRecord{Name: tp.Name, TopicID: tp.ID})
	}
	return out
}

func TestTCPClusterCommitsAndFailsOver(t *testing.T) {
	c := newCluster(t, 3, true, nil)
	old := c.leaderAmong(c.ids...)
	c.appendN(0, 5)
	assert.Equal(t, topics(0, 5), c.converged(c.ids...))
	c.stop(old)
	leader := c.leaderAmong(c.live()...)
	assert.NotEqual(t, old, leader)
	c.appendN(5, 5)
	c.start(old)
	assert.Equal(t, topics(0, 10), c.converged(c.ids...))
}

func TestCloseStopsEverything(t *testing.T) {
	c := newCluster(t, 3, false, nil)
	leader := c.leaderAmong(c.ids...)
	q := c.nodes[leader]
	c.stop(leader)
	select {
	case <-q.Done():
	default:
		t.Fatal("Done is not closed after Close")
	}
	assert.NoError(t, q.Err())
	_, err := q.Append(context.Background(), []metadata.Record{topic(1)})
	assert.ErrorIs(t, err, quorum.ErrClosed)
	_, err = q.Subscribe(func(quorum.Batch) error { return nil })
	assert.ErrorIs(t, err, quorum.ErrClosed)
	assert.NoError(t, q.Close(), "Close twice")
}

func TestOpenRejectsBadConfig(t *testing.T) {
	_, err := Open(Config{NodeID: 4, Voters: map[int32]string{1: "a:1"}, DataDir: t.TempDir()})
	assert.ErrorContains(t, err, "node.id 4 is not a voter")
	_, err = Open(Config{NodeID: 1, Voters: map[int32]string{1: "a:1"}, DataDir: t.TempDir(), ElectionTicks: 1, HeartbeatTicks: 1})
	assert.ErrorContains(t, err, "must exceed heartbeat ticks")
}

func TestOpenRefusesLostCommittedEntries(t *testing.T) {
	c := newCluster(t, 1, false, nil)
	c.leaderAmong(c.ids...)
	c.appendN(0, 3)
	c.closeAll()
	dir := filepath.Join(c.dirs[1], quorum.MetadataPartition.DirName())
	require.NoError(t, writeQuorumState(osFS(), dir, hardState{Term: 5, Commit: 100}, "", []int32{1}))
	_, err := Open(c.config(1))
	assert.ErrorContains(t, err, "committed entries were lost")
	require.NoError(t, os.WriteFile(filepath.Join(dir, QuorumStateFile), []byte("{not json"), 0o644))
	_, err = Open(c.config(1))
	assert.ErrorContains(t, err, "parse quorum-state")
}

func TestPowerLossOfAllVotersKeepsCommittedRecords(t *testing.T) {
	fss := map[int32]*storage.ErrorFS{}
	c := newCluster(t, 3, false, func(cfg *Config) {
		if fss[cfg.NodeID] == nil {
			fss[cfg.NodeID] = storage.NewErrorFS(storage.OS)
		}
		cfg.FS = fss[cfg.NodeID]
	})
	c.leaderAmong(c.ids...)
	c.appendN(0, 20)
	for _, id := range c.ids {
		c.crash(id)
		// quorum-state's commit index may lag (it is written lazily): take
		// it back to raft index 3 (the leader's empty entry, topics 0 and 1).
		dir := filepath.Join(c.dirs[id], quorum.MetadataPartition.DirName())
		hs, _, err := readQuorumState(osFS(), dir)
		require.NoError(t, err)
		hs.Commit = 3
		require.NoError(t, writeQuorumState(osFS(), dir, hs, "", c.ids))
	}
	for _, id := range c.ids {
		c.start(id)
		recs, _ := c.recs[id].records()
		assert.Equal(t, topics(0, 2), recs, "node %d replays what quorum-state says is committed", id)
	}
	c.leaderAmong(c.ids...)
	c.appendN(20, 1)
	assert.Equal(t, topics(0, 21), c.converged(c.ids...), "every acknowledged append survived, none twice")
}

func TestDiskFailureStopsTheVoterNotTheQuorum(t *testing.T) {
	fss := map[int32]*storage.ErrorFS{}
	c := newCluster(t, 3, false, func(cfg *Config) {
		if fss[cfg.NodeID] == nil {
			fss[cfg.NodeID] = storage.NewErrorFS(storage.OS)
		}
		cfg.FS = fss[cfg.NodeID]
	})
	leader := c.leaderAmong(c.ids...)
	c.appendN(0, 2)
	victim := c.ids[0]
	if victim == leader {
		victim = c.ids[1]
	}
	fss[victim].Inject(storage.Rule{Op: storage.OpSync, Path: ".log"})
	c.appendN(2, 3)
	q := c.nodes[victim]
	select {
	case <-q.Done():
	case <-time.After(waitFor):
		t.Fatal("the voter whose fsync failed kept running")
	}
	assert.ErrorContains(t, q.Err(), "fsync the metadata log")
	_, err := q.Append(context.Background(), []metadata.Record{topic(9)})
	assert.Error(t, err)
	var live []int32
	for _, id := range c.ids {
		if id != victim {
			live = append(live, id)
		}
	}
	assert.Equal(t, topics(0, 5), c.converged(live...), "the majority goes on")
}

func TestSlowAndOneWayLinks(t *testing.T) {
	c := newCluster(t, 3, false, nil)
	for _, a := range c.ids {
		for _, b := range c.ids {
			if a != b {
				c.net.SetFault(a, b, Fault{Delay: 3 * time.Millisecond})
			}
		}
	}
	leader := c.leaderAmong(c.ids...)
	c.appendN(0, 5)
	assert.Equal(t, topics(0, 5), c.converged(c.ids...), "delayed messages still commit")

	// A follower that hears the leader but cannot answer: the leader keeps
	// its majority through the third voter and goes on committing.
	c.net.Heal()
	deaf := c.ids[0]
	if deaf == leader {
		deaf = c.ids[1]
	}
	c.net.SetFault(deaf, leader, Fault{Drop: true})
	c.appendN(5, 5)
	assert.Equal(t, topics(0, 10), c.converged(c.ids...), "the half-cut follower still receives the log")
	assert.Equal(t, leader, c.leaderAmong(c.ids...), "PreVote and CheckQuorum keep the leader in place")
	c.net.Heal()
	c.net.Wait()
}

func TestRunsOnTheNodeLogManager(t *testing.T) {
	dir := t.TempDir()
	open := func() (*storage.LogManager, *Quorum, *recorder) {
		lm, err := storage.NewLogManager(storage.OS, []string{dir}, storage.ManagerOptions{})
		require.NoError(t, err)
		_, err = lm.Load()
		require.NoError(t, err)
		q, err := Open(Config{NodeID: 0, Voters: map[int32]string{0: "127.0.0.1:1"}, Logs: lm,
			Transport: NewMemNetwork().Transport(0), TickInterval: 10 * time.Millisecond})
		require.NoError(t, err)
		rec := &recorder{}
		_, err = q.Subscribe(rec.add)
		require.NoError(t, err)
		return lm, q, rec
	}
	lm, q, _ := open()
	require.Eventually(t, func() bool { return q.Leader().LeaderID == 0 }, waitFor, pollEvery, "node id 0 is raft id 1")
	_, err := q.Append(context.Background(), topics(0, 3))
	require.NoError(t, err)
	require.NoError(t, q.Close())
	l, ok := lm.GetLog(quorum.MetadataPartition)
	require.True(t, ok)
	assert.Positive(t, l.LogEndOffset(), "Close leaves the node's log manager alone")
	assert.Equal(t, int64(-1), l.Config().RetentionMs, "the metadata log has no time retention")
	require.NoError(t, lm.Shutdown(0))

	lm, q, rec := open()
	defer lm.Shutdown(0)
	defer q.Close()
	recs, _ := rec.records()
	assert.Equal(t, topics(0, 3), recs)
}

func TestOnlyVoterLeadsAndCommitsWithoutWaitingForTicks(t *testing.T) {
	// A tick of an hour: an election timeout or a tick-driven commit
	// would never come within the test.
	q, err := Open(Config{NodeID: 1, Voters: map[int32]string{1: "127.0.0.1:1"}, DataDir: t.TempDir(),
		Transport: NewMemNetwork().Transport(1), TickInterval: time.Hour})
	require.NoError(t, err)
	defer q.Close()
	require.Eventually(t, func() bool { return q.Leader().LeaderID == 1 }, 2*time.Second, time.Millisecond, "the only voter elects itself at once")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	last, err := q.Append(ctx, topics(0, 2))
	require.NoError(t, err, "an append commits without a tick")
	assert.Equal(t, last+1, q.Describe().HighWatermark)
}
