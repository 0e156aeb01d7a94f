package reports

import (
	"encoding/json"
	"fmt"
	"html/template"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/faultline/faultline/checker"
)

// The fault timeline: one lane per node showing what the nemesis did to it
// (killed, paused, cut off, power lost, disk fault; faultLooks names each
// kind), one lane per partition with anomalies showing the leader the
// harness saw over time, and the final-read phase shaded across all lanes.

// Bounds on the fault timeline.
const (
	timelineNodesMax    = 16
	leaderLanesMax      = offsetKeysMax
	timelineLanePx      = 22.0
	timelineSegmentMax  = 2000
	timelineHeightMinPx = 150.0
)

// leaderPalette colours leader segments by node, in hues the fault kinds
// (faultLooks) do not use, so a leader never reads as a fault.
var leaderPalette = []string{"#00838f", "#7cb342", "#5c6bc0", "#8d6e63", "#f06292", "#455a64", "#c0ca33", "#26a69a"}

// laneSegment is one span of one lane.
type laneSegment struct {
	start, end int64
	kind       string // fault kind, or the leader's node for leader lanes
	label      string // drawn inside when it fits
	title      string // tooltip
}

// faultValue is what the fault timeline reads of a fault op's value
// besides its targets: the mode, and an agent's account ("did").
type faultValue struct {
	Mode string `json:"mode"`
	Did  string `json:"did"`
}

// readFaultValue decodes raw; the zero value when it is no object.
func readFaultValue(raw []byte) faultValue {
	var v faultValue
	if json.Unmarshal(raw, &v) != nil {
		return faultValue{}
	}
	return v
}

// flipped reports whether a corrupt:unreplicated-tail op's account (the
// agent's JSON list) names a batch it flipped.
func (v faultValue) flipped() bool {
	var flips []struct {
		Position int64  `json:"position"`
		Skipped  string `json:"skipped"`
	}
	if v.Did == "" || json.Unmarshal([]byte(v.Did), &flips) != nil {
		return false
	}
	for _, f := range flips {
		if f.Skipped == "" && f.Position > 0 {
			return true
		}
	}
	return false
}

// nemesisTargets reads the nodes a fault op hit from its value: a list of
// names (["n1"]), an object with "nodes" (the nemesis's Targets and
// DiskTargets), or a partition's "grudge", whose cut-off nodes are those
// outside the largest group (every node, when no group is largest, as in a
// majorities ring). detail says it in words for the tooltip.
func nemesisTargets(raw []byte) (nodes []string, detail string) {
	if len(raw) == 0 {
		return nil, ""
	}
	var list []string
	if json.Unmarshal(raw, &list) == nil {
		return list, strings.Join(list, ", ")
	}
	var obj struct {
		Nodes  []string            `json:"nodes"`
		Mode   string              `json:"mode"`
		Grudge map[string][]string `json:"grudge"`
	}
	if json.Unmarshal(raw, &obj) != nil {
		return nil, rawSummary(raw)
	}
	if len(obj.Grudge) > 0 {
		groups := grudgeGroups(obj.Grudge)
		largest, ties := 0, 0
		for _, g := range groups {
			switch {
			case len(g) > largest:
				largest, ties = len(g), 1
			case len(g) == largest:
				ties++
			}
		}
		for _, g := range groups {
			if len(g) < largest || ties > 1 {
				nodes = append(nodes, g...)
			}
		}
		return nodes, grudgeSummary(obj.Mode, obj.Grudge)
	}
	return obj.Nodes, rawSummary(raw)
}

// nodeFaultSegments pairs each fault a node suffered with its end, from the
// nemesis ops alone: start-<fault> (or any op that is not a heal) opens a
// segment on each target node, stop-<fault> closes that kind's segments,
// another heal (Jepsen's "start", "resume", "heal") closes every open one,
// and the end of the history closes the rest.
func nodeFaultSegments(a *analysis) map[string][]laneSegment {
	out := map[string][]laneSegment{}
	type openSeg struct {
		node string
		seg  laneSegment
	}
	open := map[string][]openSeg{} // kind -> open segments
	closeKind := func(kind string, t int64, how string) {
		for _, o := range open[kind] {
			o.seg.end = t
			o.seg.title += "; ended at " + seconds(t) + how
			out[o.node] = append(out[o.node], o.seg)
		}
		delete(open, kind)
	}
	for _, i := range a.nemesis {
		op := a.h[i]
		if op.Type == checker.Invoke {
			continue
		}
		f := strings.ToLower(op.F)
		kind := normalizeFaultKind(f)
		switch {
		case strings.HasPrefix(f, "stop-"):
			closeKind(kind, op.Time, "")
		case isHeal(f):
			for _, k := range sortedKeys(open) {
				closeKind(k, op.Time, " ("+op.F+")")
			}
		default:
			nodes, detail := nemesisTargets(op.Raw)
			look := faultLookOf(kind)
			v := readFaultValue(op.Raw)
			if state, ok := faultModeStates[kind+":"+v.Mode]; ok {
				look.State = state
			}
			if v.Mode == "unreplicated-tail" && (op.Error != "" || !v.flipped()) {
				look.State = "cut off from its followers, nothing flipped"
			}
			for _, n := range nodes {
				title := fmt.Sprintf("%s %s from %s (op %d", n, look.State, seconds(op.Time), op.Index)
				if detail != "" {
					title += ": " + detail
				}
				title += ")"
				open[kind] = append(open[kind], openSeg{n, laneSegment{start: op.Time, kind: kind, label: look.State, title: title}})
			}
		}
	}
	for _, k := range sortedKeys(open) {
		closeKind(k, a.endNs, " (end of the history)")
	}
	for n := range out {
		sort.SliceStable(out[n], func(i, j int) bool { return out[n][i].start < out[n][j].start })
	}
	return out
}

// anomalousKeys lists the keys the checker counts anomalies on, those not
// allowed first, then by key.
func anomalousKeys(r checker.Result) []int {
	forbidden := map[int]bool{}
	seen := map[int]bool{}
	for _, rep := range r.Anomalies {
		for k, n := range rep.ByKey {
			if n <= 0 {
				continue
			}
			seen[k] = true
			if !rep.Allowed {
				forbidden[k] = true
			}
		}
	}
	keys := make([]int, 0, len(seen))
	for k := range seen {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if forbidden[keys[i]] != forbidden[keys[j]] {
			return forbidden[keys[i]]
		}
		return keys[i] < keys[j]
	})
	return keys
}

// leaderSegments turns one partition's leader events into spans, one per
// leader and epoch, each lasting until the next change (or the end).
func leaderSegments(events []leaderEvent, endNs int64) []laneSegment {
	var out []laneSegment
	for _, e := range events {
		if len(out) > 0 {
			last := &out[len(out)-1]
			if last.kind == e.leader && strings.HasSuffix(last.label, " e"+strconv.Itoa(int(e.epoch))) {
				continue
			}
			last.end = e.t
		}
		who, label := e.leader, fmt.Sprintf("%s e%d", e.leader, e.epoch)
		if who == "" {
			who, label = "none", "no leader"
		}
		out = append(out, laneSegment{start: e.t, end: endNs, kind: who, label: label,
			title: fmt.Sprintf("leader %s, epoch %d, seen by the harness from %s", who, e.epoch, seconds(e.t))})
	}
	for i := range out {
		if i+1 < len(out) {
			out[i].title += " to " + seconds(out[i+1].start)
		}
	}
	return out
}

// faultTimeline draws the labelled fault timeline, or returns "" when the
// history records neither faults on nodes nor leaders of anomalous
// partitions. notes say what was left out.
func faultTimeline(in Input, a *analysis, endS float64) (template.HTML, []string) {
	if a == nil {
		return "", nil
	}
	var notes []string
	segs := nodeFaultSegments(a)
	nodeSet := map[string]bool{}
	for _, n := range in.Spec.Nodes {
		nodeSet[n] = true
	}
	for n := range segs {
		nodeSet[n] = true
	}
	leaders := leaderEvents(a)
	type leaderLane struct {
		name string
		segs []laneSegment
	}
	var leaderLanes []leaderLane
	for _, k := range anomalousKeys(in.Result) {
		part := in.Spec.partitionName(k)
		if part == "" || len(leaders[part]) == 0 {
			continue
		}
		if len(leaderLanes) == leaderLanesMax {
			notes = append(notes, fmt.Sprintf("Leaders are drawn for the first %d partitions with anomalies.", leaderLanesMax))
			break
		}
		ls := leaderSegments(leaders[part], a.endNs)
		for _, s := range ls {
			if s.kind != "none" {
				nodeSet[s.kind] = true
			}
		}
		leaderLanes = append(leaderLanes, leaderLane{part, ls})
	}
	if len(segs) == 0 && len(leaderLanes) == 0 {
		return "", nil
	}
	nodes := make([]string, 0, len(nodeSet))
	for n := range nodeSet {
		nodes = append(nodes, n)
	}
	sort.Slice(nodes, func(i, j int) bool { return naturalLess(nodes[i], nodes[j]) })
	nodeColor := map[string]string{"none": colorFault}
	for i, n := range nodes {
		nodeColor[n] = leaderPalette[i%len(leaderPalette)]
	}
	if len(nodes) > timelineNodesMax {
		notes = append(notes, fmt.Sprintf("The first %d of %d nodes have a lane.", timelineNodesMax, len(nodes)))
		nodes = nodes[:timelineNodesMax]
	}
	lanes := append([]string(nil), nodes...)
	for _, l := range leaderLanes {
		lanes = append(lanes, l.name)
	}
	var kinds []string
	for _, n := range nodes {
		for _, s := range segs[n] {
			if !slices.Contains(kinds, s.kind) {
				kinds = append(kinds, s.kind)
			}
		}
	}
	sort.Strings(kinds)
	var leaderNodes []string
	for _, l := range leaderLanes {
		for _, s := range l.segs {
			if !slices.Contains(leaderNodes, s.kind) {
				leaderNodes = append(leaderNodes, s.kind)
			}
		}
	}
	sort.Slice(leaderNodes, func(i, j int) bool { return naturalLess(leaderNodes[i], leaderNodes[j]) })
	legendRows := len(kinds) + len(leaderNodes) + 1
	// At least room for the legend and for the rotated y-axis label.
	height := max(plotTopPx+plotBottomPx+timelineLanePx*float64(len(lanes)), plotTopPx+plotBottomPx/2+legendRowPx*float64(legendRows), timelineHeightMinPx)
	p := newPlot("fault timeline: what the nemesis did to each node, and who led each partition with anomalies", height, endS, axis{min: 0, max: float64(len(lanes))})
	p.laneAxes("time since test start (s)", "node / partition", lanes)
	drawn := 0
	for i, n := range nodes {
		fmt.Fprintf(&p.b, `<g class="lane" data-lane="%s">`, xmlEscape(n))
		for _, s := range segs[n] {
			if drawn == timelineSegmentMax {
				break
			}
			drawn++
			p.laneBar(i, len(lanes), s.start, s.end, faultColor(s.kind), s.label, s.title)
		}
		p.b.WriteString(`</g>`)
	}
	for j, l := range leaderLanes {
		fmt.Fprintf(&p.b, `<g class="lane leaders" data-lane="%s">`, xmlEscape(l.name))
		for _, s := range l.segs {
			if drawn == timelineSegmentMax {
				break
			}
			drawn++
			p.laneBar(len(nodes)+j, len(lanes), s.start, s.end, nodeColor[s.kind], s.label, l.name+": "+s.title)
		}
		p.b.WriteString(`</g>`)
	}
	if drawn == timelineSegmentMax {
		notes = append(notes, fmt.Sprintf("The fault timeline draws the first %d segments.", timelineSegmentMax))
	}
	p.finalReads(a.finalNs, false)
	for _, k := range kinds {
		p.legendEntry("fault-"+k, "node "+faultLookOf(k).State, faultColor(k), "band")
	}
	for _, n := range leaderNodes {
		label := "led by " + n
		if n == "none" {
			label = "no leader"
		}
		p.legendEntry("leader-"+n, label, nodeColor[n], "band")
	}
	if a.finalNs > 0 {
		p.legendEntry("final-reads", "final reads", colorFinalReads, "band")
	}
	return p.html(), notes
}
