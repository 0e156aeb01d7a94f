package synth_test

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faultline/faultline/checker"
	"github.com/faultline/faultline/checker/synth"
)

func cfg(seed uint64) synth.Config {
	return synth.Config{Seed: seed, Ops: 4000, Processes: 8, KeysActive: 3, WritesPerKey: 200,
		InfoPercent: 3, FailPercent: 3, NemesisEvery: 500}
}

// TestGenerateIsValid sweeps seeds, every other one transactional: a
// valid history must check valid, and porcupine must decide it (a model that
// lets it search exponentially shows up here as unknown).
func TestGenerateIsValid(t *testing.T) {
	for seed := uint64(1); seed <= 40; seed++ {
		c := cfg(seed)
		c.Txn = seed%2 == 0
		h := synth.Generate(c)
		require.NoError(t, h.Validate())
		res := checker.Analyze(context.Background(), h, checker.Options{})
		assert.Equal(t, checker.Valid, res.Valid, "seed %d: %v", seed, res.Anomalies)
		assert.Empty(t, res.Anomalies, "seed %d", seed)
		assert.NotEmpty(t, res.Perf.Faults, "seed %d", seed)
		assert.Positive(t, res.Stats.SendsOK, "seed %d", seed)
	}
}

func TestGenerateTxnAndSubscribeAreValid(t *testing.T) {
	for seed := uint64(1); seed <= 12; seed++ {
		c := cfg(seed)
		c.Txn, c.Subscribe = true, true
		h := synth.Generate(c)
		require.NoError(t, h.Validate())
		res := checker.Analyze(context.Background(), h, checker.Options{})
		assert.Equal(t, checker.Valid, res.Valid, "seed %d: %v", seed, res.Anomalies)
		assert.Equal(t, checker.ModeSubscribe, res.Mode)
		assert.True(t, res.Txn)
		assert.Positive(t, res.Stats.ByF[checker.FTxn][checker.OK], "seed %d", seed)
	}
}

func TestGenerateIsDeterministic(t *testing.T) {
	a, b := synth.Generate(cfg(7)), synth.Generate(cfg(7))
	assert.Equal(t, a, b)
	assert.NotEqual(t, a, synth.Generate(cfg(8)))
}

// TestInjectionsAreFound plants each anomaly in valid histories and checks
// that the checker finds it, and nothing the change could not cause.
func TestInjectionsAreFound(t *testing.T) {
	for _, inj := range synth.Injections() {
		t.Run(inj.Anomaly, func(t *testing.T) {
			for seed := uint64(1); seed <= 6; seed++ {
				h := synth.Generate(cfg(seed))
				bad, err := inj.Apply(h, rand.New(rand.NewPCG(seed, 1)))
				require.NoError(t, err, "seed %d", seed)
				res := checker.Analyze(context.Background(), bad, checker.Options{})
				assert.Equal(t, checker.Invalid, res.Valid, "seed %d", seed)
				require.Contains(t, res.Anomalies, inj.Anomaly, "seed %d", seed)
				for name := range res.Anomalies {
					assert.True(t, name == inj.Anomaly || slices.Contains(inj.Also, name),
						"seed %d: %s planted, %s found too: %v", seed, inj.Anomaly, name, res.Anomalies[name].Examples)
				}
			}
		})
	}
}
