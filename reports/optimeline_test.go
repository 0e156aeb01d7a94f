package reports

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func renderTimeline(t testing.TB, in Input) string {
	t.Helper()
	var buf bytes.Buffer
	require.NoError(t, WriteTimeline(&buf, in))
	return buf.String()
}

var barTitleRE = regexp.MustCompile(`<rect [^>]*fill="([^"]+)"[^>]*><title>([^<]*)</title></rect>`)

func TestTimelinePageHasALanePerProcessAndABarPerOperation(t *testing.T) {
	in := leaderLossInput(t)
	page := renderTimeline(t, in)
	parseLoose(t, page)
	require.Equal(t, 1, checkSVGs(t, page))
	contains(t, page, `<a href="report.html">`)
	contains(t, page, "All 12 operations are shown.")
	for _, lane := range []string{"nemesis", "0", "1", "5"} {
		contains(t, page, `text-anchor="end">`+lane+`</text>`)
	}
	bars := map[string]string{}
	for _, m := range barTitleRE.FindAllStringSubmatch(page, -1) {
		bars[unescape(m[2])] = m[1]
	}
	assert.Len(t, bars, 12)
	assert.Equal(t, colorOK, bars["op 15, process 0 at 10.9 s: send 202 to key 2 → offset 1 — ok after 100.0 ms"])
	assert.Equal(t, colorFault, bars["op 6, nemesis at 4.0 s: start-kill n1 — info after 1.0 ms"])
	for _, legend := range []string{"ok (8)", "fail (0)", "info (0)", "nemesis operation (4)"} {
		contains(t, page, ">"+legend+"</text></g>")
	}
}

func TestTimelinePageOfALargeHistoryIsAWindowAndSaysSo(t *testing.T) {
	in := gatingSizedInput(t)
	page := renderTimeline(t, in)
	t.Logf("timeline.html: %d bytes for %d history lines", len(page), len(in.History))
	assert.Regexp(t, `Showing 3000 of \d+ operations: those invoked between [0-9.]+ s and [0-9.]+ s, around the first operation an anomaly names`, page)
	assert.LessOrEqual(t, len(barTitleRE.FindAllString(page, -1)), opsTimelineBarsMax)
	assert.Less(t, len(page), 1_000_000)
}

func TestWriteRunWritesTheTimelineAndTheReportLinksIt(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, WriteRun(dir, leaderLossInput(t)))
	tl, err := os.ReadFile(filepath.Join(dir, FileTimeline))
	require.NoError(t, err)
	assert.True(t, strings.Contains(string(tl), "operations per process"))
	rep, err := os.ReadFile(filepath.Join(dir, FileReport))
	require.NoError(t, err)
	contains(t, string(rep), `<a href="timeline.html">the operations timeline</a>`)
}
