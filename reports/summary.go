package reports

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/faultline/faultline/checker"
)

// Summary renders a one-screen text summary for the terminal: the verdict,
// the checker's warnings about the history, anomaly counts with one example each, operations by function and outcome,
// latency p50/p99 and the windows in which no send succeeded.
func Summary(in Input) string {
	var a *analysis
	if len(in.History) > 0 {
		a = analyze(in.History)
	}
	v := buildVerdict(in, a)
	var b strings.Builder
	if in.Spec.Name != "" {
		fmt.Fprintf(&b, "%s\n", in.Spec.Name)
	}
	fmt.Fprintf(&b, "%s\n", v.Headline)
	for _, s := range v.Sentences {
		fmt.Fprintf(&b, "  - %s\n", s)
	}
	if len(in.Result.Warnings) > 0 {
		b.WriteString("\nwarnings: the history breaks the invoke/complete discipline; analysed as Jepsen's checker would:\n")
		for _, w := range in.Result.Warnings {
			fmt.Fprintf(&b, "  - %s\n", w)
		}
	}
	if names := orderedAnomalyNames(in.Result.Anomalies); len(names) > 0 {
		b.WriteString("\nanomalies:\n")
		for _, name := range names {
			rep := in.Result.Anomalies[name]
			allowed := ""
			if isAllowed(name, rep, in.Result) {
				allowed = " (allowed)"
			}
			fmt.Fprintf(&b, "  %-22s %6d%s\n", name, rep.Count, allowed)
			if len(rep.Examples) > 0 {
				if text := rep.Examples[0].Text; text != "" {
					fmt.Fprintf(&b, "    e.g. %s\n", truncate(text, 110))
				} else {
					fmt.Fprintf(&b, "    e.g. %s\n", compactExample(rep.Examples[0], 110))
				}
			}
		}
	}
	for _, c := range in.Result.Checkers {
		if c.Valid == checker.Unknown {
			fmt.Fprintf(&b, "checker %s: unknown: %s\n", c.Name, c.Error)
		}
	}
	byF := opsByF(in, a)
	if len(byF) > 0 {
		b.WriteString("\noperations (ok/fail/info):\n")
		for _, f := range sortedKeys(byF) {
			m := byF[f]
			fmt.Fprintf(&b, "  %-10s %7d ok %6d fail %6d info\n", f, m[checker.OK], m[checker.Fail], m[checker.Info])
		}
	}
	if errs := errorRows(in, a); len(errs) > 0 {
		b.WriteString("\nerrors of failed / indeterminate ops:\n")
		for i, e := range errs {
			if i == 3 {
				fmt.Fprintf(&b, "  … %d more error texts\n", len(errs)-i)
				break
			}
			fmt.Fprintf(&b, "  %6d fail %6d info  %s\n", e.Fail, e.Info, truncate(e.Error, 90))
		}
	}
	b.WriteString(clientErrorsSummary(in.Result.ClientErrors))
	q := quantiles(in, a)
	if len(q) > 0 {
		b.WriteString("\nlatency ms (p50 / p99):\n")
		for _, k := range sortedKeys(q) {
			p50, ok50 := pickQuantile(q[k], "0.5", "p50", "50")
			p99, ok99 := pickQuantile(q[k], "0.99", "p99", "99")
			if !ok50 && !ok99 {
				continue
			}
			fmt.Fprintf(&b, "  %-14s %9s / %9s\n", k, msValue(p50), msValue(p99))
		}
	}
	if un := in.Result.Perf.Unavailable; len(un) > 0 {
		total := int64(0)
		for _, w := range un {
			total += w.End - w.Start
		}
		fmt.Fprintf(&b, "\nno successful send for %s in %s:\n", seconds(total), plural(len(un), "window"))
		for i, w := range un {
			if i == 8 {
				fmt.Fprintf(&b, "  … %d more\n", len(un)-i)
				break
			}
			label := ""
			if w.Label != "" {
				label = " (" + w.Label + ")"
			}
			fmt.Fprintf(&b, "  %s – %s%s\n", seconds(w.Start), seconds(w.End), label)
		}
	} else {
		b.WriteString("\nno unavailability window: sends succeeded throughout\n")
	}
	return b.String()
}

func opsByF(in Input, a *analysis) map[string]map[checker.OpType]int {
	if a == nil {
		return in.Result.Stats.ByF
	}
	out := map[string]map[checker.OpType]int{}
	for _, p := range a.latencies {
		m := out[p.f]
		if m == nil {
			m = map[checker.OpType]int{}
			out[p.f] = m
		}
		m[p.typ]++
	}
	return out
}

func pickQuantile(m map[string]float64, names ...string) (float64, bool) {
	for _, n := range names {
		if v, ok := m[n]; ok {
			return v, true
		}
	}
	return 0, false
}

// compactExample renders an example as one line of JSON, cut at maxLen.
func compactExample(example any, maxLen int) string {
	b, err := json.Marshal(example)
	if err != nil {
		return "(example not encodable: " + err.Error() + ")"
	}
	return truncate(string(b), maxLen)
}
