package reports

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/faultline/faultline/checker"
	"github.com/faultline/faultline/nemesis"
)

// Names of the files of one run directory (DESIGN.md's store layout).
const (
	FileHistory = "history.jsonl"
	FileResults = "results.json"
	FileReport  = "report.html"
	FileJUnit   = "junit.xml"
	FileSpec    = "test.json"
	// FileSchedule holds the fault events the run executed
	// ([]nemesis.Event); a replay's steps note where its live cluster
	// disagreed with the recording, and the report shows those notes.
	FileSchedule = "schedule.json"
	DirNodes     = "nodes"
	// DirPorcupine holds porcupine's visualizations, one HTML file per
	// failing partition (e.g. porcupine/key-2.html); files named
	// linear-<key>.html (what the checker documents for
	// Result.Visualizations) or porcupine*.html at the top of the run
	// directory are found too.
	DirPorcupine = "porcupine"
)

// LinearVisualizationFile is the name under which the harness stores
// porcupine's visualization of one key (checker.Result.Visualizations).
func LinearVisualizationFile(key int) string { return fmt.Sprintf("linear-%d.html", key) }

// RenderDir re-renders report.html, junit.xml and timeline.html of a stored run from its
// results.json, history.jsonl and test.json (`faultline report DIR`). Only
// results.json is required; problems with the other files are stated on the
// page. Each file is written to a temporary name and renamed, so a reader
// never sees half a report.
func RenderDir(dir string) error {
	in, err := LoadDir(dir)
	if err != nil {
		return err
	}
	return WriteRun(dir, in)
}

// WriteRun writes report.html, junit.xml and (with a history) timeline.html
// of the run in dir from in, the
// values in memory (the harness calls it at the end of a run; RenderDir
// after reading them back). Each file is written to a temporary name and
// renamed.
func WriteRun(dir string, in Input) error {
	if len(in.History) > 0 {
		in.Links.Timeline = FileTimeline
		if err := writeFileAtomic(dir, FileTimeline, guarded(func(w io.Writer) error { return WriteTimeline(w, in) })); err != nil {
			return err
		}
	}
	if err := writeFileAtomic(dir, FileReport, guarded(func(w io.Writer) error { return WriteHTML(w, in) })); err != nil {
		return err
	}
	return writeFileAtomic(dir, FileJUnit, guarded(func(w io.Writer) error { return WriteJUnit(w, in) }))
}

// guarded turns a panic of a page builder on a history it did not foresee
// into an error: the run's verdict and results.json stand, and a suite
// goes on to its next test.
func guarded(write func(io.Writer) error) func(io.Writer) error {
	return func(w io.Writer) (err error) {
		defer func() {
			if p := recover(); p != nil {
				err = fmt.Errorf("building the page failed on this history (a report bug): %v", p)
			}
		}()
		return write(w)
	}
}

// LoadDir reads a stored run directory into an Input, with links relative
// to the directory.
func LoadDir(dir string) (Input, error) {
	in, err := loadRun(os.DirFS(dir), ".", runName(dir))
	if err != nil {
		return Input{}, fmt.Errorf("load run %s: %w", dir, err)
	}
	return in, nil
}

// loadRun reads the run at dir inside fsys; name names the run when its
// spec does not.
func loadRun(fsys fs.FS, dir, name string) (Input, error) {
	var in Input
	data, err := fs.ReadFile(fsys, path.Join(dir, FileResults))
	if err != nil {
		return Input{}, fmt.Errorf("read %s: %w", FileResults, err)
	}
	in.Result, err = decodeResult(data)
	if err != nil {
		return Input{}, fmt.Errorf("parse %s: %w", FileResults, err)
	}
	in.Links.Results = FileResults
	if data, err := fs.ReadFile(fsys, path.Join(dir, FileSpec)); err == nil {
		spec, perr := ParseSpec(data)
		if perr != nil {
			in.Notes = append(in.Notes, fmt.Sprintf("%s could not be parsed (%v); the test spec is not shown.", FileSpec, perr))
		} else {
			in.Spec = spec
		}
		in.Links.Spec = FileSpec
	} else {
		in.Notes = append(in.Notes, FileSpec+" is missing: the test spec is not shown.")
	}
	if in.Spec.Name == "" {
		in.Spec.Name = name
	}
	if data, err := fs.ReadFile(fsys, path.Join(dir, FileSchedule)); err == nil {
		var events []nemesis.Event
		if json.Unmarshal(data, &events) == nil {
			in.Notes = append(in.Notes, nemesis.ReplayNotes(events)...)
		}
	}
	h, note := readHistoryFS(fsys, path.Join(dir, FileHistory))
	in.History = h
	if note != "" {
		in.Notes = append(in.Notes, note)
	}
	if h != nil {
		in.Links.History = FileHistory
	}
	in.Links = runLinks(fsys, dir, in.Spec, in.Links)
	return in, nil
}

// RunLinks lists the files of the run in dir that the report links to
// (results.json, test.json, history.jsonl and junit.xml when present, node
// logs, porcupine's pages), from the directory's listing alone.
func RunLinks(dir string, spec Spec) Links {
	fsys := os.DirFS(dir)
	var l Links
	for name, field := range map[string]*string{FileResults: &l.Results, FileSpec: &l.Spec, FileHistory: &l.History} {
		if _, err := fs.Stat(fsys, name); err == nil {
			*field = name
		}
	}
	return runLinks(fsys, ".", spec, l)
}

func runLinks(fsys fs.FS, dir string, spec Spec, l Links) Links {
	if _, err := fs.Stat(fsys, path.Join(dir, FileJUnit)); err == nil {
		l.JUnit = FileJUnit
	}
	if _, err := fs.Stat(fsys, path.Join(dir, FileTimeline)); err == nil {
		l.Timeline = FileTimeline
	}
	l.NodeLogs = nodeLogs(fsys, dir)
	l.Porcupine = porcupineFiles(fsys, dir, spec)
	return l
}

// runName names a run without a spec after its directory: "<test>/<time>".
func runName(dir string) string {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return filepath.Base(dir)
	}
	return filepath.Base(filepath.Dir(abs)) + "/" + filepath.Base(abs)
}

// decodeResult parses results.json.
func decodeResult(data []byte) (checker.Result, error) {
	var r checker.Result
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&r); err != nil {
		return checker.Result{}, err
	}
	return r, nil
}

// readHistoryFS reads history.jsonl through the checker's codec. A missing
// or unreadable history is not an error for the report, which then draws
// what results.json holds; the returned note says what happened.
func readHistoryFS(fsys fs.FS, name string) (checker.History, string) {
	f, err := fsys.Open(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, FileHistory + " is missing: plots are drawn from results.json alone and operations are not listed."
	}
	if err != nil {
		return nil, fmt.Sprintf("%s could not be opened (%v): plots are drawn from results.json alone.", FileHistory, err)
	}
	defer f.Close()
	h, err := checker.NewReader(f).ReadAll()
	if err != nil {
		return nil, fmt.Sprintf("%s could not be read (%v): plots are drawn from results.json alone.", FileHistory, err)
	}
	return h, ""
}

// nodeLogs links every regular file under nodes/<node>/ (one level).
func nodeLogs(fsys fs.FS, dir string) []Link {
	nodes, err := fs.ReadDir(fsys, path.Join(dir, DirNodes))
	if err != nil {
		return nil
	}
	var out []Link
	for _, n := range nodes {
		if !n.IsDir() {
			continue
		}
		files, err := fs.ReadDir(fsys, path.Join(dir, DirNodes, n.Name()))
		if err != nil {
			continue
		}
		for _, f := range files {
			if f.Type().IsRegular() {
				out = append(out, Link{
					Name: n.Name() + " " + f.Name(),
					Href: relHref(DirNodes, n.Name(), f.Name()),
				})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return naturalLess(out[i].Name, out[j].Name) })
	return out
}

// porcupineFiles links porcupine's visualizations.
func porcupineFiles(fsys fs.FS, dir string, spec Spec) []Link {
	var out []Link
	if files, err := fs.ReadDir(fsys, path.Join(dir, DirPorcupine)); err == nil {
		for _, f := range files {
			if f.Type().IsRegular() && strings.HasSuffix(f.Name(), ".html") {
				out = append(out, Link{Name: strings.TrimSuffix(f.Name(), ".html"), Href: relHref(DirPorcupine, f.Name())})
			}
		}
	}
	if files, err := fs.ReadDir(fsys, dir); err == nil {
		for _, f := range files {
			name := f.Name()
			if !f.Type().IsRegular() || !strings.HasSuffix(name, ".html") {
				continue
			}
			var key int
			if _, err := fmt.Sscanf(name, "linear-%d.html", &key); err == nil && name == LinearVisualizationFile(key) {
				out = append(out, Link{Name: spec.keyLabel(key), Href: relHref(name)})
			} else if strings.HasPrefix(name, "porcupine") {
				out = append(out, Link{Name: strings.TrimSuffix(name, ".html"), Href: relHref(name)})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return naturalLess(out[i].Name, out[j].Name) })
	return out
}

func relHref(parts ...string) string {
	esc := make([]string, len(parts))
	for i, p := range parts {
		esc[i] = url.PathEscape(p)
	}
	return strings.Join(esc, "/")
}

// naturalLess orders "n2" before "n10".
func naturalLess(a, b string) bool {
	for a != "" && b != "" {
		da, db := leadingDigits(a), leadingDigits(b)
		if da != "" && db != "" {
			if len(da) != len(db) {
				return len(da) < len(db)
			}
			if da != db {
				return da < db
			}
			a, b = a[len(da):], b[len(db):]
			continue
		}
		if a[0] != b[0] {
			return a[0] < b[0]
		}
		a, b = a[1:], b[1:]
	}
	return len(a) < len(b)
}

func leadingDigits(s string) string {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	return s[:i]
}

// writeFileAtomic writes dir/name through a temporary file and a rename.
func writeFileAtomic(dir, name string, write func(io.Writer) error) error {
	tmp, err := os.CreateTemp(dir, "."+name+".*.tmp")
	if err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	defer os.Remove(tmp.Name())
	if err := write(tmp); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", filepath.Join(dir, name), err)
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", filepath.Join(dir, name), err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", filepath.Join(dir, name), err)
	}
	if err := os.Rename(tmp.Name(), filepath.Join(dir, name)); err != nil {
		return fmt.Errorf("write %s: %w", filepath.Join(dir, name), err)
	}
	return nil
}
