package shrink

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func tenFaults() Problem {
	p := Problem{TimeLimit: 120 * time.Second, Ends: map[int]time.Duration{}}
	for i := 1; i <= 10; i++ {
		p.Faults = append(p.Faults, i)
		p.Ends[i] = time.Duration(10*i) * time.Second
	}
	return p
}

// TestMinimizeFindsTheTwoFaultsThatFailTogether is the synthetic
// predicate: the run fails iff faults 3 and 7 are both in it (and it runs
// long enough for fault 7 to end).
func TestMinimizeFindsTheTwoFaultsThatFailTogether(t *testing.T) {
	var asked []Candidate
	fails := func(c Candidate) bool {
		asked = append(asked, c)
		return slices.Contains(c.Faults, 3) && slices.Contains(c.Faults, 7) && c.TimeLimit >= 75*time.Second
	}
	r := Minimize(tenFaults(), fails, Options{MaxCandidates: 100})
	assert.Equal(t, []int{3, 7}, r.Best.Faults)
	assert.Equal(t, 80*time.Second, r.Best.TimeLimit, "fault 7 ends at 70 s, plus 10 s to settle")
	assert.False(t, r.Exhausted)
	assert.Equal(t, len(asked), r.Tried)
	assert.Empty(t, asked[0].Faults, "no faults at all is tried first")
	assert.Less(t, r.Tried, 30, "ddmin needs far fewer runs than the 2^10 subsets")
}

func TestMinimizeFindsOneFaultAndNone(t *testing.T) {
	r := Minimize(tenFaults(), func(c Candidate) bool { return slices.Contains(c.Faults, 9) }, Options{})
	assert.Equal(t, []int{9}, r.Best.Faults)
	assert.Equal(t, 100*time.Second, r.Best.TimeLimit)

	r = Minimize(tenFaults(), func(Candidate) bool { return true }, Options{})
	assert.Empty(t, r.Best.Faults)
	assert.Equal(t, 10*time.Second, r.Best.TimeLimit, "a bug that needs no faults shrinks to the shortest limit")
}

func TestMinimizeKeepsTheInputWhenNothingSmallerFails(t *testing.T) {
	p := tenFaults()
	r := Minimize(p, func(c Candidate) bool { return len(c.Faults) == 10 }, Options{})
	assert.Equal(t, p.Faults, r.Best.Faults)
	assert.Equal(t, p.TimeLimit, r.Best.TimeLimit)
}

func TestMinimizeStopsAtItsBounds(t *testing.T) {
	fails := func(c Candidate) bool { return slices.Contains(c.Faults, 3) && slices.Contains(c.Faults, 7) }
	r := Minimize(tenFaults(), fails, Options{MaxCandidates: 3})
	assert.True(t, r.Exhausted)
	assert.Equal(t, 3, r.Tried)
	assert.Subset(t, r.Best.Faults, []int{3, 7}, "what it returns still fails")
	assert.Contains(t, r.Best.Faults, 3)
	assert.Contains(t, r.Best.Faults, 7)

	calls := 0
	r = Minimize(tenFaults(), fails, Options{Expired: func() bool { calls++; return calls > 2 }})
	assert.True(t, r.Exhausted)
	assert.Equal(t, 2, r.Tried)
}
