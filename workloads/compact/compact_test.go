package compact

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faultline/faultline/checker"
)

func TestGeneratorRetiresKeysAndIsSeeded(t *testing.T) {
	const n = 2000
	keysOf := func(seed int64) []int {
		g := NewGenerator(seed, Keys)
		var ks []int
		for range n {
			op, ok := g.Next(0)
			require.True(t, ok)
			pv, err := checker.ParsePut(op.Raw)
			require.NoError(t, err)
			ks = append(ks, pv.Key)
		}
		return ks
	}
	ks := keysOf(7)
	assert.Equal(t, ks, keysOf(7), "a pure function of its seed")
	assert.NotEqual(t, ks, keysOf(8))
	last := map[int]int{}
	for i, k := range ks {
		low := i / RetireEvery
		assert.GreaterOrEqual(t, k, low, "put %d", i)
		assert.Less(t, k, low+Keys, "put %d", i)
		last[k] = i
	}
	// Most keys are retired long before the end: their last put is far
	// from the last put of the run.
	retired := 0
	for _, i := range last {
		if i < n-Keys*RetireEvery {
			retired++
		}
	}
	assert.Greater(t, retired, n/RetireEvery-2*Keys, "keys written for the last time well before the end")
}
