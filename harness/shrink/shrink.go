package shrink

import (
	"fmt"
	"slices"
	"time"
)

// Candidate is one schedule to try: the faults kept (their IDs, in start
// order; a fault's start and stop go together) and the time limit.
type Candidate struct {
	Faults    []int
	TimeLimit time.Duration
}

// Problem is the failing run to shrink.
type Problem struct {
	// Faults are the run's fault IDs in start order.
	Faults []int
	// Ends is when each fault stopped, since the workload started (the
	// time limit for one that never stopped).
	Ends map[int]time.Duration
	// TimeLimit is the run's time limit.
	TimeLimit time.Duration
	// Settle is how long a candidate keeps running after its last fault
	// ends (default 10 s): the workload needs a moment to observe what the
	// fault did. MinTimeLimit is the shortest time limit tried (default 10 s).
	Settle, MinTimeLimit time.Duration
}

// Options bound the search.
type Options struct {
	// MaxCandidates bounds how many candidates the predicate is asked
	// about (default 30).
	MaxCandidates int
	// Expired, when set, ends the search as soon as it returns true
	// (a time budget).
	Expired func() bool
}

// Result is the smallest failing candidate found.
type Result struct {
	Best Candidate
	// Tried counts the candidates the predicate was asked about;
	// Exhausted says the search stopped at a bound before it was done
	// (the result is then smaller than the input but maybe not minimal).
	Tried     int
	Exhausted bool
}

// Minimize searches for the smallest candidate for which fails returns
// true: the fewest faults (ddmin: 1-minimal, removing any one kept fault
// makes it pass, when no bound interrupts), then the shortest time limit
// that still covers them. The whole problem is assumed to fail and is
// never asked about.
func Minimize(p Problem, fails func(Candidate) bool, o Options) Result {
	s := &search{p: p, fails: fails, o: o, seen: map[string]bool{}}
	if s.o.MaxCandidates <= 0 {
		s.o.MaxCandidates = 30
	}
	if s.p.Settle <= 0 {
		s.p.Settle = 10 * time.Second
	}
	if s.p.MinTimeLimit <= 0 {
		s.p.MinTimeLimit = 10 * time.Second
	}
	faults := s.ddmin(slices.Clone(p.Faults))
	limit := s.shortenLimit(faults)
	return Result{Best: Candidate{Faults: faults, TimeLimit: limit}, Tried: s.tried, Exhausted: s.exhausted}
}

type search struct {
	p         Problem
	fails     func(Candidate) bool
	o         Options
	seen      map[string]bool
	tried     int
	exhausted bool
}

// try asks the predicate once per distinct candidate, within the bounds.
func (s *search) try(c Candidate) bool {
	key := fmt.Sprint(c.Faults, c.TimeLimit)
	if v, ok := s.seen[key]; ok {
		return v
	}
	if s.tried >= s.o.MaxCandidates || (s.o.Expired != nil && s.o.Expired()) {
		s.exhausted = true
		return false
	}
	s.tried++
	v := s.fails(c)
	s.seen[key] = v
	return v
}

func (s *search) over(faults []int) bool {
	return s.try(Candidate{Faults: faults, TimeLimit: s.p.TimeLimit})
}

// ddmin is Zeller's minimizing delta debugging over the fault IDs: try
// each of n chunks alone, then each complement, and refine n when neither
// fails. No faults at all is tried first (some bugs need none).
func (s *search) ddmin(c []int) []int {
	if len(c) == 0 || s.over([]int{}) {
		return []int{}
	}
	n := 2
	for len(c) >= 2 && !s.exhausted {
		chunks := split(c, n)
		reduced := false
		for _, ch := range chunks {
			if s.over(ch) {
				c, n, reduced = ch, 2, true
				break
			}
		}
		if !reduced && n > 2 {
			for i := range chunks {
				comp := complement(chunks, i)
				if s.over(comp) {
					c, n, reduced = comp, max(n-1, 2), true
					break
				}
			}
		}
		if !reduced {
			if n >= len(c) {
				break
			}
			n = min(2*n, len(c))
		}
	}
	return c
}

// shortenLimit tries the shortest time limit that covers the kept faults
// and settles, then halves the distance to the run's limit while that
// fails to reproduce, at most three times.
func (s *search) shortenLimit(faults []int) time.Duration {
	best := s.p.TimeLimit
	var last time.Duration
	for _, f := range faults {
		last = max(last, s.p.Ends[f])
	}
	lo := max(last+s.p.Settle, s.p.MinTimeLimit).Round(time.Second)
	for range 3 {
		if lo >= best || s.exhausted {
			break
		}
		if s.try(Candidate{Faults: faults, TimeLimit: lo}) {
			return lo
		}
		lo = ((lo + best) / 2).Round(time.Second)
	}
	return best
}

func split(c []int, n int) [][]int {
	var out [][]int
	size, rest := len(c)/n, len(c)%n
	for i, at := 0, 0; i < n; i++ {
		k := size
		if i < rest {
			k++
		}
		out = append(out, c[at:at+k])
		at += k
	}
	return out
}

func complement(chunks [][]int, skip int) []int {
	var out []int
	for i, ch := range chunks {
		if i != skip {
			out = append(out, ch...)
		}
	}
	return out
}
