package node

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/faultline/faultline/broker/storage"
)

// txnProps shrinks __transaction_state for tests that start several nodes.
var txnProps = map[string]string{
	"transaction.state.log.num.partitions": "5",
}

// runTransactions produces, with a transactional kgo producer, three
// transactions of four records each over both partitions of topic: the
// first and the third committed, the second aborted. It returns the values
// of each.
func runTransactions(t *testing.T, seeds []string, topic, txnID string) (committed, aborted []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.TransactionalID(txnID), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()), kgo.TransactionTimeout(30*time.Second))
	require.NoError(t, err)
	defer cl.Close()
	for i, commit := range []bool{true, false, true} {
		require.NoError(t, cl.BeginTransaction())
		for j := range 4 {
			v := fmt.Sprintf("%s-txn%d-%d", txnID, i, j)
			require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Value: []byte(v)}).FirstErr())
			if commit {
				committed = append(committed, v)
			} else {
				aborted = append(aborted, v)
			}
		}
		require.NoError(t, cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)))
	}
	return committed, aborted
}

// consumeAll reads topic from the start with the isolation level until it
// has want values (or a minute passed) and returns what it read.
func consumeAll(t *testing.T, seeds []string, topic string, level kgo.IsolationLevel, want int) []string {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(level),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	require.NoError(t, err)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var got []string
	for len(got) < want && ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	return got
}

func createTxnTopic(t *testing.T, seeds []string, topic string, partitions int32, rf int16) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	require.NoError(t, err)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err = kadm.NewClient(cl).CreateTopic(ctx, partitions, rf, nil, topic)
	require.NoError(t, err)
}

func checkTransactions(t *testing.T, seeds []string, topic string, committed, aborted []string) {
	t.Helper()
	got := consumeAll(t, seeds, topic, kgo.ReadCommitted(), len(committed))
	assert.ElementsMatch(t, committed, got, "read_committed sees exactly the committed transactions")
	all := consumeAll(t, seeds, topic, kgo.ReadUncommitted(), len(committed)+len(aborted))
	assert.ElementsMatch(t, append(append([]string(nil), committed...), aborted...), all, "read_uncommitted sees the aborted records too")
}

func TestTransactionsKgoSingleNode(t *testing.T) {
	n := startNode(t, map[string]string{"transaction.state.log.replication.factor": "1", "transaction.state.log.min.isr": "1"})
	seeds := []string{n.Addr().String()}
	createTxnTopic(t, seeds, "txn", 2, 1)
	committed, aborted := runTransactions(t, seeds, "txn", "tx-single")
	checkTransactions(t, seeds, "txn", committed, aborted)

	// An open transaction holds read_committed consumers at its first
	// offset: a later plain record is invisible until it ends.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	open, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.TransactionalID("tx-open"), kgo.DefaultProduceTopic("txn"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	require.NoError(t, err)
	defer open.Close()
	require.NoError(t, open.BeginTransaction())
	require.NoError(t, open.ProduceSync(ctx, &kgo.Record{Value: []byte("open"), Partition: 0}).FirstErr())
	plain, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic("txn"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	require.NoError(t, err)
	defer plain.Close()
	require.NoError(t, plain.ProduceSync(ctx, &kgo.Record{Value: []byte("after-open"), Partition: 0}).FirstErr())
	offs, err := kadm.NewClient(plain).ListEndOffsets(ctx, "txn")
	require.NoError(t, err)
	endUncommitted := offs["txn"][0].Offset
	committedEnd, err := kadm.NewClient(plain).ListCommittedOffsets(ctx, "txn")
	require.NoError(t, err)
	assert.Less(t, committedEnd["txn"][0].Offset, endUncommitted, "the LSO stays at the open transaction")
	// DescribeProducers shows the transaction open on partition 0 from the
	// LSO on (kafka-transactions.sh find-hanging), and closed after.
	openTxnStart := func() int64 {
		described, err := kadm.NewClient(plain).DescribeProducers(ctx, kadm.TopicsSet{"txn": {0: {}}})
		require.NoError(t, err)
		p := described["txn"].Partitions[0]
		require.NoError(t, p.Err)
		start := int64(-1)
		for _, d := range p.ActiveProducers {
			if d.CurrentTxnStartOffset >= 0 {
				start = d.CurrentTxnStartOffset
			}
		}
		return start
	}
	assert.Equal(t, committedEnd["txn"][0].Offset, openTxnStart())
	require.NoError(t, open.EndTransaction(ctx, kgo.TryCommit))
	require.Eventually(t, func() bool { return openTxnStart() == -1 }, 10*time.Second, 10*time.Millisecond, "the marker ends it")
	got := consumeAll(t, seeds, "txn", kgo.ReadCommitted(), len(committed)+2)
	assert.Contains(t, got, "open")
	assert.Contains(t, got, "after-open")

	// The state survives a restart of the node.
	adm := kadm.NewClient(plain)
	require.Eventually(t, func() bool {
		described, err := adm.DescribeTransactions(ctx, "tx-single")
		return err == nil && described["tx-single"].State == "CompleteCommit"
	}, 10*time.Second, 10*time.Millisecond, "EndTxn answers once PrepareCommit is durable; CompleteCommit follows the markers")
}

func TestTransactionsKgoZombieFenced(t *testing.T) {
	n := startNode(t, map[string]string{"transaction.state.log.replication.factor": "1", "transaction.state.log.min.isr": "1"})
	seeds := []string{n.Addr().String()}
	createTxnTopic(t, seeds, "z", 1, 1)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	newProducer := func() *kgo.Client {
		cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.TransactionalID("tx-z"), kgo.DefaultProduceTopic("z"))
		require.NoError(t, err)
		t.Cleanup(cl.Close)
		return cl
	}
	zombie := newProducer()
	require.NoError(t, zombie.BeginTransaction())
	require.NoError(t, zombie.ProduceSync(ctx, &kgo.Record{Value: []byte("zombie")}).FirstErr())
	// A new incarnation with the same transactional id fences it and
	// aborts its open transaction.
	fresh := newProducer()
	require.NoError(t, fresh.BeginTransaction())
	require.NoError(t, fresh.ProduceSync(ctx, &kgo.Record{Value: []byte("fresh")}).FirstErr())
	require.NoError(t, fresh.EndTransaction(ctx, kgo.TryCommit))
	err := zombie.EndTransaction(ctx, kgo.TryCommit)
	require.Error(t, err, "the zombie cannot commit")
	got := consumeAll(t, seeds, "z", kgo.ReadCommitted(), 1)
	assert.Equal(t, []string{"fresh"}, got)
	assert.False(t, strings.Contains(strings.Join(got, ","), "zombie"))
}

func TestTransactionsKgoCluster(t *testing.T) {
	nodes := startCluster(t, 3, txnProps)
	s := seeds(nodes)
	createTxnTopic(t, s, "ctxn", 3, 3)
	committed, aborted := runTransactions(t, s, "ctxn", "tx-cluster")
	checkTransactions(t, s, "ctxn", committed, aborted)
}

// TestTransactionsKgoGroupTransactSession: franz-go's exactly-once
// consume-transform-produce loop: the consumed offsets are committed in
// the transaction (AddOffsetsToTxn, TxnOffsetCommit) and count only once
// it commits.
func TestTransactionsKgoGroupTransactSession(t *testing.T) {
	n := startNode(t, map[string]string{"transaction.state.log.replication.factor": "1", "transaction.state.log.min.isr": "1"})
	seeds := []string{n.Addr().String()}
	createTxnTopic(t, seeds, "in", 2, 1)
	createTxnTopic(t, seeds, "out", 2, 1)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	plain, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic("in"))
	require.NoError(t, err)
	defer plain.Close()
	const total = 20
	for i := range total {
		require.NoError(t, plain.ProduceSync(ctx, &kgo.Record{Value: []byte(fmt.Sprintf("v%d", i))}).FirstErr())
	}
	sess, err := kgo.NewGroupTransactSession(kgo.SeedBrokers(seeds...), kgo.TransactionalID("tx-eos"), kgo.ConsumerGroup("eos"),
		kgo.ConsumeTopics("in"), kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.DefaultProduceTopic("out"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	require.NoError(t, err)
	defer sess.Close()
	done := 0
	for done < total && ctx.Err() == nil {
		fs := sess.PollFetches(ctx)
		if fs.Empty() {
			continue
		}
		require.NoError(t, sess.Begin())
		var recs []*kgo.Record
		fs.EachRecord(func(r *kgo.Record) { recs = append(recs, &kgo.Record{Value: append([]byte("out-"), r.Value...)}) })
		for _, r := range recs {
			require.NoError(t, sess.ProduceSync(ctx, r).FirstErr())
		}
		committed, err := sess.End(ctx, kgo.TryCommit)
		require.NoError(t, err)
		if committed {
			done += len(recs)
		}
	}
	require.Equal(t, total, done)
	got := consumeAll(t, seeds, "out", kgo.ReadCommitted(), total)
	assert.Len(t, got, total)
	offs, err := kadm.NewClient(plain).FetchOffsets(ctx, "eos")
	require.NoError(t, err)
	sum := int64(0)
	offs.Each(func(o kadm.OffsetResponse) { sum += o.At })
	assert.Equal(t, int64(total), sum, "the group's offsets were committed with the transactions")
}

// TestTransactionsKgoCoordinatorFailover: the node coordinating a
// transaction shuts down while the transaction is open; the leader of its
// __transaction_state partition moves, the new coordinator loads the
// transaction, and the producer commits it there.
func TestTransactionsKgoCoordinatorFailover(t *testing.T) {
	nodes := startCluster(t, 3, txnProps)
	s := seeds(nodes)
	createTxnTopic(t, s, "fo", 3, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(s...), kgo.TransactionalID("tx-fo"), kgo.DefaultProduceTopic("fo"),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	require.NoError(t, err)
	defer cl.Close()
	var want []string
	produce := func(prefix string) {
		for j := range 4 {
			v := fmt.Sprintf("%s-%d", prefix, j)
			require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Value: []byte(v)}).FirstErr())
			want = append(want, v)
		}
	}
	require.NoError(t, cl.BeginTransaction())
	produce("before")
	coord := kadm.NewClient(cl).FindTxnCoordinators(ctx, "tx-fo")["tx-fo"]
	require.NoError(t, coord.Err)
	var rest []string
	for _, c := range nodes {
		if c.id == coord.NodeID {
			stopNode(t, c.node)
			continue
		}
		rest = append(rest, c.node.Addr().String())
	}
	produce("during")
	require.NoError(t, cl.EndTransaction(ctx, kgo.TryCommit))
	moved := kadm.NewClient(cl).FindTxnCoordinators(ctx, "tx-fo")["tx-fo"]
	require.NoError(t, moved.Err)
	assert.NotEqual(t, coord.NodeID, moved.NodeID, "the coordinator moved with its partition's leader")
	require.NoError(t, cl.BeginTransaction())
	produce("after")
	require.NoError(t, cl.EndTransaction(ctx, kgo.TryCommit))
	got := consumeAll(t, rest, "fo", kgo.ReadCommitted(), len(want))
	assert.ElementsMatch(t, want, got)
}

// TestTransactionsSurviveACrash (seed 002): a node crashes with a
// transaction open; at restart the partition rebuilds the open transaction
// from its log (the last stable offset stays at its first record) and the
// coordinator reloads it from __transaction_state, so the producer's next
// incarnation aborts it and read_committed consumers never see it.
func TestTransactionsSurviveACrash(t *testing.T) {
	props := map[string]string{"transaction.state.log.replication.factor": "1", "transaction.state.log.min.isr": "1",
		"log.dirs": t.TempDir()}
	n := startNode(t, props)
	seeds := []string{n.Addr().String()}
	createTxnTopic(t, seeds, "crash", 1, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	producer := func(seeds []string) *kgo.Client {
		cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.TransactionalID("tx-crash"), kgo.DefaultProduceTopic("crash"))
		require.NoError(t, err)
		t.Cleanup(cl.Close)
		return cl
	}
	p1 := producer(seeds)
	require.NoError(t, p1.BeginTransaction())
	require.NoError(t, p1.ProduceSync(ctx, &kgo.Record{Value: []byte("committed")}).FirstErr())
	require.NoError(t, p1.EndTransaction(ctx, kgo.TryCommit))
	require.NoError(t, p1.BeginTransaction())
	require.NoError(t, p1.ProduceSync(ctx, &kgo.Record{Value: []byte("open")}).FirstErr())
	n.kill()
	p1.Close()

	n2 := startNode(t, props)
	seeds = []string{n2.Addr().String()}
	plain, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic("crash"))
	require.NoError(t, err)
	defer plain.Close()
	adm := kadm.NewClient(plain)
	require.Eventually(t, func() bool {
		end, err1 := adm.ListEndOffsets(ctx, "crash")
		stable, err2 := adm.ListCommittedOffsets(ctx, "crash")
		return err1 == nil && err2 == nil && end["crash"][0].Err == nil && stable["crash"][0].Err == nil &&
			end["crash"][0].Offset == 3 && stable["crash"][0].Offset == 2
	}, 30*time.Second, 50*time.Millisecond, "after the restart the LSO stays at the open transaction's first record")
	p2 := producer(seeds)
	require.NoError(t, p2.BeginTransaction())
	require.NoError(t, p2.ProduceSync(ctx, &kgo.Record{Value: []byte("after")}).FirstErr())
	require.NoError(t, p2.EndTransaction(ctx, kgo.TryCommit))
	got := consumeAll(t, seeds, "crash", kgo.ReadCommitted(), 2)
	assert.Equal(t, []string{"committed", "after"}, got)
}

// TestTransactionVersion2: at the default faultline.transaction.version=2
// franz-go runs KIP-890 part 2 against a cluster: it sends no
// AddPartitionsToTxn (each partition leader adds its partition, through a
// coordinator on another node as often as not), and every EndTxn bumps
// the epoch; at 0 clients keep the old protocol and one epoch. Both read
// back exactly.
func TestTransactionVersion2(t *testing.T) {
	for _, level := range []string{"2", "0"} {
		t.Run("transaction.version="+level, func(t *testing.T) {
			props := map[string]string{"faultline.transaction.version": level}
			for k, v := range txnProps {
				props[k] = v
			}
			nodes := startCluster(t, 3, props)
			s := seeds(nodes)
			createTxnTopic(t, s, "tv", 3, 3)
			committed, aborted := runTransactions(t, s, "tv", "tx-tv"+level)
			checkTransactions(t, s, "tv", committed, aborted)

			cl, err := kgo.NewClient(kgo.SeedBrokers(s...))
			require.NoError(t, err)
			defer cl.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			described, err := kadm.NewClient(cl).DescribeTransactions(ctx, "tx-tv"+level)
			require.NoError(t, err)
			d := described["tx-tv"+level]
			require.NoError(t, d.Err)
			adds := 0.0
			for _, n := range nodes {
				adds += n.node.requestCount("AddPartitionsToTxn")
			}
			if level == "2" {
				// franz-go takes KIP-890 part 2 as a whole: the epoch
				// bumps show it sent no AddPartitionsToTxn either (those
				// counted are the leaders' own, to a coordinator on
				// another node), and the exact read_committed read shows
				// the leaders put every partition in its transaction.
				assert.Equal(t, int16(3), d.ProducerEpoch, "an epoch bump per transaction (three)")
			} else {
				assert.Equal(t, int16(0), d.ProducerEpoch, "one epoch across transactions")
				assert.Positive(t, adds, "the client adds its partitions")
			}
		})
	}
}

// TestDelayedProduceCannotOpenAHangingTransaction (KIP-890 part 1): a
// transactional batch of the Kafka 3.x protocol (the client adds its
// partitions) for a partition its transaction never had, as a
// produce delayed past the end of its transaction arrives, is refused with
// INVALID_TXN_STATE instead of opening a transaction nobody will end, so
// the partition's last stable offset does not stop; with
// transaction.partition.verification.enable=false it is appended and
// holds read_committed consumers back until the transaction times out.
func TestDelayedProduceCannotOpenAHangingTransaction(t *testing.T) {
	for _, verify := range []bool{true, false} {
		t.Run(fmt.Sprintf("verification=%v", verify), func(t *testing.T) {
			// transaction.version 0: kgo's request goes out at v12,
			// which under 2 would add the partition itself.
			n := startNode(t, map[string]string{"transaction.state.log.replication.factor": "1", "transaction.state.log.min.isr": "1",
				"transaction.partition.verification.enable": fmt.Sprint(verify), "faultline.transaction.version": "0"})
			seeds := []string{n.Addr().String()}
			createTxnTopic(t, seeds, "hang", 1, 1)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
			require.NoError(t, err)
			defer cl.Close()
			// A producer id for the transactional id, with no
			// transaction open.
			init := kmsg.NewPtrInitProducerIDRequest()
			init.TransactionalID = kmsg.StringPtr("tx-hang")
			init.TransactionTimeoutMillis = 60000
			var coord *kmsg.FindCoordinatorResponse
			require.Eventually(t, func() bool {
				fc := kmsg.NewPtrFindCoordinatorRequest()
				fc.CoordinatorKey, fc.CoordinatorType = "tx-hang", 1
				resp, err := fc.RequestWith(ctx, cl)
				coord = resp
				return err == nil && resp.ErrorCode == 0
			}, 30*time.Second, 100*time.Millisecond)
			require.NotNil(t, coord)
			var ipr *kmsg.InitProducerIDResponse
			require.Eventually(t, func() bool {
				resp, err := init.RequestWith(ctx, cl)
				ipr = resp
				return err == nil && resp.ErrorCode == 0
			}, 30*time.Second, 100*time.Millisecond)

			batch := storage.BuildBatch([]storage.Record{{Offset: 0, TimestampMs: time.Now().UnixMilli(), Value: []byte("late")}},
				storage.BatchOptions{Producer: &storage.BatchProducer{ID: ipr.ProducerID, Epoch: ipr.ProducerEpoch}, Transactional: true})
			pr := kmsg.NewPtrProduceRequest()
			pr.Acks, pr.TimeoutMillis, pr.TransactionID = -1, 10000, kmsg.StringPtr("tx-hang")
			rt := kmsg.NewProduceRequestTopic()
			rt.Topic = "hang"
			rp := kmsg.NewProduceRequestTopicPartition()
			rp.Partition, rp.Records = 0, batch
			rt.Partitions = append(rt.Partitions, rp)
			pr.Topics = append(pr.Topics, rt)
			presp, err := pr.RequestWith(ctx, cl)
			require.NoError(t, err)
			code := presp.Topics[0].Partitions[0].ErrorCode

			adm := kadm.NewClient(cl)
			ends, err := adm.ListEndOffsets(ctx, "hang")
			require.NoError(t, err)
			stable, err := adm.ListCommittedOffsets(ctx, "hang")
			require.NoError(t, err)
			if verify {
				assert.Equal(t, kerr.InvalidTxnState.Code, code, "the partition is in no open transaction")
				assert.Equal(t, int64(0), ends["hang"][0].Offset, "nothing appended")
				assert.Equal(t, int64(0), stable["hang"][0].Offset)
				return
			}
			assert.Zero(t, code, "without verification the batch is appended")
			assert.Equal(t, int64(1), ends["hang"][0].Offset)
			assert.Equal(t, int64(0), stable["hang"][0].Offset, "and holds the last stable offset: a hanging transaction")
		})
	}
}
