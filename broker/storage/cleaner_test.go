package storage

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// segs builds segment views from (base, next, size) triples; the last one
// is the active segment.
func segs(spec ...[3]int64) []segmentView {
	out := make([]segmentView, len(spec))
	for i, s := range spec {
		out[i] = segmentView{base: s[0], next: s[1], size: s[2], maxTimestamp: 1000 + s[0]}
	}
	return out
}

func TestPlanCleaning(t *testing.T) {
	three := segs([3]int64{0, 100, 1000}, [3]int64{100, 200, 1000}, [3]int64{200, 250, 500})
	cases := []struct {
		name                      string
		view                      cleanerView
		firstDirty, uncleanable   int64
		cleanBytes, dirtyBytes    int64
		resetCheckpoint           bool
		ratioAtLeast, ratioAtMost float64
	}{
		{name: "no checkpoint: from the log start up to the active segment",
			view:       cleanerView{segments: three, checkpoint: -1, stableOffset: 250},
			firstDirty: 0, uncleanable: 200, dirtyBytes: 2000, ratioAtLeast: 1, ratioAtMost: 1},
		{name: "the high watermark (or LSO) bounds it below the active segment",
			view:       cleanerView{segments: three, checkpoint: -1, stableOffset: 150},
			firstDirty: 0, uncleanable: 150, dirtyBytes: 2000},
		{name: "checkpoint splits clean from dirty",
			view:       cleanerView{segments: three, checkpoint: 100, stableOffset: 250},
			firstDirty: 100, uncleanable: 200, cleanBytes: 1000, dirtyBytes: 1000, ratioAtLeast: 0.5, ratioAtMost: 0.5},
		{name: "checkpoint at the active base: nothing dirty",
			view:       cleanerView{segments: three, checkpoint: 200, stableOffset: 250},
			firstDirty: 200, uncleanable: 200, cleanBytes: 2000},
		{name: "checkpoint past the log end is reset to the log start",
			view:       cleanerView{segments: three, checkpoint: 900, stableOffset: 250},
			firstDirty: 0, uncleanable: 200, dirtyBytes: 2000, resetCheckpoint: true},
		{name: "checkpoint below the log start is reset",
			view:       cleanerView{segments: three, logStart: 100, checkpoint: 50, stableOffset: 250},
			firstDirty: 100, uncleanable: 200, dirtyBytes: 1000, cleanBytes: 1000, resetCheckpoint: true},
		{name: "high watermark below the checkpoint: nothing cleanable",
			view:       cleanerView{segments: three, checkpoint: 100, stableOffset: 40},
			firstDirty: 100, uncleanable: 100, cleanBytes: 1000},
		{name: "min.compaction.lag.ms holds back young segments",
			view:       cleanerView{segments: three, checkpoint: -1, stableOffset: 250, minCompactionLagMs: 500, nowMs: 1550},
			firstDirty: 0, uncleanable: 100, dirtyBytes: 1000},
		{name: "only the active segment",
			view:       cleanerView{segments: segs([3]int64{0, 10, 100}), checkpoint: -1, stableOffset: 10},
			firstDirty: 0, uncleanable: 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := planCleaning(c.view)
			assert.Equal(t, c.firstDirty, p.firstDirty, "first dirty")
			assert.Equal(t, c.uncleanable, p.firstUncleanable, "first uncleanable")
			assert.Equal(t, c.cleanBytes, p.cleanBytes, "clean bytes")
			assert.Equal(t, c.dirtyBytes, p.dirtyBytes, "dirty bytes")
			assert.Equal(t, c.resetCheckpoint, p.resetCheckpoint)
			assert.LessOrEqual(t, p.firstUncleanable, c.view.segments[len(c.view.segments)-1].base, "never the active segment")
			assert.LessOrEqual(t, p.firstUncleanable, max(c.view.stableOffset, p.firstDirty), "never at or above the stable offset")
			if c.ratioAtMost > 0 {
				assert.InDelta(t, c.ratioAtLeast, p.dirtyRatio(), 1e-9)
			}
		})
	}
}

func TestRankFilthiest(t *testing.T) {
	plan := func(clean, dirty int64) cleanablePlan { return cleanablePlan{cleanBytes: clean, dirtyBytes: dirty} }
	cases := []struct {
		name  string
		cands []cleanCandidate
		want  []int
	}{
		{"none", nil, nil},
		{"below the ratio", []cleanCandidate{{plan(60, 40), 0.5}}, nil},
		{"at the ratio", []cleanCandidate{{plan(50, 50), 0.5}}, []int{0}},
		{"the filthiest first", []cleanCandidate{{plan(50, 50), 0.5}, {plan(10, 90), 0.5}, {plan(40, 60), 0.5}}, []int{1, 2, 0}},
		{"per-log ratios", []cleanCandidate{{plan(10, 90), 0.95}, {plan(40, 60), 0.1}}, []int{1}},
		{"nothing dirty never qualifies, even at ratio 0", []cleanCandidate{{plan(100, 0), 0}}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { assert.Equal(t, c.want, rankFilthiest(c.cands)) })
	}
}

func TestGroupSegments(t *testing.T) {
	v := func(base, next, size, idx int64) segmentView {
		return segmentView{base: base, next: next, size: size, offsetIndexBytes: idx, timeIndexBytes: idx}
	}
	cases := []struct {
		name string
		segs []segmentView
		max  int64
		idx  int64
		want []int
	}{
		{"all fit", []segmentView{v(0, 10, 10, 8), v(10, 20, 10, 8), v(20, 30, 10, 8)}, 100, 100, []int{3}},
		{"by size", []segmentView{v(0, 10, 60, 8), v(10, 20, 60, 8), v(20, 30, 30, 8)}, 100, 100, []int{1, 2}},
		{"by index size", []segmentView{v(0, 10, 1, 60), v(10, 20, 1, 60)}, 100, 100, []int{1, 1}},
		{"a segment over the limit is its own group", []segmentView{v(0, 10, 500, 8), v(10, 20, 1, 8)}, 100, 100, []int{1, 1}},
		{"relative offsets must fit 32 bits", []segmentView{v(0, 10, 1, 8), v(1<<31, 1<<31+5, 1, 8)}, 100, 100, []int{1, 1}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { assert.Equal(t, c.want, groupSegments(c.segs, c.max, c.idx)) })
	}
}

func TestOffsetMap(t *testing.T) {
	m := newOffsetMap(offsetMapMinSlots * offsetMapSlotBytes)
	capacity := m.capacity()
	require.Greater(t, capacity, 1000)
	for i := 0; i < capacity; i++ {
		require.True(t, m.put([]byte(fmt.Sprintf("k%d", i)), int64(i)))
	}
	assert.False(t, m.put([]byte("one more"), 1), "full: a new key is refused")
	assert.True(t, m.put([]byte("k3"), 99999), "full: a known key still updates")
	got, ok := m.get([]byte("k3"))
	assert.True(t, ok)
	assert.Equal(t, int64(99999), got)
	assert.True(t, m.put([]byte("k3"), 5), "an older offset is ignored")
	got, _ = m.get([]byte("k3"))
	assert.Equal(t, int64(99999), got)
	_, ok = m.get([]byte("absent"))
	assert.False(t, ok)
	assert.Equal(t, int64(99999), m.latest)
	m.reset()
	_, ok = m.get([]byte("k3"))
	assert.False(t, ok)
	assert.Equal(t, capacity, m.room())

	big := newOffsetMap(1 << 20)
	for i := 0; i < 20000; i++ {
		require.True(t, big.put([]byte(fmt.Sprintf("key-%d", i)), int64(i)), "grows up to its memory")
	}
	for i := 0; i < 20000; i += 997 {
		got, ok := big.get([]byte(fmt.Sprintf("key-%d", i)))
		require.True(t, ok)
		assert.Equal(t, int64(i), got)
	}
}

func TestKeepRecord(t *testing.T) {
	m := newOffsetMap(1 << 16)
	m.put([]byte("a"), 10)
	m.put([]byte("tomb"), 12)
	cases := []struct {
		name          string
		offset        int64
		key           []byte
		tombstone     bool
		horizonPassed bool
		want          bool
	}{
		{"older value of a key is dropped", 5, []byte("a"), false, false, false},
		{"the latest value is kept", 10, []byte("a"), false, false, true},
		{"past the mapped range: kept untouched", 30, []byte("a"), false, false, true},
		{"key not in the map (clean part): kept", 3, []byte("b"), false, false, true},
		{"no key: dropped", 3, nil, false, false, false},
		{"latest tombstone before its horizon: kept", 12, []byte("tomb"), true, false, true},
		{"latest tombstone past its horizon: dropped", 12, []byte("tomb"), true, true, false},
		{"older tombstone: dropped", 4, []byte("a"), true, false, false},
		{"a value in a batch past its horizon is kept", 10, []byte("a"), false, true, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			assert.Equal(t, c.want, keepRecord(c.offset, c.key, c.tombstone, m, 20, c.horizonPassed))
		})
	}
}

func TestDeleteHorizonAndEmptyBatches(t *testing.T) {
	h := BatchHeader{BaseOffset: 10, LastOffsetDelta: 2, BaseTimestamp: 5000, ProducerID: 7}
	assert.False(t, deleteHorizonPassed(h, 9999), "no horizon set")
	h.Attributes = attrDeleteHorizon
	assert.False(t, deleteHorizonPassed(h, 4999))
	assert.True(t, deleteHorizonPassed(h, 5000))

	last := map[int64]int64{7: 12}
	assert.True(t, keepEmptyBatch(h, last, false), "the producer's last batch")
	assert.False(t, keepEmptyBatch(BatchHeader{BaseOffset: 0, LastOffsetDelta: 2, ProducerID: 7}, last, false))
	assert.False(t, keepEmptyBatch(BatchHeader{ProducerID: -1}, last, false), "no producer")
	assert.True(t, keepEmptyBatch(BatchHeader{ProducerID: -1}, last, true), "the group's last batch")
}

func TestTxnTracker(t *testing.T) {
	tr := newTxnTracker()
	data := func(pid, off int64) BatchHeader {
		return BatchHeader{BaseOffset: off, ProducerID: pid, Attributes: attrTransactional}
	}
	marker := func(pid, off int64) BatchHeader {
		return BatchHeader{BaseOffset: off, ProducerID: pid, Attributes: attrTransactional | attrControl}
	}
	tr.observe(data(1, 0), -1)
	tr.observe(data(2, 1), -1)
	tr.observe(data(1, 2), -1)
	tr.observe(marker(1, 3), controlTypeAbort)
	tr.observe(marker(2, 4), controlTypeCommit)
	tr.observe(data(1, 5), -1)
	tr.observe(BatchHeader{BaseOffset: 6, ProducerID: 3}, -1) // not transactional
	assert.True(t, tr.isAborted(1, 0))
	assert.True(t, tr.isAborted(1, 2))
	assert.False(t, tr.isAborted(2, 1), "committed")
	assert.False(t, tr.isAborted(1, 5), "still open")
	first, ok := tr.firstOpen()
	assert.True(t, ok)
	assert.Equal(t, int64(5), first)
	tr.observe(marker(1, 7), controlTypeCommit)
	_, ok = tr.firstOpen()
	assert.False(t, ok)
}

func TestRecordSpanAndKeyCheck(t *testing.T) {
	recs := []Record{{TimestampMs: 100, Key: []byte("k"), Value: []byte("v")}, {TimestampMs: 105, Key: []byte(""), Value: nil}}
	b := BuildBatch(recs, BatchOptions{})
	h, err := ValidateBatch(b)
	require.NoError(t, err)
	body := b[BatchHeaderSize:]
	r0, err := nextRecordSpan(body, 0, h.LastOffsetDelta)
	require.NoError(t, err)
	assert.Equal(t, []byte("k"), r0.key)
	assert.False(t, r0.tombstone)
	r1, err := nextRecordSpan(body, r0.end, h.LastOffsetDelta)
	require.NoError(t, err)
	assert.NotNil(t, r1.key, "an empty key is a key")
	assert.True(t, r1.tombstone)
	assert.Equal(t, int64(1), r1.offsetDelta)
	assert.Equal(t, int64(5), r1.tsDelta)
	assert.Equal(t, len(body), r1.end)
	require.NoError(t, checkRecordKeys(h, b))

	keyless := BuildBatch([]Record{{Key: []byte("a"), Value: []byte("1")}, {Value: []byte("2")}}, BatchOptions{Compression: CompressionZstd})
	h, err = ValidateBatch(keyless)
	require.NoError(t, err)
	assert.ErrorIs(t, checkRecordKeys(h, keyless), ErrInvalidRecord)

	_, err = nextRecordSpan([]byte{0x7f}, 0, 0)
	assert.ErrorIs(t, err, ErrInvalidRecord)
}

func TestRetimedRecordsKeepTheirTimestamps(t *testing.T) {
	recs := []Record{{TimestampMs: 1000, Key: []byte("a"), Value: []byte("1")}, {TimestampMs: 1007, Key: []byte("b"), Value: nil}}
	b := BuildBatch(recs, BatchOptions{BaseOffset: 40, Compression: CompressionLZ4})
	h, err := ValidateBatch(b)
	require.NoError(t, err)
	body, err := batchBody(h, b)
	require.NoError(t, err)
	var out []byte
	for pos := 0; pos < len(body); {
		r, err := nextRecordSpan(body, pos, h.LastOffsetDelta)
		require.NoError(t, err)
		out = appendRetimedRecord(out, body, r, h.BaseTimestamp+r.tsDelta-999999)
		pos = r.end
	}
	nb, err := encodeBatch(h, h.Attributes|attrDeleteHorizon, 999999, h.MaxTimestamp, 2, out)
	require.NoError(t, err)
	got, err := DecodeRecords(nb)
	require.NoError(t, err)
	require.Len(t, got, 2)
	assert.Equal(t, int64(1000), got[0].TimestampMs)
	assert.Equal(t, int64(1007), got[1].TimestampMs)
	assert.Equal(t, int64(41), got[1].Offset)
	assert.Nil(t, got[1].Value)
	nh, err := ValidateBatch(nb)
	require.NoError(t, err)
	assert.True(t, deleteHorizonPassed(nh, 999999))
	assert.Equal(t, CompressionLZ4, nh.Compression())

	e := emptyBatch(h)
	eh, err := ValidateBatch(e)
	require.NoError(t, err)
	assert.Equal(t, int32(0), eh.RecordCount)
	assert.Equal(t, h.LastOffset(), eh.LastOffset())
	assert.Equal(t, CompressionNone, eh.Compression())
}

// FuzzCleanerBatchFilter feeds the cleaner's record parser and batch
// filter arbitrary record bytes in a batch with a valid header and CRC:
// it must never panic, and what it keeps must be a valid batch with the
// original offsets.
func FuzzCleanerBatchFilter(f *testing.F) {
	f.Add(BuildBatch(records(3, "v", 1000), BatchOptions{})[BatchHeaderSize:], uint8(3), uint8(0))
	f.Add([]byte{0x02, 0x00}, uint8(1), uint8(1))
	f.Add([]byte{}, uint8(0), uint8(2))
	f.Fuzz(func(t *testing.T, body []byte, count, codec uint8) {
		h := BatchHeader{BaseOffset: 100, LastOffsetDelta: int32(count), BaseTimestamp: 1000, MaxTimestamp: 1000,
			ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}
		c := Compression(codec % 5)
		if c != CompressionNone {
			h.Attributes = int16(c)
		}
		batch, err := encodeBatch(h, h.Attributes, h.BaseTimestamp, h.MaxTimestamp, int32(count), body)
		require.NoError(t, err)
		vh, err := ValidateBatch(batch)
		require.NoError(t, err)
		_ = checkRecordKeys(vh, batch)
		m := newOffsetMap(1 << 16)
		m.put([]byte("k0"), 200)
		p := &cleanPass{l: &Log{cfg: compactConfig()}, m: m, tracker: newTxnTracker(), endOffset: 150, nowMs: 5000}
		kept, _, err := p.filterBatch(vh, batch)
		if err != nil {
			return
		}
		kh, err := ValidateBatch(kept)
		require.NoError(t, err, "the cleaner keeps a valid batch")
		assert.Equal(t, vh.BaseOffset, kh.BaseOffset)
		assert.Equal(t, vh.LastOffset(), kh.LastOffset())
		if _, err := DecodeRecords(batch); err == nil {
			_, err = DecodeRecords(kept)
			assert.NoError(t, err, "a batch that decodes keeps decoding")
		}
	})
}
