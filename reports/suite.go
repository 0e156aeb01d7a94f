package reports

import (
	"fmt"
	"html/template"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"
)

// DirSuites is the store directory holding one index page per suite run
// (suites/<stamp>.html), written at the end of the suite.
const DirSuites = "suites"

// SuiteIndexFile is the store-relative path of a suite run's index page.
func SuiteIndexFile(stamp string) string { return path.Join(DirSuites, stamp+".html") }

// SuiteRun is one test of a suite run, as its index page lists it.
type SuiteRun struct {
	Name     string
	Expected string // valid or invalid
	Found    string // valid, invalid, unknown, or "error: ..."
	OK       bool
	// Dir is the run's directory (absolute or relative to the working
	// directory); it is linked relative to the store.
	Dir  string
	Took time.Duration
	// Why says what the test proves.
	Why string
}

var suiteTemplate = template.Must(template.New("suite").Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>suite {{.Stamp}}: {{if .AllOK}}passed{{else}}FAILED{{end}}</title><style>{{.CSS}}</style></head>
<body><main>
<h1>Suite run {{.Stamp}}</h1>
<section class="verdict {{if .AllOK}}valid{{else}}invalid{{end}}"><div class="headline">{{if .AllOK}}Passed: every test came out as expected{{else}}FAILED: {{.Failed}} of {{len .Runs}} tests came out other than expected{{end}}.</div></section>
<table>
<tr><th>test</th><th>expected</th><th>found</th><th>result</th><th>took</th><th>what it proves</th></tr>
{{range .Runs}}<tr><td>{{if .Href}}<a href="{{.Href}}">{{.Name}}</a>{{else}}{{.Name}}{{end}}</td><td>{{.Expected}}</td><td><span class="badge {{.Class}}">{{.Found}}</span></td><td>{{if .OK}}ok{{else}}<strong>FAILED</strong>{{end}}</td><td class="num">{{.Took}}</td><td>{{.Why}}</td></tr>
{{end}}
</table>
<p class="muted"><a href="../">All runs of the store</a>.</p>
</main></body></html>
`))

// WriteSuiteIndex writes the index page of one suite run into the store,
// at SuiteIndexFile(stamp): each test with its expected and found verdict,
// linked to its report.
func WriteSuiteIndex(storeDir, stamp string, runs []SuiteRun) error {
	dir := filepath.Join(storeDir, DirSuites)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("write suite index: %w", err)
	}
	return writeFileAtomic(dir, stamp+".html", func(w io.Writer) error { return writeSuiteIndex(w, storeDir, stamp, runs) })
}

func writeSuiteIndex(w io.Writer, storeDir, stamp string, runs []SuiteRun) error {
	type row struct {
		SuiteRun
		Href, Class, Took string
	}
	rows := make([]row, 0, len(runs))
	failed := 0
	for _, r := range runs {
		x := row{SuiteRun: r, Class: "unknown", Took: r.Took.Round(time.Second).String()}
		switch r.Found {
		case "valid", "invalid":
			x.Class = r.Found
		}
		if !r.OK {
			failed++
		}
		// The page sits in <store>/suites/, the run in <store>/<test>/<time>/.
		if rel, err := filepath.Rel(storeDir, r.Dir); err == nil && r.Dir != "" && filepath.IsLocal(rel) {
			x.Href = "../" + relHref(strings.Split(filepath.ToSlash(rel), "/")...) + "/" + FileReport
		}
		rows = append(rows, x)
	}
	err := suiteTemplate.Execute(w, struct {
		Stamp  string
		Runs   []row
		AllOK  bool
		Failed int
		CSS    template.CSS
	}{stamp, rows, failed == 0, failed, template.CSS(reportCSS)}) //nolint:gosec // our own embedded stylesheet
	if err != nil {
		return fmt.Errorf("render suite index: %w", err)
	}
	return nil
}
