package harness

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/faultline/faultline/checker"
	"github.com/faultline/faultline/harness/shrink"
	"github.com/faultline/faultline/nemesis"
	"github.com/faultline/faultline/workloads"
)

// Files the shrinker writes into the directory of the run it shrank.
const (
	FileShrink         = "shrink.json"
	FileShrinkSchedule = "shrink-schedule.json"
)

// ShrinkOptions bound `faultline shrink`.
type ShrinkOptions struct {
	// RunsPerCandidate is how often each candidate is run (default 2); it
	// reproduces when any run is invalid with one of the original run's
	// anomaly classes.
	RunsPerCandidate int
	// Budget bounds the whole search's wall time (default 30 min);
	// MaxCandidates the candidates tried (default 30).
	Budget        time.Duration
	MaxCandidates int
}

// ShrinkReport is shrink.json: what the shrinker tried and the smallest
// reproduction it found.
type ShrinkReport struct {
	Run       string   `json:"run"`
	Anomalies []string `json:"anomalies"`
	// Faults and TimeLimit are the original run's; Best* the smallest
	// candidate that still failed (the original when none did).
	Faults        int             `json:"faults"`
	TimeLimit     Duration        `json:"time-limit"`
	BestFaults    int             `json:"best-faults"`
	BestTimeLimit Duration        `json:"best-time-limit"`
	BestEvents    []nemesis.Event `json:"best-events"`
	BestRun       string          `json:"best-run,omitempty"`
	Tried         int             `json:"candidates-tried"`
	Runs          int             `json:"runs"`
	Exhausted     bool            `json:"exhausted"`
	Candidates    []ShrinkAttempt `json:"candidates"`
	Command       string          `json:"command"`
	Flags         string          `json:"flags"`
}

// ShrinkAttempt is one candidate and what its runs found.
type ShrinkAttempt struct {
	Faults     []int    `json:"faults"`
	TimeLimit  Duration `json:"time-limit"`
	Reproduced bool     `json:"reproduced"`
	Runs       []string `json:"runs"`
	Found      []string `json:"found"`
}

// anomalyClasses lists the anomalies that made a result invalid.
func anomalyClasses(res checker.Result) []string {
	var out []string
	for name, a := range res.Anomalies {
		if !a.Allowed && a.Count > 0 {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

// Shrink searches for the smallest reproduction of the invalid run in dir
// (`faultline shrink`): fewer fault events, then a shorter time limit, each
// candidate run opts.RunsPerCandidate times as an exact replay (same seed,
// the kept events on their recorded targets and times). It writes
// shrink.json and shrink-schedule.json into dir and prints the command
// that reproduces the smallest failing candidate.
func Shrink(ctx context.Context, dir string, opts ShrinkOptions, reg workloads.Registry, out io.Writer) (ShrinkReport, error) {
	if opts.RunsPerCandidate <= 0 {
		opts.RunsPerCandidate = 2
	}
	if opts.Budget <= 0 {
		opts.Budget = 30 * time.Minute
	}
	if st, err := os.Stat(dir); err == nil && !st.IsDir() {
		dir = filepath.Dir(dir)
	}
	orig, exact, warning, err := LoadReplay(dir)
	if err != nil {
		return ShrinkReport{}, err
	}
	if !exact {
		return ShrinkReport{}, fmt.Errorf("%s has no %s (stored before schedules were recorded): nothing to shrink over; run it again with this version first", dir, FileSchedule)
	}
	if warning != "" {
		fmt.Fprintf(out, "shrink: %s\n", warning)
	}
	b, err := os.ReadFile(filepath.Join(dir, "results.json"))
	if err != nil {
		return ShrinkReport{}, err
	}
	var res checker.Result
	if err := json.Unmarshal(b, &res); err != nil {
		return ShrinkReport{}, fmt.Errorf("%s/results.json: %w", dir, err)
	}
	classes := anomalyClasses(res)
	if res.Valid != checker.Invalid || len(classes) == 0 {
		return ShrinkReport{}, fmt.Errorf("%s is %s: only an invalid run can be shrunk", dir, res.Valid)
	}
	events := orig.Schedule
	p := shrinkProblem(events, time.Duration(orig.TimeLimit))
	rep := ShrinkReport{Run: dir, Anomalies: classes, Faults: len(p.Faults), TimeLimit: orig.TimeLimit}
	deadline := time.Now().Add(opts.Budget)
	bestRun := map[string]string{}
	fmt.Fprintf(out, "shrink: %s: %d faults, time limit %s, anomalies %s; up to %d runs per candidate, budget %s\n",
		dir, len(p.Faults), p.TimeLimit, strings.Join(classes, ","), opts.RunsPerCandidate, opts.Budget)
	fails := func(c shrink.Candidate) bool {
		t := shrinkCandidate(orig, events, c)
		att := ShrinkAttempt{Faults: c.Faults, TimeLimit: Duration(c.TimeLimit)}
		defer func() { rep.Candidates = append(rep.Candidates, att) }()
		fmt.Fprintf(out, "shrink: candidate %d: faults %v, time limit %s\n", len(rep.Candidates)+1, c.Faults, c.TimeLimit)
		for range opts.RunsPerCandidate {
			if ctx.Err() != nil || time.Now().After(deadline) {
				return false
			}
			o, err := Run(ctx, t, reg, io.Discard)
			rep.Runs++
			fmt.Fprintf(out, "shrink:   run %s\n", o.Dir)
			att.Runs = append(att.Runs, o.Dir)
			if err != nil {
				att.Found = append(att.Found, "error: "+firstLine(err.Error()))
				continue
			}
			found := anomalyClasses(o.Result)
			att.Found = append(att.Found, strings.TrimSpace(fmt.Sprintf("%s %s", o.Result.Valid, strings.Join(found, ","))))
			if o.Result.Valid == checker.Invalid && slices.ContainsFunc(found, func(a string) bool { return slices.Contains(classes, a) }) {
				att.Reproduced = true
				bestRun[fmt.Sprint(c.Faults, c.TimeLimit)] = o.Dir
				fmt.Fprintf(out, "shrink:   reproduced: %s (%s)\n", strings.Join(found, ","), o.Dir)
				return true
			}
		}
		fmt.Fprintf(out, "shrink:   not reproduced (%s)\n", strings.Join(att.Found, "; "))
		return false
	}
	r := shrink.Minimize(p, fails, shrink.Options{MaxCandidates: opts.MaxCandidates, Expired: func() bool {
		return ctx.Err() != nil || time.Now().After(deadline)
	}})
	best := shrinkCandidate(orig, events, r.Best)
	rep.BestFaults, rep.BestTimeLimit, rep.BestEvents = len(r.Best.Faults), best.TimeLimit, best.Schedule
	rep.Tried, rep.Exhausted = r.Tried, r.Exhausted
	rep.BestRun = bestRun[fmt.Sprint(r.Best.Faults, r.Best.TimeLimit)]
	if rep.BestRun == "" {
		rep.BestRun = dir
	}
	schedPath := filepath.Join(dir, FileShrinkSchedule)
	if err := writeScheduleTo(schedPath, best.Schedule); err != nil {
		return rep, err
	}
	rep.Command = "faultline test --replay " + shellQuote(rep.BestRun)
	rep.Flags = "faultline test " + strings.Join(CommandLine(best), " ") + " --schedule " + shellQuote(schedPath)
	jb, _ := json.MarshalIndent(rep, "", "  ")
	if err := os.WriteFile(filepath.Join(dir, FileShrink), append(jb, '\n'), 0o644); err != nil {
		return rep, err
	}
	how := "smallest reproduction"
	if rep.Exhausted {
		how += " within the budget (the search stopped at its bound)"
	}
	fmt.Fprintf(out, "shrink: %d candidates, %d runs; %s: %d of %d faults, time limit %s (was %s)\n  %s\nequivalently:\n  %s\nwritten to %s\n",
		rep.Tried, rep.Runs, how, rep.BestFaults, rep.Faults, time.Duration(rep.BestTimeLimit), time.Duration(rep.TimeLimit),
		rep.Command, rep.Flags, filepath.Join(dir, FileShrink))
	if ctx.Err() != nil {
		return rep, errors.Join(ErrInterrupted, ctx.Err())
	}
	return rep, nil
}

// shrinkProblem is the search over a schedule's faults. A fault is a
// start and its stop (nemesis.Pairs: the start's index in the schedule),
// kept or dropped together; one never stopped lasts to the time limit. A
// sequence mode's start carries all its steps (Event.Steps), so a sequence
// is one fault and its steps go only as a whole; each part of a composed
// entry (A+B) has a slot and so a start and stop of its own, and is kept
// or dropped on its own (the schedule stays valid either way: slots are
// independent).
func shrinkProblem(events []nemesis.Event, limit time.Duration) shrink.Problem {
	p := shrink.Problem{Faults: nemesis.Pairs(events), Ends: map[int]time.Duration{}, TimeLimit: limit}
	for _, id := range p.Faults {
		p.Ends[id] = p.TimeLimit
		if end := nemesis.PairEnd(events, id); end >= 0 {
			p.Ends[id] = end
		}
	}
	return p
}

// shrinkCandidate is the test a candidate runs: the original with only
// the kept faults' events and the candidate's time limit, stored under
// <name>-shrink.
func shrinkCandidate(orig Test, events []nemesis.Event, c shrink.Candidate) Test {
	t := orig
	t.Name = strings.TrimSuffix(orig.FullName(), "-shrink") + "-shrink"
	t.Schedule = nemesis.KeepPairs(events, c.Faults)
	if t.Schedule == nil {
		t.Schedule = []nemesis.Event{}
	}
	t.TimeLimit = Duration(c.TimeLimit)
	return t
}

// CommandLine writes the flags of `faultline test` that run t (all but
// its schedule, which --schedule or --replay gives).
func CommandLine(t Test) []string {
	d := func(v Duration) string { return time.Duration(v).String() }
	args := []string{
		"--name", t.FullName(), "--workload", t.Workload, "--nemesis", t.Nemesis.String(),
		"--nemesis-interval", d(t.NemesisInterval), "--nodes", strconv.Itoa(t.Nodes), "--topology", t.Topology,
		"--time-limit", d(t.TimeLimit), "--concurrency", strconv.Itoa(t.Concurrency),
		"--seed", strconv.FormatInt(t.Seed, 10), "--runtime", t.Runtime, "--store", t.Store,
		"--acks", strconv.Itoa(t.Acks.Int()), "--idempotent=" + strconv.FormatBool(t.Idempotent),
		"--replication-factor", strconv.Itoa(t.ReplicationFactor), "--partitions-per-topic", strconv.Itoa(t.PartitionsPerTopic),
		"--recovery-timeout", d(t.RecoveryTimeout), "--final-timeout", d(t.FinalTimeout),
		"--broker-binary", t.BrokerBinary, "--agent-binary", t.AgentBinary,
	}
	if t.Rate != 0 {
		args = append(args, "--rate", strconv.FormatFloat(t.Rate, 'g', -1, 64))
	}
	if t.Subscribe {
		args = append(args, "--subscribe")
	}
	if t.NemesisCycle {
		args = append(args, "--nemesis-cycle")
	}
	if t.DB != "" {
		args = append(args, "--db", t.DB)
	}
	if len(t.DockerHosts) > 0 {
		args = append(args, "--docker-host", PlacementText(t.DockerHosts))
	}
	if t.MixedConsumers {
		args = append(args, "--consumer-mode", "mixed")
	}
	if len(t.FailOnClientErrors) > 0 {
		args = append(args, "--fail-on-client-error", strings.Join(t.FailOnClientErrors, ","))
	}
	if t.CrashClientsInterval > 0 {
		args = append(args, "--crash-clients-interval", d(t.CrashClientsInterval))
	}
	if t.TxnRestartOneIn != 0 {
		args = append(args, "--txn-restart-one-in", strconv.Itoa(t.TxnRestartOneIn))
	}
	if t.TxnTimeout != 0 {
		args = append(args, "--txn-timeout", d(t.TxnTimeout))
	}
	if t.CrashClientsTarget != "" {
		args = append(args, "--crash-clients-target", t.CrashClientsTarget)
	}
	keys := make([]string, 0, len(t.BrokerConfig))
	for k := range t.BrokerConfig {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		args = append(args, "--broker-config", k+"="+t.BrokerConfig[k])
	}
	for i, a := range args {
		args[i] = shellQuote(a)
	}
	return args
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_=.,:/+@%") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
