package harness

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"github.com/faultline/faultline/checker"
	"github.com/faultline/faultline/reports"
)

// writeResults writes results.json, porcupine's visualizations, the report
// and junit.xml into the run's directory and prints the summary.
func (r *run) writeResults(h checker.History, res checker.Result) error {
	b, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(r.dir, "results.json"), b, 0o644); err != nil {
		return err
	}
	keys := make([]int, 0, len(res.Visualizations))
	for k := range res.Visualizations {
		keys = append(keys, k)
	}
	sort.Ints(keys)
	for _, k := range keys {
		if err := os.WriteFile(filepath.Join(r.dir, reports.LinearVisualizationFile(k)), reports.PorcupinePage(res.Visualizations[k]), 0o644); err != nil {
			return err
		}
	}
	spec := reports.SpecOf(r.t.Spec, nil)
	in := reports.Input{Spec: spec, Result: res, History: h, Links: reports.RunLinks(r.dir, spec), Notes: r.replayNotes}
	in.Links.JUnit = reports.FileJUnit
	if err := reports.WriteRun(r.dir, in); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	fmt.Fprintln(r.out, reports.Summary(in))
	fmt.Fprintf(r.out, "report: %s\n", filepath.Join(r.dir, "report.html"))
	return nil
}
