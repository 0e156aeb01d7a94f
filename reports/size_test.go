package reports

import (
	"bytes"
	"context"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faultline/faultline/checker"
	"github.com/faultline/faultline/checker/synth"
)

// gatingSizedInput is a failing run of the gating suite's size: 200 000
// history lines over rotating keys, kills every 10 000 lines, one planted
// loss.
func gatingSizedInput(t testing.TB) Input {
	t.Helper()
	h := synth.Generate(synth.Config{Seed: 12, Ops: 200_000, NemesisEvery: 10_000})
	for _, inj := range synth.Injections() {
		if inj.Anomaly == checker.AnomalyLostWrite {
			var err error
			h, err = inj.Apply(h, rand.New(rand.NewPCG(3, 4)))
			require.NoError(t, err)
		}
	}
	res := checker.Analyze(context.Background(), h, checker.Options{SkipLinear: true})
	require.Equal(t, checker.Invalid, res.Valid)
	return Input{Spec: Spec{Name: "gating-sized", PartitionsPerTopic: 4}, Result: res, History: h}
}

const pageBytesMax = 400_000

func TestGatingSizedPageIsSmall(t *testing.T) {
	in := gatingSizedInput(t)
	var buf bytes.Buffer
	require.NoError(t, WriteHTML(&buf, in))
	t.Logf("page: %d bytes for %d history lines", buf.Len(), len(in.History))
	assert.Less(t, buf.Len(), pageBytesMax)
	checkSVGs(t, buf.String())
}
