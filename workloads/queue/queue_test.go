package queue

import (
	"context"
	"maps"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/faultline/faultline/checker"
	"github.com/faultline/faultline/workloads"
)

func TestKeyMapping(t *testing.T) {
	o := Options{PartitionsPerTopic: 4}
	for k := 0; k < 20; k++ {
		topic, p := o.TopicPartition(k)
		back, ok := o.Key(topic, p)
		require.True(t, ok)
		assert.Equal(t, k, back)
	}
	topic, p := o.TopicPartition(9)
	assert.Equal(t, "t2", topic)
	assert.Equal(t, int32(1), p)
	_, ok := o.Key("other", 0)
	assert.False(t, ok)
	_, ok = o.Key("t1", 4)
	assert.False(t, ok, "partition past the per-topic count is not a key")
}

func TestGeneratorIsDeterministic(t *testing.T) {
	run := func(seed int64) []checker.Op {
		g := NewGenerator(seed, GenOptions{ActiveKeys: 3, MaxWritesPerKey: 5})
		var ops []checker.Op
		for i := 0; i < 200; i++ {
			op, ok := g.Next(i % 4)
			require.True(t, ok)
			ops = append(ops, op)
			op.Type = checker.OK
			g.Update(op)
		}
		return ops
	}
	assert.Equal(t, run(7), run(7))
	assert.NotEqual(t, run(7), run(8))
}

func TestGeneratorRotatesKeysAndValuesAreUnique(t *testing.T) {
	g := NewGenerator(1, GenOptions{ActiveKeys: 2, MaxWritesPerKey: 3})
	values := map[int64]bool{}
	perKey := map[int]int{}
	for i := 0; i < 500; i++ {
		op, _ := g.Next(0)
		for _, m := range op.Mops {
			if m.F == "send" {
				assert.False(t, values[m.Value], "value %d sent twice", m.Value)
				values[m.Value] = true
				perKey[m.Key]++
			}
		}
	}
	for k, n := range perKey {
		assert.LessOrEqual(t, n, 3, "key %d got more writes than the rotation bound", k)
	}
	assert.Greater(t, len(perKey), 2, "keys rotate")
}

// TestMaxOffsetsAreTheFinalReadsTarget: the highest offset of each key
// that an ok send, an info send with a known offset, or an ok poll
// returned; an info poll and a send without an offset count for nothing.
func TestMaxOffsetsAreTheFinalReadsTarget(t *testing.T) {
	g := NewGenerator(1, GenOptions{})
	off := func(o int64) *int64 { return &o }
	send := func(typ checker.OpType, k int, o *int64) checker.Op {
		return checker.Op{Type: typ, F: "send", Mops: []checker.MicroOp{{F: "send", Key: k, Value: 1, Offset: o}}}
	}
	g.Update(send(checker.OK, 0, off(4)))
	g.Update(send(checker.OK, 0, off(2)))
	g.Update(send(checker.Info, 1, off(7)))
	g.Update(send(checker.Info, 2, nil))
	g.Update(send(checker.Fail, 3, off(9)))
	g.Update(checker.Op{Type: checker.OK, F: "poll", Mops: []checker.MicroOp{{F: "poll", Polls: map[int][]checker.Pair{0: {{Offset: 5, Value: 9}}, 4: {{Offset: 0, Value: 8}}}}}})
	g.Update(checker.Op{Type: checker.Info, F: "poll", Mops: []checker.MicroOp{{F: "poll", Polls: map[int][]checker.Pair{4: {{Offset: 6, Value: 8}}}}}})
	assert.Equal(t, map[int]int64{0: 5, 1: 7, 4: 0}, g.MaxOffsets())
}

func TestFinalGeneratorStopsWhenEveryKeyIsRead(t *testing.T) {
	f := NewFinalGenerator([]int{0, 1, 2}, map[int]int64{0: 3, 1: 1})
	op, ok := f.Next(5)
	require.True(t, ok)
	assert.Equal(t, "assign", op.F)
	assert.True(t, op.SeekToBeginning)
	assert.Equal(t, []int{0, 1, 2}, op.Keys, "every key is assigned")
	op, ok = f.Next(5)
	require.True(t, ok)
	assert.Equal(t, "poll", op.F)
	f.Update(checker.Op{Type: checker.OK, F: "poll", Mops: []checker.MicroOp{{F: "poll", Polls: map[int][]checker.Pair{0: {{Offset: 0, Value: 1}, {Offset: 1, Value: 2}}, 1: {{Offset: 1, Value: 5}}}}}})
	assert.Equal(t, []int{0}, f.Missing())
	f.Update(checker.Op{Type: checker.Info, F: "poll", Mops: []checker.MicroOp{{F: "poll", Polls: map[int][]checker.Pair{0: {{Offset: 3, Value: 4}}}}}})
	assert.Equal(t, []int{0}, f.Missing(), "an info poll proves nothing")
	f.Update(checker.Op{Type: checker.OK, F: "poll", Mops: []checker.MicroOp{{F: "poll", Polls: map[int][]checker.Pair{0: {{Offset: 2, Value: 3}}}}}})
	assert.Equal(t, []int{0}, f.Missing(), "offset 2 is short of the target 3")
	f.Update(checker.Op{Type: checker.OK, F: "poll", Mops: []checker.MicroOp{{F: "poll", Polls: map[int][]checker.Pair{0: {{Offset: 3, Value: 4}}}}}})
	assert.True(t, f.Done())
	_, ok = f.Next(5)
	assert.False(t, ok)
}

// onKfake starts a one-broker kfake cluster for the test and returns opts
// seeded with it, its Topics and a context bounded at a minute, all
// released when the test ends.
func onKfake(t *testing.T, opts Options) (Options, *Topics, context.Context) {
	t.Helper()
	opts, topics, ctx, _ := onKfakeCluster(t, opts)
	return opts, topics, ctx
}

// onKfakeCluster is onKfake that also returns the cluster, for tests that
// inject answers (ControlKey).
func onKfakeCluster(t *testing.T, opts Options) (Options, *Topics, context.Context, *kfake.Cluster) {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	require.NoError(t, err)
	t.Cleanup(c.Close)
	opts.Seeds = c.ListenAddrs()
	topics, err := NewTopics(opts)
	require.NoError(t, err)
	t.Cleanup(topics.Close)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return opts, topics, ctx, c
}

// TestWorkloadAgainstKfake drives the real client against franz-go's fake
// cluster: every acknowledged send is found by the final reads at the
// offset it was acknowledged with.
func TestWorkloadAgainstKfake(t *testing.T) {
	opts, topics, ctx := onKfake(t, Options{PartitionsPerTopic: 2, ReplicationFactor: 1, RequestTimeout: 3 * time.Second})

	g := NewGenerator(42, GenOptions{ActiveKeys: 4, MaxWritesPerKey: 20})
	clients := map[int]*Client{}
	for p := 0; p < 2; p++ {
		cl, err := NewClient(opts, topics)
		require.NoError(t, err)
		defer cl.Close()
		clients[p] = cl
	}
	acked := map[int]map[int64]int64{} // key -> value -> offset
	for i := 0; i < 300; i++ {
		p := i % 2
		op, ok := g.Next(p)
		require.True(t, ok)
		done := clients[p].Invoke(ctx, op)
		require.Equal(t, checker.OK, done.Type, "op %d %s: %s", i, done.F, done.Error)
		g.Update(done)
		for _, m := range done.Mops {
			if m.F == "send" {
				require.NotNil(t, m.Offset)
				if acked[m.Key] == nil {
					acked[m.Key] = map[int64]int64{}
				}
				acked[m.Key][m.Value] = *m.Offset
			}
		}
	}
	require.NotEmpty(t, acked)

	ends, err := topics.EndOffsets(ctx, g.Keys())
	require.NoError(t, err)
	targets := g.MaxOffsets()
	for k, vals := range acked {
		for _, off := range vals {
			assert.LessOrEqual(t, off, targets[k], "key %d: the target covers every acknowledged offset", k)
		}
		assert.Equal(t, ends[k]-1, targets[k], "key %d: nothing but the workload wrote", k)
	}
	final := NewFinalGenerator(g.Keys(), targets)
	reader, err := NewClient(opts, topics)
	require.NoError(t, err)
	defer reader.Close()
	read := map[int]map[int64]int64{}
	for !final.Done() && ctx.Err() == nil {
		op, ok := final.Next(9)
		if !ok {
			break
		}
		done := reader.Invoke(ctx, op)
		final.Update(done)
		for _, m := range done.Mops {
			for k, pairs := range m.Polls {
				for _, pr := range pairs {
					if read[k] == nil {
						read[k] = map[int64]int64{}
					}
					read[k][pr.Value] = pr.Offset
				}
			}
		}
	}
	require.True(t, final.Done(), "final reads did not reach the end of %v", final.Missing())
	for k, vals := range acked {
		for v, off := range vals {
			assert.Equal(t, off, read[k][v], "key %d value %d", k, v)
		}
	}
}

// TestSubscribeRecordsRebalances checks that a group consumer reads what
// was sent and that its assignments reach the history as a rebalance log.
func TestSubscribeRecordsRebalances(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	require.NoError(t, err)
	defer c.Close()
	opts := Options{Seeds: c.ListenAddrs(), PartitionsPerTopic: 2, ReplicationFactor: 1, Group: "g1"}
	topics, err := NewTopics(opts)
	require.NoError(t, err)
	defer topics.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl, err := NewClient(opts, topics)
	require.NoError(t, err)
	defer cl.Close()

	sub := cl.Invoke(ctx, checker.Op{Type: checker.Invoke, F: "subscribe", Keys: []int{0, 1}})
	require.Equal(t, checker.OK, sub.Type, sub.Error)
	for v := int64(0); v < 5; v++ {
		done := cl.Invoke(ctx, checker.Op{Type: checker.Invoke, F: "send", Mops: []checker.MicroOp{{F: "send", Key: int(v % 2), Value: v}}})
		require.Equal(t, checker.OK, done.Type, done.Error)
	}
	seen := map[int64]bool{}
	var rebalanced []int
	committed := map[int]int64{}
	last := map[int]int64{}
	for ctx.Err() == nil && len(seen) < 5 {
		done := cl.Invoke(ctx, checker.Op{Type: checker.Invoke, F: "poll", Mops: []checker.MicroOp{{F: "poll"}}})
		require.NotEqual(t, checker.Info, done.Type)
		for _, r := range done.RebalanceLog {
			rebalanced = append(rebalanced, r.Keys...)
		}
		for _, m := range done.Mops {
			for k, pairs := range m.Polls {
				for _, p := range pairs {
					seen[p.Value] = true
					last[k] = p.Offset
				}
			}
		}
		maps.Copy(committed, done.Committed)
	}
	assert.Len(t, seen, 5, "the group consumer read every value")
	assert.ElementsMatch(t, []int{0, 1}, rebalanced, "the assignment is in the rebalance log")
	assert.Equal(t, map[int]int64{0: last[0] + 1, 1: last[1] + 1}, committed, "the acknowledged commits: one past the last offset polled")
}

// TestAcksZeroSendsAreIndeterminate: under acks=0 the broker never answers,
// so a send that left the client completes info (it may or may not have been
// written), never ok with an offset.
func TestAcksZeroSendsAreIndeterminate(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	require.NoError(t, err)
	defer c.Close()
	opts := Options{Seeds: c.ListenAddrs(), PartitionsPerTopic: 1, ReplicationFactor: 1, RequestTimeout: 3 * time.Second, Acks: workloads.AcksNone}
	topics, err := NewTopics(opts)
	require.NoError(t, err)
	defer topics.Close()
	cl, err := NewClient(opts, topics)
	require.NoError(t, err)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	done := cl.Invoke(ctx, checker.Op{Type: checker.Invoke, F: "send", Mops: []checker.MicroOp{{F: "send", Key: 0, Value: 7}}})
	assert.Equal(t, checker.Info, done.Type)
	assert.Contains(t, done.Error, "acks=0")
	assert.Nil(t, done.Mops[0].Offset)
}

// TestMixedConsumersSubscribeOnOddProcesses: --consumer-mode mixed makes
// odd-numbered processes subscribe and the others assign, in one run.
func TestMixedConsumersSubscribeOnOddProcesses(t *testing.T) {
	g := NewGenerator(1, GenOptions{Mixed: true, Subscribe: true, MembershipOneIn: 1})
	for p := 0; p < 6; p++ {
		for range 3 {
			op, ok := g.Next(p)
			require.True(t, ok)
			want := "assign"
			if p%2 == 1 {
				want = "subscribe"
			}
			assert.Equal(t, want, op.F, "process %d", p)
		}
	}
	plain := NewGenerator(1, GenOptions{MembershipOneIn: 1})
	op, _ := plain.Next(1)
	assert.Equal(t, "assign", op.F, "not mixed: every process assigns")
}

// TestTxnOffsetsAreRecorded: a committed transaction records the offsets it
// sent to the group; a client newly assigned the key resumes there and
// records it; a transaction aborted after sending offsets records them and
// reads the group's offsets back unchanged (group-offsets).
func TestTxnOffsetsAreRecorded(t *testing.T) {
	opts, topics, ctx := onKfake(t, Options{PartitionsPerTopic: 1, ReplicationFactor: 1, RequestTimeout: 3 * time.Second, Txn: true, TxnAbortOneIn: 1 << 30})
	invoke := func(cl *Client, op checker.Op) checker.Op {
		t.Helper()
		op.Type = checker.Invoke
		done := cl.Invoke(ctx, op)
		require.NotEqual(t, checker.Info, done.Type, "%s: %s", done.F, done.Error)
		return done
	}
	send := func(v int64) checker.MicroOp { return checker.MicroOp{F: "send", Key: 0, Value: v} }
	poll := checker.MicroOp{F: "poll"}

	keeper, err := NewClient(opts, topics)
	require.NoError(t, err)
	defer keeper.Close()
	assert.Empty(t, invoke(keeper, checker.Op{F: "assign", Keys: []int{0}}).Committed, "nothing committed yet")
	done := invoke(keeper, checker.Op{F: "txn", Mops: []checker.MicroOp{send(1)}})
	require.Equal(t, checker.OK, done.Type)
	assert.Equal(t, map[int]int64{}, done.Committed, "no poll, no offsets")
	var committed checker.Op
	require.Eventually(t, func() bool {
		committed = invoke(keeper, checker.Op{F: "txn", Mops: []checker.MicroOp{poll, send(2)}})
		return committed.Type == checker.OK && len(committed.Mops[0].Polls[0]) > 0
	}, 10*time.Second, 10*time.Millisecond)
	require.Equal(t, int64(1), committed.Mops[0].Polls[0][0].Value)
	at := committed.Mops[0].Polls[0][len(committed.Mops[0].Polls[0])-1].Offset + 1
	assert.Equal(t, map[int]int64{0: at}, committed.Committed)

	aborting := opts
	aborting.TxnAbortOneIn = 1
	quitter, err := NewClient(aborting, topics)
	require.NoError(t, err)
	defer quitter.Close()
	assert.Equal(t, map[int]int64{0: at}, invoke(quitter, checker.Op{F: "assign", Keys: []int{0}}).Committed, "resumed at the committed offset")
	var aborted checker.Op
	require.Eventually(t, func() bool {
		aborted = invoke(quitter, checker.Op{F: "txn", Mops: []checker.MicroOp{poll, send(3)}})
		return len(aborted.Mops[0].Polls[0]) > 0
	}, 10*time.Second, 10*time.Millisecond)
	require.Equal(t, checker.Fail, aborted.Type)
	assert.Equal(t, int64(2), aborted.Mops[0].Polls[0][0].Value, "the resumed consumer reads on from the committed offset")
	require.Contains(t, aborted.Committed, 0)
	assert.Greater(t, aborted.Committed[0], at)
	assert.Equal(t, map[int]int64{0: at}, aborted.GroupOffsets, "the abort left the group's offset where the commit put it")
}

// TestStallsShowAnOpenTransaction: a transaction left open holds its
// partition's last stable offset below the high watermark, and Stalls
// reports both (and the open transaction where the broker lists it).
func TestStallsShowAnOpenTransaction(t *testing.T) {
	opts, topics, ctx := onKfake(t, Options{PartitionsPerTopic: 1, ReplicationFactor: 1, RequestTimeout: 3 * time.Second})
	require.NoError(t, topics.Ensure(ctx, []int{0}))
	topic, part := opts.TopicPartition(0)
	cl, err := kgo.NewClient(kgo.SeedBrokers(opts.Seeds...), kgo.TransactionalID("stall"), kgo.DefaultProduceTopic(topic))
	require.NoError(t, err)
	defer cl.Close()
	require.NoError(t, cl.BeginTransaction())
	require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Partition: part, Value: []byte("open")}).FirstErr())

	stalls := topics.Stalls(ctx, []int{0}, true)
	require.Len(t, stalls, 1)
	s := stalls[0]
	assert.Equal(t, topic, s.Topic)
	assert.Equal(t, int64(1), s.HighWatermark)
	assert.Equal(t, int64(0), s.LastStable, "the open transaction holds the last stable offset")
	require.Empty(t, s.Error)
	require.Len(t, s.OpenTxns, 1)
	assert.Equal(t, int64(0), s.OpenTxns[0].FirstOffset)

	// Outside transactions only the offsets are listed.
	plain := topics.Stalls(ctx, []int{0}, false)
	require.Len(t, plain, 1)
	assert.Equal(t, int64(1), plain[0].HighWatermark)
	assert.Empty(t, plain[0].OpenTxns)
	assert.Empty(t, plain[0].Error)
}

// TestStallsMarkAPartitionTheClusterNoLongerLists: a topic deleted under
// the workload is Missing (its log counts as empty for lost-after-read);
// a topic that is still there, though empty, is not.
func TestStallsMarkAPartitionTheClusterNoLongerLists(t *testing.T) {
	opts, topics, ctx := onKfake(t, Options{PartitionsPerTopic: 1, ReplicationFactor: 1, RequestTimeout: 3 * time.Second})
	require.NoError(t, topics.Ensure(ctx, []int{0, 1}))
	gone, _ := opts.TopicPartition(0)
	_, err := topics.adm.DeleteTopics(ctx, gone)
	require.NoError(t, err)

	stalls := topics.Stalls(ctx, []int{0, 1}, false)
	require.Len(t, stalls, 2)
	assert.True(t, stalls[0].Missing, "the deleted topic is gone: %+v", stalls[0])
	assert.Equal(t, int64(0), stalls[0].LogEnd())
	assert.False(t, stalls[1].Missing, "the other topic is listed: %+v", stalls[1])
	assert.Equal(t, int64(0), stalls[1].HighWatermark)
}

// t0Answer is a Metadata answer about topic t0 alone: its error code and
// the partitions it lists.
func t0Answer(code int16, parts ...int32) *kmsg.MetadataResponse {
	rt := kmsg.NewMetadataResponseTopic()
	rt.Topic, rt.ErrorCode = kmsg.StringPtr("t0"), code
	for _, p := range parts {
		rp := kmsg.NewMetadataResponseTopicPartition()
		rp.Partition = p
		rt.Partitions = append(rt.Partitions, rp)
	}
	resp := kmsg.NewPtrMetadataResponse()
	resp.Topics = append(resp.Topics, rt)
	return resp
}

// TestUnlistedIn: only an answer that the topic does not exist, or a
// listing of the topic without the partition, counts as unlisted.
func TestUnlistedIn(t *testing.T) {
	answer := t0Answer
	assert.True(t, unlistedIn(answer(kerr.UnknownTopicOrPartition.Code), "t0", 0))
	assert.True(t, unlistedIn(answer(0, 0, 1), "t0", 2), "listed without the partition")
	assert.False(t, unlistedIn(answer(0, 0, 1), "t0", 1))
	assert.False(t, unlistedIn(answer(kerr.LeaderNotAvailable.Code), "t0", 0), "another error proves nothing")
	assert.False(t, unlistedIn(answer(kerr.UnknownTopicOrPartition.Code), "t1", 0), "a topic left out of the answer proves nothing")
}

// TestUnlistedBy: a partition is unlisted only when every broker asked
// answered and none lists it.
func TestUnlistedBy(t *testing.T) {
	answer := t0Answer
	of := func(k int) (string, int32) { return "t0", int32(k) }
	unknown := answer(kerr.UnknownTopicOrPartition.Code)
	assert.Equal(t, map[int]bool{0: true, 1: true}, unlistedBy([]*kmsg.MetadataResponse{unknown, unknown}, []int{0, 1}, of))
	assert.Equal(t, map[int]bool{0: false, 1: true}, unlistedBy([]*kmsg.MetadataResponse{unknown, answer(0, 0)}, []int{0, 1}, of),
		"one broker listing partition 0 outvotes the other")
	assert.Equal(t, map[int]bool{0: false}, unlistedBy([]*kmsg.MetadataResponse{unknown, nil}, []int{0}, of),
		"a broker that did not answer makes the look inconclusive")
	assert.Equal(t, map[int]bool{0: false}, unlistedBy(nil, []int{0}, of), "nobody asked")
}

// TestInfoTransactionsAreNoFinalReadTarget: the offset of a send in a
// transaction whose outcome is unknown is no target of the final reads (it
// may have been aborted, and read_committed never returns it); an info
// send outside a transaction, an ok transaction's and a poll's are.
func TestInfoTransactionsAreNoFinalReadTarget(t *testing.T) {
	g := NewGenerator(1, GenOptions{})
	at := func(o int64) *int64 { return &o }
	g.Update(checker.Op{Type: checker.OK, F: "txn", Mops: []checker.MicroOp{{F: "send", Key: 0, Value: 1, Offset: at(3)}}})
	g.Update(checker.Op{Type: checker.Info, F: "txn", Mops: []checker.MicroOp{{F: "send", Key: 0, Value: 2, Offset: at(7)}}})
	g.Update(checker.Op{Type: checker.Info, F: "send", Mops: []checker.MicroOp{{F: "send", Key: 1, Value: 3, Offset: at(5)}}})
	assert.Equal(t, map[int]int64{0: 3, 1: 5}, g.MaxOffsets())
}
