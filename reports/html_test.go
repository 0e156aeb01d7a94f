package reports

import (
	"bytes"
	"encoding/xml"
	"html"
	"io"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faultline/faultline/checker"
)

// contains asserts that page holds want, without dumping the page.
func contains(t *testing.T, page, want string) {
	t.Helper()
	assert.True(t, strings.Contains(page, want), "page lacks %q", want)
}

func lacks(t *testing.T, page, unwanted string) {
	t.Helper()
	assert.False(t, strings.Contains(page, unwanted), "page holds %q", unwanted)
}

func render(t *testing.T, in Input) string {
	t.Helper()
	var buf bytes.Buffer
	require.NoError(t, WriteHTML(&buf, in))
	return buf.String()
}

// parseLoose tokenizes the whole page with encoding/xml in HTML mode and
// returns the ids of its elements; it fails the test on a tokenizing error.
func parseLoose(t *testing.T, page string) map[string]bool {
	t.Helper()
	dec := xml.NewDecoder(strings.NewReader(page))
	dec.Strict = false
	dec.AutoClose = xml.HTMLAutoClose
	dec.Entity = xml.HTMLEntity
	ids := map[string]bool{}
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return ids
		}
		require.NoError(t, err)
		if se, ok := tok.(xml.StartElement); ok {
			for _, a := range se.Attr {
				if a.Name.Local == "id" {
					ids[a.Value] = true
				}
			}
		}
	}
}

var svgRE = regexp.MustCompile(`(?s)<svg .*?</svg>`)

// checkSVGs parses every SVG of the page strictly as XML and returns how
// many there are.
func checkSVGs(t *testing.T, page string) int {
	t.Helper()
	svgs := svgRE.FindAllString(page, -1)
	for _, s := range svgs {
		dec := xml.NewDecoder(strings.NewReader(s))
		depth := 0
		for {
			tok, err := dec.Token()
			if err == io.EOF {
				break
			}
			require.NoError(t, err, "SVG is not well-formed XML: %.300s", s)
			switch tok.(type) {
			case xml.StartElement:
				depth++
			case xml.EndElement:
				depth--
			}
		}
		assert.Zero(t, depth, "SVG elements are balanced")
		assert.Regexp(t, `<text class="x-label"[^>]*>[^<]+</text>`, s, "every plot labels its x axis")
		assert.Regexp(t, `<text class="y-label"[^>]*>[^<]+</text>`, s, "every plot labels its y axis")
		assert.Contains(t, s, `<g class="legend"`, "every plot has a legend")
	}
	return len(svgs)
}

func TestWriteHTMLInvalidStatesVerdictAndAnomalies(t *testing.T) {
	page := render(t, invalidInput())
	want := "INVALID: 3 acknowledged writes were lost on key 2 (t0-2) after the nemesis killed n1 at 41.2 s (lost-write; acknowledged between 40.3 s and 40.6 s)."
	contains(t, page, html.EscapeString(want))
	contains(t, page, html.EscapeString("1 value was written at two offsets on key 2 (t0-2) after the nemesis killed n1 at 41.2 s (duplicate; first seen at 50.0 s)."))
	ids := parseLoose(t, page)
	for _, id := range []string{"verdict", "anomaly-lost-write", "anomaly-duplicate", "plots", "offsets", "porcupine", "spec", "reference"} {
		assert.True(t, ids[id], "section %s present", id)
	}
	contains(t, page, `class="verdict invalid"`)
	contains(t, page, html.EscapeString(kindOf("lost-write").Definition))
	contains(t, page, "value 102 acknowledged at offset 2 of key 2 was never read")
	// The lost writes' operations are listed: their invoke and completion.
	for _, frag := range []string{"send 102 to key 2 → offset 2", "send 104 to key 2 → offset 4"} {
		contains(t, page, html.EscapeString(frag))
	}
	contains(t, page, `<td class="value">send 103 to key 2</td>`)
	contains(t, page, `<tr class="nemesis"><td class="num">13</td><td class="num">41.2 s</td>`)
	contains(t, page, `src="porcupine/key-2.html"`)
	contains(t, page, "3 lost</span>")
	contains(t, page, "named by the checker (2)")
	contains(t, page, "<title>duplicate: value 105 at offsets 5 and 6</title>")
	contains(t, page, ">lost (3)</text></g>")
	assert.Equal(t, 3, strings.Count(page, "not in the final reads (lost)"), "one cross per lost value")
	assert.GreaterOrEqual(t, checkSVGs(t, page), 4, "latency per f, throughput, offsets")
	for _, external := range []string{`src="http`, `href="http`, `src="//`, `href="//`, "@import", "url(http"} {
		lacks(t, page, external)
	}
}

func TestWriteHTMLValid(t *testing.T) {
	page := render(t, validInput())
	contains(t, page, html.EscapeString("VALID: no anomalies in 18 operations (6 sends, 1 poll over 1 key) under kill."))
	contains(t, page, `class="verdict valid"`)
	contains(t, page, "No anomaly was found.")
	contains(t, page, `href="nodes/n1/broker.log"`)
	ids := parseLoose(t, page)
	assert.False(t, ids["porcupine"], "no porcupine section without files")
	assert.GreaterOrEqual(t, checkSVGs(t, page), 3)
	// Derived fault window from kill..start is shaded.
	contains(t, page, "nemesis killed n1 10.0 s–20.0 s")
}

func TestWriteHTMLUnknown(t *testing.T) {
	page := render(t, unknownInput())
	contains(t, page, html.EscapeString("UNKNOWN: the linearizable checker could not decide: porcupine timed out after 30s on key 2."))
	contains(t, page, `class="verdict unknown"`)
	parseLoose(t, page)
	checkSVGs(t, page)
}

func TestWriteHTMLAllowedAnomalyInSubscribeMode(t *testing.T) {
	in := validInput()
	in.Result.Mode = checker.ModeSubscribe
	in.Result.Anomalies = map[string]checker.AnomalyReport{"poll-skip": {Count: 2, Allowed: true, Examples: []checker.Example{{Key: 2}}}}
	page := render(t, in)
	contains(t, page, html.EscapeString("2 times a consumer skipped offsets between polls on key 2 (t0-2) (poll-skip, allowed in this mode)."))
	contains(t, page, "allowed in this mode</span>")
}

func TestWriteHTMLWithoutHistoryUsesPerf(t *testing.T) {
	in := invalidInput()
	in.History = nil
	in.Result.Perf.ThroughputBucketNs = 1e9
	in.Result.Perf.Throughput = map[string][]float64{"send:ok": {3, 4, 0, 2}}
	page := render(t, in)
	contains(t, page, "INVALID: 3 acknowledged writes were lost on key 2 (t0-2) (lost-write).")
	assert.Equal(t, 1, checkSVGs(t, page), "only the throughput plot")
}

func TestWriteHTMLEscapesData(t *testing.T) {
	in := invalidInput()
	in.Spec.Name = `<script>alert(1)</script>`
	in.Result.Perf.Faults[0].Label = `<b>"kill" & run</b>`
	page := render(t, in)
	lacks(t, page, `<script>alert(1)`)
	lacks(t, page, `<b>"kill"`)
	checkSVGs(t, page)
}

func TestDownsampleLatencyKeepsEnvelopeAndIsDeterministic(t *testing.T) {
	var pts []latencyPoint
	for i := range 10000 {
		pts = append(pts, latencyPoint{startNs: int64(i) * 1e6, latencyNs: int64(1e6 + (i*7919)%1000*1e3), f: "send", typ: checker.OK})
	}
	pts[5000].latencyNs = 9e9 // one outlier
	got := downsampleLatency(pts, 1000)
	assert.LessOrEqual(t, len(got), 1000)
	assert.Equal(t, got, downsampleLatency(pts, 1000))
	found := false
	for _, p := range got {
		found = found || p.latencyNs == 9e9
	}
	assert.True(t, found, "the outlier survives")
	assert.Len(t, downsampleLatency(pts[:10], 1000), 10)
}

func TestLargeHistoryIsDownsampledAndSaysSo(t *testing.T) {
	in := validInput()
	in.History = syntheticHistory(40000, 4)
	page := render(t, in)
	contains(t, page, "Downsampled:")
	contains(t, page, "points drawn")
	// Every fail is drawn: the title of the fail series states their count
	// and no downsampling note names it.
	lacks(t, page, "send fail latency:")
	checkSVGs(t, page)
	assert.Less(t, len(page), 4<<20, "page stays small")
}

func TestAnomalySentenceShapes(t *testing.T) {
	in := invalidInput()
	a := analyze(in.History)
	rep := checker.AnomalyReport{Count: 9, Examples: []checker.Example{{Key: 1}, {Key: 4}, {Key: 7}, {Key: 9}}}
	st := anomalySentence(in, a, "inconsistent-offsets", rep)
	assert.Equal(t, "9 offsets held two or more different values on 4 or more keys (key 1 (t0-1), key 4 (t1-1), …)", st.sentence)
	assert.Equal(t, int64(-1), st.nemesisIndex, "no operation named, no time, no fault")
	st = anomalySentence(in, a, "brand-new", checker.AnomalyReport{Count: 1})
	assert.Equal(t, "1 brand-new anomaly", st.sentence)
}

func TestDescribeNemesis(t *testing.T) {
	op := func(f, raw string) checker.Op {
		return checker.Op{F: f, Raw: []byte(raw), Process: checker.NemesisProcess, Type: checker.Info}
	}
	for _, c := range []struct {
		op   checker.Op
		want string
		heal bool
	}{
		{op("start-kill", `["n1"]`), "killed n1", false},
		{op("stop-kill", `["n1","n2"]`), "restarted n1, n2", true},
		{op("start-pause", `"n3"`), "paused n3", false},
		{op("stop-pause", `"n3"`), "resumed n3", true},
		{op("start-partition", `{"n1":["n2"]}`), `partitioned the network ({"n1":["n2"]})`, false},
		{op("stop-partition", ``), "healed the network partition", true},
		{op("start-controller-kill", `null`), "killed", false},
		{op("stop-clock", `["n2"]`), "stopped clock on n2", true},
		{op("bump-clock", `5`), `ran "bump-clock" on 5`, false},
		{op("start-kill", `{"mode":"leaders","nodes":["n1","n3"]}`), "killed n1, n3 (leaders)", false},
		{op("stop-kill", `{"mode":"","nodes":["n1"]}`), "restarted n1", true},
		{op("start-power", `{"mode":"all","nodes":["n1","n2"],"did":{"n1":"power seed=1","n2":"power torn seed=2"}}`), "cut the power of n1, n2 (all)", false},
		{op("stop-power", `{"nodes":["n1"]}`), "restored the power of n1", true},
		{op("start-disk-error", `{"mode":"one","nodes":["n2"]}`), "failed writes and fsyncs with EIO on n2 (one)", false},
		{op("start-disk-full", `{"nodes":["n2"]}`), "filled the disk of n2", false},
		{op("start-disk-slow", `{"nodes":["n2"]}`), "slowed the disk of n2", false},
		{op("stop-disk-slow", `{"nodes":["n2"]}`), "ended the disk fault on n2", true},
		{op("start-corrupt", `{"nodes":["n3"]}`), "killed and corrupted the data of n3", false},
		{op("stop-corrupt", `{"nodes":["n3"]}`), "restarted n3", true},
		{op("start-corrupt", `{"mode":"unreplicated-tail","leader":"n2","partitions":["t0-0","t1-3"],"grudge":{"n2":["n3","n4","n5"]},"did":"[{\"partition\":\"t0-0\",\"base-offset\":41},{\"partition\":\"t1-3\",\"skipped\":\"no batch\"}]"}`),
			"cut leader n2 off from its followers and flipped a bit in a batch none of them had: t0-0 at offset 41", false},
		{op("start-corrupt", `{"mode":"unreplicated-tail","leader":"n2","partitions":["t0-0"],"did":"[{\"partition\":\"t0-0\",\"skipped\":\"no batch\"}]"}`),
			"cut leader n2 off from its followers; no batch of t0-0 was theirs to miss, so nothing was flipped", false},
		{op("stop-corrupt", `{"nodes":null}`), "ended the corruption fault", true},
		{op("start-partition", `{"mode":"deposed-leader-returns","leader":"n3","grudge":{"n1":["n3"],"n2":["n3"],"n3":["n1","n2"]},"killed":["n1","n2"]}`),
			"partitioned the network (n3 cut off from n1, n2; then killed n1, n2)", false},
	} {
		assert.Equal(t, c.want, describeNemesis(c.op), c.op.F)
		assert.Equal(t, c.heal, isHeal(c.op.F), c.op.F)
	}
}

func TestCheckerMarksAndModeDecideAllowed(t *testing.T) {
	in := validInput()
	in.Result.Mode = "subscribe"
	in.Result.Anomalies = map[string]checker.AnomalyReport{
		"nonmonotonic-poll": {Count: 1, Allowed: true},
		"poll-skip":         {Count: 3},
		"mystery":           {Count: 2, Allowed: true},
	}
	page := render(t, in)
	contains(t, page, "1 time a consumer&#39;s poll went backwards (nonmonotonic-poll, allowed in this mode)")
	contains(t, page, "3 times a consumer skipped offsets between polls (poll-skip)")
	assert.NotContains(t, page, "(poll-skip, allowed in this mode)", "the checker's mark decides, not the report's catalog")
	contains(t, page, "2 mystery anomalies (mystery, allowed in this mode)")
	contains(t, page, "(subscribe: consumer groups, rebalances)")
}

func TestNonlinearizableSentenceAndVisualizationLinks(t *testing.T) {
	in := validInput()
	in.Result.Valid = checker.Invalid
	in.Result.Anomalies = map[string]checker.AnomalyReport{
		"nonlinearizable": {Count: 1, Examples: []checker.Example{{Key: 2, Result: "illegal"}}},
	}
	in.Result.Visualizations = map[int][]byte{2: []byte("<html></html>")}
	page := render(t, in)
	contains(t, page, "INVALID: porcupine found no linearizable order of the operations on key 2 (t0-2) (nonlinearizable).")
	contains(t, page, `src="linear-2.html"`)
	contains(t, page, `<a href="linear-2.html">key 2 (t0-2)</a>`)

	in.Result.Anomalies["nonlinearizable"] = checker.AnomalyReport{Count: 3}
	assert.Contains(t, Summary(in), "porcupine found no linearizable order of the operations on 3 partitions")
}

func TestQuantileColumnsFollowTheChecker(t *testing.T) {
	q := map[string]map[string]float64{"send:ok": {"max": 9, "p99": 5, "p50": 1, "p90": 3, "odd": 0}, "poll:ok": {"0.5": 2}}
	assert.Equal(t, []string{"0.5", "p50", "p90", "p99", "max", "odd"}, quantileNames(q))
	computed := quantiles(Input{}, analyze(validInput().History))
	assert.Equal(t, []string{"p50", "p90", "p99", "max"}, quantileNames(computed))
	assert.InDelta(t, 900.0, computed["send:fail"]["p99"], 1e-9)
}

func TestSparseIndexesStillFindOperations(t *testing.T) {
	in := invalidInput()
	for i := range in.History {
		in.History[i].Index += 1000
	}
	rep := in.Result.Anomalies["lost-write"]
	for i := range rep.Examples {
		rep.Examples[i].Writer = ptr(*rep.Examples[i].Writer + 1000)
	}
	page := render(t, in)
	contains(t, page, "after the nemesis killed n1 at 41.2 s")
	contains(t, page, `<td class="num">1005</td>`)
}

func TestFormatValueFocusesOnTheAnomaly(t *testing.T) {
	var pairs []checker.Pair
	for o := int64(0); o < 100; o++ {
		if o != 42 {
			pairs = append(pairs, checker.Pair{Offset: o, Value: 1000 + o})
		}
	}
	op := checker.Op{F: "poll", Type: checker.OK, Mops: []checker.MicroOp{{F: "poll", Polls: map[int][]checker.Pair{
		3: pairs, 1: {{Offset: 0, Value: 7}}, 5: {{Offset: 0, Value: 8}},
	}}}}
	got := formatValue(op, 300, &valueFocus{keys: map[int]bool{3: true}, offsets: []int64{42}})
	assert.Equal(t, `poll key 3: …, 39→1039, 40→1040, 41→1041, 43→1043, 44→1044, 45→1045, …; …2 other keys`, got)
	got = formatValue(op, 300, nil)
	assert.Equal(t, `poll key 1: 0→7; poll key 3: 0→1000, 1→1001, 2→1002, 3→1003, …, 96→1096, 97→1097, 98→1098, 99→1099; poll key 5: 0→8`, got)
}
