package reports

import (
	"bytes"
	"context"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faultline/faultline/checker"
	"github.com/faultline/faultline/checker/synth"
)

// TestReportsOfPlantedAnomalies plants each anomaly the checker's synth
// package knows into a history with kills, checks it with the real
// checker and renders it: the verdict names the anomaly and the fault
// around it, and the page holds the anomaly's section.
func TestReportsOfPlantedAnomalies(t *testing.T) {
	base := synth.Generate(synth.Config{Seed: 7, Ops: 6000, NemesisEvery: 600})
	for _, inj := range synth.Injections() {
		t.Run(inj.Anomaly, func(t *testing.T) {
			h, err := inj.Apply(base, rand.New(rand.NewPCG(1, 2)))
			require.NoError(t, err)
			res := checker.Analyze(context.Background(), h, checker.Options{})
			require.Equal(t, checker.Invalid, res.Valid)
			in := Input{Spec: Spec{Name: "planted-" + inj.Anomaly}, Result: res, History: h}
			v := buildVerdict(in, analyze(h))
			all := v.Headline + "\n" + strings.Join(v.Sentences, "\n")
			assert.True(t, strings.HasPrefix(v.Headline, "INVALID: "), v.Headline)
			assert.Contains(t, all, "("+inj.Anomaly)
			assert.True(t, strings.Contains(all, " after the nemesis ") || strings.Contains(all, " with no fault injected after the writes"),
				"the verdict relates the anomaly to the faults: %s", all)
			var buf bytes.Buffer
			require.NoError(t, WriteHTML(&buf, in))
			page := buf.String()
			contains(t, page, `id="anomaly-`+inj.Anomaly+`"`)
			checkSVGs(t, page)
		})
	}
}
