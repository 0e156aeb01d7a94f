package harness

import (
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/faultline/faultline/checker"
	"github.com/faultline/faultline/nemesis"
	"github.com/faultline/faultline/reports"
	"github.com/faultline/faultline/workloads"
)

// The guarantee matrix (`faultline matrix`, `make test-jepsen-matrix`):
// configurations × faults, and planted bugs × faults, each cell with the
// verdict it must come out with, run over seeds, summed up in an index
// report. Configurations and faults are data: a new fault kind is one line
// of matrixFaults.

// Expectations of a matrix cell.
const (
	ExpectValid   = "valid"   // the configuration promises no loss under the fault
	ExpectInvalid = "invalid" // the configuration's trade-off or a planted bug loses data: the checker must find it
	ExpectEither  = "either"  // nothing is promised either way
)

// MatrixConfig is one producer/broker configuration of the matrix.
type MatrixConfig struct {
	AcksAll         bool
	MinISR          int
	Unclean         bool
	FlushPerMessage bool
}

// Name is a short label: acksall.isr2.clean.flushdef.
func (c MatrixConfig) Name() string {
	acks, unclean, flush := "1", "clean", "flushdef"
	if c.AcksAll {
		acks = "all"
	}
	if c.Unclean {
		unclean = "unclean"
	}
	if c.FlushPerMessage {
		flush = "flushmsg"
	}
	return fmt.Sprintf("acks%s.isr%d.%s.%s", acks, c.MinISR, unclean, flush)
}

// Guarantee reports whether c is the configuration that promises no loss
// of an acknowledged write under process and network faults: acks=all,
// min ISR 2, unclean election off.
func (c MatrixConfig) Guarantee() bool { return c.AcksAll && c.MinISR >= 2 && !c.Unclean }

// apply sets c on t.
func (c MatrixConfig) apply(t Test) Test {
	t.ReplicationFactor = 3
	if c.AcksAll {
		t.Acks, t.Idempotent = workloads.AcksAll, true
	} else {
		t.Acks, t.Idempotent = workloads.AcksLeader, false
	}
	t.BrokerConfig = map[string]string{
		"min.insync.replicas":            fmt.Sprint(c.MinISR),
		"unclean.leader.election.enable": fmt.Sprint(c.Unclean),
	}
	if c.FlushPerMessage {
		t.BrokerConfig["log.flush.interval.messages"] = "1"
	}
	return t
}

// matrixConfigs is every combination of acks 1/all, min ISR 1/2, unclean
// election on/off and the flush policy (default, per message).
func matrixConfigs() []MatrixConfig {
	var out []MatrixConfig
	for _, acksAll := range []bool{true, false} {
		for _, isr := range []int{2, 1} {
			for _, unclean := range []bool{false, true} {
				for _, flush := range []bool{false, true} {
					out = append(out, MatrixConfig{AcksAll: acksAll, MinISR: isr, Unclean: unclean, FlushPerMessage: flush})
				}
			}
		}
	}
	return out
}

// MatrixFault is one fault column: a --nemesis list. Fsync marks faults
// that lose what no fsync made durable (the guarantee then needs the
// per-message flush policy).
type MatrixFault struct {
	Name  string
	List  string
	Fsync bool
}

// matrixFaults are the fault columns, one line each. An entry whose list
// names a kind this tree's nemesis does not have (yet) is left out of the
// matrix (availableFaults), so a kind is added here before or after it
// exists.
var matrixFaults = []MatrixFault{
	{Name: "none", List: "none"},
	{Name: "kill", List: "kill"},
	{Name: "pause", List: "pause"},
	{Name: "partition", List: "partition"},
	{Name: "leader-loss", List: "partition:one,kill:leaders"}, // zombie and killed leaders, the acks=1 loss
	{Name: "power", List: "power:one,power:minority,power:leaders", Fsync: true},
	{Name: "power-all", List: "power:all", Fsync: true},
	{Name: "disk", List: "disk-error:one,disk-full:one,disk-slow:one,corrupt:one"},
	{Name: "mixed", List: "kill,pause,partition"},
	{Name: "stop", List: "stop"},
	{Name: "rolling-restart", List: "rolling-restart"},
	{Name: "membership", List: "membership"},
	{Name: "lagging-failover", List: "lagging-failover"},
	{Name: "packet", List: "packet"},
	{Name: "composed", List: "partition:one+kill:leaders"}, // A+B: a leader killed while a node is cut off
}

// availableFaults are the entries of matrixFaults this tree's nemesis can
// run, with their parsed lists.
func availableFaults() ([]MatrixFault, []nemesis.Spec) {
	var faults []MatrixFault
	var specs []nemesis.Spec
	for _, f := range matrixFaults {
		if s, err := nemesis.ParseSpec(f.List); err == nil {
			faults, specs = append(faults, f), append(specs, s)
		}
	}
	return faults, specs
}

// MatrixCell is one test of the matrix with the verdict it must reach.
type MatrixCell struct {
	Test   Test
	Config string // MatrixConfig.Name, or "guarantee+<bug config>" for planted cells
	Fault  string
	Bug    string // the unsafe.* switch, "" for none
	Expect string // ExpectValid, ExpectInvalid or ExpectEither
	// ExpectAnomalies are the classes that count as detecting the cell's
	// planted bug (its suite case's ExpectAnomalies); empty: any invalid
	// result counts.
	ExpectAnomalies []string
	Why             string
}

// judge says whether a run found what the cell looks for, with
// Case.Judge: invalid with one of the expected classes. found is Judge's
// text (naming a wrong class); wrongClass marks an invalid result with
// none of them.
func (c MatrixCell) judge(res checker.Result) (found string, wrongClass bool) {
	found, ok := Case{Expect: checker.Invalid, ExpectAnomalies: c.ExpectAnomalies}.Judge(res)
	return found, res.Valid == checker.Invalid && !ok
}

// expectFor is what a configuration promises under a fault.
func expectFor(c MatrixConfig, f MatrixFault) (string, string) {
	if f.Fsync && !c.FlushPerMessage && f.Name == "power-all" {
		return ExpectInvalid, "default flush policy: a power loss of every replica drops acknowledged writes no fsync made durable (Kafka's documented trade-off)"
	}
	if c.Guarantee() {
		if f.Fsync && !c.FlushPerMessage {
			return ExpectEither, "default flush policy: a power loss of several replicas may drop acknowledged unflushed writes; nothing is promised"
		}
		return ExpectValid, "the guarantee configuration (acks=all, min ISR 2, unclean election off" + map[bool]string{true: ", flush per message)", false: ")"}[f.Fsync]
	}
	if !c.AcksAll && f.Name == "leader-loss" {
		return ExpectInvalid, "acks=1: a leader acknowledges before any follower has the write; killed or cut-off leaders take such writes with them"
	}
	var why []string
	if !c.AcksAll {
		why = append(why, "acks=1 acknowledges before replication")
	}
	if c.MinISR < 2 {
		why = append(why, "min ISR 1 lets one replica acknowledge alone")
	}
	if c.Unclean {
		why = append(why, "unclean election may elect a replica without the acknowledged writes")
	}
	if f.Fsync && !c.FlushPerMessage {
		why = append(why, "the default flush policy loses unflushed writes to power loss")
	}
	return ExpectEither, strings.Join(why, "; ") + ": loss is allowed, not certain"
}

// MatrixCells builds the matrix from base (store, runtime, binaries, time
// limit, interval, seed): every configuration under every available fault,
// then the planted suite's cases (each bug under its own faults, expected
// invalid, and its control, expected valid), then every planted bug under
// every available fault (expected either: a fault the bug does not need
// may or may not expose it).
func MatrixCells(base Test) []MatrixCell {
	faults, specs := availableFaults()
	var cells []MatrixCell
	for _, c := range matrixConfigs() {
		for i, f := range faults {
			t := c.apply(base)
			t.Name, t.Nemesis = "m-"+c.Name()+"-"+f.Name, specs[i]
			expect, why := expectFor(c, f)
			cells = append(cells, MatrixCell{Test: t, Config: c.Name(), Fault: f.Name, Expect: expect, Why: why})
		}
	}
	var planted []MatrixCell
	for _, pc := range plantedSuite(base) {
		bug := plantedKey(pc.Test)
		cell := MatrixCell{Test: pc.Test, Config: "guarantee", Fault: "own: " + pc.Test.Nemesis.String(), Bug: bug, Why: pc.Why,
			Expect:          map[checker.Validity]string{checker.Valid: ExpectValid, checker.Invalid: ExpectInvalid}[pc.Expect],
			ExpectAnomalies: pc.ExpectAnomalies}
		cell.Test.Name = "m-" + pc.Test.Name
		cells = append(cells, cell)
		if bug != "" {
			planted = append(planted, cell)
		}
	}
	for _, pc := range planted {
		for i, f := range faults {
			t := pc.Test
			t.BrokerConfig = maps.Clone(pc.Test.BrokerConfig)
			if f.Fsync {
				t.BrokerConfig["log.flush.interval.messages"] = "1"
			}
			t.Name, t.Nemesis = pc.Test.Name+"-x-"+f.Name, specs[i]
			cells = append(cells, MatrixCell{Test: t, Config: "guarantee", Fault: f.Name, Bug: pc.Bug, Expect: ExpectEither, ExpectAnomalies: pc.ExpectAnomalies,
				Why: "a planted bug under a fault its named test does not use: found or not, both are information"})
		}
	}
	return cells
}

// plantedKey is the unsafe.* switch a test turns on ("" for none).
func plantedKey(t Test) string {
	for k, v := range t.BrokerConfig {
		if strings.HasPrefix(k, "unsafe.") && k != "unsafe.enable" && v == "true" {
			return k
		}
	}
	return ""
}

// SelectMatrixCells keeps the cells whose names match only, as
// SelectCases does.
func SelectMatrixCells(cells []MatrixCell, only string) ([]MatrixCell, error) {
	cases := make([]Case, len(cells))
	for i, c := range cells {
		cases[i] = Case{Test: c.Test}
	}
	kept, err := SelectCases(cases, only)
	if err != nil {
		return nil, err
	}
	names := map[string]bool{}
	for _, k := range kept {
		names[k.Test.Name] = true
	}
	var out []MatrixCell
	for _, c := range cells {
		if names[c.Test.Name] {
			out = append(out, c)
		}
	}
	return out, nil
}

// RunMatrix runs every cell once per seed (base seed .. +seeds-1), writes
// the index report (index.html and matrix.json) under
// <store>/matrix/<time>/ and returns its path and whether every cell came
// out as expected.
func RunMatrix(ctx context.Context, cells []MatrixCell, seeds int, store string, reg workloads.Registry, out io.Writer) (string, bool, error) {
	stamp := time.Now().UTC().Format("20060102T150405.000Z")
	dir := filepath.Join(store, "matrix", stamp)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", false, err
	}
	idx := reports.MatrixIndex{Title: fmt.Sprintf("faultline guarantee matrix, %d cells × %d seeds", len(cells), seeds), Generated: time.Now().UTC()}
	write := func() error { return reports.WriteMatrixDir(dir, idx) }
	for _, c := range cells {
		row := reports.MatrixCell{Name: c.Test.Name, Config: c.Config, Fault: c.Fault, Bug: c.Bug, Expect: c.Expect, ExpectAnomalies: c.ExpectAnomalies, Why: c.Why}
		for s := range seeds {
			if ctx.Err() != nil {
				break
			}
			t := c.Test
			t.Seed = c.Test.Seed + int64(s)
			start := time.Now()
			o, err := Run(ctx, t, reg, out)
			r := reports.MatrixRun{Seed: t.Seed, Took: time.Since(start)}
			if o.Dir != "" {
				if rel, rerr := filepath.Rel(dir, o.Dir); rerr == nil {
					r.Link = filepath.ToSlash(filepath.Join(rel, reports.FileReport))
				}
			}
			if err != nil {
				r.Found = "error"
				r.Error = firstLine(err.Error())
			} else {
				r.Found = o.Result.Valid.String()
				r.Anomalies = anomalyClasses(o.Result)
				r.Judged, r.WrongClass = c.judge(o.Result)
				if h, herr := checker.ReadHistory(filepath.Join(o.Dir, reports.FileHistory)); herr == nil {
					r.FirstAnomaly, r.HasFirstAnomaly = reports.FirstAnomaly(o.Result, h)
				}
			}
			row.Runs = append(row.Runs, r)
		}
		idx.Cells = append(idx.Cells, row)
		if err := write(); err != nil { // after every cell, so a long matrix shows progress
			return dir, false, err
		}
		if ctx.Err() != nil {
			break
		}
	}
	if err := write(); err != nil {
		return dir, false, err
	}
	sum := idx.Summarize()
	fmt.Fprintf(out, "matrix: %d cells, %d runs: %d as expected, %d not; index %s\n", len(idx.Cells), sum.Runs, sum.CellsOK, sum.CellsFailed, filepath.Join(dir, reports.FileMatrixIndex))
	return dir, sum.CellsFailed == 0 && ctx.Err() == nil, nil
}
