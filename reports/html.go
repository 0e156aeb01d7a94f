package reports

import (
	"embed"
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/faultline/faultline/checker"
)

//go:embed assets/report.html.tmpl assets/report.css assets/report.js
var assets embed.FS

var reportTemplate = template.Must(template.New("report.html.tmpl").ParseFS(assets, "assets/report.html.tmpl"))

var (
	reportCSS = mustAsset("assets/report.css")
	reportJS  = mustAsset("assets/report.js")
)

func mustAsset(name string) string {
	b, err := assets.ReadFile(name)
	if err != nil {
		panic("reports: embedded asset missing: " + name)
	}
	return string(b)
}

// Bounds on what one anomaly section lists.
const (
	examplesPerAnomalyMax = 5
	exampleBytesMax       = 4000
	opsPerAnomalyMax      = 12
	valueBytesMax         = 300
	nemesisOpsMax         = 500
)

type page struct {
	Title         string
	Verdict       pageVerdict
	Notes         []string
	Facts         []labelValue
	Stories       []story
	Checked       *checkedBox
	Anomalies     []anomalySection
	Checkers      []checkerRow
	Catalog       []catalogRow
	Plots         plotSet
	Quantiles     []quantileRow
	Errors        []errorRow
	ErrorsOmitted int
	ClientErrors  []clientErrorRow
	QuantileNames []string
	Faults        []windowRow
	Unavailable   []windowRow
	NemesisOps    []opRow
	NemesisTotal  int
	SpecRows      []labelValue
	Config        [][2]string
	SpecJSON      string
	Links         Links
	Mode          string
	CSS           template.CSS
	JS            template.JS
}

type pageVerdict struct {
	verdict
	Class string
}

type labelValue struct{ Label, Value string }

type anomalySection struct {
	Name, Anchor, Definition, Sentence string
	Count                              int
	Allowed                            bool
	Texts                              []string
	// Cycles spells out dependency cycles (G0, G1c and variants), one
	// list of steps each.
	Cycles        []cycleList
	Examples      []string
	ExamplesTotal int
	Ops           []opRow
	OpsOmitted    int
}

// cycleList is one dependency cycle: its operations, then one line per
// edge saying why it holds.
type cycleList struct {
	Head  string
	Steps []string
}

// cycleOf renders an example's cycle, or reports false for an example
// without one.
func cycleOf(ex checker.Example) (cycleList, bool) {
	if len(ex.Steps) == 0 {
		return cycleList{}, false
	}
	var ops []string
	for _, st := range ex.Steps {
		ops = append(ops, fmt.Sprintf("op %d", st.From))
	}
	ops = append(ops, fmt.Sprintf("op %d", ex.Steps[0].From))
	c := cycleList{Head: strings.Join(ops, " → ")}
	for _, st := range ex.Steps {
		c.Steps = append(c.Steps, fmt.Sprintf("%s: %s", st.Type, st.Text))
	}
	return c, true
}

type opRow struct {
	Index                                int64
	Time, Process, Type, F, Value, Error string
	Class                                string
}

type checkerRow struct {
	Name, Word, Class, Anomalies, Error string
}

type catalogRow struct {
	Name, Anchor, Definition string
	Allowed                  bool
	Count                    int
}

type quantileRow struct {
	Name   string
	Values []string
}

// errorRow counts one error text among client ops that ended fail or info.
type errorRow struct {
	Error      string
	Fail, Info int
}

const errorRowsMax = 20

// errorRows counts the errors of failed and indeterminate client ops, most
// frequent first: from the history when there is one, else from the
// checker's Stats.InfoErrors (which counts info only).
func errorRows(in Input, a *analysis) []errorRow {
	by := map[string]*errorRow{}
	row := func(e string) *errorRow {
		if e == "" {
			e = "(no error text)"
		}
		r := by[e]
		if r == nil {
			r = &errorRow{Error: e}
			by[e] = r
		}
		return r
	}
	if a != nil {
		for _, op := range a.h {
			if !op.IsClient() {
				continue
			}
			switch op.Type {
			case checker.Fail:
				row(op.Error).Fail++
			case checker.Info:
				row(op.Error).Info++
			}
		}
	} else {
		for e, n := range in.Result.Stats.InfoErrors {
			row(e).Info += n
		}
	}
	out := make([]errorRow, 0, len(by))
	for _, r := range by {
		out = append(out, *r)
	}
	sort.Slice(out, func(i, j int) bool {
		ti, tj := out[i].Fail+out[i].Info, out[j].Fail+out[j].Info
		if ti != tj {
			return ti > tj
		}
		return out[i].Error < out[j].Error
	})
	return out
}

type windowRow struct {
	Label, Start, End, Duration string
}

// WriteHTML renders the report page for one run. The page is
// self-contained: styles, script and plots are inline, and links to the
// run's other files are relative.
func WriteHTML(w io.Writer, in Input) error {
	var a *analysis
	if len(in.History) > 0 {
		a = analyze(in.History)
	}
	if len(in.Links.Porcupine) == 0 {
		in.Links.Porcupine = visualizationLinks(in)
	}
	p := buildPage(in, a)
	if err := reportTemplate.Execute(w, p); err != nil {
		return fmt.Errorf("render report: %w", err)
	}
	return nil
}

// visualizationLinks links the porcupine pages of Result.Visualizations
// under the names the harness stores them as (LinearVisualizationFile).
func visualizationLinks(in Input) []Link {
	keys := make([]int, 0, len(in.Result.Visualizations))
	for k := range in.Result.Visualizations {
		keys = append(keys, k)
	}
	sort.Ints(keys)
	out := make([]Link, 0, len(keys))
	for _, k := range keys {
		out = append(out, Link{Name: in.Spec.keyLabel(k), Href: LinearVisualizationFile(k)})
	}
	return out
}

func buildPage(in Input, a *analysis) page {
	subscribe := subscribeMode(in.Result)
	v := buildVerdict(in, a)
	p := page{
		Title:   in.Spec.Name,
		Verdict: pageVerdict{verdict: v, Class: strings.ToLower(v.Word)},
		Links:   in.Links,
		Notes:   append(append([]string(nil), in.Notes...), warningNotes(in.Result)...),
		Mode:    "assign",
		CSS:     template.CSS(reportCSS), //nolint:gosec // our own embedded stylesheet
		JS:      template.JS(reportJS),   //nolint:gosec // our own embedded script
	}
	if p.Title == "" {
		p.Title = "unnamed test"
	}
	if subscribe {
		p.Mode = "subscribe: consumer groups, rebalances"
	}
	p.Facts = facts(in, a)
	p.Stories = buildStories(in, a)
	p.Checked = buildChecked(in)
	if a != nil {
		a.indexAcks(shownExampleValues(in.Result))
	}
	for _, name := range orderedAnomalyNames(in.Result.Anomalies) {
		rep := in.Result.Anomalies[name]
		if rep.Count <= 0 {
			continue
		}
		p.Anomalies = append(p.Anomalies, anomalySectionOf(in, a, name, rep))
	}
	for _, c := range in.Result.Checkers {
		p.Checkers = append(p.Checkers, checkerRow{
			Name: c.Name, Word: c.Valid.String(), Class: c.Valid.String(),
			Anomalies: anomalyCounts(c.Anomalies), Error: c.Error,
		})
	}
	for _, k := range anomalyCatalog {
		p.Catalog = append(p.Catalog, catalogRow{
			Name: k.Name, Anchor: "anomaly-" + k.Name, Definition: k.Definition,
			Allowed: isAllowed(k.Name, in.Result.Anomalies[k.Name], in.Result), Count: in.Result.Anomalies[k.Name].Count,
		})
	}
	for _, name := range orderedAnomalyNames(in.Result.Anomalies) {
		if _, known := anomalyByName[name]; !known {
			k := kindOf(name)
			p.Catalog = append(p.Catalog, catalogRow{Name: name, Anchor: "anomaly-" + name, Definition: k.Definition, Count: in.Result.Anomalies[name].Count})
		}
	}
	faults := faultWindows(in, a)
	p.Plots = buildPlots(in, a, faults)
	q := quantiles(in, a)
	p.QuantileNames = quantileNames(q)
	for _, name := range sortedKeys(q) {
		row := quantileRow{Name: name}
		for _, qn := range p.QuantileNames {
			if val, ok := q[name][qn]; ok {
				row.Values = append(row.Values, msValue(val))
			} else {
				row.Values = append(row.Values, "")
			}
		}
		p.Quantiles = append(p.Quantiles, row)
	}
	p.Faults = windowRows(faults)
	p.Unavailable = windowRows(in.Result.Perf.Unavailable)
	p.ClientErrors = clientErrorRows(in.Result.ClientErrors)
	p.Errors = errorRows(in, a)
	if len(p.Errors) > errorRowsMax {
		p.ErrorsOmitted = len(p.Errors) - errorRowsMax
		p.Errors = p.Errors[:errorRowsMax]
	}
	if a != nil {
		p.NemesisTotal = len(a.nemesis)
		for i, pos := range a.nemesis {
			if i == nemesisOpsMax {
				break
			}
			p.NemesisOps = append(p.NemesisOps, rowOf(a.h[pos], nil))
		}
	}
	p.SpecRows = specRows(in.Spec)
	p.Config = in.Spec.sortedConfig()
	if in.Spec.Raw != nil {
		if b, err := json.MarshalIndent(in.Spec.Raw, "", "  "); err == nil {
			p.SpecJSON = string(b)
		}
	}
	return p
}

// warningNotes states the checker's warnings about the history.
func warningNotes(r checker.Result) []string {
	out := make([]string, 0, len(r.Warnings))
	for _, w := range r.Warnings {
		out = append(out, "The history breaks Jepsen's invoke/complete discipline, and was analysed as Jepsen's checker would: "+w+".")
	}
	return out
}

func facts(in Input, a *analysis) []labelValue {
	var out []labelValue
	add := func(label, value string) {
		if value != "" {
			out = append(out, labelValue{label, value})
		}
	}
	add("workload", in.Spec.Workload)
	add("expected by its suite", in.Spec.Expected)
	faults := strings.Join(in.Spec.Nemesis.Names(), ", ")
	if faults == "" && a != nil {
		faults = strings.Join(faultNames(in, a), ", ")
	}
	if faults == "" {
		faults = "none"
	}
	add("nemesis", faults)
	if len(in.Spec.Nodes) > 0 {
		add("nodes", fmt.Sprintf("%d (%s)", len(in.Spec.Nodes), strings.Join(in.Spec.Nodes, ", ")))
	}
	if in.Spec.Raw != nil || in.Spec.Seed != 0 {
		add("seed", strconv.FormatInt(in.Spec.Seed, 10))
	}
	if in.Spec.TimeLimit > 0 {
		add("time limit", in.Spec.TimeLimit.String())
	}
	for _, f := range []struct{ label, field string }{
		{"topology", "topology"}, {"runtime", "runtime"}, {"acks", "acks"},
		{"idempotent producer", "idempotent"}, {"replication factor", "replicationfactor"},
	} {
		if v, ok := rawField(in.Spec.Raw, f.field); ok {
			add(f.label, v)
		}
	}
	add("docker hosts", dockerHosts(in.Spec.Raw))
	ops := in.Result.Stats.Count
	if a != nil {
		if ops == 0 {
			ops = len(a.latencies)
		}
		add("duration", seconds(a.endNs))
		add("history entries", strconv.Itoa(len(a.h)))
	}
	add("operations", strconv.Itoa(ops))
	if st := in.Result.Stats; st.Sends > 0 || st.Polls > 0 {
		add("sends / polls", fmt.Sprintf("%d / %d", st.Sends, st.Polls))
	}
	if in.Result.Stats.Keys > 0 {
		add("keys", strconv.Itoa(in.Result.Stats.Keys))
	}
	if a != nil {
		counts := map[checker.OpType]int{}
		for _, p := range a.latencies {
			counts[p.typ]++
		}
		add("client outcomes", fmt.Sprintf("%d ok, %d fail, %d info", counts[checker.OK], counts[checker.Fail], counts[checker.Info]))
	}
	return out
}

// dockerHosts is a placed run's placement (test.json's docker-hosts),
// "n1 unix:///var/run/docker.sock, n2 tcp://b:2375" in node order; empty
// for a run on one Engine.
func dockerHosts(raw map[string]any) string {
	hosts, _ := raw["docker-hosts"].(map[string]any)
	nodes := make([]string, 0, len(hosts))
	for n := range hosts {
		nodes = append(nodes, n)
	}
	sort.Strings(nodes)
	parts := make([]string, 0, len(nodes))
	for _, n := range nodes {
		if ep, ok := hosts[n].(string); ok {
			parts = append(parts, n+" "+ep)
		}
	}
	return strings.Join(parts, ", ")
}

func anomalySectionOf(in Input, a *analysis, name string, rep checker.AnomalyReport) anomalySection {
	k := kindOf(name)
	st := anomalySentence(in, a, name, rep)
	s := anomalySection{
		Name: name, Anchor: "anomaly-" + name, Definition: k.Definition,
		Sentence: capitalizeAll([]string{withDetail(st.sentence, st.detail)})[0],
		Count:    rep.Count, Allowed: isAllowed(name, rep, in.Result), ExamplesTotal: len(rep.Examples),
	}
	var ops []int64
	focus := &valueFocus{keys: map[int]bool{}}
	for i, ex := range rep.Examples {
		if ex.HasKey() {
			focus.keys[ex.Key] = true
		}
		focus.offsets = append(focus.offsets, ex.OffsetsNamed()...)
		if i < examplesPerAnomalyMax {
			s.Examples = append(s.Examples, exampleJSON(ex, exampleBytesMax))
			if c, ok := cycleOf(ex); ok {
				s.Cycles = append(s.Cycles, c)
			} else if text := exampleText(a, ex); text != "" {
				s.Texts = append(s.Texts, text)
			}
		}
		ops = append(ops, ex.OpIndexes()...)
	}
	if len(focus.keys) == 0 {
		focus.keys = nil
	}
	focus.offsets = uniqueInt64s(focus.offsets)
	if a == nil {
		return s
	}
	if st.nemesisIndex >= 0 {
		ops = append(ops, st.nemesisIndex)
	}
	positions := relatedPositions(a, uniqueInt64s(ops))
	if len(positions) > opsPerAnomalyMax {
		s.OpsOmitted = len(positions) - opsPerAnomalyMax
		positions = positions[:opsPerAnomalyMax]
	}
	for _, pos := range positions {
		s.Ops = append(s.Ops, rowOf(a.h[pos], focus))
	}
	return s
}

// Bound on the values one example's line spells out.
const exampleValuesShownMax = 3

// shownExampleValues are the values the examples shown on the page name
// (exampleText spells out each).
func shownExampleValues(r checker.Result) map[keyValue]bool {
	out := map[keyValue]bool{}
	for _, rep := range r.Anomalies {
		for i, ex := range rep.Examples {
			if i == examplesPerAnomalyMax {
				break
			}
			for j, v := range exampleValues(ex) {
				if j == exampleValuesShownMax {
					break
				}
				out[keyValue{ex.Key, v}] = true
			}
		}
	}
	return out
}

// exampleText is the checker's sentence for an example followed by the
// values it names as people read them, from the history: "send 26116 →
// offset 188 (op 15)", or "send 26116, never acknowledged with an offset".
func exampleText(a *analysis, ex checker.Example) string {
	text := ex.Text
	if a == nil || !ex.HasKey() {
		return text
	}
	values := exampleValues(ex)
	var parts []string
	for i, v := range values {
		if i == exampleValuesShownMax {
			parts = append(parts, fmt.Sprintf("%d more", len(values)-i))
			break
		}
		if s, ok := a.ackOf(ex.Key, v); ok {
			parts = append(parts, fmt.Sprintf("send %d → offset %d (op %d)", v, s.offset, s.index))
		} else {
			parts = append(parts, fmt.Sprintf("send %d, never acknowledged with an offset", v))
		}
	}
	if len(parts) == 0 {
		return text
	}
	if text == "" {
		return strings.Join(parts, "; ")
	}
	return text + " — " + strings.Join(parts, "; ")
}

// relatedPositions returns the history positions of the given operations
// and of their invoke or completion, in history order.
func relatedPositions(a *analysis, ops []int64) []int {
	seen := map[int]bool{}
	var out []int
	add := func(p int) {
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	for _, idx := range ops {
		p, ok := a.position(idx)
		if !ok {
			continue
		}
		add(p)
		if q := a.partner[p]; q >= 0 {
			add(int(q))
		}
	}
	sort.Ints(out)
	return out
}

func rowOf(op checker.Op, focus *valueFocus) opRow {
	proc := strconv.Itoa(op.Process)
	class := string(op.Type)
	if op.Process == checker.NemesisProcess {
		proc = "nemesis"
		class = "nemesis"
	}
	return opRow{
		Index: op.Index, Time: seconds(op.Time), Process: proc, Type: string(op.Type),
		F: op.F, Value: formatValue(op, valueBytesMax, focus), Error: op.Error, Class: class,
	}
}

func anomalyCounts(m map[string]checker.AnomalyReport) string {
	var parts []string
	for _, name := range orderedAnomalyNames(m) {
		if m[name].Count > 0 {
			parts = append(parts, fmt.Sprintf("%s: %d", name, m[name].Count))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

func windowRows(ws []checker.Window) []windowRow {
	out := make([]windowRow, 0, len(ws))
	for _, w := range ws {
		out = append(out, windowRow{
			Label: w.Label, Start: seconds(w.Start), End: seconds(w.End),
			Duration: seconds(w.End - w.Start),
		})
	}
	return out
}

// specRows lists the spec: every top-level field of test.json as stored
// when there is one, else the fields of Spec.
func specRows(s Spec) []labelValue {
	if s.Raw != nil {
		out := make([]labelValue, 0, len(s.Raw))
		for _, k := range sortedKeys(s.Raw) {
			v := s.Raw[k]
			if m, isMap := v.(map[string]any); isMap && len(m) > 0 {
				continue // broker config and other maps have their own table or the full spec
			}
			out = append(out, labelValue{k, truncate(scalarString(v), 200)})
		}
		return out
	}
	var out []labelValue
	add := func(label, value string) {
		if value != "" {
			out = append(out, labelValue{label, value})
		}
	}
	add("name", s.Name)
	add("workload", s.Workload)
	add("nemesis", strings.Join(s.Nemesis.Names(), ", "))
	add("nodes", strings.Join(s.Nodes, ", "))
	if s.Raw != nil || s.Seed != 0 {
		add("seed", strconv.FormatInt(s.Seed, 10))
	}
	if s.TimeLimit > 0 {
		add("time limit", s.TimeLimit.String())
	}
	if s.PartitionsPerTopic > 0 {
		add("partitions per topic", strconv.Itoa(s.PartitionsPerTopic))
	}
	mode := "assign"
	if s.Subscribe {
		mode = "subscribe"
	}
	add("consumer mode", mode)
	return out
}

// quantiles returns the checker's latency quantiles in ms per "f:type",
// or computes p50, p90, p99 and max (the checker's names) from the history
// when the checker gave none.
func quantiles(in Input, a *analysis) map[string]map[string]float64 {
	if len(in.Result.Perf.LatencyQuantilesMs) > 0 || a == nil {
		return in.Result.Perf.LatencyQuantilesMs
	}
	by := map[string][]int64{}
	for _, p := range a.latencies {
		k := p.f + ":" + string(p.typ)
		by[k] = append(by[k], p.latencyNs)
	}
	out := make(map[string]map[string]float64, len(by))
	for k, lats := range by {
		sort.Slice(lats, func(i, j int) bool { return lats[i] < lats[j] })
		q := func(f float64) float64 {
			i := int(math.Ceil(f*float64(len(lats)))) - 1
			return float64(lats[min(max(i, 0), len(lats)-1)]) / 1e6
		}
		out[k] = map[string]float64{"p50": q(0.5), "p90": q(0.9), "p99": q(0.99), "max": q(1)}
	}
	return out
}

// msValue renders a latency in ms with two decimals below 10 ms, one above.
func msValue(v float64) string {
	if math.Abs(v) < 10 {
		return strconv.FormatFloat(v, 'f', 2, 64)
	}
	return strconv.FormatFloat(v, 'f', 1, 64)
}

// quantileRank orders quantile names: "min", then "p50" or "0.5" by
// value, then "max"; names it cannot read come last.
func quantileRank(name string) (float64, bool) {
	switch name {
	case "min":
		return 0, true
	case "max":
		return 1, true
	}
	if v, err := strconv.ParseFloat(strings.TrimPrefix(name, "p"), 64); err == nil {
		if strings.HasPrefix(name, "p") {
			v /= 100
		}
		return v, true
	}
	return 0, false
}

// quantileNames orders quantile columns by quantile.
func quantileNames(q map[string]map[string]float64) []string {
	seen := map[string]bool{}
	var names []string
	for _, m := range q {
		for n := range m {
			if !seen[n] {
				seen[n] = true
				names = append(names, n)
			}
		}
	}
	sort.Slice(names, func(i, j int) bool {
		a, okA := quantileRank(names[i])
		b, okB := quantileRank(names[j])
		if okA != okB {
			return okA
		}
		if a != b {
			return a < b
		}
		return names[i] < names[j]
	})
	return names
}
