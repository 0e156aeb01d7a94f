package sarama

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faultline/faultline/internal/compat/goclients"
)

func config(t *testing.T) *sarama.Config {
	t.Helper()
	c := sarama.NewConfig()
	c.Version = sarama.V4_0_0_0
	c.Producer.Idempotent = true
	c.Producer.RequiredAcks = sarama.WaitForAll
	c.Producer.Return.Successes = true
	c.Producer.Retry.Max = 50
	c.Producer.Retry.Backoff = 200 * time.Millisecond
	c.Producer.Partitioner = sarama.NewRoundRobinPartitioner
	c.Producer.Transaction.Retry.Max = 50
	c.Producer.Transaction.Retry.Backoff = 200 * time.Millisecond
	c.Net.MaxOpenRequests = 1
	c.Metadata.Retry.Max = 50
	c.Consumer.IsolationLevel = sarama.ReadCommitted
	c.Consumer.Offsets.Initial = sarama.OffsetOldest
	c.Consumer.Offsets.AutoCommit.Enable = false
	return c
}

func createTopics(t *testing.T, addrs []string, topics ...string) {
	t.Helper()
	admin, err := sarama.NewClusterAdmin(addrs, config(t))
	require.NoError(t, err)
	defer admin.Close()
	for _, topic := range topics {
		require.NoError(t, admin.CreateTopic(topic, &sarama.TopicDetail{NumPartitions: 3, ReplicationFactor: 3}, false))
	}
}

// readCommitted reads topic's three partitions from the start with a
// read_committed consumer until none has returned a record for idle, and
// counts each value.
func readCommitted(t *testing.T, addrs []string, topic string, idle time.Duration) map[string]int {
	t.Helper()
	c, err := sarama.NewConsumer(addrs, config(t))
	require.NoError(t, err)
	defer c.Close()
	seen := map[string]int{}
	for p := range int32(3) {
		pc, err := c.ConsumePartition(topic, p, sarama.OffsetOldest)
		require.NoError(t, err)
	read:
		for {
			select {
			case m := <-pc.Messages():
				seen[string(m.Value)]++
			case <-time.After(idle):
				break read
			}
		}
		require.NoError(t, pc.Close())
	}
	return seen
}

// TestSaramaTransactionsUnderKill: 150 transactions of 4 sends over 3
// partitions, every fifth aborted, with a node killed after the 40th and
// restarted 4 s later; read_committed gets every committed value exactly
// once and no aborted one.
func TestSaramaTransactionsUnderKill(t *testing.T) {
	c := goclients.StartCluster(t, "")
	createTopics(t, c.Addrs, "txn")
	cfg := config(t)
	cfg.Producer.Transaction.ID = "sarama-txn"
	p, err := sarama.NewSyncProducer(c.Addrs, cfg)
	require.NoError(t, err)
	defer p.Close()
	committed, aborted := map[string]bool{}, map[string]bool{}
	var restarted <-chan error
	for i := range 150 {
		if i == 40 {
			restarted = c.KillAndRestart(t, 0, 4*time.Second)
		}
		require.NoError(t, p.BeginTxn(), "begin %d", i)
		var vals []string
		for j := range 4 {
			v := fmt.Sprintf("t%d-%d", i, j)
			vals = append(vals, v)
			_, _, err := p.SendMessage(&sarama.ProducerMessage{Topic: "txn", Value: sarama.StringEncoder(v)})
			require.NoError(t, err, "send %s", v)
		}
		if i%5 == 4 {
			require.NoError(t, p.AbortTxn(), "abort %d", i)
			for _, v := range vals {
				aborted[v] = true
			}
			continue
		}
		require.NoError(t, p.CommitTxn(), "commit %d", i)
		for _, v := range vals {
			committed[v] = true
		}
	}
	require.NoError(t, <-restarted)
	c.WaitReady(t, 0)
	seen := readCommitted(t, c.Addrs, "txn", 3*time.Second)
	for v := range committed {
		assert.Equal(t, 1, seen[v], "committed %s", v)
	}
	for v := range aborted {
		assert.Zero(t, seen[v], "aborted %s", v)
	}
	assert.Len(t, seen, len(committed))
}

// forward is a consumer group handler that copies each record of "in" to
// "out" inside a transaction that also commits the record's offset.
type forward struct {
	p        sarama.AsyncProducer
	n        atomic.Int64
	failures atomic.Int64
}

func (*forward) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (*forward) Cleanup(sarama.ConsumerGroupSession) error { return nil }

func (f *forward) ConsumeClaim(s sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	var batch []*sarama.ConsumerMessage
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		defer func() { batch = batch[:0] }()
		if err := f.p.BeginTxn(); err != nil {
			return err
		}
		for _, m := range batch {
			f.p.Input() <- &sarama.ProducerMessage{Topic: "out", Value: sarama.ByteEncoder(m.Value)}
			if err := f.p.AddMessageToTxn(m, "forward", nil); err != nil {
				_ = f.p.AbortTxn()
				return err
			}
		}
		if err := f.p.CommitTxn(); err != nil {
			f.failures.Add(1)
			if f.p.TxnStatus()&sarama.ProducerTxnFlagAbortableError != 0 {
				_ = f.p.AbortTxn()
			}
			// Start the claim again from the group's committed offset.
			s.ResetOffset(batch[0].Topic, batch[0].Partition, batch[0].Offset, "")
			return err
		}
		f.n.Add(int64(len(batch)))
		return nil
	}
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case m, ok := <-claim.Messages():
			if !ok {
				return flush()
			}
			if batch = append(batch, m); len(batch) >= 10 {
				if err := flush(); err != nil {
					return err
				}
			}
		case <-tick.C:
			if err := flush(); err != nil {
				return err
			}
		case <-s.Context().Done():
			return nil
		}
	}
}

// TestSaramaConsumeTransformProduceUnderKill: a consumer group copies 600
// records from "in" to "out", each batch and its offsets in one
// transaction (AddOffsetsToTxn, TxnOffsetCommit), while a node is killed
// and restarted; "out" then holds every input exactly once.
func TestSaramaConsumeTransformProduceUnderKill(t *testing.T) {
	const total = 600
	c := goclients.StartCluster(t, "")
	createTopics(t, c.Addrs, "in", "out")
	plain := config(t)
	pp, err := sarama.NewSyncProducer(c.Addrs, plain)
	require.NoError(t, err)
	for i := range total {
		_, _, err := pp.SendMessage(&sarama.ProducerMessage{Topic: "in", Value: sarama.StringEncoder(fmt.Sprintf("in-%d", i))})
		require.NoError(t, err)
	}
	require.NoError(t, pp.Close())

	cfg := config(t)
	cfg.Producer.Transaction.ID = "sarama-forward"
	cfg.Producer.Return.Successes = false
	p, err := sarama.NewAsyncProducer(c.Addrs, cfg)
	require.NoError(t, err)
	g, err := sarama.NewConsumerGroup(c.Addrs, "forward", cfg)
	require.NoError(t, err)
	f := &forward{p: p}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	consumed := make(chan struct{})
	go func() {
		defer close(consumed)
		for ctx.Err() == nil {
			if err := g.Consume(ctx, []string{"in"}, f); err != nil && ctx.Err() == nil {
				time.Sleep(200 * time.Millisecond)
			}
		}
	}()
	require.Eventually(t, func() bool { return f.n.Load() >= total/3 }, 60*time.Second, 10*time.Millisecond)
	restarted := c.KillAndRestart(t, 1, 4*time.Second)
	require.Eventually(t, func() bool { return f.n.Load() >= total }, 80*time.Second, 10*time.Millisecond,
		"forwarded %d of %d (%d failed commits)", f.n.Load(), total, f.failures.Load())
	cancel()
	<-consumed
	require.NoError(t, g.Close())
	require.NoError(t, p.Close())
	require.NoError(t, <-restarted)
	c.WaitReady(t, 1)
	seen := readCommitted(t, c.Addrs, "out", 3*time.Second)
	for i := range total {
		assert.Equal(t, 1, seen[fmt.Sprintf("in-%d", i)], "in-%d", i)
	}
	assert.Len(t, seen, total)
}
