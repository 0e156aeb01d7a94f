package harness

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faultline/faultline/checker"
	"github.com/faultline/faultline/reports"
)

func TestDiskSuiteRunsValidTestsOnTheFaultFilesystem(t *testing.T) {
	base := DefaultTest()
	base.TimeLimit = Duration(10 * time.Minute)
	cases := Suites["disk"](base)
	require.Len(t, cases, 4)
	names := map[string]checker.Validity{}
	for _, c := range cases {
		names[c.Test.Name] = c.Expect
		require.NoError(t, c.Test.Validate(testWorkloads), c.Test.Name)
		assert.LessOrEqual(t, time.Duration(c.Test.TimeLimit), 120*time.Second, c.Test.Name)
		assert.True(t, c.Test.diskFaults(), c.Test.Name)
		assert.Equal(t, "2", c.Test.BrokerConfig["min.insync.replicas"], c.Test.Name)
	}
	assert.Equal(t, map[string]checker.Validity{
		"power-all-default-flush": checker.Invalid, "durable-power": checker.Valid,
		"durable-power-then-leader": checker.Valid, "durable-disk": checker.Valid,
	}, names)
	assert.Equal(t, "1", cases[1].Test.BrokerConfig["log.flush.interval.messages"])
	assert.Empty(t, cases[0].Test.BrokerConfig["log.flush.interval.messages"], "the default flush policy")

	process := cases[3].Test
	process.Runtime = "process"
	assert.ErrorContains(t, process.Validate(testWorkloads), "need --runtime docker")
}

// A 60 s run of a cycled disk case starts each of its faults: the last
// start, 2k-1 intervals in, leaves 10 s for the starts and stops before it
// (a node restarted after disk-error or corrupt takes seconds).
func TestDiskSuiteMeetsEveryFaultInAMinute(t *testing.T) {
	cases := Suites["disk"](DefaultTest())
	cycled := map[string]bool{}
	for _, c := range cases {
		if !c.Test.NemesisCycle {
			continue
		}
		cycled[c.Test.Name] = true
		lastStart := time.Duration(2*len(c.Test.Nemesis)-1) * time.Duration(c.Test.NemesisInterval)
		assert.LessOrEqual(t, lastStart+10*time.Second, time.Duration(c.Test.TimeLimit), c.Test.Name)
	}
	assert.Equal(t, map[string]bool{"durable-power": true, "durable-disk": true}, cycled)
}

func TestSelectCasesByNameAndPrefix(t *testing.T) {
	cases := Suites["gating"](DefaultTest())
	got, err := SelectCases(cases, "durable-none, power*")
	require.NoError(t, err)
	var names []string
	for _, c := range got {
		names = append(names, c.Test.Name)
	}
	require.Equal(t, []string{"durable-none", "power-all-default-flush"}, names)
	all, err := SelectCases(cases, "")
	require.NoError(t, err)
	require.Len(t, all, len(cases))
	_, err = SelectCases(cases, "durable-nne")
	require.ErrorContains(t, err, "matches no test")
}

func TestRunSuiteWritesTheSuitesIndexPage(t *testing.T) {
	base := DefaultTest()
	base.Store = t.TempDir()
	base.Workload = "no-such-workload" // refused before anything runs
	base.Name = "refused"
	var out strings.Builder
	rows, all := RunSuite(context.Background(), []Case{{Test: base, Expect: checker.Valid, Why: "a refused test"}}, testWorkloads, &out)
	require.Len(t, rows, 1)
	assert.False(t, all)
	pages, err := filepath.Glob(filepath.Join(base.Store, reports.DirSuites, "*.html"))
	require.NoError(t, err)
	require.Len(t, pages, 1, "one index page per suite run")
	page, err := os.ReadFile(pages[0])
	require.NoError(t, err)
	assert.Contains(t, string(page), "FAILED: 1 of 1 tests came out other than expected")
	assert.Contains(t, string(page), "<td>valid</td>")
	assert.Contains(t, string(page), "a refused test")
	assert.Contains(t, out.String(), "suite index: "+pages[0])
}

// TestGatingRunsPlantedBugsAndEveryFaultKind: the gate holds the durable
// configuration under pause too, compaction under kills, and planted bugs
// that must come out invalid with their own anomaly classes and carry
// their unsafe switch.
func TestGatingRunsPlantedBugsAndEveryFaultKind(t *testing.T) {
	byName := map[string]Case{}
	for _, c := range Suites["gating"](DefaultTest()) {
		byName[c.Test.Name] = c
	}
	for _, n := range []string{"durable-pause", "compact-kill", "txn-coordinator"} {
		require.Contains(t, byName, n)
		assert.Equal(t, checker.Valid, byName[n].Expect, n)
		assert.Empty(t, byName[n].Test.BrokerConfig["unsafe.enable"], n)
	}
	assert.True(t, byName["txn-coordinator"].Test.Txn)
	require.NotEmpty(t, gatingPlanted)
	for _, n := range append(slices.Clone(gatingPlanted), "planted-read-committed-past-lso", "planted-cleaner-drops-latest") {
		require.Contains(t, byName, n)
		c := byName[n]
		assert.Equal(t, checker.Invalid, c.Expect, n)
		assert.NotEmpty(t, c.ExpectAnomalies, n)
		assert.Equal(t, "true", c.Test.BrokerConfig["unsafe.enable"], n)
	}
}
