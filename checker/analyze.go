package checker

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"
)

// Consumer modes (Options.Mode).
const (
	ModeAssign    = "assign"
	ModeSubscribe = "subscribe"
)

// Options tune Analyze. The zero value is usable: every zero field takes the
// default named in its comment.
type Options struct {
	// Mode is ModeAssign or ModeSubscribe, the test's consumer mode; empty
	// takes the methods the history's consumers used. As Jepsen's sub-via,
	// a test whose consumers may subscribe allows poll-skip and
	// nonmonotonic-poll (AllowedAnomalies).
	Mode string
	// Txn forces transactional semantics (offsets may have gaps); without
	// it they are inferred from any txn op in the history.
	Txn bool
	// Timeout bounds each checker (default 5 minutes); a checker still
	// running then is unknown.
	Timeout time.Duration
	// LinearTimeout bounds porcupine on one partition (default 10 s).
	LinearTimeout time.Duration
	// LinearOpsMax bounds the operations of one partition given to
	// porcupine (default 50 000); a larger partition is unknown.
	// Porcupine's memory grows with the square of a partition's length
	// (about 300 MB at 50 000 operations), so the workload should rotate
	// keys, as Jepsen does after 1024 writes.
	LinearOpsMax int
	// SkipLinear turns the porcupine checker off.
	SkipLinear bool
	// ExamplesMax bounds examples per anomaly (default ExamplesMax).
	ExamplesMax int
	// VisualizeMax bounds the failing partitions visualized (default 3);
	// VisualizeOpsMax the operations of one visualized partition (default
	// 5000).
	VisualizeMax    int
	VisualizeOpsMax int
	// UnavailableMin is the shortest window without a successful send that
	// counts as unavailability (default 1 s).
	UnavailableMin time.Duration
	// ThroughputBucket is the width of one throughput bucket (default 1 s;
	// widened so a series has at most 2000 buckets).
	ThroughputBucket time.Duration
	// FailOnClientErrors are client error codes (SuspectClientErrors) that
	// make the result invalid when any client received one
	// (AnomalyClientError); every suspect error is counted in
	// Result.ClientErrors either way.
	FailOnClientErrors []string

	subscribe, txn bool
	subVia         []string
}

func (o Options) resolve(h History) Options {
	if o.Timeout <= 0 {
		o.Timeout = 5 * time.Minute
	}
	if o.LinearTimeout <= 0 {
		o.LinearTimeout = 10 * time.Second
	}
	if o.LinearOpsMax <= 0 {
		o.LinearOpsMax = 50000
	}
	if o.ExamplesMax <= 0 {
		o.ExamplesMax = ExamplesMax
	}
	if o.VisualizeMax <= 0 {
		o.VisualizeMax = 3
	}
	if o.VisualizeOpsMax <= 0 {
		o.VisualizeOpsMax = 5000
	}
	if o.UnavailableMin <= 0 {
		o.UnavailableMin = time.Second
	}
	if o.ThroughputBucket <= 0 {
		o.ThroughputBucket = time.Second
	}
	o.txn = o.Txn
	used := map[string]bool{}
	for i := range h {
		switch h[i].F {
		case FSubscribe, FAssign:
			used[h[i].F] = true
		case FTxn:
			o.txn = true
		}
	}
	switch {
	case o.Mode != "":
		o.subVia = []string{o.Mode}
	case used[FAssign] && used[FSubscribe]:
		o.subVia = []string{ModeAssign, ModeSubscribe}
	case used[FSubscribe]:
		o.subVia = []string{ModeSubscribe}
	default:
		o.subVia = []string{ModeAssign}
	}
	o.subscribe = slices.Contains(o.subVia, ModeSubscribe)
	return o
}

// Analyze checks a history: the discipline of its operations, Jepsen's
// Kafka analyses ("queue") and porcupine per partition ("linearizable"),
// composed so that a panic or timeout makes a checker unknown; plus Stats
// and Perf. It never returns without a verdict. A history that breaks the
// invoke/complete discipline is analysed all the same, as Jepsen's checker
// does, with each violation named in Result.Warnings; a history with no
// send or poll is invalid (AnomalyEmptyTransactionGraph), as Jepsen's is.
func Analyze(ctx context.Context, h History, opts Options) Result {
	opts = opts.resolve(h)
	p := pair(h)
	ce := clientErrors(h, faultWindows(h, p), opts.FailOnClientErrors, opts.ExamplesMax)
	checkers := []Checker{
		Func{CheckerName: "history", Fn: func(context.Context, History) CheckerResult {
			return checkNotEmpty(h)
		}},
		Func{CheckerName: "queue", Fn: func(ctx context.Context, h History) CheckerResult {
			return runQueue(ctx, h, p, opts)
		}},
		Func{CheckerName: "cycles", Fn: func(ctx context.Context, h History) CheckerResult {
			return runCycles(ctx, h, p, opts)
		}},
	}
	if hasF(h, FPut) {
		checkers = append(checkers, Func{CheckerName: "compaction", Fn: func(ctx context.Context, h History) CheckerResult {
			return runCompaction(ctx, h, p, opts)
		}})
	}
	if probes := txnIDProbeOps(h); len(probes) > 0 {
		checkers = append(checkers, Func{CheckerName: "transactional-ids", Fn: func(context.Context, History) CheckerResult {
			return checkTxnIDs(h, probes, opts.ExamplesMax)
		}})
	}
	if len(opts.FailOnClientErrors) > 0 {
		checkers = append(checkers, Func{CheckerName: "client-errors", Fn: func(context.Context, History) CheckerResult {
			return checkClientErrors(ce, opts.FailOnClientErrors, opts.ExamplesMax)
		}})
	}
	if !opts.SkipLinear {
		checkers = append(checkers, Func{CheckerName: "linearizable", Fn: func(ctx context.Context, h History) CheckerResult {
			return runLinear(ctx, h, p, opts)
		}})
	}
	res := Compose(ctx, h, opts.Timeout, checkers...)
	res.Warnings = p.warnings()
	res.Mode = ModeAssign
	if opts.subscribe {
		res.Mode = ModeSubscribe
	}
	res.SubVia = opts.subVia
	res.Txn = opts.txn
	res.Stats = computeStats(h, p)
	res.Perf = computePerf(h, p, opts)
	res.ClientErrors = ce
	res.FirstAnomalyNs = firstAnomalyNs(res, h)
	return res
}

// checkNotEmpty is the "history" checker: a history in which no client
// sent or polled tested nothing, so it cannot be valid (Jepsen's checker
// finds its transaction graph empty and says invalid too).
func checkNotEmpty(h History) CheckerResult {
	for i := range h {
		op := &h[i]
		if op.Process != NemesisProcess && op.Type != Invoke && (op.F == FSend || op.F == FPoll || op.F == FTxn || op.F == FPut || op.F == FScan) {
			return CheckerResult{Valid: Valid}
		}
	}
	return CheckerResult{Valid: Invalid, Anomalies: map[string]AnomalyReport{AnomalyEmptyTransactionGraph: {
		Count: 1,
		Examples: []Example{{Key: -1, Text: fmt.Sprintf(
			"the history's %d operations hold no completed send or poll: the test exercised nothing, so it cannot pass", len(h))}},
	}}}
}

// hasF reports whether any client op of h has function f.
func hasF(h History, f string) bool {
	return slices.ContainsFunc(h, func(op Op) bool { return op.IsClient() && op.F == f })
}

// CheckFile reads history.jsonl at path and analyzes it. A file that cannot
// be read or decoded is an error (the CLI exits 254/255); a history that
// decodes but breaks the discipline is analysed, with its violations in
// Result.Warnings. The analysis is bounded by opts' timeouts.
//
// A path ending in .edn is read as Jepsen's EDN notation (ReadEDNHistory);
// the integers its keywords became are in Result.Notes.
func CheckFile(path string, opts Options) (Result, error) {
	h, notes, err := ReadAnyHistory(path)
	if err != nil {
		return Result{Valid: Unknown}, err
	}
	res := Analyze(context.Background(), h, opts)
	res.Notes = notes
	return res, nil
}

// ReadAnyHistory reads history.jsonl, or Jepsen's EDN notation when path
// ends in .edn (ReadEDNHistory, whose notes say which integers keywords
// became).
func ReadAnyHistory(path string) (History, []string, error) {
	if !strings.HasSuffix(path, ".edn") {
		h, err := ReadHistory(path)
		return h, nil, err
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, fmt.Errorf("read history: %w", err)
	}
	defer f.Close()
	h, notes, err := ReadEDNHistory(f)
	if err != nil {
		return nil, nil, fmt.Errorf("read history %s: %w", path, err)
	}
	return h, notes, nil
}

// QueueChecker returns Jepsen's Kafka analyses as a Checker named "queue".
func QueueChecker(opts Options) Checker {
	return Func{CheckerName: "queue", Fn: func(ctx context.Context, h History) CheckerResult {
		return runQueue(ctx, h, pair(h), opts.resolve(h))
	}}
}

// LinearChecker returns the per-partition porcupine check as a Checker named
// "linearizable".
func LinearChecker(opts Options) Checker {
	return Func{CheckerName: "linearizable", Fn: func(ctx context.Context, h History) CheckerResult {
		return runLinear(ctx, h, pair(h), opts.resolve(h))
	}}
}
