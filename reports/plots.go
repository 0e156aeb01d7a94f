package reports

import (
	"fmt"
	"html/template"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/faultline/faultline/checker"
)

// Bounds that keep the page light for histories of 10^5 and more
// operations. Downsampling is deterministic (time buckets keeping each
// bucket's extremes), so the same history renders the same page.
const (
	// okPointsPerSeriesMax caps the ok points of one latency series.
	okPointsPerSeriesMax = 4000
	// failInfoPointsPerSeriesMax caps fail and info points, which are
	// otherwise all kept; only a run that is mostly failing reaches it.
	failInfoPointsPerSeriesMax = 50000
	// throughputBucketsMax bounds the throughput plot's resolution.
	throughputBucketsMax = 150
	// offsetKeysMax bounds how many keys with anomalies get an offset
	// timeline; healthy keys get a cell of the grid instead.
	offsetKeysMax = 8
	// sendPointsPerKeyMax and pollBarsPerKeyMax bound one key's timeline.
	sendPointsPerKeyMax = 1500
	pollBarsPerKeyMax   = 600
)

// plotSet is every plot of the page plus the notes that explain it.
type plotSet struct {
	// FaultTimeline has one lane per node and per anomalous partition's
	// leader (faultTimeline).
	FaultTimeline template.HTML
	Latency       []template.HTML
	Throughput    template.HTML
	// Unseen is Jepsen's unseen plot (Perf.Unseen); Lag its realtime-lag
	// plot.
	Unseen  template.HTML
	Lag     template.HTML
	Offsets []keyTimeline
	// Healthy are the keys without anomalies, one grid cell each.
	Healthy []keyCell
	// Notes say what was downsampled or left out.
	Notes []string
	// OffsetNotes say which keys were left out.
	OffsetNotes []string
}

// keyCell sums up a healthy key: every value acknowledged was read back.
type keyCell struct {
	Label    string
	Acked    int
	ReadMax  int64
	HasReads bool
}

type keyTimeline struct {
	Label    string
	Anchor   string
	Lost     int
	Unseen   int
	SVG      template.HTML
	Acked    int
	ReadMax  int64
	HasReads bool
}

func outcomeColor(t checker.OpType) string {
	switch t {
	case checker.OK:
		return colorOK
	case checker.Fail:
		return colorFail
	default:
		return colorInfo
	}
}

func buildPlots(in Input, a *analysis, faults []checker.Window) plotSet {
	var ps plotSet
	endNs := int64(0)
	if a != nil {
		endNs = a.endNs
	}
	for _, w := range append(append([]checker.Window{}, faults...), in.Result.Perf.Unavailable...) {
		endNs = max(endNs, w.End)
	}
	if n := len(firstThroughput(in.Result.Perf)); n > 0 && in.Result.Perf.ThroughputBucketNs > 0 {
		endNs = max(endNs, int64(n)*in.Result.Perf.ThroughputBucketNs)
	}
	endS := float64(endNs) / 1e9
	var nemesisXs []float64
	var nemesisTitles []string
	if a != nil && len(faults) == 0 {
		for _, i := range a.nemesis {
			op := a.h[i]
			nemesisXs = append(nemesisXs, float64(op.Time)/1e9)
			nemesisTitles = append(nemesisTitles, fmt.Sprintf("nemesis %s %s at %s", op.F, formatValue(op, 60, nil), seconds(op.Time)))
		}
	}
	if a != nil {
		var notes []string
		ps.FaultTimeline, notes = faultTimeline(in, a, endS)
		ps.Latency, ps.Notes = latencyPlots(a, faults, endS, nemesisXs, nemesisTitles)
		ps.Notes = append(notes, ps.Notes...)
		ps.Offsets, ps.Healthy, ps.OffsetNotes = offsetTimelines(in, a, faults, endS, nemesisXs, nemesisTitles)
	}
	ps.Throughput = throughputPlot(in, a, faults, endS, nemesisXs, nemesisTitles)
	ps.Unseen = unseenPlot(in, a, faults, endS)
	if a != nil {
		ps.Lag = lagPlot(in, a, faults, endS)
	}
	return ps
}

func firstThroughput(p checker.Perf) []float64 {
	for _, k := range sortedKeys(p.Throughput) {
		return p.Throughput[k]
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// latencyPlots draws one scatter per function: invoke time against latency
// on a log scale, colored by outcome.
func latencyPlots(a *analysis, faults []checker.Window, endS float64, nxs []float64, ntitles []string) ([]template.HTML, []string) {
	byF := map[string]map[checker.OpType][]latencyPoint{}
	minMs, maxMs := math.Inf(1), 0.0
	for _, p := range a.latencies {
		m := byF[p.f]
		if m == nil {
			m = map[checker.OpType][]latencyPoint{}
			byF[p.f] = m
		}
		m[p.typ] = append(m[p.typ], p)
		ms := float64(p.latencyNs) / 1e6
		if ms > 0 {
			minMs = math.Min(minMs, ms)
		}
		maxMs = math.Max(maxMs, ms)
	}
	if len(byF) == 0 {
		return nil, nil
	}
	if math.IsInf(minMs, 1) {
		minMs = 0.001
	}
	lo := math.Pow(10, math.Floor(math.Log10(minMs)))
	hi := math.Pow(10, math.Ceil(math.Log10(math.Max(maxMs, lo*10))))
	if hi <= lo {
		hi = lo * 10
	}
	var plots []template.HTML
	var notes []string
	for _, f := range sortedKeys(byF) {
		p := newPlot("latency of "+f+" operations (log scale), by outcome", 280, endS, axis{min: lo, max: hi, log: true})
		p.faultBands(faults, finalReadsNs(a))
		p.vlines(nxs, ntitles)
		p.axes("time since test start (s)", "latency")
		for _, t := range []checker.OpType{checker.OK, checker.Info, checker.Fail} {
			pts := byF[f][t]
			if len(pts) == 0 {
				continue
			}
			limit := okPointsPerSeriesMax
			if t != checker.OK {
				limit = failInfoPointsPerSeriesMax
			}
			kept := downsampleLatency(pts, limit)
			if len(kept) < len(pts) {
				notes = append(notes, fmt.Sprintf("%s %s latency: %d of %d points drawn (each time bucket keeps its fastest and slowest operation).", f, t, len(kept), len(pts)))
			}
			xs := make([]float64, len(kept))
			ys := make([]float64, len(kept))
			for i, q := range kept {
				xs[i] = float64(q.startNs) / 1e9
				ys[i] = float64(q.latencyNs) / 1e6
			}
			series := f + "-" + string(t)
			radius := 1.6
			if t != checker.OK {
				radius = 2.4
			}
			p.dots(series, outcomeColor(t), radius, xs, ys, fmt.Sprintf("%s %s: %s", f, t, plural(len(pts), "operation")))
			p.legendEntry(series, fmt.Sprintf("%s (%d)", t, len(pts)), outcomeColor(t), "dot")
		}
		plots = append(plots, p.html())
	}
	return plots, notes
}

// downsampleLatency keeps at most limit points: it splits the time range
// into limit/2 buckets and keeps the fastest and the slowest point of each,
// so the envelope of the cloud (and every outlier bucket) survives.
func downsampleLatency(pts []latencyPoint, limit int) []latencyPoint {
	if len(pts) <= limit || limit < 2 {
		return pts
	}
	t0, t1 := pts[0].startNs, pts[0].startNs
	for _, p := range pts {
		t0 = min(t0, p.startNs)
		t1 = max(t1, p.startNs)
	}
	buckets := limit / 2
	span := t1 - t0 + 1
	minAt := make([]int, buckets)
	maxAt := make([]int, buckets)
	for i := range minAt {
		minAt[i], maxAt[i] = -1, -1
	}
	for i, p := range pts {
		b := int(float64(p.startNs-t0) / float64(span) * float64(buckets))
		b = min(max(b, 0), buckets-1)
		if minAt[b] < 0 || p.latencyNs < pts[minAt[b]].latencyNs {
			minAt[b] = i
		}
		if maxAt[b] < 0 || p.latencyNs > pts[maxAt[b]].latencyNs {
			maxAt[b] = i
		}
	}
	out := make([]latencyPoint, 0, limit)
	for b := range buckets {
		if minAt[b] >= 0 {
			out = append(out, pts[minAt[b]])
		}
		if maxAt[b] >= 0 && maxAt[b] != minAt[b] {
			out = append(out, pts[maxAt[b]])
		}
	}
	return out
}

// throughputPlot draws completed operations per second over time: ok per
// function, and fail and info over all functions. It uses the history when
// there is one and the checker's Perf.Throughput otherwise.
func throughputPlot(in Input, a *analysis, faults []checker.Window, endS float64, nxs []float64, ntitles []string) template.HTML {
	type series struct {
		name, color string
		perS        []float64
	}
	var all []series
	bucketNs := int64(0)
	if a != nil && len(a.latencies) > 0 {
		endNs := int64(endS * 1e9)
		bucketNs = throughputBucket(endNs)
		// n buckets cover [0, endNs]. A remainder of at least half a
		// bucket is a bucket of its own, a shorter one joins the previous
		// bucket; either way the last bucket's rate is taken over the time
		// it really spans, so the line does not dip at the end.
		n := int(endNs / bucketNs)
		rem := endNs % bucketNs
		lastWidthNs := bucketNs + rem
		switch {
		case n == 0:
			n, lastWidthNs = 1, max(endNs, 1)
		case rem*2 >= bucketNs:
			n, lastWidthNs = n+1, rem
		}
		counts := map[string][]float64{}
		for _, p := range a.latencies {
			name := p.f + " ok"
			if p.typ != checker.OK {
				name = string(p.typ)
			}
			c := counts[name]
			if c == nil {
				c = make([]float64, n)
				counts[name] = c
			}
			b := min(int((p.startNs+p.latencyNs)/bucketNs), n-1)
			c[max(b, 0)]++
		}
		for i, name := range sortedKeys(counts) {
			color := seriesPalette[i%len(seriesPalette)]
			switch name {
			case "fail":
				color = colorFail
			case "info":
				color = colorInfo
			}
			perS := counts[name]
			for j := range perS {
				width := bucketNs
				if j == n-1 {
					width = lastWidthNs
				}
				perS[j] /= float64(width) / 1e9
			}
			all = append(all, series{name, color, perS})
		}
	} else if in.Result.Perf.ThroughputBucketNs > 0 {
		bucketNs = in.Result.Perf.ThroughputBucketNs
		for i, name := range sortedKeys(in.Result.Perf.Throughput) {
			all = append(all, series{name, seriesPalette[i%len(seriesPalette)], in.Result.Perf.Throughput[name]})
		}
	}
	if len(all) == 0 {
		return ""
	}
	peak := 1.0
	for _, s := range all {
		for _, v := range s.perS {
			peak = math.Max(peak, v)
		}
	}
	p := newPlot("throughput: completed operations per second", 260, endS, axis{min: 0, max: peak * 1.05})
	p.faultBands(faults, finalReadsNs(a))
	p.vlines(nxs, ntitles)
	p.axes(fmt.Sprintf("time since test start (s), %s buckets", seconds(bucketNs)), "completed ops/s")
	p.underline(in.Result.Perf.Unavailable, colorUnavailable)
	if len(in.Result.Perf.Unavailable) > 0 {
		p.legendEntry("unavailable", "no send succeeded", colorUnavailable, "band")
	}
	for _, s := range all {
		xs := make([]float64, len(s.perS))
		for i := range s.perS {
			xs[i] = math.Min((float64(i)+0.5)*float64(bucketNs)/1e9, endS)
		}
		p.polyline("tp-"+s.name, s.color, xs, s.perS, s.name+" per second")
		p.legendEntry("tp-"+s.name, s.name, s.color, "line")
	}
	return p.html()
}

// throughputBucket picks a bucket of 1, 2, 5, 10, ... seconds (or 100 ms
// for short runs) so the plot has at most throughputBucketsMax points.
func throughputBucket(endNs int64) int64 {
	for _, b := range []int64{1e8, 2e8, 5e8, 1e9, 2e9, 5e9, 1e10, 3e10, 6e10, 3e11, 6e11, 36e11} {
		if endNs/b < throughputBucketsMax {
			return b
		}
	}
	return 36e11
}

// offsetTimelines draws, for each key with anomalies, the offsets
// acknowledged to sends and the ranges returned by polls over time, and
// marks the acknowledged values the final reads did not return (a value
// overwritten at an offset someone read is marked too): red where the
// checker names the value a lost-write or a poll read it before it went,
// orange for one never read (unseen). The counts shown are the checker's
// (ByKey). Keys without anomalies are summed up as grid cells.
func offsetTimelines(in Input, a *analysis, faults []checker.Window, endS float64, nxs []float64, ntitles []string) ([]keyTimeline, []keyCell, []string) {
	type sendPt struct {
		t      int64
		offset int64
		index  int64
		value  int64
	}
	type pollBar struct {
		t      int64
		lo, hi int64
	}
	sends := map[int][]sendPt{}
	polls := map[int][]pollBar{}
	readValues := map[keyValue]bool{}
	finalValues := map[keyValue]bool{}
	finalKeys := map[int]bool{}
	finalProcs := map[int]bool{}
	readMax := map[int]int64{}
	for _, op := range a.h {
		if !op.IsClient() {
			continue
		}
		if op.SeekToBeginning {
			finalProcs[op.Process] = true
		}
		if op.Type != checker.OK {
			continue
		}
		for _, m := range op.Mops {
			switch {
			case m.F == "send" && m.Completed && m.Offset != nil:
				sends[m.Key] = append(sends[m.Key], sendPt{op.Time, *m.Offset, op.Index, m.Value})
			case m.F == "poll":
				for k, pairs := range m.Polls {
					if len(pairs) == 0 {
						continue
					}
					bar := pollBar{op.Time, pairs[0].Offset, pairs[0].Offset}
					if _, ok := readMax[k]; !ok {
						readMax[k] = -1
					}
					for _, pr := range pairs {
						bar.lo = min(bar.lo, pr.Offset)
						bar.hi = max(bar.hi, pr.Offset)
						readValues[keyValue{k, pr.Value}] = true
						if finalProcs[op.Process] {
							finalValues[keyValue{k, pr.Value}] = true
							finalKeys[k] = true
						}
					}
					readMax[k] = max(readMax[k], bar.hi)
					polls[k] = append(polls[k], bar)
				}
			}
		}
	}
	// Offsets the checker names in its examples (duplicates, inconsistent
	// offsets, skips...) are marked on their key; loss is already marked
	// from the history itself.
	type checkerMark struct {
		t      int64
		offset int64
		label  string
	}
	anomalyKeys := map[int]bool{}
	marks := map[int][]checkerMark{}
	lostValues := map[keyValue]bool{}
	for _, ex := range in.Result.Anomalies[checker.AnomalyLostWrite].Examples {
		if ex.Value != nil {
			lostValues[keyValue{ex.Key, *ex.Value}] = true
		}
	}
	for _, name := range orderedAnomalyNames(in.Result.Anomalies) {
		for k := range in.Result.Anomalies[name].ByKey {
			anomalyKeys[k] = true
		}
		for _, ex := range in.Result.Anomalies[name].Examples {
			if !ex.HasKey() || kindOf(name).loss {
				continue
			}
			anomalyKeys[ex.Key] = true
			t, _, ok := timesOf(a, ex.OpIndexes())
			if !ok {
				t = a.endNs
			}
			label := name
			if ex.Text != "" {
				label += ": " + ex.Text
			}
			for _, o := range ex.OffsetsNamed() {
				marks[ex.Key] = append(marks[ex.Key], checkerMark{t, o, label})
			}
		}
	}
	type keyInfo struct {
		key                int
		lost, unseen, gone []sendPt
	}
	var keys []keyInfo
	for k := range sends {
		keys = append(keys, keyInfo{key: k})
	}
	for k := range polls {
		if _, ok := sends[k]; !ok {
			keys = append(keys, keyInfo{key: k})
		}
	}
	for i := range keys {
		k := keys[i].key
		for _, s := range sends[k] {
			kv := keyValue{k, s.value}
			switch {
			case finalValues[kv] || !finalKeys[k] && readValues[kv]:
			case lostValues[kv]:
				keys[i].lost = append(keys[i].lost, s)
			case readValues[kv]:
				keys[i].gone = append(keys[i].gone, s)
			default:
				keys[i].unseen = append(keys[i].unseen, s)
			}
		}
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].key < keys[j].key })
	leaders := leaderEvents(a)
	var healthy []keyCell
	var troubled []keyInfo
	for _, ki := range keys {
		if anomalyKeys[ki.key] || len(ki.lost)+len(ki.unseen)+len(ki.gone) > 0 {
			troubled = append(troubled, ki)
			continue
		}
		rm, hasReads := readMax[ki.key]
		healthy = append(healthy, keyCell{Label: in.Spec.keyLabel(ki.key), Acked: len(sends[ki.key]), ReadMax: rm, HasReads: hasReads})
	}
	keys = troubled
	var notes []string
	if len(keys) > offsetKeysMax {
		notes = append(notes, fmt.Sprintf("Showing %d of %d keys with anomalies, the lowest keys.", offsetKeysMax, len(keys)))
		keys = keys[:offsetKeysMax]
	}
	var out []keyTimeline
	for _, ki := range keys {
		k := ki.key
		ss, ps := sends[k], polls[k]
		offMax := int64(0)
		for _, s := range ss {
			offMax = max(offMax, s.offset)
		}
		for _, b := range ps {
			offMax = max(offMax, b.hi)
		}
		for _, m := range marks[k] {
			offMax = max(offMax, m.offset)
		}
		label := in.Spec.keyLabel(k)
		// The plot is zoomed to the key's active window: its first and last
		// send, poll or checker mark, with a margin.
		firstNs, lastNs := a.endNs, int64(0)
		for _, s := range ss {
			firstNs, lastNs = min(firstNs, s.t), max(lastNs, s.t)
		}
		for _, b := range ps {
			firstNs, lastNs = min(firstNs, b.t), max(lastNs, b.t)
		}
		for _, m := range marks[k] {
			firstNs, lastNs = min(firstNs, m.t), max(lastNs, m.t)
		}
		if firstNs > lastNs {
			firstNs, lastNs = 0, a.endNs
		}
		marginNs := max((lastNs-firstNs)/40, int64(1e8))
		fromS := float64(max(firstNs-marginNs, 0)) / 1e9
		toS := float64(min(lastNs+marginNs, max(a.endNs, lastNs))) / 1e9
		p := newPlotSized(fmt.Sprintf("offsets of %s, %s to %s", label, seconds(int64(fromS*1e9)), seconds(int64(toS*1e9))),
			plotWidthPx, 190, fromS, toS, axis{min: 0, max: float64(offMax) + 1})
		p.faultBands(faults, finalReadsNs(a))
		p.vlines(nxs, ntitles)
		p.axes("time since test start (s)", "offset")
		series := "k" + strconv.Itoa(k)
		p.leaderMarks(series+"-leader", leaders[in.Spec.partitionName(k)])
		stride := 1
		if len(ss) > sendPointsPerKeyMax {
			stride = (len(ss) + sendPointsPerKeyMax - 1) / sendPointsPerKeyMax
			notes = append(notes, fmt.Sprintf("%s: every %d-th of %d acknowledged sends drawn.", label, stride, len(ss)))
		}
		var xs, ys []float64
		for i := 0; i < len(ss); i += stride {
			xs = append(xs, float64(ss[i].t)/1e9)
			ys = append(ys, float64(ss[i].offset))
		}
		merged := mergePollBars(ps, pollBarsPerKeyMax, func(b pollBar) (int64, int64, int64) { return b.t, b.lo, b.hi })
		if len(merged) < len(ps) {
			notes = append(notes, fmt.Sprintf("%s: %d polls merged into %d time buckets.", label, len(ps), len(merged)))
		}
		bx := make([]float64, len(merged))
		b0 := make([]float64, len(merged))
		b1 := make([]float64, len(merged))
		for i, m := range merged {
			bx[i], b0[i], b1[i] = float64(m[0])/1e9, float64(m[1]), float64(m[2])
		}
		p.vbars(series+"-poll", "#2a6fdb", bx, b0, b1, plural(len(ps), "poll")+": offset ranges read")
		p.dots(series+"-send", colorOK, 1.6, xs, ys, plural(len(ss), "acknowledged send"))
		p.legendEntry(series+"-send", "send acknowledged", colorOK, "dot")
		p.legendEntry(series+"-poll", "offsets polled", "#2a6fdb", "line")
		if ms := marks[k]; len(ms) > 0 {
			mx := make([]float64, len(ms))
			my := make([]float64, len(ms))
			titles := make([]string, len(ms))
			for i, m := range ms {
				mx[i], my[i], titles[i] = float64(m.t)/1e9, float64(m.offset), m.label
			}
			p.diamonds(series+"-checker", colorChecker, mx, my, titles)
			p.legendEntry(series+"-checker", fmt.Sprintf("named by the checker (%d)", len(ms)), colorChecker, "diamond")
		}
		for _, group := range []struct {
			name, color string
			pts         []sendPt
		}{{"lost", colorFail, ki.lost}, {"gone by the end", colorFail, ki.gone}, {"never read", colorInfo, ki.unseen}} {
			if len(group.pts) == 0 {
				continue
			}
			markStride := 1
			if len(group.pts) > sendPointsPerKeyMax {
				markStride = (len(group.pts) + sendPointsPerKeyMax - 1) / sendPointsPerKeyMax
				notes = append(notes, fmt.Sprintf("%s: every %d-th of %d %s offsets marked.", label, markStride, len(group.pts), group.name))
			}
			var mx, my []float64
			var titles []string
			for i := 0; i < len(group.pts); i += markStride {
				s := group.pts[i]
				mx = append(mx, float64(s.t)/1e9)
				my = append(my, float64(s.offset))
				if len(titles) < crossTitlesMax {
					titles = append(titles, fmt.Sprintf("send %d → offset %d acknowledged to op %d at %s, not in the final reads (%s)", s.value, s.offset, s.index, seconds(s.t), group.name))
				}
			}
			id := series + "-" + strings.ReplaceAll(group.name, " ", "-")
			p.crosses(id, group.color, mx, my, titles)
			p.legendEntry(id, fmt.Sprintf("%s (%d)", group.name, len(group.pts)), group.color, "cross")
		}
		rm, hasReads := readMax[k]
		out = append(out, keyTimeline{
			Label: label, Anchor: "key-" + strconv.Itoa(k),
			Lost:   in.Result.Anomalies[checker.AnomalyLostWrite].ByKey[k],
			Unseen: in.Result.Anomalies[checker.AnomalyUnseen].ByKey[k],
			SVG:    p.html(), Acked: len(ss), ReadMax: rm, HasReads: hasReads,
		})
	}
	return out, healthy, notes
}

// mergePollBars merges bars into at most limit time buckets, each keeping
// the lowest and highest offset read in it. It returns (time, lo, hi).
func mergePollBars[T any](bars []T, limit int, get func(T) (int64, int64, int64)) [][3]int64 {
	out := make([][3]int64, 0, min(len(bars), limit))
	if len(bars) <= limit {
		for _, b := range bars {
			t, lo, hi := get(b)
			out = append(out, [3]int64{t, lo, hi})
		}
		return out
	}
	t0, _, _ := get(bars[0])
	t1 := t0
	for _, b := range bars {
		t, _, _ := get(b)
		t0, t1 = min(t0, t), max(t1, t)
	}
	span := t1 - t0 + 1
	idx := make([]int, limit)
	for i := range idx {
		idx[i] = -1
	}
	for _, b := range bars {
		t, lo, hi := get(b)
		k := min(int(float64(t-t0)/float64(span)*float64(limit)), limit-1)
		if idx[k] < 0 {
			idx[k] = len(out)
			out = append(out, [3]int64{t, lo, hi})
			continue
		}
		m := &out[idx[k]]
		m[1], m[2] = min(m[1], lo), max(m[2], hi)
	}
	sort.Slice(out, func(i, j int) bool { return out[i][0] < out[j][0] })
	return out
}

// finalReadsNs is when the final reads began, 0 when unknown.
func finalReadsNs(a *analysis) int64 {
	if a == nil {
		return 0
	}
	return a.finalNs
}

// faultWindows returns the checker's fault intervals, or derives them from
// the nemesis operations: a fault opens a window labeled with what it did,
// the next heal closes every open window, and the end of the history closes
// the rest.
func faultWindows(in Input, a *analysis) []checker.Window {
	if len(in.Result.Perf.Faults) > 0 || a == nil {
		return in.Result.Perf.Faults
	}
	var out []checker.Window
	var open []checker.Window
	for _, i := range a.nemesis {
		op := a.h[i]
		if op.Type == checker.Invoke {
			continue
		}
		if isHeal(op.F) {
			for _, w := range open {
				w.End = op.Time
				out = append(out, w)
			}
			open = open[:0]
			continue
		}
		open = append(open, checker.Window{Start: op.Time, Label: "nemesis " + describeNemesis(op)})
	}
	for _, w := range open {
		w.End = a.endNs
		out = append(out, w)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Start < out[j].Start })
	return out
}
