package server

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/faultline/faultline/broker/storage"
)

// fakeTxns is a transaction coordinator that answers nothing it is not
// asked in these tests.
type fakeTxns struct{ Transactions }

// fakeAdder records what it is asked to add and answers code.
type fakeAdder struct {
	mu      sync.Mutex
	code    int16
	calls   []string
	batches int // AddTxnPartitions calls
}

func (a *fakeAdder) AddTxnPartitions(_ context.Context, id string, pid int64, epoch int16, partitions []storage.TopicPartition, verifyOnly bool) []int16 {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.batches++
	prefix, codes := "", make([]int16, len(partitions))
	if verifyOnly {
		prefix = "verify "
	}
	for i, tp := range partitions {
		a.calls = append(a.calls, fmt.Sprintf("%s%s/%s-%d pid %d epoch %d", prefix, id, tp.Topic, tp.Partition, pid, epoch))
		codes[i] = a.code
	}
	return codes
}

func (a *fakeAdder) AddTxnOffsets(_ context.Context, id string, _ int64, _ int16, group string) int16 {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.calls = append(a.calls, id+"/offsets:"+group)
	return a.code
}

func (a *fakeAdder) called() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.calls...)
}

func txnBatch(transactional bool) []byte {
	return storage.BuildBatch([]storage.Record{{Offset: 0, TimestampMs: 1, Value: []byte("v")}},
		storage.BatchOptions{Producer: &storage.BatchProducer{ID: 7, Epoch: 3}, Transactional: transactional})
}

func produceTxn(c *rawConn, version int16, records []byte) int16 {
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks, req.TimeoutMillis = version, -1, 5000
	req.TransactionID = kmsg.StringPtr("tx")
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "t"
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = 0, records
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return c.roundTrip(req).(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode
}

// TestTransactionVersionFeature: with a coordinator and an adder the
// broker finalizes transaction.version at its level (KIP-584 features in
// ApiVersions v3+); without an adder, or at level 0, it advertises none.
func TestTransactionVersionFeature(t *testing.T) {
	for name, tc := range map[string]struct {
		adder bool
		level int16
		want  int16 // finalized level, 0 for none
	}{
		"level 2":     {adder: true, level: 2, want: 2},
		"level 0":     {adder: true, level: 0},
		"no adder":    {adder: false, level: 2},
		"level above": {adder: true, level: 9, want: 2},
	} {
		t.Run(name, func(t *testing.T) {
			ts := startServer(t, Options{}, func(b *Backend) {
				b.Txns, b.TransactionVersion = fakeTxns{}, tc.level
				if tc.adder {
					b.TxnAdder = &fakeAdder{}
				}
			})
			req := kmsg.NewPtrApiVersionsRequest()
			req.Version = 3
			resp := dial(t, ts.addr).roundTrip(req).(*kmsg.ApiVersionsResponse)
			if tc.want == 0 {
				assert.Empty(t, resp.FinalizedFeatures)
				return
			}
			require.Len(t, resp.FinalizedFeatures, 1)
			assert.Equal(t, "transaction.version", resp.FinalizedFeatures[0].Name)
			assert.Equal(t, tc.want, resp.FinalizedFeatures[0].MaxVersionLevel)
			require.Len(t, resp.SupportedFeatures, 1)
			assert.Equal(t, int16(2), resp.SupportedFeatures[0].MaxVersion)
		})
	}
}

// TestProduceV12AddsItsPartitionToTheTransaction: under transaction.version
// 2 a transactional batch of a Produce v12 is appended only once the
// coordinator put its partition in the transaction; a moving or busy
// coordinator is NOT_ENOUGH_REPLICAS (retried), a fenced producer's
// refusal is passed on; v11, and batches that are not transactional, are
// not asked about.
func TestProduceV12AddsItsPartitionToTheTransaction(t *testing.T) {
	adder := &fakeAdder{}
	ts := startServer(t, Options{}, func(b *Backend) { b.Txns, b.TxnAdder, b.TransactionVersion = fakeTxns{}, adder, 2 })
	require.True(t, ts.fake.addTopic("t", 1))
	c := dial(t, ts.addr)

	assert.Zero(t, produceTxn(c, 12, txnBatch(true)))
	assert.Equal(t, []string{"tx/t-0 pid 7 epoch 3"}, adder.called())
	assert.Zero(t, produceTxn(c, 11, txnBatch(true)), "v11: the client added the partition itself")
	assert.Zero(t, produceTxn(c, 12, txnBatch(false)), "an idempotent batch is in no transaction")
	assert.Len(t, adder.called(), 1)

	for code, want := range map[int16]int16{
		kerr.ConcurrentTransactions.Code:  kerr.NotEnoughReplicas.Code,
		kerr.NotCoordinator.Code:          kerr.NotEnoughReplicas.Code,
		kerr.CoordinatorNotAvailable.Code: kerr.NotEnoughReplicas.Code,
		kerr.ProducerFenced.Code:          kerr.ProducerFenced.Code,
		kerr.InvalidProducerEpoch.Code:    kerr.InvalidProducerEpoch.Code,
	} {
		adder.mu.Lock()
		adder.code = code
		adder.mu.Unlock()
		assert.Equal(t, want, produceTxn(c, 12, txnBatch(true)), kerr.ErrorForCode(code).Error())
	}
}

// TestProduceVerifiesTheFirstBatchOfATransaction (KIP-890 part 1): below
// v12 (or transaction.version 2), with verification on, a transactional
// batch is appended only once the coordinator confirms its partition is
// in the transaction; a partition whose producer state has the
// transaction open is not asked about; a batch of a transaction the
// coordinator does not have open is refused with its answer.
func TestProduceVerifiesTheFirstBatchOfATransaction(t *testing.T) {
	adder := &fakeAdder{}
	open := &sync.Map{}
	ts := startServer(t, Options{}, func(b *Backend) {
		b.Txns, b.TxnAdder, b.TransactionVersion, b.VerifyTxnPartitions = fakeTxns{}, adder, 0, true
		b.Replicas = openTxns{Replicas: b.Replicas, open: open}
	})
	require.True(t, ts.fake.addTopic("t", 1))
	c := dial(t, ts.addr)

	assert.Zero(t, produceTxn(c, 11, txnBatch(true)))
	assert.Equal(t, []string{"verify tx/t-0 pid 7 epoch 3"}, adder.called())
	assert.Zero(t, produceTxn(c, 11, txnBatch(false)), "an idempotent batch is in no transaction")
	open.Store(int64(7), true)
	assert.Zero(t, produceTxn(c, 11, txnBatch(true)), "the transaction is open on the partition")
	assert.Len(t, adder.called(), 1)
	open.Delete(int64(7))

	for code, want := range map[int16]int16{
		kerr.InvalidTxnState.Code:        kerr.InvalidTxnState.Code,
		kerr.ProducerFenced.Code:         kerr.ProducerFenced.Code,
		kerr.ConcurrentTransactions.Code: kerr.NotEnoughReplicas.Code,
		kerr.NotCoordinator.Code:         kerr.NotEnoughReplicas.Code,
	} {
		adder.mu.Lock()
		adder.code = code
		adder.mu.Unlock()
		assert.Equal(t, want, produceTxn(c, 11, txnBatch(true)), kerr.ErrorForCode(code).Error())
	}
}

// openTxns answers InTransaction from open (by producer id).
type openTxns struct {
	Replicas
	open *sync.Map
}

func (o openTxns) InTransaction(_ string, _ int32, producerID int64, _ int16) bool {
	_, ok := o.open.Load(producerID)
	return ok
}

// TestProduceV12AddsAllItsPartitionsAtOnce: the transactional batches of
// one Produce v12 for three partitions are added in one call (one
// __transaction_state write at the coordinator, as Kafka's brokers batch
// them).
func TestProduceV12AddsAllItsPartitionsAtOnce(t *testing.T) {
	adder := &fakeAdder{}
	ts := startServer(t, Options{}, func(b *Backend) { b.Txns, b.TxnAdder, b.TransactionVersion = fakeTxns{}, adder, 2 })
	require.True(t, ts.fake.addTopic("t", 3))
	c := dial(t, ts.addr)
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks, req.TimeoutMillis = 12, -1, 5000
	req.TransactionID = kmsg.StringPtr("tx")
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "t"
	for p := range int32(3) {
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Partition, rp.Records = p, txnBatch(true)
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	resp := c.roundTrip(req).(*kmsg.ProduceResponse)
	for _, p := range resp.Topics[0].Partitions {
		assert.Zero(t, p.ErrorCode, "partition %d", p.Partition)
	}
	assert.Equal(t, 1, adder.batches)
	assert.Equal(t, []string{"tx/t-0 pid 7 epoch 3", "tx/t-1 pid 7 epoch 3", "tx/t-2 pid 7 epoch 3"}, adder.called())
}
