package reports

import (
	"bytes"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/faultline/faultline/checker"
)

// runsListedMax bounds the index page.
const runsListedMax = 2000

// Handler browses a store directory (`faultline serve`):
//
//	/                      index of runs, newest first: test, time, verdict, anomaly counts
//	/runs/<test>/<time>/   the run's report.html, rendered on the fly when it is missing
//	/runs/<path>           any file of the store (history, logs, porcupine pages)
//
// Every file is opened through an os.Root on storeDir, so neither ".."
// nor a symbolic link can reach outside the store; request paths with a
// ".." segment are refused with 400 before that.
func Handler(storeDir string) http.Handler {
	return &storeServer{dir: storeDir, log: slog.Default()}
}

type storeServer struct {
	dir string
	log *slog.Logger
}

func (s *storeServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		http.Error(w, "only GET and HEAD", http.StatusMethodNotAllowed)
		return
	}
	if unsafePath(r.URL.Path) || unsafePath(r.URL.RawPath) {
		http.Error(w, "path must not contain '..', backslashes or NUL", http.StatusBadRequest)
		return
	}
	root, err := os.OpenRoot(s.dir)
	if err != nil {
		http.Error(w, fmt.Sprintf("store %s cannot be opened: %v", s.dir, err), http.StatusNotFound)
		return
	}
	defer root.Close()
	fsys := root.FS()
	switch {
	case r.URL.Path == "/":
		s.index(w, fsys)
	case strings.HasPrefix(r.URL.Path, "/runs/"):
		s.run(w, r, fsys, strings.TrimPrefix(r.URL.Path, "/runs/"))
	default:
		http.NotFound(w, r)
	}
}

// unsafePath refuses ".." segments, backslashes and NUL in a request path.
func unsafePath(p string) bool {
	if strings.ContainsAny(p, "\\\x00") {
		return true
	}
	for _, seg := range strings.Split(p, "/") {
		if seg == ".." {
			return true
		}
	}
	lower := strings.ToLower(p)
	return strings.Contains(lower, "%2e%2e") || strings.Contains(lower, "%2f")
}

func (s *storeServer) run(w http.ResponseWriter, r *http.Request, fsys fs.FS, rel string) {
	name := strings.TrimSuffix(rel, "/")
	if name == "" {
		name = "."
	}
	if !fs.ValidPath(name) {
		http.Error(w, "invalid path", http.StatusBadRequest)
		return
	}
	info, err := fs.Stat(fsys, name)
	if err != nil {
		http.NotFound(w, r)
		return
	}
	if info.IsDir() {
		if _, err := fs.Stat(fsys, path.Join(name, FileResults)); err == nil {
			if !strings.HasSuffix(r.URL.Path, "/") {
				http.Redirect(w, r, r.URL.Path+"/", http.StatusMovedPermanently)
				return
			}
			s.report(w, r, fsys, name)
			return
		}
	}
	switch path.Ext(name) {
	case ".log", ".jsonl", ".txt", ".properties":
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	}
	http.StripPrefix("/runs", http.FileServerFS(fsys)).ServeHTTP(w, r)
}

// report serves a run's report.html, or renders one when it is missing.
func (s *storeServer) report(w http.ResponseWriter, r *http.Request, fsys fs.FS, dir string) {
	if data, err := fs.ReadFile(fsys, path.Join(dir, FileReport)); err == nil {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		http.ServeContent(w, r, FileReport, time.Time{}, bytes.NewReader(data))
		return
	}
	in, err := loadRun(fsys, dir, dir)
	if err != nil {
		http.Error(w, fmt.Sprintf("run %s cannot be loaded: %v", dir, err), http.StatusInternalServerError)
		return
	}
	in.Notes = append(in.Notes, FileReport+" was missing; this page was rendered by `faultline serve` from the stored results.")
	var buf bytes.Buffer
	if err := WriteHTML(&buf, in); err != nil {
		s.log.Error("render report", "run", dir, "err", err)
		http.Error(w, "report rendering failed: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = w.Write(buf.Bytes())
}

// runEntry is one row of the index.
type runEntry struct {
	Test, Stamp, Href string
	Time              time.Time
	When              string
	Verdict, Class    string
	Anomalies         string
	Problem           string
	// Nemesis names the faults of the run's test.json; Duration is how long
	// the run's history lasted.
	Nemesis, Duration string
	// Expected is the verdict the run's suite expected (empty outside a
	// suite), Matches whether the found one is it, SuiteHref the suite
	// run's index page.
	Expected, SuiteHref string
	Matches             bool
}

func (s *storeServer) index(w http.ResponseWriter, fsys fs.FS) {
	runs, truncated := listRuns(fsys)
	counts := map[string]int{}
	for _, r := range runs {
		counts[r.Class]++
	}
	_, latestErr := fs.Stat(fsys, path.Join("latest", FileResults))
	suites := listSuites(fsys)
	var buf bytes.Buffer
	err := indexTemplate.Execute(&buf, struct {
		Store     string
		Runs      []runEntry
		Truncated bool
		Counts    map[string]int
		Latest    bool
		Suites    []Link
		CSS       template.CSS
	}{s.dir, runs, truncated, counts, latestErr == nil, suites, template.CSS(reportCSS)}) //nolint:gosec // our own embedded stylesheet
	if err != nil {
		s.log.Error("render store index", "err", err)
		http.Error(w, "index rendering failed: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = w.Write(buf.Bytes())
}

// listRuns finds <test>/<timestamp>/results.json in the store, newest
// first; "latest" (a link to the newest run) is skipped.
func listRuns(fsys fs.FS) ([]runEntry, bool) {
	tests, err := fs.ReadDir(fsys, ".")
	if err != nil {
		return nil, false
	}
	var runs []runEntry
	for _, t := range tests {
		if !t.IsDir() || t.Name() == "latest" || strings.HasPrefix(t.Name(), ".") {
			continue
		}
		stamps, err := fs.ReadDir(fsys, t.Name())
		if err != nil {
			continue
		}
		for _, st := range stamps {
			if !st.IsDir() || st.Name() == "latest" {
				continue
			}
			dir := path.Join(t.Name(), st.Name())
			info, err := fs.Stat(fsys, path.Join(dir, FileResults))
			if err != nil {
				continue
			}
			e := runEntry{Test: t.Name(), Stamp: st.Name(), Href: "runs/" + relHref(t.Name(), st.Name()) + "/", Matches: true}
			e.Time = stampTime(st.Name(), info.ModTime())
			e.When = e.Time.UTC().Format("2006-01-02 15:04:05 UTC")
			data, err := fs.ReadFile(fsys, path.Join(dir, FileResults))
			if err == nil {
				var res checker.Result
				res, err = decodeResult(data)
				if err == nil {
					e.Verdict = validityWord(res.Valid)
					e.Class = res.Valid.String()
					e.Anomalies = anomalyCounts(res.Anomalies)
					if res.Stats.DurationNs > 0 {
						e.Duration = seconds(res.Stats.DurationNs)
					}
				}
			}
			if err != nil {
				e.Verdict, e.Class, e.Problem = "?", "unknown", err.Error()
			}
			if data, err := fs.ReadFile(fsys, path.Join(dir, FileSpec)); err == nil {
				if spec, err := ParseSpec(data); err == nil {
					e.Nemesis = strings.Join(spec.Nemesis.Names(), ", ")
					e.Expected = spec.Expected
					e.Matches = spec.Expected == "" || spec.Expected == e.Class
					if spec.Suite != "" {
						e.SuiteHref = "runs/" + relHref(DirSuites, spec.Suite+".html")
					}
				}
			}
			runs = append(runs, e)
		}
	}
	sort.Slice(runs, func(i, j int) bool {
		if !runs[i].Time.Equal(runs[j].Time) {
			return runs[i].Time.After(runs[j].Time)
		}
		return runs[i].Href > runs[j].Href
	})
	if len(runs) > runsListedMax {
		return runs[:runsListedMax], true
	}
	return runs, false
}

// suitesListedMax bounds the suite runs the index links.
const suitesListedMax = 50

// listSuites links the suite runs' index pages (suites/<stamp>.html),
// newest first.
func listSuites(fsys fs.FS) []Link {
	files, err := fs.ReadDir(fsys, DirSuites)
	if err != nil {
		return nil
	}
	var out []Link
	for i := len(files) - 1; i >= 0 && len(out) < suitesListedMax; i-- {
		name := files[i].Name()
		if files[i].Type().IsRegular() && strings.HasSuffix(name, ".html") {
			out = append(out, Link{Name: strings.TrimSuffix(name, ".html"), Href: "runs/" + relHref(DirSuites, name)})
		}
	}
	return out
}

// stampLayouts are the run directory names the harness may use.
var stampLayouts = []string{
	"20060102T150405Z", "20060102T150405.000000000Z", "20060102T150405.000Z",
	"2006-01-02T15-04-05Z", "2006-01-02T15-04-05.000Z", "2006-01-02T150405Z",
	"20060102-150405", "2006-01-02_15-04-05", time.RFC3339, time.RFC3339Nano,
}

// stampTime reads a run directory's name as a time, falling back to the
// modification time of its results.
func stampTime(name string, fallback time.Time) time.Time {
	for _, l := range stampLayouts {
		if t, err := time.Parse(l, name); err == nil {
			return t
		}
	}
	return fallback
}

var indexTemplate = template.Must(template.New("index").Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>faultline store</title><style>{{.CSS}}</style></head>
<body><main>
<h1>faultline runs</h1>
<p>{{len .Runs}} runs: {{index .Counts "valid"}} valid, {{index .Counts "invalid"}} invalid, {{index .Counts "unknown"}} unknown.{{if .Latest}} <a href="runs/latest/">Latest run</a>.{{end}}</p>
<p class="muted">Store {{.Store}} — newest first. <a href="runs/">Browse files</a>.</p>
{{if .Suites}}<p>Suite runs, newest first: {{range $i, $s := .Suites}}{{if $i}} · {{end}}<a href="{{$s.Href}}">{{$s.Name}}</a>{{end}}</p>{{end}}
<table>
<tr><th>test</th><th>time</th><th>nemesis</th><th>duration</th><th>expected</th><th>found</th><th>anomalies</th></tr>
{{range .Runs}}<tr><td><a href="{{.Href}}">{{.Test}}</a></td><td>{{.When}}<br><span class="muted">{{.Stamp}}</span></td><td>{{.Nemesis}}</td><td class="num">{{.Duration}}</td><td>{{if .Expected}}{{.Expected}}{{if .SuiteHref}}<br><a class="muted" href="{{.SuiteHref}}">suite</a>{{end}}{{else}}<span class="muted">—</span>{{end}}</td><td><span class="badge {{.Class}}">{{.Verdict}}</span>{{if not .Matches}} <strong>not as expected</strong>{{end}}</td><td>{{.Anomalies}}{{.Problem}}</td></tr>
{{else}}<tr><td colspan="7">No runs yet: a run is a directory &lt;test&gt;/&lt;time&gt;/ holding results.json.</td></tr>
{{end}}
</table>
{{if .Truncated}}<p class="muted">Only the newest runs are listed.</p>{{end}}
</main></body></html>
`))
