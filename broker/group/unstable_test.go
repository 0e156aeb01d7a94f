package group

import (
	"context"
	"maps"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// txnMemLog is a memLog that takes transactional batches (their records
// count at once: the tests drive CompleteTxn themselves).
type txnMemLog struct{ *memLog }

func (l txnMemLog) AppendTxn(ctx context.Context, p int32, _ int64, _ int16, records []Record) error {
	return l.Append(ctx, p, records)
}

func (l txnMemLog) ReplayTxn(ctx context.Context, p int32, fn func(key, value []byte) error, _ func(int64, []byte, []byte) error) error {
	return l.Replay(ctx, p, fn)
}

// TestRequireStableRefusesOffsetsOfAnOpenTransaction: OffsetFetch with
// RequireStable answers UNSTABLE_OFFSET_COMMIT for a partition whose
// offset a transaction still open committed, and the committed offset
// once the transaction commits; without RequireStable it answers what is
// committed so far.
func TestRequireStableRefusesOffsetsOfAnOpenTransaction(t *testing.T) {
	h := newHarness(t, 0)
	h.c.log = txnMemLog{h.log}
	ctx := context.Background()

	commit := kmsg.NewPtrTxnOffsetCommitRequest()
	commit.Version, commit.TransactionalID, commit.Group, commit.ProducerID, commit.ProducerEpoch, commit.Generation = 3, "tx", "g", 7, 0, -1
	ct := kmsg.NewTxnOffsetCommitRequestTopic()
	ct.Topic = "t"
	cp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
	cp.Partition, cp.Offset = 1, 42
	ct.Partitions = append(ct.Partitions, cp)
	commit.Topics = append(commit.Topics, ct)
	resp := h.c.TxnOffsetCommit(ctx, commit)
	require.Zero(t, resp.Topics[0].Partitions[0].ErrorCode)

	fetch := func(version int16, stable bool, all bool) (int64, int16) {
		req := kmsg.NewPtrOffsetFetchRequest()
		req.Version, req.Group, req.RequireStable = version, "g", stable
		if !all {
			rt := kmsg.NewOffsetFetchRequestTopic()
			rt.Topic, rt.Partitions = "t", []int32{1}
			req.Topics = append(req.Topics, rt)
		}
		out := h.c.OffsetFetch(ctx, req)
		if len(out.Topics) == 0 {
			return -1, 0
		}
		p := out.Topics[0].Partitions[0]
		return p.Offset, p.ErrorCode
	}
	off, code := fetch(7, true, false)
	assert.Equal(t, codeUnstableOffsetCommit, code, "RequireStable: the open transaction's offset may yet replace what is committed")
	assert.Equal(t, int64(-1), off)
	off, code = fetch(7, false, false)
	assert.Zero(t, code)
	assert.Equal(t, int64(-1), off, "without RequireStable: what is committed so far (nothing)")
	off, code = fetch(6, true, false)
	assert.Zero(t, code, "v6 has no RequireStable")
	assert.Equal(t, int64(-1), off)

	h.c.mu.Lock()
	var partition int32 = -1
	for k := range h.c.txnPending {
		partition = k.partition
	}
	h.c.mu.Unlock()
	require.GreaterOrEqual(t, partition, int32(0))
	h.c.CompleteTxn(partition, 7, true)
	off, code = fetch(7, true, false)
	assert.Zero(t, code)
	assert.Equal(t, int64(42), off, "committed with the transaction")
	off, code = fetch(7, true, true)
	assert.Zero(t, code)
	assert.Equal(t, int64(42), off, "the whole group's offsets")

	cp.Offset = 50
	commit.Topics[0].Partitions[0] = cp
	require.Zero(t, h.c.TxnOffsetCommit(ctx, commit).Topics[0].Partitions[0].ErrorCode)
	_, code = fetch(7, true, true)
	assert.Equal(t, codeUnstableOffsetCommit, code, "asking for all the group's offsets too")
	off, code = fetch(7, false, true)
	assert.Zero(t, code)
	assert.Equal(t, int64(42), off)
	h.c.CompleteTxn(partition, 7, false)
	off, code = fetch(7, true, false)
	assert.Zero(t, code)
	assert.Equal(t, int64(42), off, "the aborted transaction's offset is forgotten")
}

// TestUnsafeKeepAbortedOffsets: with unsafe.txn.offsets.kept.on.abort an
// aborted transaction's offset becomes the group's committed offset;
// without it the abort forgets it.
func TestUnsafeKeepAbortedOffsets(t *testing.T) {
	for _, keep := range []bool{false, true} {
		h := newHarness(t, 0)
		h.c.log = txnMemLog{h.log}
		h.c.cfg.Unsafe.KeepAbortedOffsets = keep
		ctx := context.Background()
		commit := kmsg.NewPtrTxnOffsetCommitRequest()
		commit.Version, commit.TransactionalID, commit.Group, commit.ProducerID, commit.ProducerEpoch, commit.Generation = 3, "tx", "g", 7, 0, -1
		commit.Topics = []kmsg.TxnOffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.TxnOffsetCommitRequestTopicPartition{{Partition: 1, Offset: 42, LeaderEpoch: -1}}}}
		require.Zero(t, h.c.TxnOffsetCommit(ctx, commit).Topics[0].Partitions[0].ErrorCode)
		h.c.mu.Lock()
		partitions := slices.Collect(maps.Keys(h.c.txnPending))
		h.c.mu.Unlock()
		require.Len(t, partitions, 1)
		h.c.CompleteTxn(partitions[0].partition, 7, false)

		req := kmsg.NewPtrOffsetFetchRequest()
		req.Version, req.Group, req.RequireStable = 7, "g", true
		req.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: "t", Partitions: []int32{1}}}
		out := h.c.OffsetFetch(ctx, req)
		require.Len(t, out.Topics, 1)
		want := int64(-1)
		if keep {
			want = 42
		}
		assert.Equal(t, want, out.Topics[0].Partitions[0].Offset, "keep=%v", keep)
	}
}
