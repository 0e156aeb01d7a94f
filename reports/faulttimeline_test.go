package reports

import (
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faultline/faultline/checker"
)

// plotSVG returns the SVG whose aria-label starts with label out of the
// page.
func plotSVG(t *testing.T, page, label string) string {
	t.Helper()
	i := strings.Index(page, `aria-label="`+label)
	require.GreaterOrEqual(t, i, 0, "the page has the plot %q", label)
	start := strings.LastIndex(page[:i], "<svg")
	end := strings.Index(page[start:], "</svg>")
	require.Greater(t, end, 0)
	return page[start : start+end+len("</svg>")]
}

// laneTitles returns the tooltips of the bars in the lane with the given
// name.
func laneTitles(t *testing.T, svg, lane string) []string {
	t.Helper()
	re := regexp.MustCompile(`(?s)<g class="lane[^"]*" data-lane="` + regexp.QuoteMeta(lane) + `">(.*?)</g>`)
	m := re.FindStringSubmatch(svg)
	require.NotNil(t, m, "lane %s", lane)
	var out []string
	for _, tm := range regexp.MustCompile(`<title>(.*?)</title>`).FindAllStringSubmatch(m[1], -1) {
		out = append(out, unescape(tm[1]))
	}
	return out
}

func TestFaultTimelineHasALanePerNodeAndTheLeadersOfAnomalousPartitions(t *testing.T) {
	in := leaderLossInput(t)
	page := render(t, in)
	svg := plotSVG(t, page, "fault timeline")
	checkSVGs(t, svg)
	assert.Equal(t, []string{"n1 killed from 4.0 s (op 6: n1); ended at 8.0 s"}, laneTitles(t, svg, "n1"))
	assert.Equal(t, []string{"n2 cut off from 12.0 s (op 17: n2 cut off from n1, n3); ended at 16.0 s"}, laneTitles(t, svg, "n2"),
		"a partition marks the node cut off, not the majority")
	assert.Empty(t, laneTitles(t, svg, "n3"))
	assert.Equal(t, []string{
		"t0-1: leader n1, epoch 1, seen by the harness from 1.0 s to 5.0 s",
		"t0-1: leader n3, epoch 2, seen by the harness from 5.0 s",
	}, laneTitles(t, svg, "t0-1"))
	assert.Equal(t, []string{
		"t0-2: leader n2, epoch 3, seen by the harness from 1.0 s to 13.0 s",
		"t0-2: leader n1, epoch 4, seen by the harness from 13.0 s",
	}, laneTitles(t, svg, "t0-2"))
	for _, legend := range []string{"node killed", "node cut off", "led by n1", "led by n2", "led by n3", "final reads"} {
		assert.Contains(t, svg, ">"+legend+"</text></g>", "legend names %q", legend)
	}
	assert.Contains(t, svg, "<title>final reads from 19.9 s</title>", "the final-read phase is marked")
	contains(t, page, `<a href="#timeline">Fault timeline</a>`)
}

func TestFaultLooksAreDataWithADefault(t *testing.T) {
	for _, kind := range []string{"kill", "pause", "partition", "power", "disk-error", "disk-full", "disk-slow", "corrupt"} {
		l := faultLookOf(kind)
		assert.NotEqual(t, colorFault, l.Color, kind)
		assert.NotEqual(t, kind, l.State, "%s says what it does to a node", kind)
	}
	assert.Equal(t, faultLook{Color: colorFault, State: "clock-skew"}, faultLookOf("clock-skew"), "an unknown kind is grey and named by itself")
	assert.Equal(t, "killed", faultLookOf("kill-leader").State)
}

func TestNemesisTargets(t *testing.T) {
	for _, c := range []struct {
		raw   string
		nodes []string
	}{
		{`["n1","n2"]`, []string{"n1", "n2"}},
		{`{"mode":"leaders","nodes":["n3"]}`, []string{"n3"}},
		{`{"mode":"one","grudge":{"n2":["n1","n3"],"n1":["n2"],"n3":["n2"]}}`, []string{"n2"}},
		{`{"mode":"halves","grudge":{"n1":["n3","n4"],"n2":["n3","n4"],"n3":["n1","n2"],"n4":["n1","n2"]}}`, []string{"n1", "n2", "n3", "n4"}},
		{`"garbage"`, nil},
		{``, nil},
	} {
		nodes, _ := nemesisTargets([]byte(c.raw))
		assert.Equal(t, c.nodes, nodes, c.raw)
	}
}

// A fault whose kind's name would mislead is named by its mode:
// corrupt:unreplicated-tail cuts a leader off and kills nobody, while
// corrupt's other modes kill the node.
func TestNodeFaultSegmentsNameTheModeWhereTheKindMisleads(t *testing.T) {
	nem := func(i int64, f, raw string, at int64) checker.Op {
		return checker.Op{Index: i, Process: checker.NemesisProcess, Type: checker.Info, F: f, Raw: []byte(raw), Time: at}
	}
	a := &analysis{h: checker.History{
		nem(0, "start-corrupt", `{"mode":"unreplicated-tail","leader":"n5","grudge":{"n5":["n2","n3","n4"]},"did":"[{\"partition\":\"t2-1\",\"base-offset\":416,\"position\":30603}]"}`, 1e9),
		nem(1, "stop-corrupt", `null`, 2e9),
		nem(2, "start-corrupt", `{"mode":"bit-flip","nodes":["n3"]}`, 3e9),
		nem(3, "stop-corrupt", `null`, 4e9),
	}, nemesis: []int{0, 1, 2, 3}, endNs: 5e9}
	segs := nodeFaultSegments(a)
	require.Len(t, segs["n5"], 1)
	assert.Equal(t, "cut off from its followers, a bit flipped in a batch only it had", segs["n5"][0].label)
	require.Len(t, segs["n3"], 1)
	assert.Equal(t, "killed, data corrupted", segs["n3"][0].label)

	// The same fault that found no batch to flip, or failed, says so.
	for _, op := range []checker.Op{
		nem(0, "start-corrupt", `{"mode":"unreplicated-tail","leader":"n5","grudge":{"n5":["n2","n3","n4"]},"did":"[{\"partition\":\"t2-1\",\"skipped\":\"no batch\"}]"}`, 1e9),
		nem(0, "start-corrupt", `{"mode":"unreplicated-tail","leader":"n5","grudge":{"n5":["n2","n3","n4"]}}`, 1e9),
	} {
		a := &analysis{h: checker.History{op, nem(1, "stop-corrupt", `null`, 2e9)}, nemesis: []int{0, 1}, endNs: 3e9}
		segs := nodeFaultSegments(a)
		require.Len(t, segs["n5"], 1)
		assert.Equal(t, "cut off from its followers, nothing flipped", segs["n5"][0].label)
	}
}
