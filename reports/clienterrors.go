package reports

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/faultline/faultline/checker"
)

// clientErrorRow is one line of the client-errors table: a period (before
// any fault, or during / after one fault window) and its counts by code.
type clientErrorRow struct {
	Period string
	Counts string
	Total  int
}

// clientErrorRows lays results.json's client-errors finding out as rows:
// before any fault, then each fault window during and after it.
func clientErrorRows(ce *checker.ClientErrors) []clientErrorRow {
	if ce == nil {
		return nil
	}
	var out []clientErrorRow
	add := func(period string, m map[string]int) {
		if len(m) == 0 {
			return
		}
		var parts []string
		total := 0
		for _, code := range slices.Sorted(maps.Keys(m)) {
			parts = append(parts, fmt.Sprintf("%s ×%d", code, m[code]))
			total += m[code]
		}
		out = append(out, clientErrorRow{Period: period, Counts: strings.Join(parts, ", "), Total: total})
	}
	add("before any fault", ce.NoFault)
	for _, w := range ce.ByWindow {
		span := fmt.Sprintf("%s – %s", seconds(w.Start), seconds(w.End))
		add(fmt.Sprintf("during %s (%s)", truncate(w.Label, 80), span), w.During)
		add(fmt.Sprintf("after %s (ended %s)", truncate(w.Label, 80), seconds(w.End)), w.After)
	}
	return out
}

// clientErrorsSummary is the summary's lines of the finding.
func clientErrorsSummary(ce *checker.ClientErrors) string {
	if ce == nil {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\nclient errors a correct broker never returns: %d", ce.Count)
	if len(ce.FailOn) > 0 {
		fmt.Fprintf(&b, " (the test fails on %s)", strings.Join(ce.FailOn, ", "))
	}
	b.WriteString("\n")
	for _, r := range clientErrorRows(ce) {
		fmt.Fprintf(&b, "  %-60s %s\n", truncate(r.Period, 60), r.Counts)
	}
	return b.String()
}
