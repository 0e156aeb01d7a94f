package reports

import (
	"fmt"
	"sort"
	"strings"

	"github.com/faultline/faultline/checker"
)

// checkedBox says what a valid run stressed and verified, from the
// checker's Stats and Perf: writes read back, indeterminate sends resolved
// by the reads, time under each fault, availability and the longest
// outages.
type checkedBox struct {
	Lines  []string
	Faults []faultTime
}

// faultTime is the time a run spent under one kind of fault.
type faultTime struct {
	Kind, Under, Windows, LongestOutage string
}

func buildChecked(in Input) *checkedBox {
	r := in.Result
	if r.Valid != checker.Valid {
		return nil
	}
	st := r.Stats
	box := &checkedBox{}
	switch {
	case st.SendsOK > 0 && st.SendsOKRead > 0:
		box.Lines = append(box.Lines, fmt.Sprintf("%s, %d of them read back by the polls and final reads", plural(st.SendsOK, "acknowledged write"), st.SendsOKRead))
	case st.SendsOK > 0:
		// results.json written before the checker counted reads back: a
		// valid run has no unseen write, so every one was read.
		box.Lines = append(box.Lines, plural(st.SendsOK, "acknowledged write")+", every one read back (none unseen)")
	}
	if st.SendsInfo > 0 {
		box.Lines = append(box.Lines, fmt.Sprintf("%s of unknown outcome: %d landed (read back), %d did not",
			plural(st.SendsInfo, "indeterminate send"), st.SendsInfoRead, st.SendsInfo-st.SendsInfoRead))
	}
	if st.DurationNs > 0 {
		var down, longest int64
		for _, w := range r.Perf.Unavailable {
			down += w.End - w.Start
			longest = max(longest, w.End-w.Start)
		}
		avail := 100 * (1 - float64(down)/float64(st.DurationNs))
		line := fmt.Sprintf("available %.1f%% of %s (no send succeeded for %s in %s", avail, seconds(st.DurationNs), seconds(down), plural(len(r.Perf.Unavailable), "window"))
		if longest > 0 {
			line += ", the longest " + seconds(longest)
		}
		box.Lines = append(box.Lines, line+")")
	}
	box.Faults = faultTimes(r.Perf)
	return box
}

// faultTimes sums the fault windows by kind (the first word of their
// label) and finds, per kind, the longest outage overlapping one of them.
func faultTimes(perf checker.Perf) []faultTime {
	type sum struct {
		under, longest int64
		windows        int
	}
	by := map[string]*sum{}
	for _, w := range perf.Faults {
		kind, _, _ := strings.Cut(w.Label, " ")
		if kind == "" {
			kind = "fault"
		}
		s := by[kind]
		if s == nil {
			s = &sum{}
			by[kind] = s
		}
		s.under += max(w.End-w.Start, 0)
		s.windows++
		for _, u := range perf.Unavailable {
			if u.Start <= w.End && u.End >= w.Start {
				s.longest = max(s.longest, u.End-u.Start)
			}
		}
	}
	out := make([]faultTime, 0, len(by))
	for kind, s := range by {
		longest := "none"
		if s.longest > 0 {
			longest = seconds(s.longest)
		}
		out = append(out, faultTime{Kind: kind, Under: seconds(s.under), Windows: fmt.Sprint(s.windows), LongestOutage: longest})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Kind < out[j].Kind })
	return out
}
