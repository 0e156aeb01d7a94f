package reports

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/faultline/faultline/checker"
)

// verdict is the report's opening: one headline and the sentences behind it.
type verdict struct {
	Validity checker.Validity
	Word     string // VALID, INVALID, UNKNOWN
	Headline string
	// Sentences explain each anomaly that makes the run invalid, each
	// checker that could not decide, and the allowed anomalies observed.
	Sentences []string
}

func validityWord(v checker.Validity) string {
	switch v {
	case checker.Valid:
		return "VALID"
	case checker.Invalid:
		return "INVALID"
	default:
		return "UNKNOWN"
	}
}

// anomalyStory is what the report says about one anomaly.
type anomalyStory struct {
	// sentence says what, where, and which fault preceded it, e.g. "3
	// acknowledged writes were lost on key 2 (t0-2) after the nemesis
	// killed n1 at 41.2 s"; detail adds when it was seen ("acknowledged
	// between 40.0 s and 40.8 s"), or is empty.
	sentence, detail string
	// nemesisIndex is the index of the nemesis op the sentence cites, or
	// -1.
	nemesisIndex int64
}

func anomalySentence(in Input, a *analysis, name string, rep checker.AnomalyReport) anomalyStory {
	kind := kindOf(name)
	var keys []int
	var ops []int64
	for _, ex := range rep.Examples {
		if ex.HasKey() {
			keys = append(keys, ex.Key)
		}
		if senders := ex.Senders(); kind.loss && len(senders) > 0 {
			ops = append(ops, senders...)
		} else {
			ops = append(ops, ex.OpIndexes()...)
		}
	}
	keys = uniqueInts(keys)
	st := anomalyStory{sentence: kind.phrase(rep.Count) + keysPhrase(in.Spec, keys, rep.Count), nemesisIndex: -1}
	if kind.countFree() && len(keys) == 0 {
		st.sentence += " on " + plural(rep.Count, "partition")
	}
	if a == nil {
		return st
	}
	first, last, ok := timesOf(a, ops)
	if !ok {
		return st
	}
	seen, seenOK := firstSeen(a, rep.Examples)
	if kind.loss {
		st.detail = "acknowledged at " + seconds(first)
		if seconds(last) != seconds(first) {
			st.detail = "acknowledged between " + seconds(first) + " and " + seconds(last)
		}
	} else if seenOK && !kind.unseenTime {
		st.detail = "first seen at " + seconds(seen)
	}
	if len(a.nemesis) == 0 {
		return st
	}
	spans := faultSpans(a)
	blamed := blamePerKey(a, spans, rep.Examples, kind)
	switch {
	case len(blamed) == 1 && blamed[0].fault != nil:
		st.sentence += " after the nemesis " + blamed[0].fault.Text + " at " + seconds(blamed[0].fault.start)
		st.nemesisIndex = blamed[0].fault.opIndex
	case len(blamed) > 1:
		var parts []string
		for i, b := range blamed {
			if i == 3 {
				parts = append(parts, "and on other keys after other faults")
				break
			}
			parts = append(parts, keysPhrase(in.Spec, b.keys, len(b.keys))[1:]+blamedPhrase(b.fault, kind.loss))
			if st.nemesisIndex < 0 && b.fault != nil {
				st.nemesisIndex = b.fault.opIndex
			}
		}
		st.sentence = kind.phrase(rep.Count) + ": " + strings.Join(parts, "; ")
	case len(blamed) == 1:
		st.sentence += blamedPhrase(nil, kind.loss)
	case kind.loss:
		st.sentence += " with no fault injected after the writes"
	default:
		// Examples without a key (client errors, cycles, fenced commits)
		// are laid to the fault of their own times: the one in force, or
		// the last one before, by the time the first was seen.
		if seenOK && !kind.loss && !kind.unseenTime {
			last = max(first, seen)
		}
		f := blameUntil(spans, first, last, last, kind)
		st.sentence += faultWindowPhrase(f, first, last)
		if f != nil {
			st.nemesisIndex = f.opIndex
		}
	}
	return st
}

// faultWindowPhrase says where [first, last] lies against fault f (blame's
// choice): during it, after it, or before any fault when f is nil.
func faultWindowPhrase(f *faultSpan, first, last int64) string {
	switch {
	case f == nil:
		return " before any fault"
	case f.start <= last && (f.end < 0 || f.end >= first):
		span := "from " + seconds(f.start)
		if f.end >= 0 {
			span = seconds(f.start) + " – " + seconds(f.end)
		}
		return " during the nemesis " + f.Text + " (" + span + ")"
	case f.end >= 0:
		return " after the nemesis " + f.Text + " (" + seconds(f.start) + " – " + seconds(f.end) + ")"
	}
	return " after the nemesis " + f.Text + " at " + seconds(f.start)
}

// blameUntil lays an anomaly of kind whose writes span [first, last] and
// which was first seen at seen to its fault (blame). A loss's window is
// its writes, and its cause may follow them. Anything else was caused
// before it showed: an overwrite's window is still its writes, any
// other's runs to seen (a kill between an aborted write and the read
// that returned it), and a fault begun after seen is replaced by the one
// in force then, or the last before, or none. Porcupine's examples do
// not say when they were seen (unseenTime): no such limit.
func blameUntil(spans []faultSpan, first, last, seen int64, kind anomalyKind) *faultSpan {
	if kind.loss || kind.unseenTime {
		return blame(spans, first, last, kind.causeFollows())
	}
	seen = max(first, seen)
	if !kind.overwrite {
		last = seen
	}
	f := blame(spans, first, last, kind.overwrite)
	if f != nil && f.start > seen {
		f = blame(spans, seen, seen, false)
	}
	return f
}

// blamedPhrase is what follows a key list laid to fault f: "after the
// nemesis ...", or, with no fault (nil), that none came after the writes
// (a loss) or before the anomaly was seen.
func blamedPhrase(f *faultSpan, loss bool) string {
	switch {
	case f != nil:
		return " after the nemesis " + f.Text + " at " + seconds(f.start)
	case loss:
		return " with no fault injected after the writes"
	}
	return " before any fault"
}

// keysBlamed are the keys whose anomalies are laid to one fault, or to
// none (fault nil).
type keysBlamed struct {
	fault *faultSpan
	keys  []int
}

// blamePerKey lays each key's examples to its fault (blameUntil, over the
// key's writes and the time its first example was seen, firstSeen), and
// groups the keys by fault: the keys laid to no fault first, then by
// fault, earliest first.
func blamePerKey(a *analysis, spans []faultSpan, examples []checker.Example, kind anomalyKind) []keysBlamed {
	type window struct{ first, last, seen int64 }
	windows := map[int]*window{}
	for _, ex := range examples {
		t0, t1, ok := sendTimes(a, ex)
		if !ok || !ex.HasKey() {
			continue
		}
		seen, _ := seenAt(a, ex)
		w := windows[ex.Key]
		if w == nil {
			windows[ex.Key] = &window{t0, t1, seen}
			continue
		}
		w.first, w.last, w.seen = min(w.first, t0), max(w.last, t1), min(w.seen, seen)
	}
	byFault := map[*faultSpan][]int{}
	for k, w := range windows {
		f := blameUntil(spans, w.first, w.last, w.seen, kind)
		byFault[f] = append(byFault[f], k)
	}
	out := make([]keysBlamed, 0, len(byFault))
	for f, keys := range byFault {
		sort.Ints(keys)
		out = append(out, keysBlamed{f, keys})
	}
	sort.Slice(out, func(i, j int) bool {
		if (out[i].fault == nil) != (out[j].fault == nil) {
			return out[i].fault == nil
		}
		return out[i].fault != nil && out[i].fault.start < out[j].fault.start
	})
	return out
}

// withDetail joins a sentence and its parenthesized details.
func withDetail(sentence string, details ...string) string {
	var parts []string
	for _, d := range details {
		if d != "" {
			parts = append(parts, d)
		}
	}
	if len(parts) == 0 {
		return sentence
	}
	return sentence + " (" + strings.Join(parts, "; ") + ")"
}

func keysPhrase(spec Spec, keys []int, count int) string {
	switch {
	case len(keys) == 0:
		return ""
	case len(keys) == 1:
		return " on " + spec.keyLabel(keys[0])
	case len(keys) <= 3:
		labels := make([]string, len(keys))
		for i, k := range keys {
			labels[i] = spec.keyLabel(k)
		}
		return " on " + strings.Join(labels[:len(labels)-1], ", ") + " and " + labels[len(labels)-1]
	default:
		more := ""
		if count > len(keys) {
			more = " or more"
		}
		return fmt.Sprintf(" on %d%s keys (%s, %s, …)", len(keys), more, spec.keyLabel(keys[0]), spec.keyLabel(keys[1]))
	}
}

// sendTimes returns the earliest and latest time of the sends an example
// names (the writes an anomaly is about, not the reads that exposed them),
// or of all its operations when it names no send.
func sendTimes(a *analysis, ex checker.Example) (first, last int64, ok bool) {
	var sends []int64
	for _, idx := range ex.OpIndexes() {
		if i, found := a.position(idx); found && (a.h[i].F == checker.FSend || a.h[i].F == checker.FTxn) {
			sends = append(sends, idx)
		}
	}
	if len(sends) == 0 {
		return timesOf(a, ex.OpIndexes())
	}
	return timesOf(a, sends)
}

// seenAt is when an example could be seen: once its last operation
// completed (the read of an aborted write, the poll that skipped, the
// transaction that closed a cycle).
func seenAt(a *analysis, ex checker.Example) (int64, bool) {
	_, last, ok := timesOf(a, ex.OpIndexes())
	return last, ok
}

// firstSeen is when the first of the examples could be seen (seenAt).
func firstSeen(a *analysis, examples []checker.Example) (int64, bool) {
	var first int64
	found := false
	for _, ex := range examples {
		if t, ok := seenAt(a, ex); ok && (!found || t < first) {
			first, found = t, true
		}
	}
	return first, found
}

// timesOf returns the earliest and latest time of the given operations
// that are in the history; for an invoke, its completion counts.
func timesOf(a *analysis, ops []int64) (first, last int64, ok bool) {
	for _, idx := range ops {
		i, found := a.position(idx)
		if !found {
			continue
		}
		if c, has := a.completion(i); has {
			i = c
		}
		t := a.h[i].Time
		if !ok || t < first {
			first = t
		}
		if !ok || t > last {
			last = t
		}
		ok = true
	}
	return first, last, ok
}

// plural counts a noun: "1 poll", "2 polls".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}

// seconds renders a time since the test started: "41.2 s", or in ms or
// µs below a second (hand-written histories are that short).
func seconds(ns int64) string {
	switch abs := max(ns, -ns); {
	case abs == 0 || abs >= 1e9:
		return strconv.FormatFloat(float64(ns)/1e9, 'f', 1, 64) + " s"
	case abs >= 1e6:
		return strconv.FormatFloat(float64(ns)/1e6, 'f', 1, 64) + " ms"
	default:
		return strconv.FormatFloat(float64(ns)/1e3, 'f', 1, 64) + " µs"
	}
}

func buildVerdict(in Input, a *analysis) verdict {
	r := in.Result
	v := verdict{Validity: r.Valid, Word: validityWord(r.Valid)}
	var bad, allowed []string
	for _, name := range orderedAnomalyNames(r.Anomalies) {
		rep := r.Anomalies[name]
		if rep.Count <= 0 {
			continue
		}
		st := anomalySentence(in, a, name, rep)
		if isAllowed(name, rep, r) {
			allowed = append(allowed, withDetail(st.sentence, name+", allowed in this mode", st.detail))
			continue
		}
		bad = append(bad, withDetail(st.sentence, name, st.detail))
	}
	var undecided []string
	for _, c := range r.Checkers {
		if c.Valid == checker.Unknown {
			why := c.Error
			if why == "" {
				why = "no reason given"
			}
			undecided = append(undecided, "the "+c.Name+" checker could not decide: "+why)
		}
	}
	switch r.Valid {
	case checker.Valid:
		v.Headline = "VALID: " + validSentence(in, a)
	case checker.Invalid:
		if len(bad) > 0 {
			v.Headline = "INVALID: " + bad[0]
			bad = bad[1:]
		} else {
			v.Headline = "INVALID: the checkers found the history inconsistent" + failedCheckers(r)
		}
	default:
		if len(undecided) > 0 {
			v.Headline = "UNKNOWN: " + undecided[0]
			undecided = undecided[1:]
		} else {
			v.Headline = "UNKNOWN: the checkers could not decide whether the history is valid"
		}
	}
	v.Sentences = append(v.Sentences, capitalizeAll(bad)...)
	v.Sentences = append(v.Sentences, capitalizeAll(undecided)...)
	v.Sentences = append(v.Sentences, capitalizeAll(allowed)...)
	return v
}

func failedCheckers(r checker.Result) string {
	var names []string
	for _, c := range r.Checkers {
		if c.Valid == checker.Invalid {
			names = append(names, c.Name)
		}
	}
	if len(names) == 0 {
		return ""
	}
	return " (" + strings.Join(names, ", ") + ")"
}

func validSentence(in Input, a *analysis) string {
	st := in.Result.Stats
	ops := st.Count
	if ops == 0 && a != nil {
		ops = len(a.h)
	}
	s := "no anomalies in " + plural(ops, "operation")
	if st.Sends > 0 || st.Polls > 0 {
		s += " (" + plural(st.Sends, "send") + ", " + plural(st.Polls, "poll")
		if st.Keys > 0 {
			s += " over " + plural(st.Keys, "key")
		}
		if st.SendsOK > 0 {
			s += "; " + plural(st.SendsOK, "acknowledged write") + " checked"
		}
		s += ")"
	}
	if faults := faultNames(in, a); len(faults) > 0 {
		s += " under " + strings.Join(faults, ", ")
	}
	return s
}

// faultNames lists the kinds of faults injected, from the spec or else the
// history's nemesis operations.
func faultNames(in Input, a *analysis) []string {
	out := in.Spec.Nemesis.Injected().Names()
	if len(out) > 0 || a == nil {
		return out
	}
	seen := map[string]bool{}
	for _, i := range a.nemesis {
		f := strings.TrimPrefix(a.h[i].F, "start-")
		if !seen[f] && !isHeal(a.h[i].F) {
			seen[f] = true
			out = append(out, f)
		}
	}
	sort.Strings(out)
	return out
}

func capitalizeAll(in []string) []string {
	out := make([]string, len(in))
	for i, s := range in {
		if s != "" {
			out[i] = strings.ToUpper(s[:1]) + s[1:]
		}
	}
	return out
}
