package reports

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/faultline/faultline/checker"
)

// story is the causal account of one partition's anomalies: what was
// acknowledged, by which leader, which fault came, who led next, what was
// written over it and what the final reads found.
type story struct {
	Key    int
	Label  string
	Anchor string
	// Summary names the anomalies the story explains, with the checker's
	// counts on this key: "2 lost-write, 5 unseen, 1 inconsistent-offsets".
	Summary string
	// Fault is the fault blamed (the one overlapping the partition's
	// window), or nil.
	Fault *faultSpan
	Steps []storyStep
}

// storyStep is one step of a story, at a time, naming ops and nodes.
type storyStep struct {
	Time string
	Text string
	ns   int64
}

// Bounds on stories.
const (
	storiesMax     = 12
	storyStepsMax  = 8
	leaderStepsMax = 2
)

// faultSpan is one fault from its start to its heal, as the nemesis ops
// record it.
type faultSpan struct {
	start, end int64
	// Text says what the fault did: "killed n1", "partitioned the network
	// (n2 cut off from n1, n3)".
	Text string
	// Heal says what ended it, or is empty for a fault never healed.
	Heal string
	// opIndex is the index of the op that started it.
	opIndex int64
}

// faultSpans pairs each start-<fault> completion with the next
// stop-<fault> completion; any other nemesis op is a span of its own
// lasting until the next heal, as faultWindows reads them.
func faultSpans(a *analysis) []faultSpan {
	var out []faultSpan
	open := map[string]int{}
	for _, i := range a.nemesis {
		op := a.h[i]
		if op.Type == checker.Invoke {
			continue
		}
		f := strings.ToLower(op.F)
		switch {
		case strings.HasPrefix(f, "stop-"):
			name := strings.TrimPrefix(f, "stop-")
			if j, ok := open[name]; ok {
				out[j].end, out[j].Heal = op.Time, describeNemesis(op)
				delete(open, name)
			}
		case isHeal(f):
			for name, j := range open {
				out[j].end, out[j].Heal = op.Time, describeNemesis(op)
				delete(open, name)
			}
		default:
			name := strings.TrimPrefix(f, "start-")
			if _, ok := open[name]; ok {
				continue
			}
			open[name] = len(out)
			out = append(out, faultSpan{start: op.Time, end: -1, Text: describeNemesis(op), opIndex: op.Index})
		}
	}
	for _, j := range open {
		out[j].end = a.endNs
	}
	return out
}

// blame picks the fault a partition's anomalies are laid to: the one
// overlapping the partition's window [first, last]; failing that, when the
// cause may follow the writes (a loss or an overwrite: acknowledged, then
// lost) the first fault after them, else the last fault begun before the
// anomaly was seen.
func blame(spans []faultSpan, first, last int64, loss bool) *faultSpan {
	var best *faultSpan
	for i := range spans {
		s := &spans[i]
		if s.start <= last && s.end >= first {
			if best == nil || s.start > best.start {
				best = s
			}
		}
	}
	if best != nil {
		return best
	}
	for i := range spans {
		s := &spans[i]
		switch {
		case loss && s.start >= first:
			return s
		case !loss && s.start <= first:
			best = s
		}
	}
	return best
}

// leaderEvent is one partition's leader as the harness saw it.
type leaderEvent struct {
	t      int64
	leader string
	epoch  int32
}

// leaderEvents gathers the harness's leadership events by partition label
// ("t0-2").
func leaderEvents(a *analysis) map[string][]leaderEvent {
	out := map[string][]leaderEvent{}
	for _, op := range a.h {
		for _, l := range op.Leaderships() {
			label := l.Topic + "-" + strconv.Itoa(int(l.Partition))
			out[label] = append(out[label], leaderEvent{op.Time, l.Leader, l.Epoch})
		}
	}
	return out
}

// leaderAt is the last leader seen at or before t.
func leaderAt(events []leaderEvent, t int64) (leaderEvent, bool) {
	var out leaderEvent
	found := false
	for _, e := range events {
		if e.t > t {
			break
		}
		out, found = e, true
	}
	return out, found && out.leader != ""
}

// partitionName is the topic-partition of a key ("t0-2"), or "" when the
// spec does not say how keys map to partitions.
func (s Spec) partitionName(key int) string {
	if s.PartitionsPerTopic <= 0 {
		return ""
	}
	return fmt.Sprintf("t%d-%d", key/s.PartitionsPerTopic, key%s.PartitionsPerTopic)
}

// ackedSend is one acknowledged send of a value at an offset.
type ackedSend struct {
	t      int64
	index  int64
	offset int64
	value  int64
}

// keyFacts is what the history says of one key, for its story.
type keyFacts struct {
	sends   map[int64]ackedSend   // value -> its ok send with an offset
	byOff   map[int64][]ackedSend // offset -> ok sends acknowledged there
	read    map[int64]ackedSend   // value -> the first ok poll before the final reads that returned it
	final   *checker.Op           // the last final read that returned this key
	finalAt map[int64]int64       // offset -> value, in the final reads
	lastOff int64
}

// factsOfKey scans the history once for one key.
func factsOfKey(a *analysis, key int) keyFacts {
	kf := keyFacts{sends: map[int64]ackedSend{}, byOff: map[int64][]ackedSend{}, read: map[int64]ackedSend{}, finalAt: map[int64]int64{}, lastOff: -1}
	final := map[int]bool{} // processes whose reads are final reads
	for i := range a.h {
		op := &a.h[i]
		if !op.IsClient() {
			continue
		}
		if op.SeekToBeginning {
			final[op.Process] = true
		}
		if op.Type != checker.OK {
			continue
		}
		for _, m := range op.Mops {
			switch {
			case m.F == checker.FSend && m.Key == key && m.Completed && m.Offset != nil:
				s := ackedSend{op.Time, op.Index, *m.Offset, m.Value}
				if _, ok := kf.sends[m.Value]; !ok {
					kf.sends[m.Value] = s
				}
				kf.byOff[s.offset] = append(kf.byOff[s.offset], s)
			case m.F == checker.FPoll && final[op.Process] && len(m.Polls[key]) > 0:
				kf.final = op
				for _, p := range m.Polls[key] {
					kf.finalAt[p.Offset] = p.Value
					kf.lastOff = max(kf.lastOff, p.Offset)
				}
			case m.F == checker.FPoll:
				for _, p := range m.Polls[key] {
					if _, ok := kf.read[p.Value]; !ok {
						kf.read[p.Value] = ackedSend{op.Time, op.Index, p.Offset, p.Value}
					}
				}
			}
		}
	}
	return kf
}

// storyKinds are the anomalies a story tells, in the order it looks for the
// write it starts from: one cause on one partition shows as several of
// them.
var storyKinds = []string{
	checker.AnomalyLostWrite, checker.AnomalyLostAfterRead, checker.AnomalyInconsistentOffsets, checker.AnomalyNonmonotonicSend,
	checker.AnomalyUnseen, checker.AnomalyDuplicate, checker.AnomalyG1a,
}

// buildStories tells one story per partition with anomalies that are not
// allowed, worst first (most anomalies), at most storiesMax.
func buildStories(in Input, a *analysis) []story {
	if a == nil {
		return nil
	}
	counts := map[int]map[string]int{}
	for name, rep := range in.Result.Anomalies {
		if rep.Count == 0 || rep.Allowed {
			continue
		}
		for k, n := range rep.ByKey {
			if counts[k] == nil {
				counts[k] = map[string]int{}
			}
			counts[k][name] += n
		}
	}
	keys := make([]int, 0, len(counts))
	total := map[int]int{}
	for k, c := range counts {
		keys = append(keys, k)
		for _, n := range c {
			total[k] += n
		}
	}
	sort.Slice(keys, func(i, j int) bool {
		if total[keys[i]] != total[keys[j]] {
			return total[keys[i]] > total[keys[j]]
		}
		return keys[i] < keys[j]
	})
	if len(keys) > storiesMax {
		keys = keys[:storiesMax]
	}
	spans := faultSpans(a)
	leaders := leaderEvents(a)
	out := make([]story, 0, len(keys))
	for _, k := range keys {
		out = append(out, keyStory(in, a, k, counts[k], spans, leaders))
	}
	return out
}

func keyStory(in Input, a *analysis, key int, counts map[string]int, spans []faultSpan, leaders map[string][]leaderEvent) story {
	st := story{Key: key, Label: in.Spec.keyLabel(key), Anchor: "story-" + strconv.Itoa(key)}
	var parts []string
	for _, name := range orderedAnomalyNames(counts) {
		parts = append(parts, strconv.Itoa(counts[name])+" "+name)
	}
	st.Summary = strings.Join(parts, ", ")
	kf := factsOfKey(a, key)
	part := in.Spec.partitionName(key)
	events := leaders[part]
	where := st.Label
	if part != "" {
		where = part
	}

	// The victim: the first acknowledged value the checker names on this
	// key, and the offset it was acknowledged at.
	var victim *ackedSend
	loss := false
	for _, name := range storyKinds {
		for _, ex := range in.Result.Anomalies[name].Examples {
			if ex.Key != key {
				continue
			}
			for _, v := range exampleValues(ex) {
				if s, ok := kf.sends[v]; ok && (victim == nil || s.t < victim.t) {
					victim, loss = &s, kindOf(name).causeFollows()
				}
			}
		}
		if victim != nil {
			break
		}
	}
	var steps []storyStep
	add := func(t int64, text string) {
		if len(steps) < storyStepsMax {
			steps = append(steps, storyStep{Time: seconds(t), Text: text, ns: t})
		}
	}
	first, last, seen := a.endNs, int64(0), a.endNs
	// limit is the kind whose rule bounds the fault by when the key's
	// anomalies were first seen (blameUntil): none when one of them is a
	// loss or porcupine's, an overwrite when one is.
	limit, limited := anomalyKind{}, true
	for name := range counts {
		k := kindOf(name)
		limited = limited && !k.loss && !k.unseenTime
		limit.overwrite = limit.overwrite || k.overwrite
		for _, ex := range in.Result.Anomalies[name].Examples {
			if ex.Key != key {
				continue
			}
			if t0, t1, ok := sendTimes(a, ex); ok {
				first, last = min(first, t0), max(last, t1)
			}
			if t, ok := seenAt(a, ex); ok {
				seen = min(seen, t)
			}
		}
	}
	if victim != nil {
		first = min(first, victim.t)
		by := ""
		if l, ok := leaderAt(events, victim.t); ok {
			by = fmt.Sprintf(" by %s (leader of %s, epoch %d)", l.leader, where, l.epoch)
		}
		add(victim.t, fmt.Sprintf("send %d → offset %d acknowledged%s (op %d)", victim.value, victim.offset, by, victim.index))
	}
	if first > last {
		last = first
	}
	if limited && victim == nil {
		st.Fault = blameUntil(spans, first, last, seen, limit)
	} else {
		st.Fault = blame(spans, first, last, loss || victim != nil)
	}
	if f := st.Fault; f != nil {
		add(f.start, "the nemesis "+f.Text)
		shown := 0
		prev, hadPrev := leaderAt(events, f.start)
		for _, e := range events {
			if e.t < f.start || shown == leaderStepsMax {
				continue
			}
			if hadPrev && e.leader == prev.leader && e.epoch == prev.epoch {
				continue
			}
			if e.leader == "" {
				add(e.t, fmt.Sprintf("%s has no leader (seen by the harness)", where))
			} else {
				add(e.t, fmt.Sprintf("%s became leader of %s, epoch %d (seen by the harness)", e.leader, where, e.epoch))
			}
			prev, hadPrev = e, true
			shown++
		}
		if f.Heal != "" && f.end < a.endNs {
			add(f.end, "the nemesis "+f.Heal)
		}
	}
	if victim != nil {
		for _, s := range kf.byOff[victim.offset] {
			if s.value != victim.value {
				by := ""
				if l, ok := leaderAt(events, s.t); ok {
					by = " by " + l.leader
				}
				add(s.t, fmt.Sprintf("send %d → offset %d acknowledged%s (op %d): the same offset again", s.value, s.offset, by, s.index))
				break
			}
		}
		r, wasRead := kf.read[victim.value]
		if wasRead {
			add(r.t, fmt.Sprintf("a poll read %d at offset %d (op %d)", r.value, r.offset, r.index))
		}
		switch {
		case kf.final == nil && wasRead:
			add(a.endNs, fmt.Sprintf("no final read returned %s; %d, read before, is gone", where, victim.value))
		case kf.final == nil:
			add(a.endNs, fmt.Sprintf("no final read returned %s; send %d was never read back", where, victim.value))
		case kf.finalAt[victim.offset] == victim.value:
			add(kf.final.Time, fmt.Sprintf("final read (op %d): offset %d holds %d", kf.final.Index, victim.offset, victim.value))
		default:
			holds := "nothing"
			if v, ok := kf.finalAt[victim.offset]; ok {
				holds = strconv.FormatInt(v, 10)
			}
			add(kf.final.Time, fmt.Sprintf("final read (op %d, up to offset %d): offset %d holds %s; %d is gone",
				kf.final.Index, kf.lastOff, victim.offset, holds, victim.value))
		}
	}
	sort.SliceStable(steps, func(i, j int) bool { return steps[i].ns < steps[j].ns })
	if len(steps) == storyStepsMax {
		steps = steps[:storyStepsMax-1]
	}
	steps = append(steps, storyStep{Text: "the checker counts on " + where + ": " + st.Summary})
	st.Steps = steps
	return st
}

// exampleValues lists the values an example names.
func exampleValues(ex checker.Example) []int64 {
	var out []int64
	if ex.Value != nil {
		out = append(out, *ex.Value)
	}
	return append(out, ex.Values...)
}
