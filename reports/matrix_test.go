package reports

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faultline/faultline/checker"
)

func sampleMatrix() MatrixIndex {
	valid, invalid := checker.Valid.String(), checker.Invalid.String()
	return MatrixIndex{Title: "matrix <test>", Generated: time.Date(2026, 12, 2, 5, 0, 0, 0, time.UTC), Cells: []MatrixCell{
		{Name: "m-guarantee-kill", Config: "acksall.isr2.clean.flushdef", Fault: "kill", Expect: "valid", Why: "promised",
			Runs: []MatrixRun{{Seed: 1, Found: valid, Link: "../../m-guarantee-kill/t1/report.html"}, {Seed: 2, Found: valid}}},
		{Name: "m-guarantee-partition", Config: "acksall.isr2.clean.flushdef", Fault: "partition", Expect: "valid",
			Runs: []MatrixRun{{Seed: 1, Found: invalid, Anomalies: []string{"lost-write"}, FirstAnomaly: 7 * time.Second, HasFirstAnomaly: true}}},
		{Name: "m-planted-x", Config: "guarantee", Fault: "own: kill", Bug: "unsafe.x", Expect: "invalid",
			Runs: []MatrixRun{
				{Seed: 1, Found: invalid, Anomalies: []string{"lost-write"}, FirstAnomaly: 12 * time.Second, HasFirstAnomaly: true},
				{Seed: 2, Found: valid},
			}},
		{Name: "m-planted-x-x-pause", Config: "guarantee", Fault: "pause", Bug: "unsafe.x", Expect: "either",
			Runs: []MatrixRun{{Seed: 1, Found: invalid, FirstAnomaly: 4 * time.Second, HasFirstAnomaly: true}}},
		{Name: "m-planted-y", Config: "guarantee", Fault: "own: partition", Bug: "unsafe.y", Expect: "invalid",
			Runs: []MatrixRun{{Seed: 1, Found: "error", Error: "setup: no docker"}}},
		{Name: "m-not-run", Expect: "either"},
	}}
}

func TestMatrixCountsAWrongClassAsMissed(t *testing.T) {
	invalid := checker.Invalid.String()
	right := MatrixRun{Seed: 1, Found: invalid, Anomalies: []string{"lost-write"}, FirstAnomaly: 9 * time.Second, HasFirstAnomaly: true}
	wrong := MatrixRun{Seed: 2, Found: invalid, Anomalies: []string{"duplicate"}, Judged: "invalid (duplicate; expected lost-write or unseen)",
		WrongClass: true, FirstAnomaly: time.Second, HasFirstAnomaly: true}
	named := MatrixCell{Name: "m-planted-z", Fault: "own: kill", Bug: "unsafe.z", Expect: "invalid",
		ExpectAnomalies: []string{"lost-write", "unseen"}, Runs: []MatrixRun{right, wrong}}
	assert.Equal(t, 2, named.Invalid())
	assert.Equal(t, 1, named.Detected(), "only the right class counts")
	assert.Equal(t, 1, named.WrongClass())
	assert.Equal(t, "MISSED (wrong class)", named.Status())
	allWrong := named
	allWrong.Runs = []MatrixRun{wrong}
	assert.Equal(t, "MISSED (wrong class)", allWrong.Status())
	missed := named
	missed.Runs = []MatrixRun{{Seed: 3, Found: checker.Valid.String()}}
	assert.Equal(t, "MISSED", missed.Status(), "valid runs are a plain miss")
	good := named
	good.Runs = []MatrixRun{right}
	assert.Equal(t, "ok", good.Status())
	cross := MatrixCell{Name: "m-planted-z-x-pause", Fault: "pause", Bug: "unsafe.z", Expect: "either",
		ExpectAnomalies: named.ExpectAnomalies, Runs: []MatrixRun{wrong}}
	promised := MatrixCell{Name: "m-valid", Expect: "valid", Runs: []MatrixRun{wrong}}
	assert.Equal(t, "FALSE ALARM", promised.Status(), "any invalid run breaks a promise, whatever its class")

	m := MatrixIndex{Title: "wrong class", Cells: []MatrixCell{named, cross}}
	s := m.Summarize()
	require.Len(t, s.Bugs, 1)
	assert.Equal(t, BugSummary{Bug: "unsafe.z", Named: "m-planted-z", Detected: 1, Runs: 2, WrongClass: 1,
		FirstMin: 9 * time.Second, FirstMedian: 9 * time.Second, HasFirst: true, FoundBy: []string{"own: kill"}}, s.Bugs[0],
		"the rate, the first anomaly and the faults that found it count right-class detections only")
	var buf bytes.Buffer
	require.NoError(t, WriteMatrixIndex(&buf, m))
	page := buf.String()
	for _, want := range []string{
		"invalid (lost-write | unseen)", "1: invalid: lost-write", "2: invalid: duplicate (wrong class)",
		`title="invalid (duplicate; expected lost-write or unseen)"`, "1/2, 1 wrong class", "MISSED (wrong class)",
		"1/2 (50%); 1 invalid for the wrong class",
	} {
		assert.Contains(t, page, want)
	}
}

func TestMatrixStatusAndSummary(t *testing.T) {
	m := sampleMatrix()
	var got []string
	for _, c := range m.Cells {
		got = append(got, c.Status())
	}
	assert.Equal(t, []string{"ok", "FALSE ALARM", "MISSED", "ok", "MISSED", "not run"}, got)
	s := m.Summarize()
	assert.Equal(t, MatrixSummary{Cells: 6, CellsOK: 3, CellsFailed: 3, Runs: 7, Bugs: []BugSummary{
		{Bug: "unsafe.x", Named: "m-planted-x", Detected: 1, Runs: 2, FirstMin: 4 * time.Second, FirstMedian: 12 * time.Second, HasFirst: true, FoundBy: []string{"own: kill", "pause"}},
		{Bug: "unsafe.y", Named: "m-planted-y", Runs: 1},
	}}, s)
}

func TestMatrixIndexRendersExpectedAgainstFoundWithLinks(t *testing.T) {
	var buf bytes.Buffer
	require.NoError(t, WriteMatrixIndex(&buf, sampleMatrix()))
	page := buf.String()
	for _, want := range []string{
		"matrix &lt;test&gt;", // escaped
		"6 cells, 7 runs", "3 as expected", "3 not",
		`href="../../m-guarantee-kill/t1/report.html"`,
		"FALSE ALARM", "MISSED", "not run",
		"unsafe.x", "1/2 (50%)", "4s (median 12s)", "own: kill, pause",
		`title="setup: no docker"`,
	} {
		assert.Contains(t, page, want)
	}
	assert.NotContains(t, page, "<script", "the index is a plain page")

	dir := t.TempDir()
	require.NoError(t, WriteMatrixDir(dir, sampleMatrix()))
	for _, f := range []string{FileMatrixIndex, FileMatrixJSON} {
		b, err := os.ReadFile(filepath.Join(dir, f))
		require.NoError(t, err)
		assert.True(t, strings.Contains(string(b), "m-planted-x"), f)
	}
}

func TestFirstAnomalyIsTheEarliestOpAnAnomalyNames(t *testing.T) {
	w, r := int64(3), int64(4)
	h := checker.History{
		{Index: 0, Time: int64(5 * time.Second), Process: checker.NemesisProcess},
		{Index: 1, Time: int64(6 * time.Second), Process: 0, Type: checker.Invoke, F: "send"},
		{Index: 2, Time: int64(7 * time.Second), Process: 0, Type: checker.OK, F: "send"},
		{Index: 3, Time: int64(20 * time.Second), Process: 1, Type: checker.OK, F: "send"},
		{Index: 4, Time: int64(30 * time.Second), Process: 2, Type: checker.OK, F: "poll"},
	}
	res := checker.Result{Anomalies: map[string]checker.AnomalyReport{
		"lost-write": {Count: 1, Examples: []checker.Example{{Writer: &w, Reader: &r}}},
		"poll-skip":  {Count: 1, Allowed: true, Examples: []checker.Example{{Ops: []int64{2}}}},
	}}
	d, ok := FirstAnomaly(res, h)
	require.True(t, ok)
	assert.Equal(t, 14*time.Second, d, "op 3 at 20 s, the workload's first op at 6 s; the allowed poll-skip does not count")
	_, ok = FirstAnomaly(checker.Result{}, h)
	assert.False(t, ok)
}
