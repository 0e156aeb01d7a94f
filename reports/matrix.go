package reports

import (
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/faultline/faultline/checker"
)

// Files of a matrix directory (<store>/matrix/<time>/).
const (
	FileMatrixIndex = "index.html"
	FileMatrixJSON  = "matrix.json"
)

// DetectionTarget is the share of a cell's seeds that must find what an
// invalid cell expects (issue 10: 9 of 10).
const DetectionTarget = 0.9

// MatrixIndex is the guarantee matrix's record: every cell, what it
// expected, what each seed's run found.
type MatrixIndex struct {
	Title     string       `json:"title"`
	Generated time.Time    `json:"generated"`
	Cells     []MatrixCell `json:"cells"`
}

// MatrixCell is one cell: a configuration under a fault, maybe with a
// planted bug, and its runs.
type MatrixCell struct {
	Name   string `json:"name"`
	Config string `json:"config"`
	Fault  string `json:"fault"`
	Bug    string `json:"bug,omitempty"`
	Expect string `json:"expect"` // valid, invalid or either
	// ExpectAnomalies are the anomaly classes that count as finding what
	// the cell looks for (a planted bug's classes, from its suite case):
	// an invalid run with none of them is a detection of the wrong class.
	// Empty: any invalid run counts.
	ExpectAnomalies []string    `json:"expect-anomalies,omitempty"`
	Why             string      `json:"why"`
	Runs            []MatrixRun `json:"runs"`
}

// MatrixRun is one seed's run of a cell.
type MatrixRun struct {
	Seed      int64    `json:"seed"`
	Found     string   `json:"found"` // valid, invalid, unknown or error
	Error     string   `json:"error,omitempty"`
	Anomalies []string `json:"anomalies,omitempty"`
	// Judged is the harness's judgement of the run against the cell's
	// expected classes (harness.Case.Judge), e.g. "invalid (duplicate;
	// expected lost-write)"; WrongClass marks an invalid run with none of
	// them.
	Judged     string        `json:"judged,omitempty"`
	WrongClass bool          `json:"wrong-class,omitempty"`
	Took       time.Duration `json:"took"`
	// FirstAnomaly is the time from the workload's first operation to the
	// first operation an anomaly names.
	FirstAnomaly    time.Duration `json:"first-anomaly,omitempty"`
	HasFirstAnomaly bool          `json:"has-first-anomaly,omitempty"`
	// Link is the run's report, relative to the matrix directory.
	Link string `json:"link,omitempty"`
}

// Invalid counts the runs that came out invalid, whatever they found.
func (c MatrixCell) Invalid() int {
	n := 0
	for _, r := range c.Runs {
		if r.Found == checker.Invalid.String() {
			n++
		}
	}
	return n
}

// Detected counts the runs that found what the cell looks for: invalid
// with one of its expected classes.
func (c MatrixCell) Detected() int {
	n := 0
	for _, r := range c.Runs {
		if r.Found == checker.Invalid.String() && !r.WrongClass {
			n++
		}
	}
	return n
}

// WrongClass counts the invalid runs that found none of the expected
// classes.
func (c MatrixCell) WrongClass() int { return c.Invalid() - c.Detected() }

// Status is what the cell shows: ok, FALSE ALARM (an invalid run where
// valid was promised), MISSED (fewer right-class detections than
// DetectionTarget where invalid was expected), MISSED (wrong class) (as
// MISSED, with some runs invalid for another class than expected),
// inconclusive (a promised-valid cell with an unknown or failed run), not
// run.
func (c MatrixCell) Status() string {
	if len(c.Runs) == 0 {
		return "not run"
	}
	det := c.Detected()
	switch c.Expect {
	case "valid":
		if c.Invalid() > 0 {
			return "FALSE ALARM"
		}
		for _, r := range c.Runs {
			if r.Found != checker.Valid.String() {
				return "inconclusive"
			}
		}
	case "invalid":
		if float64(det) < DetectionTarget*float64(len(c.Runs)) {
			if c.WrongClass() > 0 {
				return "MISSED (wrong class)"
			}
			return "MISSED"
		}
	}
	return "ok"
}

// OK reports whether the cell came out as expected.
func (c MatrixCell) OK() bool { s := c.Status(); return s == "ok" || s == "not run" }

// FirstAnomalies lists the times to first anomaly of the runs not judged
// of the wrong class (every invalid run of a cell without expected
// classes), shortest first.
func (c MatrixCell) FirstAnomalies() []time.Duration {
	var out []time.Duration
	for _, r := range c.Runs {
		if r.HasFirstAnomaly && !r.WrongClass {
			out = append(out, r.FirstAnomaly)
		}
	}
	slices.Sort(out)
	return out
}

// MatrixSummary sums up a matrix.
type MatrixSummary struct {
	Cells, CellsOK, CellsFailed, Runs int
	Bugs                              []BugSummary
}

// BugSummary is one planted bug over every cell that plants it.
type BugSummary struct {
	Bug string
	// Named is the cell of its named test (expected invalid); Detected
	// and Runs its detection over seeds, counting only runs that found
	// one of its expected classes; WrongClass the named test's runs that
	// were invalid for another class.
	Named                      string
	Detected, Runs, WrongClass int
	// FirstAnomaly is the shortest and median time to first anomaly over
	// every right-class detection of the bug, in any cell.
	FirstMin, FirstMedian time.Duration
	HasFirst              bool
	// FoundBy lists the faults of the cells where some run found it (with
	// an expected class).
	FoundBy []string
}

// Summarize counts cells and runs and sums up each planted bug.
func (m MatrixIndex) Summarize() MatrixSummary {
	var s MatrixSummary
	bugs := map[string]*BugSummary{}
	var firsts = map[string][]time.Duration{}
	for _, c := range m.Cells {
		s.Cells++
		s.Runs += len(c.Runs)
		if c.OK() {
			s.CellsOK++
		} else {
			s.CellsFailed++
		}
		if c.Bug == "" {
			continue
		}
		b := bugs[c.Bug]
		if b == nil {
			b = &BugSummary{Bug: c.Bug}
			bugs[c.Bug] = b
		}
		if c.Expect == "invalid" {
			b.Named, b.Detected, b.Runs = c.Name, b.Detected+c.Detected(), b.Runs+len(c.Runs)
			b.WrongClass += c.WrongClass()
		}
		if c.Detected() > 0 {
			b.FoundBy = append(b.FoundBy, c.Fault)
		}
		for _, r := range c.Runs {
			if r.Found == checker.Invalid.String() && !r.WrongClass && r.HasFirstAnomaly {
				firsts[c.Bug] = append(firsts[c.Bug], r.FirstAnomaly)
			}
		}
	}
	for name, b := range bugs {
		if f := firsts[name]; len(f) > 0 {
			slices.Sort(f)
			b.FirstMin, b.FirstMedian, b.HasFirst = f[0], f[len(f)/2], true
		}
		s.Bugs = append(s.Bugs, *b)
	}
	sort.Slice(s.Bugs, func(i, j int) bool { return s.Bugs[i].Bug < s.Bugs[j].Bug })
	return s
}

// FirstAnomaly is the time from the history's first client operation to
// the earliest operation that an invalidating anomaly's examples name.
func FirstAnomaly(res checker.Result, h checker.History) (time.Duration, bool) {
	var base int64 = -1
	byIndex := make(map[int64]int64, len(h))
	for _, op := range h {
		byIndex[op.Index] = op.Time
		if op.IsClient() && (base < 0 || op.Time < base) {
			base = op.Time
		}
	}
	first, found := int64(0), false
	for _, a := range res.Anomalies {
		if a.Allowed {
			continue
		}
		for _, ex := range a.Examples {
			for _, i := range ex.OpIndexes() {
				if t, ok := byIndex[i]; ok && (!found || t < first) {
					first, found = t, true
				}
			}
		}
	}
	if !found || base < 0 {
		return 0, false
	}
	return time.Duration(max(first-base, 0)), true
}

// WriteMatrixDir writes index.html and matrix.json into dir, each to a
// temporary name and renamed.
func WriteMatrixDir(dir string, m MatrixIndex) error {
	if err := writeFileAtomic(dir, FileMatrixJSON, func(w io.Writer) error {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(m)
	}); err != nil {
		return err
	}
	return writeFileAtomic(dir, FileMatrixIndex, func(w io.Writer) error { return WriteMatrixIndex(w, m) })
}

// WriteMatrixIndex renders the matrix as one self-contained HTML page:
// the totals, each planted bug's detection rate and time to first anomaly,
// then every cell with expected against found and a link to each run.
func WriteMatrixIndex(w io.Writer, m MatrixIndex) error {
	type runView struct {
		Seed         int64
		Found, Class string
		Title, Link  string
	}
	type cellView struct {
		MatrixCell
		Status, StatusClass string
		Expected            string
		Detection, First    string
		RunViews            []runView
	}
	type bugView struct {
		BugSummary
		Rate, First, FoundBy string
	}
	sum := m.Summarize()
	var cells []cellView
	for _, c := range m.Cells {
		v := cellView{MatrixCell: c, Status: c.Status(), Expected: c.Expect, Detection: fmt.Sprintf("%d/%d", c.Detected(), len(c.Runs))}
		if len(c.ExpectAnomalies) > 0 {
			v.Expected += " (" + strings.Join(c.ExpectAnomalies, " | ") + ")"
		}
		if w := c.WrongClass(); w > 0 {
			v.Detection += fmt.Sprintf(", %d wrong class", w)
		}
		v.StatusClass = map[bool]string{true: "valid", false: "invalid"}[c.OK()]
		if f := c.FirstAnomalies(); len(f) > 0 {
			v.First = f[0].Round(100 * time.Millisecond).String()
		}
		for _, r := range c.Runs {
			class, found := r.Found, r.Found
			if class == "error" {
				class = "unknown"
			}
			if len(r.Anomalies) > 0 {
				found += ": " + strings.Join(r.Anomalies, ",")
			}
			if r.WrongClass {
				class, found = "unknown", found+" (wrong class)"
			}
			title := r.Judged
			if r.Error != "" {
				title = r.Error
			}
			v.RunViews = append(v.RunViews, runView{Seed: r.Seed, Found: found, Class: class, Title: title, Link: filepath.ToSlash(r.Link)})
		}
		cells = append(cells, v)
	}
	var bugs []bugView
	for _, b := range sum.Bugs {
		v := bugView{BugSummary: b, Rate: "not run", FoundBy: strings.Join(b.FoundBy, ", ")}
		if b.Runs > 0 {
			v.Rate = fmt.Sprintf("%d/%d (%.0f%%)", b.Detected, b.Runs, 100*float64(b.Detected)/float64(b.Runs))
			if b.WrongClass > 0 {
				v.Rate += fmt.Sprintf("; %d invalid for the wrong class", b.WrongClass)
			}
		}
		if b.HasFirst {
			v.First = fmt.Sprintf("%s (median %s)", b.FirstMin.Round(100*time.Millisecond), b.FirstMedian.Round(100*time.Millisecond))
		}
		bugs = append(bugs, v)
	}
	return matrixTemplate.Execute(w, struct {
		MatrixIndex
		Sum   MatrixSummary
		Cells []cellView
		Bugs  []bugView
		CSS   template.CSS
	}{m, sum, cells, bugs, template.CSS(reportCSS)}) //nolint:gosec // our own embedded stylesheet
}

var matrixTemplate = template.Must(template.New("matrix").Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Title}}</title><style>{{.CSS}}</style></head>
<body><main>
<h1>{{.Title}}</h1>
<p>{{.Sum.Cells}} cells, {{.Sum.Runs}} runs: <span class="badge valid">{{.Sum.CellsOK}} as expected</span> <span class="badge {{if .Sum.CellsFailed}}invalid{{else}}valid{{end}}">{{.Sum.CellsFailed}} not</span>.
<span class="muted">Generated {{.Generated.Format "2006-01-02 15:04:05 UTC"}}. Expected valid: the configuration promises no loss under the fault (a run found invalid is a FALSE ALARM or a broker bug). Expected invalid: the configuration's trade-off or a planted bug loses data and the checker must find it, with one of the anomaly classes the cell names, in at least 90% of the seeds (else MISSED; MISSED (wrong class) when some runs were invalid for another class). Found: each seed's verdict and the classes it found. Either: nothing is promised.</span></p>
{{if .Bugs}}<h2>Planted bugs</h2>
<table>
<tr><th>bug</th><th>named test</th><th>detection over seeds (right class)</th><th>time to first anomaly</th><th>found under</th></tr>
{{range .Bugs}}<tr><td>{{.Bug}}</td><td>{{.Named}}</td><td class="num">{{.Rate}}</td><td class="num">{{.First}}</td><td>{{.FoundBy}}</td></tr>
{{end}}</table>{{end}}
<h2>Cells</h2>
<table>
<tr><th>cell</th><th>config</th><th>fault</th><th>bug</th><th>expected</th><th>found (per seed)</th><th>detected</th><th>first anomaly</th><th>result</th></tr>
{{range .Cells}}<tr><td>{{.Name}}<br><span class="muted">{{.Why}}</span></td><td>{{.Config}}</td><td>{{.Fault}}</td><td>{{.Bug}}</td><td>{{.Expected}}</td><td>{{range .RunViews}}<a href="{{.Link}}" title="{{.Title}}"><span class="badge {{.Class}}">{{.Seed}}: {{.Found}}</span></a> {{else}}<span class="muted">not run</span>{{end}}</td><td class="num">{{.Detection}}</td><td class="num">{{.First}}</td><td><span class="badge {{.StatusClass}}">{{.Status}}</span></td></tr>
{{end}}</table>
</main></body></html>
`))
