package reports

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/faultline/faultline/checker"
)

// analysis is what the report derives from the history once, before
// rendering.
type analysis struct {
	h checker.History
	// sparse maps an operation index to its position in h; nil when the
	// indexes are dense (h[i].Index == i), as the harness records them.
	sparse map[int64]int
	// partner maps a client op's position to its invoke's or completion's
	// position, -1 when it has none.
	partner []int32
	// latencies pairs each client invoke with its completion.
	latencies []latencyPoint
	// nemesis holds the positions of nemesis operations in h, in order.
	nemesis []int
	endNs   int64
	// finalNs is when the final reads began (the first assign or subscribe
	// seeking to the beginning), 0 when there were none.
	finalNs int64
	// acks maps a key and value to its first acknowledged send with an
	// offset, for the values indexAcks was asked for (ackOf).
	acks map[keyValue]ackedSend
}

// keyValue names one value sent to one key.
type keyValue struct {
	key   int
	value int64
}

// indexAcks finds, in one pass over the history, the first ok send with an
// offset of each wanted key and value, for ackOf. Only the wanted values
// are kept, so a history of 10^6 sends costs one scan, not a map of them
// all.
func (a *analysis) indexAcks(wanted map[keyValue]bool) {
	a.acks = make(map[keyValue]ackedSend, len(wanted))
	if len(wanted) == 0 {
		return
	}
	for i := range a.h {
		op := &a.h[i]
		if op.Type != checker.OK || !op.IsClient() {
			continue
		}
		for _, m := range op.Mops {
			if m.F != checker.FSend || !m.Completed || m.Offset == nil {
				continue
			}
			kv := keyValue{m.Key, m.Value}
			if _, done := a.acks[kv]; wanted[kv] && !done {
				a.acks[kv] = ackedSend{op.Time, op.Index, *m.Offset, m.Value}
			}
		}
	}
}

// ackOf returns the first ok send of value to key that reported an offset,
// among the values indexAcks was asked for.
func (a *analysis) ackOf(key int, value int64) (ackedSend, bool) {
	s, ok := a.acks[keyValue{key, value}]
	return s, ok
}

// latencyPoint is one completed client operation.
type latencyPoint struct {
	startNs   int64
	latencyNs int64
	f         string
	typ       checker.OpType
}

func analyze(h checker.History) *analysis {
	a := &analysis{h: h, partner: make([]int32, len(h)), latencies: make([]latencyPoint, 0, len(h)/2)}
	dense := true
	for i := range h {
		a.partner[i] = -1
		dense = dense && h[i].Index == int64(i)
	}
	if !dense {
		a.sparse = make(map[int64]int, len(h))
		for i := range h {
			a.sparse[h[i].Index] = i
		}
	}
	open := map[int]int{} // process -> position of its pending invoke
	for i := range h {
		op := &h[i]
		a.endNs = max(a.endNs, op.Time)
		if op.Process == checker.NemesisProcess {
			a.nemesis = append(a.nemesis, i)
			continue
		}
		if !op.IsClient() {
			continue
		}
		if op.SeekToBeginning && a.finalNs == 0 {
			a.finalNs = op.Time
		}
		if op.Type == checker.Invoke {
			open[op.Process] = i
			continue
		}
		inv, ok := open[op.Process]
		if !ok {
			continue
		}
		delete(open, op.Process)
		a.partner[inv], a.partner[i] = int32(i), int32(inv)
		a.latencies = append(a.latencies, latencyPoint{
			startNs:   h[inv].Time,
			latencyNs: op.Time - h[inv].Time,
			f:         h[inv].F,
			typ:       op.Type,
		})
	}
	return a
}

// position returns the position in the history of the op with the given
// index.
func (a *analysis) position(index int64) (int, bool) {
	if a.sparse != nil {
		i, ok := a.sparse[index]
		return i, ok
	}
	if index < 0 || index >= int64(len(a.h)) {
		return 0, false
	}
	return int(index), true
}

// completion returns the position of the completion of the invoke at pos.
func (a *analysis) completion(pos int) (int, bool) {
	if p := a.partner[pos]; p >= 0 && a.h[pos].Type == checker.Invoke {
		return int(p), true
	}
	return 0, false
}

// isHeal tells whether a nemesis op ends a fault rather than injecting one:
// stop-<fault> does, start-<fault> does not; other names are read by their
// verb (heal, resume, restart, ...).
func isHeal(f string) bool {
	f = strings.ToLower(f)
	switch {
	case strings.HasPrefix(f, "stop-"):
		return true
	case strings.HasPrefix(f, "start-"):
		return false
	}
	for _, w := range []string{"heal", "resume", "restart", "recover", "unpause"} {
		if strings.Contains(f, w) {
			return true
		}
	}
	return f == "start" || f == "cont"
}

// describeNemesis says what a nemesis operation did: "killed n1".
func describeNemesis(op checker.Op) string {
	target := rawSummary(op.Raw)
	f := strings.ToLower(op.F)
	verb := ""
	// The nemesis names its ops start-<fault> and stop-<fault>.
	if fault, ok := strings.CutPrefix(f, "stop-"); ok {
		switch {
		case strings.Contains(fault, "kill") || fault == "corrupt":
			verb = "restarted"
		case fault == "power":
			verb = "restored the power of"
		case strings.HasPrefix(fault, "disk-"):
			verb = "ended the disk fault on"
		case strings.Contains(fault, "pause"):
			verb = "resumed"
		case strings.Contains(fault, "partition"):
			verb = "healed the network partition"
		default:
			verb = "stopped " + fault + " on"
		}
		if target == "" {
			if fault == "corrupt" {
				return "ended the corruption fault"
			}
			return strings.TrimSuffix(verb, " on")
		}
		if strings.HasPrefix(verb, "healed") {
			return verb
		}
		return verb + " " + target
	}
	f = strings.TrimPrefix(f, "start-")
	switch {
	case strings.Contains(f, "kill"):
		verb = "killed"
	case f == "power":
		verb = "cut the power of"
	case f == "disk-error":
		verb = "failed writes and fsyncs with EIO on"
	case f == "disk-full":
		verb = "filled the disk of"
	case f == "disk-slow":
		verb = "slowed the disk of"
	case f == "corrupt" && rawMode(op.Raw) == "unreplicated-tail":
		return tailFlipSummary(op.Raw)
	case f == "corrupt" && rawMode(op.Raw) == "disk-replaced":
		verb = "killed and replaced with an empty disk the data dir of"
	case f == "corrupt":
		verb = "killed and corrupted the data of"
	case strings.Contains(f, "unpause") || strings.Contains(f, "resume") || strings.Contains(f, "cont"):
		verb = "resumed"
	case strings.Contains(f, "pause") || strings.Contains(f, "stop-process"):
		verb = "paused"
	case strings.Contains(f, "heal") || strings.Contains(f, "stop-partition"):
		verb = "healed the network partition"
	case strings.Contains(f, "partition"):
		verb = "partitioned the network"
	case strings.Contains(f, "restart") || f == "start" || strings.Contains(f, "start-node"):
		verb = "restarted"
	case strings.Contains(f, "shutdown"):
		verb = "shut down"
	}
	if verb == "" {
		s := "ran " + strconv.Quote(op.F)
		if target != "" {
			s += " on " + target
		}
		return s
	}
	if target == "" {
		return verb
	}
	if strings.HasPrefix(verb, "partitioned") || strings.HasPrefix(verb, "healed") {
		return verb + " (" + target + ")"
	}
	return verb + " " + target
}

// rawSummary renders a nemesis value briefly: a list of node names as
// "n1, n2", an object naming "nodes" (and a "mode") as "n1, n2 (leaders)",
// anything else as compact JSON cut at 80 bytes.
func rawSummary(raw []byte) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var list []string
	if json.Unmarshal(raw, &list) == nil {
		return strings.Join(list, ", ")
	}
	var obj struct {
		Nodes  []string            `json:"nodes"`
		Mode   string              `json:"mode"`
		Grudge map[string][]string `json:"grudge"`
		Killed []string            `json:"killed"`
	}
	if json.Unmarshal(raw, &obj) == nil && len(obj.Grudge) > 0 {
		out := grudgeSummary(obj.Mode, obj.Grudge)
		if len(obj.Killed) > 0 {
			out += "; then killed " + strings.Join(obj.Killed, ", ")
		}
		return truncate(out, 80)
	}
	if json.Unmarshal(raw, &obj) == nil && len(obj.Nodes) > 0 {
		out := strings.Join(obj.Nodes, ", ")
		if obj.Mode != "" {
			out += " (" + obj.Mode + ")"
		}
		return truncate(out, 80)
	}
	var fields map[string]any
	if json.Unmarshal(raw, &fields) == nil && !slices.ContainsFunc(slices.Collect(maps.Values(fields)), func(v any) bool {
		switch v := v.(type) {
		case nil:
			return false
		case []any:
			return len(v) > 0
		case string:
			return v != ""
		}
		return true
	}) {
		return "" // an object with nothing in it ({"nodes":null})
	}
	var buf bytes.Buffer
	if json.Compact(&buf, raw) != nil {
		return truncate(string(raw), 80)
	}
	return truncate(buf.String(), 80)
}

// rawMode is the "mode" a nemesis value names, "" when none.
func rawMode(raw []byte) string {
	var obj struct {
		Mode string `json:"mode"`
	}
	_ = json.Unmarshal(raw, &obj)
	return obj.Mode
}

// tailFlipSummary says what corrupt:unreplicated-tail did: which leader
// it cut off from its followers and in which partitions it flipped a bit
// of a batch no follower had yet.
func tailFlipSummary(raw []byte) string {
	var t struct {
		Leader     string   `json:"leader"`
		Partitions []string `json:"partitions"`
		Did        string   `json:"did"`
	}
	_ = json.Unmarshal(raw, &t)
	var flips []struct {
		Partition  string `json:"partition"`
		BaseOffset int64  `json:"base-offset"`
		Skipped    string `json:"skipped"`
	}
	_ = json.Unmarshal([]byte(t.Did), &flips)
	var flipped []string
	for _, f := range flips {
		if f.Skipped == "" {
			flipped = append(flipped, fmt.Sprintf("%s at offset %d", f.Partition, f.BaseOffset))
		}
	}
	if t.Leader == "" {
		return "flipped a bit in a batch no follower had (unreplicated-tail)"
	}
	if len(flipped) == 0 {
		return "cut leader " + t.Leader + " off from its followers; no batch of " + strings.Join(t.Partitions, ", ") + " was theirs to miss, so nothing was flipped"
	}
	return "cut leader " + t.Leader + " off from its followers and flipped a bit in a batch none of them had: " + strings.Join(flipped, ", ")
}

// grudgeSummary says in words which nodes a partition separated, from the
// nemesis's grudge (node -> nodes whose packets it drops): "n3 cut off from
// n1, n2, n4, n5", "n1, n2 | n3, n4, n5", or the majorities ring.
func grudgeSummary(mode string, grudge map[string][]string) string {
	if mode == "majorities-ring" {
		return "majorities ring"
	}
	groups := grudgeGroups(grudge)
	if len(groups) == 2 && (len(groups[0]) == 1 || len(groups[1]) == 1) {
		alone, rest := groups[0], groups[1]
		if len(alone) != 1 {
			alone, rest = rest, alone
		}
		return alone[0] + " cut off from " + strings.Join(rest, ", ")
	}
	parts := make([]string, len(groups))
	for i, g := range groups {
		parts[i] = strings.Join(g, ", ")
	}
	return strings.Join(parts, " | ")
}

// grudgeGroups splits the nodes a grudge names into the groups that can
// still reach each other, each sorted, in order of their first node.
func grudgeGroups(grudge map[string][]string) [][]string {
	cut := map[[2]string]bool{}
	nodes := map[string]bool{}
	for n, from := range grudge {
		nodes[n] = true
		for _, f := range from {
			nodes[f] = true
			cut[[2]string{n, f}], cut[[2]string{f, n}] = true, true
		}
	}
	names := make([]string, 0, len(nodes))
	for n := range nodes {
		names = append(names, n)
	}
	sort.Strings(names)
	// Components of the "still connected" graph.
	group := map[string]int{}
	var groups [][]string
	for _, n := range names {
		if _, ok := group[n]; ok {
			continue
		}
		id := len(groups)
		groups = append(groups, nil)
		stack := []string{n}
		group[n] = id
		for len(stack) > 0 {
			x := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			groups[id] = append(groups[id], x)
			for _, y := range names {
				if _, seen := group[y]; !seen && !cut[[2]string{x, y}] {
					group[y] = id
					stack = append(stack, y)
				}
			}
		}
		sort.Strings(groups[id])
	}
	return groups
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8Start(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

func utf8Start(b byte) bool { return b&0xC0 != 0x80 }

// valueFocus narrows how a poll's value is shown to what an anomaly is
// about: only its keys, and only the records near its offsets.
type valueFocus struct {
	keys    map[int]bool // nil: every key
	offsets []int64      // sorted; empty: the ends of long lists
}

// pairsShownMax is how long a poll's list of one key may be before it is
// elided around the focus offsets (or to its ends).
const (
	pairsShownMax      = 12
	pairsContextAround = 3
	pairsAtEachEnd     = 4
)

// formatValue renders an operation's value for people, cut at maxLen
// bytes: "send 102 to key 2 → offset 2", "poll key 3: 39→1039, 40→1040, …"
// (offset → value); focus (may be nil) elides what an anomaly is not about,
// marking each cut with "…".
func formatValue(op checker.Op, maxLen int, focus *valueFocus) string {
	var b strings.Builder
	switch {
	case op.Mops != nil:
		for i, m := range op.Mops {
			if i > 0 {
				b.WriteString("; ")
			}
			writeMop(&b, m, focus)
			if b.Len() > maxLen {
				break
			}
		}
	case op.Keys != nil:
		b.WriteString("keys ")
		for i, k := range op.Keys {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(strconv.Itoa(k))
		}
		if op.SeekToBeginning {
			b.WriteString(", from the beginning")
		}
	case len(op.Raw) > 0:
		b.WriteString(rawSummary(op.Raw))
	}
	return truncate(b.String(), maxLen)
}

func writeMop(b *strings.Builder, m checker.MicroOp, focus *valueFocus) {
	switch m.F {
	case "send":
		b.WriteString("send " + strconv.FormatInt(m.Value, 10) + " to key " + strconv.Itoa(m.Key))
		if m.Completed {
			if m.Offset != nil {
				b.WriteString(" → offset " + strconv.FormatInt(*m.Offset, 10))
			} else {
				b.WriteString(" → offset unknown")
			}
		}
	case "poll":
		if m.Polls == nil {
			b.WriteString("poll")
			return
		}
		if len(m.Polls) == 0 {
			b.WriteString("poll: nothing")
			return
		}
		keys := make([]int, 0, len(m.Polls))
		for k := range m.Polls {
			keys = append(keys, k)
		}
		sort.Ints(keys)
		written, hidden := 0, 0
		for _, k := range keys {
			if focus != nil && focus.keys != nil && !focus.keys[k] {
				hidden++
				continue
			}
			if written > 0 {
				b.WriteString("; ")
			}
			written++
			b.WriteString("poll key " + strconv.Itoa(k) + ": ")
			writePairs(b, m.Polls[k], focus)
			if b.Len() > 4096 {
				break
			}
		}
		if hidden > 0 {
			if written > 0 {
				b.WriteString("; ")
			} else {
				b.WriteString("poll ")
			}
			b.WriteString("…" + plural(hidden, "other key"))
		}
	default:
		b.WriteString(m.F)
	}
}

// writePairs writes "offset→value" pairs; a long list keeps only the pairs
// near the focus offsets, or its two ends, and marks each gap with "…".
func writePairs(b *strings.Builder, pairs []checker.Pair, focus *valueFocus) {
	keep := func(int) bool { return true }
	if len(pairs) > pairsShownMax {
		var offsets []int64
		if focus != nil {
			offsets = focus.offsets
		}
		keep = func(j int) bool {
			if len(offsets) == 0 {
				return j < pairsAtEachEnd || j >= len(pairs)-pairsAtEachEnd
			}
			o := pairs[j].Offset
			i := sort.Search(len(offsets), func(i int) bool { return offsets[i] >= o-pairsContextAround })
			return i < len(offsets) && offsets[i] <= o+pairsContextAround
		}
	}
	first, gap := true, false
	for j, p := range pairs {
		if !keep(j) {
			gap = true
			continue
		}
		if !first {
			b.WriteString(", ")
		}
		if gap {
			b.WriteString("…, ")
			gap = false
		}
		first = false
		b.WriteString(strconv.FormatInt(p.Offset, 10) + "→" + strconv.FormatInt(p.Value, 10))
	}
	if gap {
		if !first {
			b.WriteString(", ")
		}
		b.WriteString("…")
	}
}
