package checker

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// Functions of the compaction workload. A put writes one record of a
// compacted topic: invoked as [k, v] (v null for a delete, i.e. a
// tombstone), completed as [k, v, offset] (offset null when unknown). A
// scan reads every partition of the topic from its start to its end:
// invoked with value null, completed as {"k": [[offset, v], ...]} listing,
// per record key and in offset order, what the scan returned (v null for
// a tombstone).
const (
	FPut  = "put"
	FScan = "scan"
)

// Compaction anomalies.
const (
	// AnomalyLostLatestValue: a key's latest acknowledged value (the put
	// acknowledged at the highest offset) is not what the final scan shows
	// last for the key: an older value, no record, a tombstone, or a value
	// no put of that key wrote.
	AnomalyLostLatestValue = "lost-latest-value"
	// AnomalyResurrectedDelete: a key whose latest acknowledged put is a
	// delete comes back in the final scan with an older value.
	AnomalyResurrectedDelete = "resurrected-delete"
)

// PutValue is the decoded value of a put: record key, value (nil for a
// tombstone) and the offset a completion reports (nil when unknown).
type PutValue struct {
	Key    int
	Value  *int64
	Offset *int64
}

// ParsePut decodes a put's value, [k, v] or [k, v, offset] with v and
// offset integers or null.
func ParsePut(raw []byte) (PutValue, error) {
	var parts []json.RawMessage
	if err := json.Unmarshal(raw, &parts); err != nil {
		return PutValue{}, fmt.Errorf("put value must be [k, v] or [k, v, offset]: %w", err)
	}
	if len(parts) != 2 && len(parts) != 3 {
		return PutValue{}, fmt.Errorf("put value must be [k, v] or [k, v, offset], got %d elements", len(parts))
	}
	var pv PutValue
	k, err := strconv.ParseInt(string(parts[0]), 10, 0)
	if err != nil {
		return PutValue{}, fmt.Errorf("put key %s is not an integer", parts[0])
	}
	pv.Key = int(k)
	if pv.Value, err = nullableInt(parts[1]); err != nil {
		return PutValue{}, fmt.Errorf("put value: %w", err)
	}
	if len(parts) == 3 {
		if pv.Offset, err = nullableInt(parts[2]); err != nil {
			return PutValue{}, fmt.Errorf("put offset: %w", err)
		}
	}
	return pv, nil
}

func nullableInt(raw json.RawMessage) (*int64, error) {
	if string(raw) == "null" {
		return nil, nil
	}
	n, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil {
		return nil, fmt.Errorf("%s is not an integer or null", raw)
	}
	return &n, nil
}

// ScanEntry is one record a scan returned for a key.
type ScanEntry struct {
	Offset int64
	Value  *int64 // nil for a tombstone
}

// ParseScan decodes a completed scan's value, {"k": [[offset, v], ...]}.
func ParseScan(raw []byte) (map[int][]ScanEntry, error) {
	var m map[string][][]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf(`scan value must be {"k": [[offset, v], ...]}: %w`, err)
	}
	out := make(map[int][]ScanEntry, len(m))
	for ks, pairs := range m {
		k, err := strconv.Atoi(ks)
		if err != nil {
			return nil, fmt.Errorf("scan key %q is not an integer", ks)
		}
		entries := make([]ScanEntry, 0, len(pairs))
		for _, p := range pairs {
			if len(p) != 2 {
				return nil, fmt.Errorf("scan of key %d: an entry must be [offset, v]", k)
			}
			o, err := strconv.ParseInt(string(p[0]), 10, 64)
			if err != nil {
				return nil, fmt.Errorf("scan of key %d: offset %s is not an integer", k, p[0])
			}
			v, err := nullableInt(p[1])
			if err != nil {
				return nil, fmt.Errorf("scan of key %d: %w", k, err)
			}
			entries = append(entries, ScanEntry{Offset: o, Value: v})
		}
		out[k] = entries
	}
	return out, nil
}

// putRec is one put as the analysis knows it.
type putRec struct {
	index  int64
	typ    OpType
	value  *int64
	offset *int64
}

// runCompaction is the "compaction" checker: the final scan of a compacted
// topic must show, last for every key, the key's latest acknowledged put
// (or a put made later whose outcome is unknown), and no value of a put
// that failed (G1a: under transactions, an aborted put's value). A log the cleaner has not
// touched passes as well (the latest value is still last per key), and a
// deleted key may be absent or still hold its tombstone. A history
// without puts has nothing to check here. Without an ok scan the final
// state is unknown, except for the keys of partitions the final scans
// stopped short on (the harness's stalled-reads event): a key whose latest
// acknowledged put lies at or above its partition's high watermark lost
// it, and one whose latest put lies at or above a last stable offset
// stuck below it, past the transaction timeout, is unseen (unreadLatest).
func runCompaction(ctx context.Context, h History, p *pairing, opts Options) CheckerResult {
	res := CheckerResult{Name: "compaction", Valid: Valid}
	puts := map[int][]putRec{}
	var final map[int][]ScanEntry
	var finalIndex int64
	any := false
	stalls := map[int]Stall{}
	for pos := range h {
		op := &h[pos]
		for _, st := range op.Stalls() {
			stalls[st.Key] = st
		}
		if !op.IsClient() || op.Type == Invoke && p.partner[pos] >= 0 {
			continue
		}
		switch op.F {
		case FPut:
			any = true
			raw := op.Raw
			if op.Type == Invoke || len(raw) == 0 || string(raw) == "null" {
				if inv := p.partner[pos]; inv >= 0 && op.Type != Invoke {
					raw = h[inv].Raw
				}
			}
			pv, err := ParsePut(raw)
			if err != nil {
				res.Valid, res.Error = Unknown, fmt.Sprintf("op %d: %v", op.Index, err)
				return res
			}
			typ := op.Type
			if typ == Invoke {
				typ = Info
			}
			puts[pv.Key] = append(puts[pv.Key], putRec{index: op.Index, typ: typ, value: pv.Value, offset: pv.Offset})
		case FScan:
			if op.Type != OK {
				continue
			}
			scan, err := ParseScan(op.Raw)
			if err != nil {
				res.Valid, res.Error = Unknown, fmt.Sprintf("op %d: %v", op.Index, err)
				return res
			}
			final, finalIndex = scan, op.Index // the last ok scan is the final state
		}
		if ctx.Err() != nil {
			return unknown(res, ctx)
		}
	}
	if !any {
		return res
	}
	found := map[string]*AnomalyReport{}
	report := func(name string, ex Example) {
		a := found[name]
		if a == nil {
			a = &AnomalyReport{Examples: []Example{}, ByKey: map[int]int{}}
			found[name] = a
		}
		a.Count++
		a.ByKey[ex.Key]++
		if len(a.Examples) < opts.ExamplesMax {
			a.Examples = append(a.Examples, ex)
		}
	}
	notJudged := ""
	for _, k := range slices.Sorted(maps.Keys(puts)) {
		if final == nil {
			if why := unreadLatest(k, puts[k], stalls, report); notJudged == "" {
				notJudged = why
			}
			continue
		}
		checkKey(k, puts[k], final[k], finalIndex, report)
	}
	if final == nil && len(found) == 0 {
		res.Valid, res.Error = Unknown, "puts but no ok scan: the final state of the compacted topic is unknown"
		switch {
		case notJudged != "":
			res.Error += " (the final scans stopped short: " + notJudged + ")"
		case len(stalls) > 0:
			res.Error += " (the final scans stopped short, and no key's latest acknowledged put lies where the harness found they could not read)"
		}
		return res
	}
	res.Anomalies = map[string]AnomalyReport{}
	for name, a := range found {
		res.Anomalies[name] = *a
		res.Valid = Invalid
	}
	return res
}

func showValue(v *int64) string {
	if v == nil {
		return "a tombstone"
	}
	return fmt.Sprintf("value %d", *v)
}

// checkKey judges one key: its puts and what the final scan (op scanIndex)
// shows for it.
func checkKey(k int, puts []putRec, scan []ScanEntry, scanIndex int64, report func(string, Example)) {
	latest := latestAcked(puts)
	var last *ScanEntry
	if n := len(scan); n > 0 {
		last = &scan[n-1]
	}
	// A value whose put failed (under --txn: a transaction known aborted)
	// was never committed; a scan of committed records that shows it read
	// an aborted write.
	// Values are unique; a failed delete is known by the offset it
	// reported (under --txn, where its send was answered).
	failed := map[int64]*putRec{}
	failedDeletes := map[int64]*putRec{}
	for i := range puts {
		switch pr := &puts[i]; {
		case pr.typ == Fail && pr.value != nil:
			failed[*pr.value] = pr
		case pr.typ == Fail && pr.offset != nil:
			failedDeletes[*pr.offset] = pr
		}
	}
	for _, e := range scan {
		if e.Value == nil {
			if pr, ok := failedDeletes[e.Offset]; ok {
				report(AnomalyG1a, Example{Key: k, Offset: ptr(e.Offset), Writer: ptr(pr.index), Reader: ptr(scanIndex),
					Text: fmt.Sprintf("the final scan op %d shows the tombstone of key %d at offset %d, written by op %d, which failed (its transaction aborted)",
						scanIndex, k, e.Offset, pr.index)})
			}
			continue
		}
		if pr, ok := failed[*e.Value]; ok {
			report(AnomalyG1a, Example{Key: k, Value: ptr(*e.Value), Offset: ptr(e.Offset), Writer: ptr(pr.index), Reader: ptr(scanIndex),
				Text: fmt.Sprintf("the final scan op %d shows value %d of key %d at offset %d, written by op %d, which failed (its transaction aborted)",
					scanIndex, *e.Value, k, e.Offset, pr.index)})
		}
	}
	if latest == nil {
		return // nothing acknowledged with an offset: nothing promised
	}
	ex := Example{Key: k, Offset: ptr(*latest.offset), Writer: ptr(latest.index), Reader: ptr(scanIndex)}
	if latest.value != nil {
		ex.Value = ptr(*latest.value)
	}
	switch {
	case last == nil && latest.value == nil:
		return // deleted, and the tombstone is gone too
	case last != nil && last.Offset == *latest.offset && sameValue(last.Value, latest.value):
		return
	case last != nil && last.Offset > *latest.offset && explainedByLaterPut(puts, *last, *latest.offset):
		return // a later put whose outcome was unknown landed
	case last != nil && last.Offset < *latest.offset && latest.value == nil && last.Value != nil:
		ex.Offsets = []int64{last.Offset}
		ex.Values = []int64{*last.Value}
		ex.Text = fmt.Sprintf("key %d was deleted by op %d (tombstone acknowledged at offset %d), yet the final scan op %d shows value %d from offset %d",
			k, latest.index, *latest.offset, scanIndex, *last.Value, last.Offset)
		report(AnomalyResurrectedDelete, ex)
		return
	}
	shown := "no record"
	if last != nil {
		shown = fmt.Sprintf("%s at offset %d", showValue(last.Value), last.Offset)
		ex.Offsets = []int64{last.Offset}
		if last.Value != nil {
			ex.Values = []int64{*last.Value}
		}
	}
	ex.Text = fmt.Sprintf("key %d's latest acknowledged put is %s at offset %d (op %d), but the final scan op %d shows %s last",
		k, showValue(latest.value), *latest.offset, latest.index, scanIndex, shown)
	report(AnomalyLostLatestValue, ex)
}

// latestAcked is the put of the highest offset among a key's
// acknowledged ones, or nil.
func latestAcked(puts []putRec) *putRec {
	var latest *putRec
	for i := range puts {
		pr := &puts[i]
		if pr.typ == OK && pr.offset != nil && (latest == nil || *pr.offset > *latest.offset) {
			latest = pr
		}
	}
	return latest
}

// abortGraceMs is how long past its timeout an open transaction may still
// hold a last stable offset at a correct broker: Kafka's coordinator looks
// for timed-out transactions every 10 s
// (transaction.abort.timed.out.transaction.cleanup.interval.ms), and the
// abort's markers take a moment more.
const abortGraceMs = 15_000

// unreadLatest judges a key when no scan reached the end of the topic; it
// returns why it could not, or "". If the final scans stopped short on the
// key's partition (a stalled-reads event from a cluster that served again
// after the heal) and the key's latest acknowledged put lies at or above
// the partition's high watermark, the healed partition no longer holds it:
// lost-latest-value. If, in read_committed scans (Stall.TxnTimeoutMs set),
// it lies at or above a last stable offset held below the high watermark,
// and every transaction open at or below it (the lowest at the last
// stable offset) has been seen open by the harness for longer than the
// timeout and abortGraceMs (OpenTxn.OpenForMs, the harness's clock), no
// committed reader can ever reach it, nor the key's latest value: unseen.
// A put below the last stable offset was readable and is not judged, nor
// one behind a transaction a correct coordinator might still abort.
func unreadLatest(k int, puts []putRec, stalls map[int]Stall, report func(string, Example)) string {
	s, ok := stalls[k]
	latest := latestAcked(puts)
	if !ok || latest == nil || s.Unrecovered || s.Missing || s.HighWatermark < 0 {
		return ""
	}
	o := *latest.offset
	ex := Example{Key: k, Offset: ptr(o), Writer: ptr(latest.index)}
	if latest.value != nil {
		ex.Value = ptr(*latest.value)
	}
	what := fmt.Sprintf("key %d's latest acknowledged put, %s at offset %d of %s-%d (op %d)", k, showValue(latest.value), o, s.Topic, s.Partition, latest.index)
	if o >= s.HighWatermark {
		ex.Text = fmt.Sprintf("%s, was never read back: the final scans stopped short on the partition, whose high watermark %d, listed after them, is at or below it, so the healed partition no longer holds it",
			what, s.HighWatermark)
		report(AnomalyLostLatestValue, ex)
		return ""
	}
	if s.TxnTimeoutMs <= 0 || s.LastStable < 0 || s.LastStable >= s.HighWatermark || o < s.LastStable {
		return ""
	}
	held, why := s.stuckBelow(o)
	if why != "" {
		return fmt.Sprintf("key %d's latest acknowledged put at offset %d of %s-%d lies above its last stable offset %d, %s", k, o, s.Topic, s.Partition, s.LastStable, why)
	}
	ex.Text = fmt.Sprintf("%s, was never read back: read_committed reads of the partition stop at its last stable offset %d, below its high watermark %d: held by %s, each seen open by the harness for more than %d ms, past the %d ms transaction timeout (a transaction never ended blocks every later record, so no committed reader sees the key's latest value)",
		what, s.LastStable, s.HighWatermark, held, s.TxnTimeoutMs+abortGraceMs, s.TxnTimeoutMs)
	report(AnomalyUnseen, ex)
	return ""
}

// stuckBelow finds the transactions that keep offset o from committed
// readers for good: every transaction open at or below o, the lowest
// starting at the last stable offset, each seen open for longer than the
// timeout and abortGraceMs. It returns them spelt out, or why they do not
// prove it.
func (s Stall) stuckBelow(o int64) (held, why string) {
	var open []string
	lowest := int64(-1)
	for _, t := range s.OpenTxns {
		if t.FirstOffset > o {
			continue // opened above the put: it does not hold it
		}
		if lowest < 0 || t.FirstOffset < lowest {
			lowest = t.FirstOffset
		}
		if t.OpenForMs <= s.TxnTimeoutMs+abortGraceMs {
			return "", fmt.Sprintf("held by the open transaction of producer %d epoch %d from offset %d, seen open for %d ms: within its %d ms timeout and %d ms for the coordinator to abort it",
				t.ProducerID, t.Epoch, t.FirstOffset, t.OpenForMs, s.TxnTimeoutMs, abortGraceMs)
		}
		open = append(open, fmt.Sprintf("the open transaction of producer %d epoch %d from offset %d (seen open for %d ms)", t.ProducerID, t.Epoch, t.FirstOffset, t.OpenForMs))
	}
	if lowest != s.LastStable {
		return "", "but no transaction listed open at or below the put starts there (" + s.heldBy() + ")"
	}
	return strings.Join(open, ", "), ""
}

func sameValue(a, b *int64) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return *a == *b
}

// explainedByLaterPut reports whether a put of the key not acknowledged ok
// (info: it may have landed) wrote what the scan shows at e, above the
// latest acknowledged offset.
func explainedByLaterPut(puts []putRec, e ScanEntry, after int64) bool {
	for _, pr := range puts {
		if pr.typ != Info || !sameValue(pr.value, e.Value) {
			continue
		}
		if pr.offset == nil || *pr.offset == e.Offset {
			return true
		}
	}
	return false
}

// CompactionChecker returns the compaction workload's check as a Checker
// named "compaction".
func CompactionChecker(opts Options) Checker {
	return Func{CheckerName: "compaction", Fn: func(ctx context.Context, h History) CheckerResult {
		return runCompaction(ctx, h, pair(h), opts.resolve(h))
	}}
}
