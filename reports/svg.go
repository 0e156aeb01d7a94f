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

// The plots are SVG written by hand: no plotting library, no script needed
// to display them. Every text that comes from data is XML-escaped.

const (
	plotWidthPx      = 960.0
	plotLeftPx       = 64.0
	plotRightPx      = 170.0 // room for the legend
	plotTopPx        = 22.0
	plotBottomPx     = 40.0
	legendRowPx      = 16.0
	colorOK          = "#2a9d5c"
	colorFail        = "#d1495b"
	colorInfo        = "#e09f3e"
	colorFault       = "#9aa5b1"
	colorFinalReads  = "#2e7d32"
	colorLeader      = "#6d4c41"
	colorUnavailable = "#d1495b"
	colorChecker     = "#7b2cbf"
	crossTitlesMax   = 200
)

var seriesPalette = []string{"#2a6fdb", "#2a9d5c", "#8e44ad", "#16a2b8", "#6c757d", "#b5651d", "#c2185b", "#455a64"}

// axis maps data values to pixels, linearly or on a log10 scale.
type axis struct {
	min, max float64
	log      bool
	// lo and hi are the pixel positions of min and max.
	lo, hi float64
}

func (ax axis) px(v float64) float64 {
	lo, hi := ax.min, ax.max
	if ax.log {
		v = math.Log10(math.Max(v, ax.min))
		lo, hi = math.Log10(ax.min), math.Log10(ax.max)
	}
	if hi == lo {
		return ax.lo
	}
	f := (v - lo) / (hi - lo)
	f = math.Max(0, math.Min(1, f))
	return ax.lo + f*(ax.hi-ax.lo)
}

// svgPlot accumulates one plot.
type svgPlot struct {
	b        strings.Builder
	heightPx float64
	x, y     axis
	legend   int
}

// newPlot opens an SVG of the given height with a time x axis (seconds)
// from 0 to endS and the given y axis (its pixel range is set here).
func newPlot(title string, heightPx, endS float64, y axis) *svgPlot {
	return newPlotSized(title, plotWidthPx, heightPx, 0, endS, y)
}

// newPlotSized is newPlot with a width and a time axis from startS to endS.
func newPlotSized(title string, widthPx, heightPx, startS, endS float64, y axis) *svgPlot {
	p := &svgPlot{heightPx: heightPx}
	p.x = axis{min: startS, max: math.Max(endS, startS+1e-3), lo: plotLeftPx, hi: widthPx - plotRightPx}
	y.lo, y.hi = heightPx-plotBottomPx, plotTopPx
	p.y = y
	fmt.Fprintf(&p.b, `<svg xmlns="http://www.w3.org/2000/svg" class="plot" viewBox="0 0 %g %g" width="%g" height="%g" role="img" aria-label="%s">`,
		widthPx, heightPx, widthPx, heightPx, xmlEscape(title))
	fmt.Fprintf(&p.b, `<title>%s</title>`, xmlEscape(title))
	fmt.Fprintf(&p.b, `<text class="plot-title" x="%s" y="15" font-size="12" font-weight="600" fill="#1d2330">%s</text>`, f1(plotLeftPx), xmlEscape(title))
	fmt.Fprintf(&p.b, `<rect class="frame" x="%s" y="%s" width="%s" height="%s" fill="#fff" stroke="#ccc"/>`,
		f1(p.x.lo), f1(p.y.hi), f1(p.x.hi-p.x.lo), f1(p.y.lo-p.y.hi))
	return p
}

// visible tells whether [startNs, endNs] overlaps the plot's time axis.
func (p *svgPlot) visible(startNs, endNs int64) bool {
	return float64(endNs)/1e9 >= p.x.min && float64(startNs)/1e9 <= p.x.max
}

func f1(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }

func xmlEscape(s string) string {
	var b strings.Builder
	template.HTMLEscape(&b, []byte(s))
	return b.String()
}

// underline draws windows as a thick bar just under the plot area (used
// for unavailability).
func (p *svgPlot) underline(ws []checker.Window, color string) {
	for _, w := range ws {
		x0 := p.x.px(float64(w.Start) / 1e9)
		x1 := p.x.px(float64(w.End) / 1e9)
		fmt.Fprintf(&p.b, `<rect class="unavailable" x="%s" y="%s" width="%s" height="4" fill="%s"><title>no successful send %s–%s</title></rect>`,
			f1(x0), f1(p.y.lo+1), f1(math.Max(x1-x0, 1)), color, seconds(w.Start), seconds(w.End))
	}
}

// axes draws ticks, grid lines and labels on both axes.
func (p *svgPlot) axes(xLabel, yLabel string) {
	p.b.WriteString(`<g class="axis" font-size="11" fill="#333">`)
	p.xTicks()
	var yt []tick
	if p.y.log {
		yt = logTicks(p.y.min, p.y.max)
	} else {
		yt = niceTicks(p.y.min, p.y.max, 5)
	}
	for _, t := range yt {
		y := p.y.px(t.v)
		fmt.Fprintf(&p.b, `<line x1="%s" x2="%s" y1="%s" y2="%s" stroke="#eee"/><line x1="%s" x2="%s" y1="%s" y2="%s" stroke="#333"/><text x="%s" y="%s" text-anchor="end">%s</text>`,
			f1(p.x.lo), f1(p.x.hi), f1(y), f1(y), f1(p.x.lo-4), f1(p.x.lo), f1(y), f1(y), f1(p.x.lo-6), f1(y+4), xmlEscape(t.label))
	}
	p.axisLabels(xLabel, yLabel)
	p.b.WriteString(`</g>`)
}

// xTicks draws the time axis's ticks, grid lines and tick labels.
func (p *svgPlot) xTicks() {
	for _, t := range niceTicks(p.x.min, p.x.max, 10) {
		x := p.x.px(t.v)
		fmt.Fprintf(&p.b, `<line x1="%s" x2="%s" y1="%s" y2="%s" stroke="#eee"/><line x1="%s" x2="%s" y1="%s" y2="%s" stroke="#333"/><text x="%s" y="%s" text-anchor="middle">%s</text>`,
			f1(x), f1(x), f1(p.y.hi), f1(p.y.lo), f1(x), f1(x), f1(p.y.lo), f1(p.y.lo+4), f1(x), f1(p.y.lo+16), xmlEscape(t.label))
	}
}

func (p *svgPlot) axisLabels(xLabel, yLabel string) {
	fmt.Fprintf(&p.b, `<text class="x-label" x="%s" y="%s" text-anchor="middle">%s</text>`, f1((p.x.lo+p.x.hi)/2), f1(p.heightPx-6), xmlEscape(xLabel))
	fmt.Fprintf(&p.b, `<text class="y-label" transform="translate(14 %s) rotate(-90)" text-anchor="middle">%s</text>`, f1((p.y.lo+p.y.hi)/2), xmlEscape(yLabel))
}

// laneAxes draws the time axis and names the lanes of a lane plot
// (lanes[0] at the top), with the axis labels.
func (p *svgPlot) laneAxes(xLabel, yLabel string, lanes []string) {
	p.b.WriteString(`<g class="axis" font-size="11" fill="#333">`)
	p.xTicks()
	n := float64(len(lanes))
	for i, name := range lanes {
		y0, y1 := p.y.px(n-float64(i)), p.y.px(n-float64(i)-1)
		fmt.Fprintf(&p.b, `<line x1="%s" x2="%s" y1="%s" y2="%s" stroke="#eee"/><text x="%s" y="%s" text-anchor="end">%s</text>`,
			f1(p.x.lo), f1(p.x.hi), f1(y1), f1(y1), f1(p.x.lo-6), f1((y0+y1)/2+4), xmlEscape(name))
	}
	p.axisLabels(xLabel, yLabel)
	p.b.WriteString(`</g>`)
}

// laneBar draws one segment on lane i of n (0 at the top) from t0 to t1
// (ns), labelled inside when wide enough, with a tooltip.
func (p *svgPlot) laneBar(i, n int, t0, t1 int64, color, label, title string) {
	top := p.y.px(float64(n - i))
	bottom := p.y.px(float64(n - i - 1))
	x0 := p.x.px(float64(t0) / 1e9)
	x1 := math.Max(p.x.px(float64(t1)/1e9), x0+1.5)
	fmt.Fprintf(&p.b, `<rect x="%s" y="%s" width="%s" height="%s" fill="%s" fill-opacity="0.8"><title>%s</title></rect>`,
		f1(x0), f1(top+3), f1(x1-x0), f1(math.Max(bottom-top-6, 2)), color, xmlEscape(title))
	if label != "" && x1-x0 >= 6.2*float64(len(label))+4 {
		fmt.Fprintf(&p.b, `<text x="%s" y="%s" font-size="10" fill="#fff">%s</text>`, f1(x0+3), f1((top+bottom)/2+3.5), xmlEscape(label))
	}
}

// legendEntry adds one row to the legend; series is the data-series key
// the page's script uses to toggle the series.
func (p *svgPlot) legendEntry(series, label, color, shape string) {
	x := p.x.hi + 14
	y := plotTopPx + 8 + float64(p.legend)*legendRowPx
	p.legend++
	fmt.Fprintf(&p.b, `<g class="legend" data-series="%s" font-size="11">`, xmlEscape(series))
	switch shape {
	case "band":
		fmt.Fprintf(&p.b, `<rect x="%s" y="%s" width="14" height="10" fill="%s" fill-opacity="0.35"/>`, f1(x), f1(y-5), color)
	case "line":
		fmt.Fprintf(&p.b, `<line x1="%s" x2="%s" y1="%s" y2="%s" stroke="%s" stroke-width="2"/>`, f1(x), f1(x+14), f1(y), f1(y), color)
	case "diamond":
		fmt.Fprintf(&p.b, `<path d="M%s %sl5 5l-5 5l-5 -5z" stroke="%s" stroke-width="2" fill="none"/>`, f1(x+7), f1(y-5), color)
	case "cross":
		fmt.Fprintf(&p.b, `<path d="M%s %sl8 8m0 -8l-8 8" stroke="%s" stroke-width="2"/>`, f1(x+3), f1(y-4), color)
	default:
		fmt.Fprintf(&p.b, `<circle cx="%s" cy="%s" r="4" fill="%s"/>`, f1(x+7), f1(y), color)
	}
	fmt.Fprintf(&p.b, `<text x="%s" y="%s">%s</text></g>`, f1(x+20), f1(y+4), xmlEscape(label))
}

// dots draws points as one path of zero-length round-capped segments,
// which keeps 10^4 points to a few hundred kilobytes.
func (p *svgPlot) dots(series, color string, radiusPx float64, xs, ys []float64, title string) {
	if len(xs) == 0 {
		return
	}
	fmt.Fprintf(&p.b, `<path class="series" data-series="%s" stroke="%s" stroke-width="%g" stroke-linecap="round" fill="none" d="`,
		xmlEscape(series), color, 2*radiusPx)
	for i := range xs {
		fmt.Fprintf(&p.b, "M%s %sh0", f1(p.x.px(xs[i])), f1(p.y.px(ys[i])))
	}
	fmt.Fprintf(&p.b, `"><title>%s</title></path>`, xmlEscape(title))
}

// polyline draws a connected series.
func (p *svgPlot) polyline(series, color string, xs, ys []float64, title string) {
	if len(xs) == 0 {
		return
	}
	fmt.Fprintf(&p.b, `<polyline class="series" data-series="%s" fill="none" stroke="%s" stroke-width="1.5" points="`, xmlEscape(series), color)
	for i := range xs {
		if i > 0 {
			p.b.WriteByte(' ')
		}
		p.b.WriteString(f1(p.x.px(xs[i])) + "," + f1(p.y.px(ys[i])))
	}
	fmt.Fprintf(&p.b, `"><title>%s</title></polyline>`, xmlEscape(title))
}

// vbars draws vertical segments from ys0 to ys1 at xs.
func (p *svgPlot) vbars(series, color string, xs, ys0, ys1 []float64, title string) {
	if len(xs) == 0 {
		return
	}
	fmt.Fprintf(&p.b, `<path class="series" data-series="%s" stroke="%s" stroke-width="1.5" stroke-opacity="0.6" fill="none" d="`, xmlEscape(series), color)
	for i := range xs {
		x := f1(p.x.px(xs[i]))
		y0, y1 := p.y.px(ys0[i]), p.y.px(ys1[i])
		if math.Abs(y0-y1) < 1 {
			y1 = y0 - 1
		}
		fmt.Fprintf(&p.b, "M%s %sV%s", x, f1(y0), f1(y1))
	}
	fmt.Fprintf(&p.b, `"><title>%s</title></path>`, xmlEscape(title))
}

// crosses draws X marks. Up to crossTitlesMax marks get their own
// tooltip; beyond that they are drawn as one path with a single title, so a
// run that lost thousands of writes still renders quickly.
func (p *svgPlot) crosses(series, color string, xs, ys []float64, titles []string) {
	if len(xs) > crossTitlesMax {
		fmt.Fprintf(&p.b, `<path class="series" data-series="%s" stroke="%s" stroke-width="2" fill="none" d="`, xmlEscape(series), color)
		for i := range xs {
			fmt.Fprintf(&p.b, "M%s %sl8 8m0 -8l-8 8", f1(p.x.px(xs[i])-4), f1(p.y.px(ys[i])-4))
		}
		fmt.Fprintf(&p.b, `"><title>%d marks; the first: %s</title></path>`, len(xs), xmlEscape(titles[0]))
		return
	}
	fmt.Fprintf(&p.b, `<g class="series" data-series="%s" stroke="%s" stroke-width="2">`, xmlEscape(series), color)
	for i := range xs {
		fmt.Fprintf(&p.b, `<path d="M%s %sl8 8m0 -8l-8 8"><title>%s</title></path>`, f1(p.x.px(xs[i])-4), f1(p.y.px(ys[i])-4), xmlEscape(titles[i]))
	}
	p.b.WriteString(`</g>`)
}

// diamonds draws outlined diamonds, each with its tooltip (the checker's
// examples are bounded, so there are few).
func (p *svgPlot) diamonds(series, color string, xs, ys []float64, titles []string) {
	fmt.Fprintf(&p.b, `<g class="series" data-series="%s" stroke="%s" stroke-width="2" fill="none">`, xmlEscape(series), color)
	for i := range xs {
		fmt.Fprintf(&p.b, `<path d="M%s %sl5 5l-5 5l-5 -5z"><title>%s</title></path>`, f1(p.x.px(xs[i])), f1(p.y.px(ys[i])-5), xmlEscape(titles[i]))
	}
	p.b.WriteString(`</g>`)
}

// vlines marks instants (nemesis operations when no intervals are known).
func (p *svgPlot) vlines(xs []float64, titles []string) {
	for i := range xs {
		if xs[i] < p.x.min || xs[i] > p.x.max {
			continue
		}
		x := f1(p.x.px(xs[i]))
		fmt.Fprintf(&p.b, `<line class="nemesis" x1="%s" x2="%s" y1="%s" y2="%s" stroke="%s" stroke-dasharray="3 3"><title>%s</title></line>`,
			x, x, f1(p.y.hi), f1(p.y.lo), colorFault, xmlEscape(titles[i]))
	}
}

func (p *svgPlot) html() template.HTML {
	p.b.WriteString(`</svg>`)
	// Every piece of text in the SVG went through xmlEscape.
	return template.HTML(p.b.String()) //nolint:gosec // built from escaped parts only
}

type tick struct {
	v     float64
	label string
}

// niceTicks returns about target ticks at 1, 2 or 5 times a power of ten.
func niceTicks(lo, hi float64, target int) []tick {
	if !(hi > lo) || math.IsInf(hi-lo, 0) || math.IsNaN(hi-lo) {
		return []tick{{lo, trimFloat(lo, 0)}}
	}
	span := hi - lo
	step := math.Pow(10, math.Floor(math.Log10(span/float64(target))))
	for _, m := range []float64{1, 2, 5, 10} {
		if span/(step*m) <= float64(target) {
			step *= m
			break
		}
	}
	decimals := int(math.Max(0, -math.Floor(math.Log10(step))))
	var out []tick
	for i := math.Ceil(lo / step); i*step <= hi+step*1e-9 && len(out) < 100; i++ {
		v := i * step
		out = append(out, tick{v, trimFloat(v, decimals)})
	}
	return out
}

func trimFloat(v float64, decimals int) string {
	return strconv.FormatFloat(v, 'f', decimals, 64)
}

// logTicks returns one tick per power of ten between lo and hi (in ms).
func logTicks(lo, hi float64) []tick {
	var out []tick
	for e := math.Floor(math.Log10(lo)); e <= math.Ceil(math.Log10(hi)) && len(out) < 40; e++ {
		v := math.Pow(10, e)
		if v < lo*0.999 || v > hi*1.001 {
			continue
		}
		out = append(out, tick{v, msLabel(v)})
	}
	return out
}

func msLabel(ms float64) string {
	switch {
	case ms >= 1000:
		return trimFloat(ms/1000, 0) + " s"
	case ms >= 1:
		return trimFloat(ms, 0) + " ms"
	case ms >= 0.001:
		return strconv.FormatFloat(ms*1000, 'f', -1, 64) + " µs"
	default:
		return strconv.FormatFloat(ms, 'g', 3, 64) + " ms"
	}
}

// faultLook is how one kind of fault is drawn and named: the colour of its
// bands and lane segments, and what it does to a node in the fault
// timeline's lanes ("killed", "cut off").
type faultLook struct {
	Color string
	State string
}

// faultLooks maps each nemesis fault kind (nemesis.Kind, the <fault> of
// start-<fault>) to its look. A kind missing here (one added later, or
// another tool's) is drawn grey and named by itself (faultLookOf).
var faultLooks = map[string]faultLook{
	"kill":       {"#d9534f", "killed"},
	"pause":      {"#e69a28", "paused"},
	"partition":  {"#3d8fd1", "cut off"},
	"power":      {"#8e5bb5", "power lost"},
	"disk-error": {"#a0522d", "disk errors (EIO)"},
	"disk-full":  {"#b8860b", "disk full"},
	"disk-slow":  {"#c71585", "disk slow"},
	"corrupt":    {"#6a1b9a", "killed, data corrupted"},
	"shutdown":   {"#5a9e6f", "shut down"},
}

// faultModeStates name what a fault of one mode does to a node where its
// kind's State would mislead ("kind:mode" as the nemesis records them):
// corrupt:unreplicated-tail kills nobody.
var faultModeStates = map[string]string{
	"corrupt:unreplicated-tail":             "cut off from its followers, a bit flipped in a batch only it had",
	"corrupt:disk-replaced":                 "killed, its disk replaced by an empty one",
	"partition:leader-cut-then-killed":      "cut off from its followers, then killed",
	"partition:coordinator-cut-then-killed": "cut off from all but two nodes, then killed",
}

// faultKind is the kind of a fault window, the first word of its label
// ("kill" of `kill ["n1"]`).
func faultKind(w checker.Window) string {
	label := strings.TrimPrefix(w.Label, "nemesis ")
	kind, _, _ := strings.Cut(label, " ")
	if kind == "" {
		return "fault"
	}
	return normalizeFaultKind(kind)
}

// normalizeFaultKind reads a nemesis op's f as a fault kind:
// "start-kill" and "kill" are kill.
func normalizeFaultKind(f string) string {
	return strings.TrimPrefix(strings.TrimPrefix(strings.ToLower(f), "start-"), "stop-")
}

// faultLookOf is the look of a kind: its entry in faultLooks, else grey and
// named after the kind itself.
func faultLookOf(kind string) faultLook {
	if l, ok := faultLooks[kind]; ok {
		return l
	}
	for _, k := range sortedKeys(faultLooks) {
		if strings.Contains(kind, k) {
			return faultLooks[k]
		}
	}
	return faultLook{Color: colorFault, State: kind}
}

func faultColor(kind string) string { return faultLookOf(kind).Color }

// faultBands draws the fault windows coloured by kind, each labelled with
// its kind where it is wide enough, and the final-read phase from
// finalNs (when positive) to the end; a legend entry per kind shown.
func (p *svgPlot) faultBands(ws []checker.Window, finalNs int64) {
	var kinds []string
	byKind := map[string][]checker.Window{}
	for _, w := range ws {
		if !p.visible(w.Start, w.End) {
			continue
		}
		k := faultKind(w)
		if _, ok := byKind[k]; !ok {
			kinds = append(kinds, k)
		}
		byKind[k] = append(byKind[k], w)
	}
	sort.Strings(kinds)
	for _, k := range kinds {
		color := faultColor(k)
		fmt.Fprintf(&p.b, `<g class="series" data-series="fault-%s">`, xmlEscape(k))
		for _, w := range byKind[k] {
			x0 := p.x.px(float64(w.Start) / 1e9)
			x1 := math.Max(p.x.px(float64(w.End)/1e9), x0+1)
			fmt.Fprintf(&p.b, `<rect x="%s" y="%s" width="%s" height="%s" fill="%s" fill-opacity="0.18"><title>%s %s–%s</title></rect>`,
				f1(x0), f1(p.y.hi), f1(x1-x0), f1(p.y.lo-p.y.hi), color, xmlEscape(w.Label), seconds(w.Start), seconds(w.End))
			if x1-x0 >= 6*float64(len(k)) {
				fmt.Fprintf(&p.b, `<text x="%s" y="%s" font-size="10" fill="%s">%s</text>`, f1(x0+2), f1(p.y.hi+10), color, xmlEscape(k))
			}
		}
		p.b.WriteString(`</g>`)
	}
	p.finalReads(finalNs, false)
	for _, k := range kinds {
		p.legendEntry("fault-"+k, k, faultColor(k), "band")
	}
	if finalNs > 0 {
		p.legendEntry("final-reads", "final reads", colorFinalReads, "band")
	}
}

// finalReads shades the final-read phase from finalNs (when positive) to
// the end of the plot, labelled; with legend it adds its legend entry.
func (p *svgPlot) finalReads(finalNs int64, legend bool) {
	if finalNs <= 0 || float64(finalNs)/1e9 > p.x.max {
		return
	}
	x0 := p.x.px(float64(finalNs) / 1e9)
	fmt.Fprintf(&p.b, `<g class="series" data-series="final-reads"><rect x="%s" y="%s" width="%s" height="%s" fill="%s" fill-opacity="0.12"><title>final reads from %s</title></rect><text x="%s" y="%s" font-size="10" fill="#555">final reads</text></g>`,
		f1(x0), f1(p.y.hi), f1(math.Max(p.x.hi-x0, 1)), f1(p.y.lo-p.y.hi), colorFinalReads, seconds(finalNs), f1(x0+2), f1(p.y.lo-4))
	if legend {
		p.legendEntry("final-reads", "final reads", colorFinalReads, "band")
	}
}

// leaderMarks draws the leader changes the harness saw on one partition as
// short ticks along the top of the plot, each labelled with the new leader
// and epoch ("n3 e2"), and adds their legend entry.
func (p *svgPlot) leaderMarks(series string, events []leaderEvent) {
	if len(events) == 0 {
		return
	}
	fmt.Fprintf(&p.b, `<g class="series" data-series="%s" font-size="9" fill="%s">`, xmlEscape(series), colorLeader)
	for _, e := range events {
		if !p.visible(e.t, e.t) {
			continue
		}
		x := p.x.px(float64(e.t) / 1e9)
		who := e.leader
		if who == "" {
			who = "none"
		}
		fmt.Fprintf(&p.b, `<line x1="%s" x2="%s" y1="%s" y2="%s" stroke="%s" stroke-width="2"><title>leader %s, epoch %d, seen at %s</title></line><text x="%s" y="%s">%s e%d</text>`,
			f1(x), f1(x), f1(p.y.hi), f1(p.y.hi+8), colorLeader, xmlEscape(who), e.epoch, seconds(e.t), f1(x+2), f1(p.y.hi+18), xmlEscape(who), e.epoch)
	}
	p.b.WriteString(`</g>`)
	p.legendEntry(series, "leader (harness)", colorLeader, "line")
}
