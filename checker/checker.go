package checker

import (
	"context"
	"fmt"
	"runtime/debug"
	"sort"
	"strings"
	"time"
)

// Checker judges a history. Check must honour ctx: when it is done the
// checker should return promptly (Compose stops waiting for it anyway).
type Checker interface {
	Check(ctx context.Context, h History) CheckerResult
}

// Named is implemented by checkers that name themselves; Compose uses the
// name when the checker panics or times out.
type Named interface {
	Name() string
}

// Noop is the checker that finds nothing: always valid.
type Noop struct{}

// Name returns "noop".
func (Noop) Name() string { return "noop" }

// Check returns a valid result.
func (Noop) Check(context.Context, History) CheckerResult {
	return CheckerResult{Name: "noop", Valid: Valid}
}

// Func adapts a function to a named Checker.
type Func struct {
	CheckerName string
	Fn          func(ctx context.Context, h History) CheckerResult
}

// Name returns the checker's name.
func (f Func) Name() string { return f.CheckerName }

// Check calls the function.
func (f Func) Check(ctx context.Context, h History) CheckerResult {
	r := f.Fn(ctx, h)
	if r.Name == "" {
		r.Name = f.CheckerName
	}
	return r
}

func nameOf(c Checker) string {
	if n, ok := c.(Named); ok {
		return n.Name()
	}
	return fmt.Sprintf("%T", c)
}

// Compose runs the checkers concurrently on h and merges their results, as
// Jepsen's checker/compose does: validity is the worst of theirs (Invalid >
// Unknown > Valid) and anomalies are merged by name. A checker that panics,
// or has not returned when timeout (if positive) expires or ctx is done,
// becomes Unknown with the reason in its Error; Compose never waits past
// that point (a late checker's result is dropped). Stats and Perf are left
// for the caller to fill.
func Compose(ctx context.Context, h History, timeout time.Duration, checkers ...Checker) Result {
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	type done struct {
		i int
		r CheckerResult
	}
	results := make([]CheckerResult, len(checkers))
	finished := make([]bool, len(checkers))
	ch := make(chan done, len(checkers))
	for i, c := range checkers {
		go func() {
			defer func() {
				if p := recover(); p != nil {
					ch <- done{i, CheckerResult{
						Name:  nameOf(c),
						Valid: Unknown,
						Error: fmt.Sprintf("checker panicked: %v\n%s", p, firstFrames(debug.Stack())),
					}}
				}
			}()
			r := c.Check(ctx, h)
			if r.Name == "" {
				r.Name = nameOf(c)
			}
			ch <- done{i, r}
		}()
	}
	for n := 0; n < len(checkers); n++ {
		select {
		case d := <-ch:
			results[d.i], finished[d.i] = d.r, true
		case <-ctx.Done():
			n = len(checkers)
		}
	}
	for i, c := range checkers {
		if !finished[i] {
			results[i] = CheckerResult{
				Name:  nameOf(c),
				Valid: Unknown,
				Error: fmt.Sprintf("checker did not finish: %v", context.Cause(ctx)),
			}
		}
	}
	return Merge(results...)
}

// Merge combines checker results into a Result: the worst validity, and
// anomalies merged by name (counts added, examples concatenated up to
// ExamplesMax, allowed only when every checker reporting it allows it).
func Merge(results ...CheckerResult) Result {
	out := Result{Valid: Valid, Anomalies: map[string]AnomalyReport{}, Checkers: results}
	if out.Checkers == nil {
		out.Checkers = []CheckerResult{}
	}
	for _, r := range results {
		out.Valid = out.Valid.Merge(r.Valid)
		for k, html := range r.Visualizations {
			if out.Visualizations == nil {
				out.Visualizations = map[int][]byte{}
			}
			out.Visualizations[k] = html
		}
		for name, a := range r.Anomalies {
			prev, ok := out.Anomalies[name]
			if !ok {
				out.Anomalies[name] = a
				continue
			}
			prev.Count += a.Count
			prev.ByKey = addCounts(prev.ByKey, a.ByKey)
			prev.Allowed = prev.Allowed && a.Allowed
			room := ExamplesMax - len(prev.Examples)
			if room > 0 {
				prev.Examples = append(prev.Examples, a.Examples[:min(room, len(a.Examples))]...)
			}
			out.Anomalies[name] = prev
		}
	}
	return out
}

// addCounts adds the per-key counts of b into a copy of a.
func addCounts(a, b map[int]int) map[int]int {
	if len(b) == 0 {
		return a
	}
	out := make(map[int]int, len(a)+len(b))
	for k, n := range a {
		out[k] += n
	}
	for k, n := range b {
		out[k] += n
	}
	return out
}

// BadAnomalies lists, sorted, the anomalies that make the result invalid
// (those found and not allowed in the test's mode).
func (r Result) BadAnomalies() []string {
	var bad []string
	for name, a := range r.Anomalies {
		if a.Count > 0 && !a.Allowed {
			bad = append(bad, name)
		}
	}
	sort.Strings(bad)
	return bad
}

// firstFrames keeps the top of a stack trace: enough to locate a panic
// without flooding results.json.
func firstFrames(stack []byte) string {
	lines := strings.Split(string(stack), "\n")
	if len(lines) > 24 {
		lines = lines[:24]
	}
	return strings.Join(lines, "\n")
}
