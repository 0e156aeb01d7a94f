package checker

import (
	"context"
	"fmt"
	"maps"
	"slices"
)

// Anomaly names, as Jepsen's Kafka checker spells them (the last,
// lost-after-read, is faultline's own).
const (
	AnomalyLostWrite           = "lost-write"
	AnomalyUnseen              = "unseen"
	AnomalyDuplicate           = "duplicate"
	AnomalyInconsistentOffsets = "inconsistent-offsets"
	AnomalyPollSkip            = "poll-skip"
	AnomalyIntPollSkip         = "int-poll-skip"
	AnomalyNonmonotonicPoll    = "nonmonotonic-poll"
	AnomalyIntNonmonotonicPoll = "int-nonmonotonic-poll"
	AnomalyNonmonotonicSend    = "nonmonotonic-send"
	AnomalyIntNonmonotonicSend = "int-nonmonotonic-send"
	AnomalyIntSendSkip         = "int-send-skip"
	AnomalyG1a                 = "G1a"
	AnomalyPrecommittedRead    = "precommitted-read"
	AnomalyG0                  = "G0"
	AnomalyNonlinearizable     = "nonlinearizable"
	// AnomalyEmptyTransactionGraph is a history with no completed send or
	// poll (Jepsen's kafka checker reports elle's empty-transaction-graph
	// for it, and counts it against validity).
	AnomalyEmptyTransactionGraph = "empty-transaction-graph"
	// AnomalyLostAfterRead is faultline's, not Jepsen's: a value polls
	// read (so it lay below the high watermark: committed) that the
	// healed cluster no longer holds. The final reads stopped short of
	// it, and its partition's high watermark, listed after them, is at or
	// below every offset it was seen at. Jepsen's lost-write and unseen
	// count only values no poll ever read, so a committed tail lost after
	// consumers had read it, with nothing written at its offsets again,
	// shows in neither.
	AnomalyLostAfterRead = "lost-after-read"
)

// AllowedAnomalies returns the anomalies a test tolerates, after Jepsen's
// allowed-error-types: int-send-skip and G0 (with its process and realtime
// variants) always (Kafka transactions do not isolate writes); with subscribe also poll-skip and nonmonotonic-poll,
// because a rebalance may move a partition between consumers. Everything
// else, unseen included, makes the result invalid.
func AllowedAnomalies(subscribe bool) map[string]bool {
	allowed := map[string]bool{AnomalyIntSendSkip: true, AnomalyG0: true, AnomalyG0Process: true, AnomalyG0Realtime: true}
	if subscribe {
		allowed[AnomalyPollSkip] = true
		allowed[AnomalyNonmonotonicPoll] = true
	}
	return allowed
}

// valInfo is what the analysis knows about one value of one key.
type valInfo struct {
	writer     int32  // position of the completion that sent it, -1 if none
	writerType OpType // type of that completion
	reader     int32  // position of the first ok op that read it, -1 if none
	readOK     bool
	offsets    int32 // distinct offsets it was seen at in the version order
	firstIdx   int32 // first and last log position it appears at, -1 if none
	lastIdx    int32
	repIdx     int32 // log position where it is the representative value, -1 if none
}

// logEntry is the first value known at an offset and the op that showed it.
type logEntry struct {
	value int64
	pos   int32
}

// keyData is one key's version order (Jepsen's version-orders) plus
// per-value facts. Memory is O(values of the key).
type keyData struct {
	vals     map[int64]int32 // value -> index in infos
	infos    []valInfo
	log      map[int64]logEntry   // offset -> first value seen there
	conflict map[int64][]logEntry // offset -> further distinct values
	offsets  []int64              // sorted offsets of log: position -> offset
	rep      []int64              // position -> representative value
	// aborted[i] counts the positions below i whose representative value
	// was sent by an op that definitely failed (an aborted transaction's
	// record): read_committed never returns them, so a read passing over
	// them skips nothing. Nil when there are none, and outside txn mode
	// (a plain log's every reader must see every record in it).
	aborted []int32
}

func newKeyData() *keyData {
	return &keyData{vals: map[int64]int32{}, log: map[int64]logEntry{}}
}

func (kd *keyData) info(v int64) *valInfo {
	i, ok := kd.vals[v]
	if !ok {
		i = int32(len(kd.infos))
		kd.vals[v] = i
		kd.infos = append(kd.infos, valInfo{writer: -1, reader: -1, firstIdx: -1, lastIdx: -1, repIdx: -1})
	}
	return &kd.infos[i]
}

func (kd *keyData) lookup(v int64) *valInfo {
	if i, ok := kd.vals[v]; ok {
		return &kd.infos[i]
	}
	return nil
}

// addLog records that value v was seen at offset o by the op at pos.
func (kd *keyData) addLog(o, v int64, pos int32) {
	e, ok := kd.log[o]
	if !ok {
		kd.log[o] = logEntry{v, pos}
		kd.info(v).offsets++
		return
	}
	if e.value == v {
		return
	}
	if kd.conflict == nil {
		kd.conflict = map[int64][]logEntry{}
	}
	for _, c := range kd.conflict[o] {
		if c.value == v {
			return
		}
	}
	kd.conflict[o] = append(kd.conflict[o], logEntry{v, pos})
	kd.info(v).offsets++
}

// build orders the log and assigns positions (Jepsen's dense indexes);
// with txn it counts the aborted positions.
func (kd *keyData) build(txn bool) {
	kd.offsets = slices.Sorted(maps.Keys(kd.log))
	kd.rep = make([]int64, len(kd.offsets))
	kd.aborted = nil
	for i, o := range kd.offsets {
		e := kd.log[o]
		kd.rep[i] = e.value
		idx := int32(i)
		if vi := kd.lookup(e.value); txn && vi != nil && vi.writer >= 0 && vi.writerType == Fail {
			if kd.aborted == nil {
				kd.aborted = make([]int32, len(kd.offsets)+1)
			}
			kd.aborted[i+1] = 1
		}
		mark := func(v int64) {
			vi := kd.info(v)
			if vi.firstIdx < 0 {
				vi.firstIdx = idx
			}
			vi.lastIdx = idx
		}
		mark(e.value)
		for _, c := range kd.conflict[o] {
			mark(c.value)
		}
		// A value at several offsets (duplicate) is represented at its
		// first (Jepsen's by-value keeps its last); an op that met it at
		// a known offset is judged at that offset instead (idx).
		if vi := kd.info(e.value); vi.repIdx < 0 {
			vi.repIdx = idx
		}
	}
	for i := 1; i < len(kd.aborted); i++ {
		kd.aborted[i] += kd.aborted[i-1]
	}
}

// abortedBetween counts the aborted positions strictly between i1 and i2
// (i1 < i2).
func (kd *keyData) abortedBetween(i1, i2 int32) int32 {
	if kd.aborted == nil || i2 <= i1+1 {
		return 0
	}
	return kd.aborted[i2] - kd.aborted[i1+1]
}

// isAborted reports whether position i holds an aborted record.
func (kd *keyData) isAborted(i int32) bool {
	return kd.aborted != nil && kd.aborted[i+1] > kd.aborted[i]
}

// keyVals is one key's values (sends) or pairs (reads) within one op.
type keyVals struct {
	key   int
	pairs []Pair // for sends, Offset is -1 when unknown
}

// queue is the state of the Jepsen analyses over one history.
type queue struct {
	h       History
	p       *pairing
	opts    Options
	keys    map[int]*keyData
	found   map[string]*AnomalyReport
	scratch map[int]int
	stalls  map[int]Stall // the harness's stalled-reads, by key; built on first use
}

func (q *queue) key(k int) *keyData {
	kd, ok := q.keys[k]
	if !ok {
		kd = newKeyData()
		q.keys[k] = kd
	}
	return kd
}

// mops returns the micro-ops of the completion at pos, falling back to its
// invoke's when the completion carries none (as info completions may).
func (q *queue) mops(pos int) []MicroOp {
	op := &q.h[pos]
	if op.Mops != nil || op.Type == Invoke {
		return op.Mops
	}
	if inv := q.p.partner[pos]; inv >= 0 {
		return q.h[inv].Mops
	}
	return nil
}

// writes groups the sends of the completion at pos by key, in order.
func (q *queue) writes(pos int) []keyVals {
	f := q.h[pos].F
	if f != FSend && f != FTxn {
		return nil
	}
	return q.group(q.mops(pos), true)
}

// reads groups what the op at pos polled by key, in order.
func (q *queue) reads(pos int) []keyVals {
	op := &q.h[pos]
	if op.F != FPoll && op.F != FTxn {
		return nil
	}
	return q.group(op.Mops, false)
}

func (q *queue) group(mops []MicroOp, sends bool) []keyVals {
	var out []keyVals
	clear(q.scratch)
	at := func(k int) int {
		i, ok := q.scratch[k]
		if !ok {
			i = len(out)
			q.scratch[k] = i
			out = append(out, keyVals{key: k})
		}
		return i
	}
	for _, m := range mops {
		if sends && m.F == FSend {
			o := int64(-1)
			if m.Offset != nil {
				o = *m.Offset
			}
			i := at(m.Key)
			out[i].pairs = append(out[i].pairs, Pair{Offset: o, Value: m.Value})
		}
		if !sends && m.F == FPoll && m.Polls != nil {
			for _, k := range slices.Sorted(maps.Keys(m.Polls)) {
				i := at(k)
				out[i].pairs = append(out[i].pairs, m.Polls[k]...)
			}
		}
	}
	return out
}

// isDataCompletion reports whether pos ends a client op that sends or
// polls: a completion, or an invoke never completed (which counts as info,
// as Jepsen treats a history cut short).
func (q *queue) isDataCompletion(pos int) bool {
	op := &q.h[pos]
	return op.IsClient() && hasMops(op.F) && (op.Type != Invoke || q.p.partner[pos] < 0)
}

// typeOf is the outcome of the op ending at pos: its type, or Info for an
// invoke never completed.
func (q *queue) typeOf(pos int) OpType {
	if t := q.h[pos].Type; t != Invoke {
		return t
	}
	return Info
}

// committed is Jepsen's must-have-committed?: the op is ok, or info and an
// ok poll read one of its sends.
func (q *queue) committed(pos int32) bool {
	switch q.typeOf(int(pos)) {
	case OK:
		return true
	case Info:
	default:
		return false
	}
	for _, kv := range q.writes(int(pos)) {
		kd := q.keys[kv.key]
		for _, p := range kv.pairs {
			if vi := kd.lookup(p.Value); vi != nil && vi.readOK {
				return true
			}
		}
	}
	return false
}

func (q *queue) report(name string, ex Example) {
	a := q.found[name]
	if a == nil {
		a = &AnomalyReport{Examples: []Example{}, ByKey: map[int]int{}}
		q.found[name] = a
	}
	a.Count++
	a.ByKey[ex.Key]++
	if len(a.Examples) < q.opts.ExamplesMax {
		a.Examples = append(a.Examples, ex)
	}
}

func (q *queue) index(pos int32) int64 { return q.h[pos].Index }

// buildQueue reads the history into per-key version orders: writers of
// each value, what ok polls read, every poll's pairs and every send with a
// known offset that must have committed. It reports false when ctx ended.
func buildQueue(ctx context.Context, h History, p *pairing, opts Options) (*queue, []int, bool) {
	q := &queue{h: h, p: p, opts: opts, keys: map[int]*keyData{}, found: map[string]*AnomalyReport{}, scratch: map[int]int{}}

	// Pass 1: writers of each value, what ok polls read, and every poll's
	// pairs into the version order (Jepsen uses polls of every type).
	var senders []int32
	for pos := range h {
		if !q.isDataCompletion(pos) {
			continue
		}
		typ := q.typeOf(pos)
		ws := q.writes(pos)
		if len(ws) > 0 {
			senders = append(senders, int32(pos))
		}
		for _, kv := range ws {
			kd := q.key(kv.key)
			for _, pr := range kv.pairs {
				vi := kd.info(pr.Value)
				vi.writer, vi.writerType = int32(pos), typ
			}
		}
		for _, kv := range q.reads(pos) {
			kd := q.key(kv.key)
			for _, pr := range kv.pairs {
				kd.addLog(pr.Offset, pr.Value, int32(pos))
				if typ == OK {
					vi := kd.info(pr.Value)
					if !vi.readOK {
						vi.readOK, vi.reader = true, int32(pos)
					}
				}
			}
		}
	}
	if ctx.Err() != nil {
		return nil, nil, false
	}
	// Pass 2: sends with a known offset join the version order when they
	// must have committed.
	for _, pos := range senders {
		if !q.committed(pos) {
			continue
		}
		for _, kv := range q.writes(int(pos)) {
			kd := q.key(kv.key)
			for _, pr := range kv.pairs {
				if pr.Offset >= 0 {
					kd.addLog(pr.Offset, pr.Value, pos)
				}
			}
		}
	}
	keys := slices.Sorted(maps.Keys(q.keys))
	for _, k := range keys {
		q.keys[k].build(opts.txn)
	}
	return q, keys, ctx.Err() == nil
}

// runQueue performs Jepsen's Kafka analyses. Every pass is linear in the
// history (plus sorting each key's offsets), and memory is O(values).
func runQueue(ctx context.Context, h History, p *pairing, opts Options) CheckerResult {
	res := CheckerResult{Name: "queue", Valid: Valid}
	q, keys, ok := buildQueue(ctx, h, p, opts)
	if !ok {
		return unknown(res, ctx)
	}

	for _, k := range keys {
		q.perKey(k)
		q.lostAfterRead(k)
	}
	q.perOp()
	if ctx.Err() != nil {
		return unknown(res, ctx)
	}
	q.perProcess()
	q.lostCommits()
	q.abortedOffsets()
	q.fencedCommits()

	allowed := AllowedAnomalies(opts.subscribe)
	res.Anomalies = map[string]AnomalyReport{}
	for name, a := range q.found {
		a.Allowed = allowed[name]
		if !a.Allowed {
			res.Valid = Invalid
		}
		res.Anomalies[name] = *a
	}
	return res
}

func unknown(res CheckerResult, ctx context.Context) CheckerResult {
	res.Valid = Unknown
	res.Error = fmt.Sprintf("stopped: %v", context.Cause(ctx))
	return res
}

// perKey finds inconsistent offsets, duplicates, lost writes and unseen
// values of key k.
func (q *queue) perKey(k int) {
	kd := q.keys[k]
	for i, o := range kd.offsets {
		cs := kd.conflict[o]
		if len(cs) == 0 {
			continue
		}
		e := kd.log[o]
		vals := []int64{e.value}
		ops := []int64{q.index(e.pos)}
		for _, c := range cs {
			vals = append(vals, c.value)
			ops = append(ops, q.index(c.pos))
		}
		q.report(AnomalyInconsistentOffsets, Example{
			Key: k, Offset: ptr(o), LogIndex: ptr(int64(i)), Values: vals, Ops: ops,
			Text: fmt.Sprintf("offset %d of key %d holds %d different values %v", o, k, len(vals), vals),
		})
	}

	values := slices.Sorted(maps.Keys(kd.vals))
	bound := int32(-1)
	for _, v := range values {
		vi := kd.lookup(v)
		if vi.readOK && vi.firstIdx > bound {
			bound = vi.firstIdx
		}
	}
	var unseen []int64
	var unseenOps []int64
	for _, v := range values {
		vi := kd.lookup(v)
		if vi.offsets > 1 {
			ex := Example{Key: k, Value: ptr(v), Count: int(vi.offsets), Ops: q.opsOf(vi)}
			if q.found[AnomalyDuplicate] == nil || len(q.found[AnomalyDuplicate].Examples) < q.opts.ExamplesMax {
				ex.Offsets = kd.offsetsOf(v)
			}
			ex.Text = fmt.Sprintf("value %d of key %d appears at %d offsets %v", v, k, vi.offsets, ex.Offsets)
			q.report(AnomalyDuplicate, ex)
		}
		if vi.lastIdx >= 0 && vi.lastIdx <= bound && !vi.readOK && vi.writer >= 0 && q.committed(vi.writer) {
			maxRead := kd.lookup(kd.rep[bound])
			ex := Example{
				Key: k, Value: ptr(v), Offset: ptr(kd.offsets[vi.firstIdx]),
				LogIndex: ptr(int64(vi.firstIdx)), MaxReadIndex: ptr(int64(bound)),
				Writer: ptr(q.index(vi.writer)),
			}
			readerText := ""
			if maxRead != nil && maxRead.reader >= 0 {
				ex.Reader = ptr(q.index(maxRead.reader))
				readerText = fmt.Sprintf(" (op %d read offset %d)", *ex.Reader, kd.offsets[bound])
			}
			ex.Text = fmt.Sprintf("value %d sent to key %d by op %d at offset %d was never read, though polls reached offset %d%s",
				v, k, *ex.Writer, *ex.Offset, kd.offsets[bound], readerText)
			q.report(AnomalyLostWrite, ex)
		}
		if vi.writer >= 0 && vi.writerType == OK && !vi.readOK {
			unseen = append(unseen, v)
			if len(unseenOps) < q.opts.ExamplesMax {
				unseenOps = append(unseenOps, q.index(vi.writer))
			}
		}
	}
	if len(unseen) > 0 {
		q.reportValues(AnomalyUnseen, k, unseen, func(shown []int64) Example {
			return Example{
				Key: k, Count: len(unseen), Values: shown, Ops: unseenOps,
				Text: fmt.Sprintf("%d acknowledged value(s) of key %d never read by any poll: %v%s", len(unseen), k, shown, q.stallText(k, unseen)),
			}
		})
	}
}

// reportValues counts vals, values of key k, as anomaly name, with one
// example per key (made from the first ExamplesMax of them) while the
// report has room for it.
func (q *queue) reportValues(name string, k int, vals []int64, example func(shown []int64) Example) {
	a := q.found[name]
	if a == nil {
		a = &AnomalyReport{Examples: []Example{}, ByKey: map[int]int{}}
		q.found[name] = a
	}
	a.Count += len(vals)
	a.ByKey[k] += len(vals)
	if len(a.Examples) < q.opts.ExamplesMax {
		a.Examples = append(a.Examples, example(vals[:min(len(vals), q.opts.ExamplesMax)]))
	}
}

// stallText says, for a key the final reads stopped short on, what the
// harness found there (a stalled-reads event), or "", for the unseen
// values it explains: an open transaction holds back only what lies at or
// above the last stable offset.
func (q *queue) stallText(k int, unseen []int64) string {
	s, ok := q.stallOf(k)
	if !ok {
		return ""
	}
	kd := q.keys[k]
	lowest := int64(-1)
	for _, v := range unseen {
		if vi := kd.lookup(v); vi != nil && vi.firstIdx >= 0 {
			if o := kd.offsets[vi.firstIdx]; lowest < 0 || o < lowest {
				lowest = o
			}
		}
	}
	switch {
	case s.Missing && !s.Unrecovered:
		return fmt.Sprintf("; the final reads stopped short on %s-%d, which the healed cluster no longer lists: the topic or partition is gone, and these with it", s.Topic, s.Partition)
	case s.HighWatermark >= 0 && lowest >= s.HighWatermark && !s.Unrecovered:
		return fmt.Sprintf("; the final reads stopped short on %s-%d, whose high watermark %d, listed after them, is at or below the offsets these were acknowledged at: the healed cluster no longer holds them", s.Topic, s.Partition, s.HighWatermark)
	case s.HighWatermark < 0 || q.opts.txn && s.LastStable < 0:
		return fmt.Sprintf("; the final reads stopped short on %s-%d, whose offsets the harness could not read (%s)", s.Topic, s.Partition, s.Error)
	case !q.opts.txn:
		return fmt.Sprintf("; the final reads stopped short on %s-%d, whose high watermark is %d", s.Topic, s.Partition, s.HighWatermark)
	case s.LastStable >= s.HighWatermark:
		return fmt.Sprintf("; the final reads stopped short on %s-%d, whose last stable offset is its high watermark %d: no open transaction held them", s.Topic, s.Partition, s.HighWatermark)
	case lowest >= 0 && lowest < s.LastStable:
		return fmt.Sprintf("; the final reads stopped short on %s-%d below its last stable offset %d (high watermark %d), so no open transaction held them", s.Topic, s.Partition, s.LastStable, s.HighWatermark)
	}
	return fmt.Sprintf("; read_committed reads of %s-%d stop at its last stable offset %d, below its high watermark %d: %s (a transaction never ended blocks every later record)",
		s.Topic, s.Partition, s.LastStable, s.HighWatermark, s.heldBy())
}

// stallOf returns the harness's stalled-reads entry for key k, if the
// final reads stopped short on it.
func (q *queue) stallOf(k int) (Stall, bool) {
	if q.stalls == nil {
		q.stalls = map[int]Stall{}
		for i := range q.h {
			for _, s := range q.h[i].Stalls() {
				q.stalls[s.Key] = s
			}
		}
	}
	s, ok := q.stalls[k]
	return s, ok
}

// lostAfterRead finds the values of key k that polls read and the healed
// cluster no longer holds: the final reads stopped short on k (a
// stalled-reads event) and every offset a value was seen at is at or above
// the partition's high watermark listed after them (0 when the cluster no
// longer lists the partition at all: Stall.Missing). A consumer only ever
// reads below the high watermark, which a correct broker never moves back
// over a record it exposed, so such a value was committed and then lost.
// Values no poll read are unseen's, and a definitely aborted send read
// back is G1a's. A key without a stalled-reads event, whose high watermark
// could not be listed (for a partition still listed), or whose cluster did not recover after the heal (a
// node still cut off may answer for a partition it no longer leads) is not
// judged. The example's ops are the sends of the values it shows.
func (q *queue) lostAfterRead(k int) {
	s, ok := q.stallOf(k)
	end := s.LogEnd()
	if !ok || end < 0 || s.Unrecovered {
		return
	}
	kd := q.keys[k]
	start, _ := slices.BinarySearch(kd.offsets, end)
	var lost, ops []int64
	var first, last int64 = -1, -1
	// A value counts at its first log position, so once, and only when
	// that position (hence every one) is at or above the high watermark.
	check := func(v int64, idx int) {
		vi := kd.lookup(v)
		if vi == nil || !vi.readOK || vi.firstIdx != int32(idx) || vi.writer >= 0 && vi.writerType == Fail {
			return
		}
		o := kd.offsets[idx]
		lost = append(lost, v)
		if first < 0 {
			first = o
		}
		last = o
		if vi.writer >= 0 && len(lost) <= q.opts.ExamplesMax {
			if w := q.index(vi.writer); !slices.Contains(ops, w) {
				ops = append(ops, w)
			}
		}
	}
	for idx := start; idx < len(kd.offsets); idx++ {
		o := kd.offsets[idx]
		check(kd.log[o].value, idx)
		for _, c := range kd.conflict[o] {
			check(c.value, idx)
		}
	}
	if len(lost) == 0 {
		return
	}
	why := fmt.Sprintf("whose high watermark was then %d, so the partition no longer holds records a consumer had read as committed", s.HighWatermark)
	if s.Missing {
		why = "which the healed cluster no longer lists: every broker asked said the topic or partition does not exist, so records a consumer had read as committed went with it"
	}
	q.reportValues(AnomalyLostAfterRead, k, lost, func(shown []int64) Example {
		return Example{
			Key: k, Count: len(lost), Values: shown, Ops: ops, Offset: ptr(first),
			Text: fmt.Sprintf("%d value(s) of key %d that polls had read, at offsets %d to %d, are gone: %v; after the faults healed the final reads stopped short on %s-%d, %s",
				len(lost), k, first, last, shown, s.Topic, s.Partition, why),
		}
	})
}

// opsOf lists the writer and first ok reader of a value.
func (q *queue) opsOf(vi *valInfo) []int64 {
	var ops []int64
	if vi.writer >= 0 {
		ops = append(ops, q.index(vi.writer))
	}
	if vi.reader >= 0 {
		ops = append(ops, q.index(vi.reader))
	}
	return ops
}

func (kd *keyData) offsetsOf(v int64) []int64 {
	var out []int64
	for _, o := range kd.offsets {
		if kd.log[o].value == v {
			out = append(out, o)
			continue
		}
		for _, c := range kd.conflict[o] {
			if c.value == v {
				out = append(out, o)
			}
		}
	}
	return out
}

// idx is the log position of record p (value p.Value, seen at offset
// p.Offset, -1 when unknown) of key k, or -1 when the version order does
// not place it. Where the version order holds p.Value at p.Offset, that
// offset's position is the answer, so that a poll or send that met a
// duplicated value at one of its offsets is judged where it met it (a poll
// reading offsets 2 and 3 in turn never looks reordered because the value
// at 3 also sits at 1). Otherwise it is the value's representative
// position, as Jepsen's by-value.
func (q *queue) idx(k int, p Pair) int32 {
	kd := q.keys[k]
	if kd == nil {
		return -1
	}
	vi := kd.lookup(p.Value)
	if vi == nil {
		return -1
	}
	if vi.offsets > 1 && p.Offset >= 0 {
		if i, ok := slices.BinarySearch(kd.offsets, p.Offset); ok && kd.rep[i] == p.Value {
			return int32(i)
		}
	}
	return vi.repIdx
}

// delta is the distance in log positions from record a to record b of key
// k, 1 when either is unknown (Jepsen assumes the step was fine then).
// Aborted records between them do not count: read_committed passes over
// them (reading one is G1a, reported on its own).
func (q *queue) delta(k int, a, b Pair) (int64, int32, int32) {
	i1, i2 := q.idx(k, a), q.idx(k, b)
	if i1 < 0 || i2 < 0 {
		return 1, i1, i2
	}
	return int64(i2 - i1 - q.keys[k].abortedBetween(i1, i2)), i1, i2
}

// skipped lists the values a read skipped between positions i1 and i2,
// aborted records left out, at most ExamplesMax of them.
func (q *queue) skipped(k int, i1, i2 int32) []int64 {
	kd := q.keys[k]
	var out []int64
	for i := i1 + 1; i < i2 && len(out) < q.opts.ExamplesMax; i++ {
		if !kd.isAborted(i) {
			out = append(out, kd.rep[i])
		}
	}
	return out
}

// perOp finds G1a, precommitted reads and the int- (within one op) skips
// and reorderings of polls and sends.
func (q *queue) perOp() {
	for pos := range q.h {
		if !q.isDataCompletion(pos) {
			continue
		}
		op := &q.h[pos]
		reads := q.reads(pos)
		rebalanced := map[int]bool{}
		for _, r := range op.RebalanceLog {
			for _, k := range r.Keys {
				rebalanced[k] = true
			}
		}
		for _, kv := range reads {
			k := kv.key
			// Jepsen counts ok readers only. A poll is no part of the
			// reader's own transaction, so an aborted record it returned
			// was returned whatever became of that op: a failed or
			// indeterminate op's reads count too.
			for _, pr := range kv.pairs {
				vi := q.keys[k].lookup(pr.Value)
				if vi != nil && vi.writer >= 0 && vi.writerType == Fail && vi.writer != int32(pos) {
					reader := fmt.Sprintf("op %d", op.Index)
					if t := q.typeOf(pos); t != OK {
						reader += fmt.Sprintf(" (itself %s)", outcomeWord(t))
					}
					q.report(AnomalyG1a, Example{
						Key: k, Value: ptr(pr.Value), Offset: ptr(pr.Offset),
						Writer: ptr(q.index(vi.writer)), Reader: ptr(op.Index),
						Text: fmt.Sprintf("%s read value %d of key %d at offset %d, whose send op %d failed",
							reader, pr.Value, k, pr.Offset, q.index(vi.writer)),
					})
				}
			}
			if rebalanced[k] {
				continue
			}
			for i := 1; i < len(kv.pairs); i++ {
				a, b := kv.pairs[i-1], kv.pairs[i]
				d, i1, i2 := q.delta(k, a, b)
				switch {
				case d > 1:
					q.report(AnomalyIntPollSkip, Example{
						Key: k, Values: []int64{a.Value, b.Value}, Offsets: []int64{a.Offset, b.Offset},
						Delta: ptr(d), Skipped: q.skipped(k, i1, i2), Ops: []int64{op.Index},
						Text: fmt.Sprintf("op %d polled key %d from offset %d to %d, skipping %d value(s)", op.Index, k, a.Offset, b.Offset, d-1),
					})
				case d < 1:
					q.report(AnomalyIntNonmonotonicPoll, Example{
						Key: k, Values: []int64{a.Value, b.Value}, Offsets: []int64{a.Offset, b.Offset},
						Delta: ptr(d), Ops: []int64{op.Index},
						Text: fmt.Sprintf("op %d polled key %d: value %d at offset %d came after value %d at offset %d, but is not later in the log",
							op.Index, k, b.Value, b.Offset, a.Value, a.Offset),
					})
				}
			}
		}
		writes := q.writes(pos)
		for _, kv := range writes {
			k := kv.key
			for i := 1; i < len(kv.pairs); i++ {
				a, b := kv.pairs[i-1], kv.pairs[i]
				d, i1, i2 := q.delta(k, a, b)
				switch {
				case d > 1:
					q.report(AnomalyIntSendSkip, Example{
						Key: k, Values: []int64{a.Value, b.Value}, Delta: ptr(d),
						Skipped: q.skipped(k, i1, i2), Ops: []int64{op.Index},
						Text: fmt.Sprintf("op %d sent %d then %d to key %d; %d other value(s) landed between them", op.Index, a.Value, b.Value, k, d-1),
					})
				case d < 1:
					q.report(AnomalyIntNonmonotonicSend, Example{
						Key: k, Values: []int64{a.Value, b.Value}, Delta: ptr(d), Ops: []int64{op.Index},
						Text: fmt.Sprintf("op %d sent %d then %d to key %d, but %d landed at or before %d in the log", op.Index, a.Value, b.Value, k, b.Value, a.Value),
					})
				}
			}
		}
		if op.F == FTxn && len(reads) > 0 && len(writes) > 0 {
			q.precommitted(op, reads, writes)
		}
	}
}

func (q *queue) precommitted(op *Op, reads, writes []keyVals) {
	for _, w := range writes {
		for _, r := range reads {
			if r.key != w.key {
				continue
			}
			for _, wp := range w.pairs {
				if i := slices.IndexFunc(r.pairs, func(p Pair) bool { return p.Value == wp.Value }); i >= 0 {
					q.report(AnomalyPrecommittedRead, Example{
						Key: w.key, Value: ptr(wp.Value), Offset: ptr(r.pairs[i].Offset), Ops: []int64{op.Index},
						Text: fmt.Sprintf("txn op %d read its own uncommitted send of %d to key %d", op.Index, wp.Value, w.key),
					})
					return
				}
			}
		}
	}
}

// lastSeen is the last value a process read from or sent to a key.
type lastSeen struct {
	pos      int32
	value    int64
	offset   int64
	hasValue bool
}

type procState struct {
	reads map[int]lastSeen
	sends map[int]lastSeen
}

// perProcess walks each process's ops in order for poll-skip,
// nonmonotonic-poll and nonmonotonic-send (across ops).
func (q *queue) perProcess() {
	procs := map[int]*procState{}
	for pos := range q.h {
		op := &q.h[pos]
		if op.Type == Invoke || !op.IsClient() {
			continue
		}
		ps := procs[op.Process]
		if ps == nil {
			ps = &procState{reads: map[int]lastSeen{}, sends: map[int]lastSeen{}}
			procs[op.Process] = ps
		}
		switch {
		case hasKeys(op.F):
			if op.Type == Fail {
				break
			}
			keys := op.Keys
			if keys == nil && q.p.partner[pos] >= 0 {
				keys = q.h[q.p.partner[pos]].Keys
			}
			keep := map[int]bool{}
			for _, k := range keys {
				keep[k] = true
			}
			// Seeking to the beginning (the final reads) rewinds on
			// purpose: the process's reads start afresh. Jepsen gets the
			// same effect by giving the final reads a new process.
			seek := q.p.seeksToBeginning(q.h, pos)
			maps.DeleteFunc(ps.reads, func(k int, _ lastSeen) bool { return seek || !keep[k] })
			maps.DeleteFunc(ps.sends, func(k int, _ lastSeen) bool { return !keep[k] })
		case hasMops(op.F):
			q.pollOrder(pos, ps)
			if op.Type == OK || op.Type == Info {
				q.sendOrder(pos, ps)
			}
		}
	}
}

func (q *queue) pollOrder(pos int, ps *procState) {
	op := &q.h[pos]
	for _, kv := range q.reads(pos) {
		k := kv.key
		if last, ok := ps.reads[k]; ok && last.hasValue && len(kv.pairs) > 0 {
			first := kv.pairs[0]
			d, i1, i2 := q.delta(k, Pair{Offset: last.offset, Value: last.value}, first)
			ops := []int64{q.index(last.pos), op.Index}
			switch {
			case d > 1:
				q.report(AnomalyPollSkip, Example{
					Key: k, Values: []int64{last.value, first.Value}, Offsets: []int64{last.offset, first.Offset},
					Delta: ptr(d), Skipped: q.skipped(k, i1, i2), Ops: ops,
					Text: fmt.Sprintf("process %d polled key %d up to offset %d in op %d, then resumed at offset %d in op %d, skipping %d value(s)",
						op.Process, k, last.offset, ops[0], first.Offset, op.Index, d-1),
				})
			case d < 1:
				q.report(AnomalyNonmonotonicPoll, Example{
					Key: k, Values: []int64{last.value, first.Value}, Offsets: []int64{last.offset, first.Offset},
					Delta: ptr(d), Ops: ops,
					Text: fmt.Sprintf("process %d polled key %d up to value %d (offset %d) in op %d, then went back to value %d (offset %d) in op %d",
						op.Process, k, last.value, last.offset, ops[0], first.Value, first.Offset, op.Index),
				})
			}
		}
		if op.Type == OK {
			ls := lastSeen{pos: int32(pos)}
			if n := len(kv.pairs); n > 0 {
				ls.value, ls.offset, ls.hasValue = kv.pairs[n-1].Value, kv.pairs[n-1].Offset, true
			}
			ps.reads[k] = ls
		}
	}
}

func (q *queue) sendOrder(pos int, ps *procState) {
	op := &q.h[pos]
	for _, kv := range q.writes(pos) {
		k := kv.key
		if len(kv.pairs) == 0 {
			continue
		}
		if last, ok := ps.sends[k]; ok {
			first := kv.pairs[0]
			d, _, _ := q.delta(k, Pair{Offset: last.offset, Value: last.value}, first)
			if d < 1 {
				ops := []int64{q.index(last.pos), op.Index}
				q.report(AnomalyNonmonotonicSend, Example{
					Key: k, Values: []int64{last.value, first.Value}, Delta: ptr(d), Ops: ops,
					Text: fmt.Sprintf("process %d sent %d to key %d in op %d, then %d in op %d, which landed at or before it in the log",
						op.Process, last.value, k, ops[0], first.Value, op.Index),
				})
			}
		}
		n := len(kv.pairs)
		ps.sends[k] = lastSeen{pos: int32(pos), value: kv.pairs[n-1].Value, offset: kv.pairs[n-1].Offset, hasValue: true}
	}
}

// outcomeWord names an op's outcome in example text.
func outcomeWord(t OpType) string {
	switch t {
	case Fail:
		return "failed"
	case Info:
		return "indeterminate"
	}
	return "ok"
}
