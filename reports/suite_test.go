package reports

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faultline/faultline/harness/testspec"
	"github.com/faultline/faultline/nemesis"
)

func TestSuiteIndexListsRunsWithBothVerdictsAndTheStoreLinksIt(t *testing.T) {
	store := t.TempDir()
	const suite = "20261202T040000.000Z"
	lossyDir := writeRun(t, store, "acks1-leader-loss", "20261202T040100.000Z", invalidInput(), false)
	validDir := writeRun(t, store, "durable-kill", "20261202T040500.000Z", validInput(), false)
	// The harness's test.json for a suite run records the expected verdict
	// and the suite run.
	for dir, expected := range map[string]string{lossyDir: "invalid", validDir: "invalid"} {
		spec := testspec.Spec{Name: filepath.Base(filepath.Dir(dir)), Workload: "queue", Nodes: 3, Nemesis: nemesis.Spec{{Kind: nemesis.KindKill}}, Expected: expected, Suite: suite}
		b, err := json.Marshal(spec)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, FileSpec), b, 0o644))
	}
	require.NoError(t, WriteSuiteIndex(store, suite, []SuiteRun{
		{Name: "acks1-leader-loss", Expected: "invalid", Found: "invalid", OK: true, Dir: lossyDir, Took: 95 * time.Second, Why: "acks=1 loses writes"},
		{Name: "durable-kill", Expected: "invalid", Found: "valid", OK: false, Dir: validDir, Took: 80 * time.Second},
	}))
	page, err := os.ReadFile(filepath.Join(store, SuiteIndexFile(suite)))
	require.NoError(t, err)
	parseLoose(t, string(page))
	contains(t, string(page), "FAILED: 1 of 2 tests came out other than expected")
	contains(t, string(page), `<a href="../acks1-leader-loss/20261202T040100.000Z/report.html">acks1-leader-loss</a></td><td>invalid</td><td><span class="badge invalid">invalid</span></td><td>ok</td><td class="num">1m35s</td><td>acks=1 loses writes</td>`)

	index := serve(t, Handler(store), "/").Body.String()
	contains(t, index, `<a href="runs/suites/20261202T040000.000Z.html">20261202T040000.000Z</a>`)
	row := index[strings.Index(index, `>durable-kill</a>`):]
	row = row[:strings.Index(row, "</tr>")]
	assert.Contains(t, row, `invalid<br><a class="muted" href="runs/suites/20261202T040000.000Z.html">suite</a>`)
	assert.Contains(t, row, `<span class="badge valid">`)
	assert.Contains(t, row, "not as expected")
	suitePage := serve(t, Handler(store), "/runs/suites/20261202T040000.000Z.html")
	assert.Equal(t, 200, suitePage.Code)
}
