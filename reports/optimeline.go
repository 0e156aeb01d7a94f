package reports

import (
	"fmt"
	"html/template"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/faultline/faultline/checker"
)

// FileTimeline is the run's per-process timeline page (Jepsen's
// timeline.html): one lane per process, one bar per operation from its
// invoke to its completion, coloured by outcome.
const FileTimeline = "timeline.html"

// Bounds that keep timeline.html light: a history with more operations is
// shown as a window of opsTimelineBarsMax operations around the first
// anomaly (or the first fault), and the page says so.
const (
	opsTimelineBarsMax  = 3000
	opsTimelineLanesMax = 128
	opsTimelineLanePx   = 14.0
	opsTimelineWidthPx  = 1400.0
	opsTimelineValueMax = 80
)

var timelineTemplate = template.Must(template.New("timeline").Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>timeline — {{.Title}}</title>
<style>{{.CSS}} main { max-width: none; } .plot { max-width: none; }</style>
</head>
<body>
<main>
<h1>Operations per process: {{.Title}}</h1>
<p><a href="{{.Report}}">← back to the report</a></p>
<p>Each lane is one process (a client, or the nemesis at the top); each bar one operation, from its invoke to its completion: green ok, red fail, orange info (indeterminate, or never completed). Hover a bar for the operation. Click a legend entry to hide or show its bars.</p>
<p class="{{if .Windowed}}notes{{else}}muted{{end}}">{{.Scope}}</p>
{{.SVG}}
</main>
<script>{{.JS}}</script>
</body>
</html>
`))

// opBar is one operation of the timeline page.
type opBar struct {
	lane       int // process; NemesisProcess for the nemesis
	start, end int64
	typ        checker.OpType
	// invoke and done are the positions of the invoke and of its
	// completion (-1: never completed) in the history.
	invoke, done int
}

// WriteTimeline renders timeline.html of a run: one lane per process and a
// bar per operation, coloured ok/fail/info, linked back to report.html.
// A history of more than opsTimelineBarsMax operations is shown as a window
// around the first anomaly, and the page says which.
func WriteTimeline(w io.Writer, in Input) error {
	var a *analysis
	if len(in.History) > 0 {
		a = analyze(in.History)
	}
	title := in.Spec.Name
	if title == "" {
		title = "unnamed test"
	}
	svg, scope, windowed := opsTimeline(in, a)
	err := timelineTemplate.Execute(w, struct {
		Title, Report, Scope string
		Windowed             bool
		SVG                  template.HTML
		CSS                  template.CSS
		JS                   template.JS
	}{title, FileReport, scope, windowed, svg,
		template.CSS(reportCSS), //nolint:gosec // our own embedded stylesheet
		template.JS(reportJS),   //nolint:gosec // our own embedded script
	})
	if err != nil {
		return fmt.Errorf("render timeline: %w", err)
	}
	return nil
}

// opBars pairs every invoke with its completion; an invoke never completed
// lasts to the end of the history, as info.
func opBars(a *analysis) []opBar {
	// The nemesis runs one operation at a time: each completion closes the
	// invoke before it (analyze pairs client operations only).
	nemesisDone := map[int]int{}
	pending := -1
	for _, i := range a.nemesis {
		switch {
		case a.h[i].Type == checker.Invoke:
			pending = i
		case pending >= 0:
			nemesisDone[pending], pending = i, -1
		}
	}
	bars := make([]opBar, 0, len(a.h)/2)
	for i := range a.h {
		op := &a.h[i]
		if op.Type != checker.Invoke || !(op.IsClient() || op.Process == checker.NemesisProcess) {
			continue
		}
		b := opBar{lane: op.Process, start: op.Time, end: a.endNs, typ: checker.Info, invoke: i, done: -1}
		c, ok := a.completion(i)
		if op.Process == checker.NemesisProcess {
			c, ok = nemesisDone[i]
		}
		if ok {
			b.end, b.typ, b.done = a.h[c].Time, a.h[c].Type, c
		}
		bars = append(bars, b)
	}
	return bars
}

// barTitle says what one bar's operation did, for its tooltip (built only
// for the bars drawn).
func barTitle(a *analysis, b opBar) string {
	op := &a.h[b.invoke]
	done := "never completed"
	if b.done >= 0 {
		cop := &a.h[b.done]
		done = fmt.Sprintf("%s after %s", cop.Type, seconds(cop.Time-op.Time))
		if cop.Error != "" {
			done += ": " + truncate(cop.Error, opsTimelineValueMax)
		}
		op = cop
	}
	who, what := "process "+strconv.Itoa(b.lane), formatValue(*op, opsTimelineValueMax, nil)
	switch {
	case b.lane == checker.NemesisProcess:
		who, what = "nemesis", strings.TrimSpace(op.F+" "+what)
	case what == "":
		what = op.F
	}
	return fmt.Sprintf("op %d, %s at %s: %s — %s", op.Index, who, seconds(b.start), what, done)
}

// timelineFocus is the time the window of a large history is laid around:
// the first operation an anomaly that is not allowed names, else the start
// of the first fault, else the start; what says which.
func timelineFocus(in Input, a *analysis) (t int64, what string) {
	found := false
	for _, rep := range in.Result.Anomalies {
		if rep.Allowed {
			continue
		}
		for _, ex := range rep.Examples {
			if t0, _, ok := timesOf(a, ex.OpIndexes()); ok && (!found || t0 < t) {
				t, found = t0, true
			}
		}
	}
	if found {
		return t, "around the first operation an anomaly names"
	}
	for _, s := range faultSpans(a) {
		return s.start, "around the first fault"
	}
	return 0, "from the start"
}

// opsTimeline draws the lanes; scope says what is shown, windowed whether
// it is a window of a larger history.
func opsTimeline(in Input, a *analysis) (template.HTML, string, bool) {
	if a == nil {
		return "", "The run has no history, so there are no operations to show.", false
	}
	bars := opBars(a)
	if len(bars) == 0 {
		return "", "The history holds no client or nemesis operations.", false
	}
	sort.SliceStable(bars, func(i, j int) bool { return bars[i].start < bars[j].start })
	total := len(bars)
	scope := fmt.Sprintf("All %s are shown.", plural(total, "operation"))
	windowed := false
	if total > opsTimelineBarsMax {
		focus, what := timelineFocus(in, a)
		at := sort.Search(total, func(i int) bool { return bars[i].start >= focus })
		from := min(max(at-opsTimelineBarsMax/4, 0), total-opsTimelineBarsMax)
		bars = bars[from : from+opsTimelineBarsMax]
		windowed = true
		scope = fmt.Sprintf("Showing %d of %d operations: those invoked between %s and %s, %s. The full history is in %s.",
			len(bars), total, seconds(bars[0].start), seconds(bars[len(bars)-1].start), what, FileHistory)
	}
	t0, t1 := bars[0].start, bars[0].end
	laneSet := map[int]bool{}
	for _, b := range bars {
		t0, t1 = min(t0, b.start), max(t1, b.end, b.start)
		laneSet[b.lane] = true
	}
	procs := make([]int, 0, len(laneSet))
	for p := range laneSet {
		procs = append(procs, p)
	}
	// The nemesis (a negative process) sorts first: the top lane.
	sort.Ints(procs)
	if len(procs) > opsTimelineLanesMax {
		scope += fmt.Sprintf(" %d processes ran; the first %d have a lane.", len(procs), opsTimelineLanesMax)
		procs = procs[:opsTimelineLanesMax]
	}
	laneOf := make(map[int]int, len(procs))
	names := make([]string, len(procs))
	for i, p := range procs {
		laneOf[p] = i
		names[i] = strconv.Itoa(p)
		if p == checker.NemesisProcess {
			names[i] = "nemesis"
		}
	}
	height := plotTopPx + plotBottomPx + opsTimelineLanePx*float64(len(procs))
	height = math.Max(height, plotTopPx+plotBottomPx+legendRowPx*5)
	p := newPlotSized("operations per process, invoke to completion, by outcome", opsTimelineWidthPx, height,
		float64(t0)/1e9, float64(t1)/1e9, axis{min: 0, max: float64(len(procs))})
	p.laneAxes("time since test start (s)", "process", names)
	counts := map[string]int{}
	for _, series := range []struct {
		name  string
		color string
		keep  func(opBar) bool
	}{
		{"ok", colorOK, func(b opBar) bool { return b.lane != checker.NemesisProcess && b.typ == checker.OK }},
		{"fail", colorFail, func(b opBar) bool { return b.lane != checker.NemesisProcess && b.typ == checker.Fail }},
		{"info", colorInfo, func(b opBar) bool { return b.lane != checker.NemesisProcess && b.typ == checker.Info }},
		{"nemesis", colorFault, func(b opBar) bool { return b.lane == checker.NemesisProcess }},
	} {
		fmt.Fprintf(&p.b, `<g class="series" data-series="%s">`, series.name)
		for _, b := range bars {
			lane, ok := laneOf[b.lane]
			if !ok || !series.keep(b) {
				continue
			}
			counts[series.name]++
			p.laneBar(lane, len(procs), b.start, b.end, series.color, "", barTitle(a, b))
		}
		p.b.WriteString(`</g>`)
	}
	for _, s := range []struct{ name, label, color string }{
		{"ok", "ok", colorOK}, {"fail", "fail", colorFail}, {"info", "info", colorInfo}, {"nemesis", "nemesis operation", colorFault},
	} {
		p.legendEntry(s.name, fmt.Sprintf("%s (%d)", s.label, counts[s.name]), s.color, "band")
	}
	return p.html(), scope, windowed
}
