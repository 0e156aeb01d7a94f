package reports

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faultline/faultline/checker"
)

func TestValidRunSaysWhatWasChecked(t *testing.T) {
	h, err := checker.ReadHistory(filepath.Join("..", "checker", "testdata", "valid-info-send.jsonl"))
	require.NoError(t, err)
	res := checker.Analyze(context.Background(), h, checker.Options{})
	require.Equal(t, checker.Valid, res.Valid)
	res.Perf.Faults = []checker.Window{{Start: 1e9, End: 4e9, Label: `kill ["n1"]`}, {Start: 6e9, End: 7e9, Label: "kill"}, {Start: 5e9, End: 5.5e9, Label: "partition {}"}}
	res.Perf.Unavailable = []checker.Window{{Start: 2e9, End: 3.5e9}}
	res.Stats.DurationNs = 10e9
	page := render(t, Input{Result: res, History: h})
	ids := parseLoose(t, page)
	require.True(t, ids["checked"])
	contains(t, page, "2 acknowledged writes, 2 of them read back by the polls and final reads")
	contains(t, page, "3 indeterminate sends of unknown outcome: 1 landed (read back), 2 did not")
	contains(t, page, "available 85.0% of 10.0 s (no send succeeded for 1.5 s in 1 window, the longest 1.5 s)")
	contains(t, page, `<tr><td>kill</td><td class="num">4.0 s</td><td class="num">2</td><td class="num">1.5 s</td></tr>`)
	contains(t, page, `<tr><td>partition</td><td class="num">500.0 ms</td><td class="num">1</td><td class="num">none</td></tr>`)

	res.Valid = checker.Invalid
	assert.False(t, parseLoose(t, render(t, Input{Result: res, History: h}))["checked"], "only a valid run has the box")
}
