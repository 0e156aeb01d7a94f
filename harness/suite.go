package harness

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/faultline/faultline/checker"
	"github.com/faultline/faultline/nemesis"
	"github.com/faultline/faultline/reports"
	"github.com/faultline/faultline/workloads"
)

// Case is one test of a suite with the verdict it must come out with.
type Case struct {
	Test Test
	// Expect is the verdict the case must reach: Valid for the durability
	// configuration, Invalid where the seeds say loss is expected (a
	// harness that cannot find a known loss is broken).
	Expect checker.Validity
	// ExpectAnomalies, for an Invalid case, are the anomaly classes that
	// count as finding what the case looks for: the case passes only when
	// the result's anomalies (those that make it invalid) include at least
	// one of them. Empty: any invalid result passes.
	ExpectAnomalies []string
	// Why says what the case proves, for the table.
	Why string
}

// durable is the configuration the suite gates on: acks=all,
// min.insync.replicas=2, RF=3, unclean leader election off.
func durable(t Test) Test {
	t.Acks, t.Idempotent, t.ReplicationFactor = workloads.AcksAll, true, 3
	t.BrokerConfig = map[string]string{"min.insync.replicas": "2", "unclean.leader.election.enable": "false"}
	return t
}

// Suites are the named suites `faultline suite` runs.
var Suites = map[string]func(base Test) []Case{
	// gating is `make test-jepsen`: the durability configuration under
	// every fault class (the disk suite's cases included), each expected
	// valid, acks=1 under leader kills and the default flush policy under
	// a power loss of every node, each expected to lose acknowledged
	// writes, the compaction workload under kills, and the planted bugs a
	// 60 s test catches in every seed measured (gatingPlanted).
	"gating": func(base Test) []Case {
		mk := func(name string, kinds ...nemesis.Kind) Test {
			t := durable(base)
			t.Name, t.Nemesis = name, nil
			for _, k := range kinds {
				t.Nemesis = append(t.Nemesis, nemesis.FaultSpec{Kind: k})
			}
			return t
		}
		// acks=1 loses what the leader acknowledged and no follower had
		// yet when it dies (seed 003). A kill leaves only a replication
		// round trip of such writes; a leader cut off from the other
		// nodes but not from clients (a zombie) acknowledges for the whole
		// partition, so the case mixes both, faster than the durable
		// cases, to find the loss in every run. The zombie is the leader
		// of a partition being written (deposed-leader-returns): until
		// 2026-12-06 it was any node (partition:one), and a gate run at
		// seed 1 found no loss when the node cut off led no partition the
		// clients were writing then.
		lossy := base
		lossy.Name, lossy.Nemesis = "acks1-leader-loss", nemesis.Spec{
			{Kind: nemesis.KindPartition, Mode: nemesis.PartitionDeposedLeaderReturns}, {Kind: nemesis.KindKill, Mode: nemesis.TargetLeaders},
		}
		lossy.NemesisInterval = Duration(min(time.Duration(base.NemesisInterval), 8*time.Second))
		lossy.Acks, lossy.Idempotent, lossy.ReplicationFactor = workloads.AcksLeader, false, 3
		// A 4 s session (Kafka's is 9 s) has the controller fence the
		// cut-off leader early in its 10 s cut and elect a leader without
		// the writes it acknowledged meanwhile: with 9 s the fencing came
		// after partition:one's cut had healed in one gate run, the
		// followers had caught up, and the case found no loss.
		lossy.BrokerConfig = map[string]string{"min.insync.replicas": "1", "unclean.leader.election.enable": "true", "broker.session.timeout.ms": "4000"}
		// It loses acknowledged writes, so its final reads never reach the
		// highest offset anyone saw and would wait out their whole timeout;
		// what the cluster holds is read within seconds (as for
		// power-all-default-flush), and the gate's 30 minutes are tight.
		lossy.FinalTimeout = Duration(min(time.Duration(base.FinalTimeout), 20*time.Second))
		// Composed, overlapping faults (Jepsen's combined nemesis): a
		// leader killed while a node is cut off, a failover onto a
		// lagging replica, packet loss and a node leaving and rejoining,
		// each kind on its own staggered timeline, healed before each
		// stable period.
		composed := durable(base)
		composed.Name, composed.NemesisOverlap = "durable-composed", true
		composed.Nemesis = nemesis.Spec{
			{Kind: nemesis.KindPartition, Mode: nemesis.PartitionOne, With: []nemesis.FaultSpec{{Kind: nemesis.KindKill, Mode: nemesis.TargetLeaders}}},
			{Kind: nemesis.KindLaggingFailover, Mode: nemesis.LaggingCut},
			{Kind: nemesis.KindPacket, Mode: nemesis.PacketLoss},
			{Kind: nemesis.KindMembership},
		}
		composed.NemesisInterval = Duration(min(time.Duration(base.NemesisInterval), 8*time.Second))
		// A leader cut off from its followers only, then killed while
		// they are still in the ISR: the window in which a leader that
		// acknowledges too early (before its ISR has the write, or with
		// a high watermark ahead of it) loses what it acknowledged.
		leaderCut := durable(base)
		leaderCut.Name = "durable-leader-cut"
		leaderCut.Nemesis = nemesis.Spec{{Kind: nemesis.KindPartition, Mode: nemesis.PartitionLeaderCutThenKilled}}
		leaderCut.NemesisInterval = Duration(min(time.Duration(base.NemesisInterval), 8*time.Second))
		return append([]Case{
			{Test: mk("durable-none", nemesis.KindNone), Expect: checker.Valid, Why: "no faults: the baseline"},
			{Test: mk("durable-kill", nemesis.KindKill), Expect: checker.Valid, Why: "kill -9 of nodes, leaders, controller"},
			{Test: mk("durable-partition", nemesis.KindPartition), Expect: checker.Valid, Why: "network partitions between nodes"},
			{Test: mk("durable-pause", nemesis.KindPause), Expect: checker.Valid, Why: "SIGSTOP and SIGCONT of nodes, leaders, controller"},
			{Test: leaderCut, Expect: checker.Valid, Why: "a leader of a partition being written cut off from its followers, then killed before they leave the ISR: nothing acknowledged is lost"},
			{Test: composed, Expect: checker.Valid, Why: "overlapping faults: a leader kill during a partition, failover next to a lagging replica, packet loss, a node leaving and rejoining"},
			{Test: lossy, Expect: checker.Invalid, Why: "acks=1 + leader kills and zombie leaders lose acknowledged writes (seed 003): the checker must find it"},
		}, append(diskCases(base), gatingExtra(base)...)...)
	},
	// disk runs the durability configuration on the fault filesystem
	// (`make test-jepsen-disk`): power losses, disk errors and corruption.
	"disk": diskCases,
	// single runs against one node (the process runtime works everywhere):
	// a smoke test of the whole pipeline.
	"single": func(base Test) []Case {
		t := base
		t.Nodes, t.ReplicationFactor = 1, 1
		t.BrokerConfig = map[string]string{"log.flush.interval.messages": "1"}
		none, kill := t, t
		none.Name, none.Nemesis = "single-none", nemesis.Spec{{Kind: nemesis.KindNone}}
		kill.Name, kill.Nemesis = "single-kill", nemesis.Spec{{Kind: nemesis.KindKill}}
		return []Case{
			{Test: none, Expect: checker.Valid, Why: "one node, no faults"},
			{Test: kill, Expect: checker.Valid, Why: "one node killed and restarted, every message fsynced"},
		}
	},
	"planted": plantedSuite, // every planted bug caught, and valid without it (suite_planted.go)
	"txn":     txnSuite,     // transactions and compaction under kills, and their planted bugs (suite_txn.go)
	// kfake runs franz-go's kfake (--db kfake), a broker this project did
	// not write, through the same pipeline: one node (kfake is a whole
	// cluster in one process) at RF 1. Without faults it must be valid;
	// killed and restarted it comes back empty (it keeps everything in
	// memory), so the checker must find the acknowledged writes lost.
	"kfake": func(base Test) []Case {
		t := base
		t.DB, t.Nodes, t.ReplicationFactor, t.Topology = "kfake", 1, 1, "combined"
		t.BrokerConfig = nil
		none, kill := t, t
		none.Name, none.Nemesis = "kfake-none", nemesis.Spec{{Kind: nemesis.KindNone}}
		kill.Name, kill.Nemesis = "kfake-kill", nemesis.Spec{{Kind: nemesis.KindKill}}
		kill.NemesisInterval = Duration(min(time.Duration(base.NemesisInterval), 10*time.Second))
		return []Case{
			{Test: none, Expect: checker.Valid, Why: "kfake without faults: the pipeline works on a broker we did not write"},
			{Test: kill, Expect: checker.Invalid, Why: "kfake keeps nothing across a restart: acknowledged writes are lost and the checker must say so"},
		}
	},
}

// SuiteNames lists the suites in name order.
func SuiteNames() []string {
	names := make([]string, 0, len(Suites))
	for n := range Suites {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// SelectCases keeps the cases whose test name matches one of the
// comma-separated patterns in only (an exact name, or a prefix ending in
// "*"); an empty only keeps every case. A pattern that matches no case is
// an error naming the suite's tests, so a typo never runs an empty suite.
func SelectCases(cases []Case, only string) ([]Case, error) {
	if strings.TrimSpace(only) == "" {
		return cases, nil
	}
	var out []Case
	keep := map[int]bool{}
	for _, pat := range strings.Split(only, ",") {
		pat = strings.TrimSpace(pat)
		if pat == "" {
			continue
		}
		matched := false
		for i, c := range cases {
			n := c.Test.Name
			if n == pat || (strings.HasSuffix(pat, "*") && strings.HasPrefix(n, strings.TrimSuffix(pat, "*"))) {
				matched, keep[i] = true, true
			}
		}
		if !matched {
			names := make([]string, len(cases))
			for i, c := range cases {
				names[i] = c.Test.Name
			}
			return nil, fmt.Errorf("--only %q matches no test of the suite (its tests: %s)", pat, strings.Join(names, ", "))
		}
	}
	for i, c := range cases {
		if keep[i] {
			out = append(out, c)
		}
	}
	return out, nil
}

// SuiteRow is one line of the suite's table.
type SuiteRow struct {
	Name     string
	Expected checker.Validity
	// ExpectAnomalies are the case's expected classes; Anomalies the
	// classes the run found (those that make it invalid).
	ExpectAnomalies []string
	Anomalies       []string
	Found           string // valid, invalid, unknown, or error: ...
	OK              bool
	// FirstAnomaly is the time of the first operation an anomaly names,
	// from the workload's first operation (0 when none).
	FirstAnomaly time.Duration
	Dir          string
	Took         time.Duration
}

// Judge says whether a case's result is what the case expects: the
// expected validity and, for an invalid case with ExpectAnomalies, at
// least one of those classes among the anomalies found. The row's Found
// names a wrong class ("invalid (duplicate; expected lost-write)").
func (c Case) Judge(res checker.Result) (found string, ok bool) {
	found = res.Valid.String()
	if res.Valid != c.Expect {
		return found, false
	}
	if c.Expect != checker.Invalid || len(c.ExpectAnomalies) == 0 {
		return found, true
	}
	bad := res.BadAnomalies()
	for _, a := range bad {
		if slices.Contains(c.ExpectAnomalies, a) {
			return found, true
		}
	}
	return fmt.Sprintf("%s (%s; expected %s)", found, strings.Join(bad, ","), strings.Join(c.ExpectAnomalies, " or ")), false
}

// RunSuite runs every case in order, with the workloads of reg, and prints
// a table of test, expected, found. Each test's test.json records the
// expected verdict and the suite run; at the end the suite's index page
// (reports.SuiteIndexFile in the store) lists every run with both verdicts. It returns the rows and whether every
// case came out as expected.
func RunSuite(ctx context.Context, cases []Case, reg workloads.Registry, out io.Writer) ([]SuiteRow, bool) {
	var rows []SuiteRow
	var runs []reports.SuiteRun
	var warnings []string
	all := true
	stamp := time.Now().UTC().Format("20060102T150405.000Z")
	for _, c := range cases {
		start := time.Now()
		// test.json records what the suite expects, and which suite run
		// this was, for the report and the store browser.
		c.Test.Expected, c.Test.Suite = c.Expect.String(), stamp
		o, err := Run(ctx, c.Test, reg, out)
		row := SuiteRow{Name: c.Test.FullName(), Expected: c.Expect, ExpectAnomalies: c.ExpectAnomalies, Dir: o.Dir, Took: time.Since(start)}
		if err != nil {
			row.Found = "error: " + firstLine(err.Error())
		} else {
			row.Found, row.OK = c.Judge(o.Result)
			if o.Faults.AllFailed() {
				// The faults meant to test something may never have
				// happened: the verdict may say nothing about them. Not a
				// failure of its own, since a start that errored may
				// still have hit its targets (a kill of three nodes with
				// one error, a sequence whose last wait timed out).
				row.Found += " (every fault start failed: " + o.Faults.String() + ")"
				warnings = append(warnings, fmt.Sprintf("%s: every fault start failed, the verdict may not cover its faults: %s", row.Name, o.Faults))
			}
			row.Anomalies = o.Result.BadAnomalies()
			if o.Result.FirstAnomalyNs != nil {
				row.FirstAnomaly = time.Duration(*o.Result.FirstAnomalyNs)
			}
		}
		all = all && row.OK
		rows = append(rows, row)
		runs = append(runs, reports.SuiteRun{Name: row.Name, Expected: row.Expected.String(), Found: row.Found, OK: row.OK, Dir: row.Dir, Took: row.Took, Why: c.Why})
		if ctx.Err() != nil {
			break
		}
	}
	tw := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TEST\tEXPECTED\tFOUND\tANOMALIES\tFIRST\tRESULT\tTOOK\tRUN")
	for _, r := range rows {
		res := "ok"
		if !r.OK {
			res = "FAILED"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Name, r.expected(), r.Found, dashIfEmpty(strings.Join(r.Anomalies, ",")),
			firstText(r.FirstAnomaly), res, r.Took.Round(time.Second), r.Dir)
	}
	tw.Flush()
	for _, w := range warnings {
		fmt.Fprintf(out, "WARNING: %s\n", w)
	}
	if len(cases) > 0 {
		store := cases[0].Test.Store
		if err := reports.WriteSuiteIndex(store, stamp, runs); err != nil {
			fmt.Fprintf(out, "faultline: suite index not written: %v\n", err)
		} else {
			fmt.Fprintf(out, "suite index: %s\n", filepath.Join(store, reports.SuiteIndexFile(stamp)))
		}
	}
	return rows, all
}

// expected is the EXPECTED column: the verdict, and the classes an
// invalid case must find.
func (r SuiteRow) expected() string {
	if len(r.ExpectAnomalies) == 0 {
		return r.Expected.String()
	}
	return fmt.Sprintf("%s (%s)", r.Expected, strings.Join(r.ExpectAnomalies, "|"))
}

func dashIfEmpty(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func firstText(d time.Duration) string {
	if d <= 0 {
		return "-"
	}
	return d.Round(100 * time.Millisecond).String()
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// diskCases are the disk suite: the durability configuration on the fault
// filesystem under power losses, disk errors and corruption, and the default
// flush policy under a power loss of every node, expected to lose writes.
func diskCases(base Test) []Case {
	mk := func(name string, spec nemesis.Spec, extra map[string]string) Test {
		t := durable(base)
		t.Name, t.Nemesis = name, spec
		t.TimeLimit = Duration(min(time.Duration(base.TimeLimit), 120*time.Second))
		for k, v := range extra {
			t.BrokerConfig[k] = v
		}
		return t
	}
	perMessage := map[string]string{"log.flush.interval.messages": "1"}
	// cycled starts the faults in the order named, at most every interval,
	// so that a 60 s run meets each of them (drawn at random, a 15 s
	// interval gives two faults, often of one kind).
	cycled := func(t Test, interval time.Duration) Test {
		t.NemesisCycle = true
		t.NemesisInterval = Duration(min(time.Duration(base.NemesisInterval), interval))
		return t
	}
	// After the power loss of every replica the logs end below offsets the
	// clients saw, so the final reads never reach "the highest offset
	// anyone saw" and wait out their whole timeout; everything the healed
	// cluster still holds is read within seconds, so 20 s is plenty.
	lossy := mk("power-all-default-flush", nemesis.Spec{{Kind: nemesis.KindPower, Mode: nemesis.TargetAll}}, nil)
	lossy.FinalTimeout = Duration(min(time.Duration(base.FinalTimeout), 20*time.Second))
	return []Case{
		{Test: lossy,
			Expect: checker.Invalid, Why: "default flush policy: a power loss of every replica at once loses acknowledged writes (Kafka's trade-off): the checker must find it"},
		// power:all (seed 002's case) first, so that a slow restart never
		// leaves it out.
		{Test: cycled(mk("durable-power", nemesis.Spec{
			{Kind: nemesis.KindPower, Mode: nemesis.TargetAll}, {Kind: nemesis.KindPower, Mode: nemesis.TargetMinority},
			{Kind: nemesis.KindPower, Mode: nemesis.TargetOne},
		}, perMessage), 6*time.Second), Expect: checker.Valid, Why: "every message fsynced before it is acknowledged: power losses of one node, a minority and all lose nothing"},
		{Test: mk("durable-power-then-leader", nemesis.Spec{
			{Kind: nemesis.KindPower, Mode: nemesis.PowerThenLeader},
		}, nil), Expect: checker.Valid, Why: "default flush, min ISR 2: a replica that lost its unflushed tail must not lead before it caught up (KIP-966)"},
		// The faults that restart a node (disk-error stops its broker, and
		// heal starts it again; corrupt kills it and damages its data in a
		// one-shot container) come last, so only one restart runs before
		// the last start.
		{Test: cycled(mk("durable-disk", nemesis.Spec{
			{Kind: nemesis.KindDiskFull, Mode: nemesis.TargetOne}, {Kind: nemesis.KindDiskSlow, Mode: nemesis.TargetOne},
			{Kind: nemesis.KindDiskError, Mode: nemesis.TargetOne}, {Kind: nemesis.KindCorrupt, Mode: nemesis.TargetOne},
		}, nil), 5*time.Second), Expect: checker.Valid, Why: "EIO, a full disk, slow fsyncs and corruption while down, one node at a time, lose nothing"},
	}
}

// gatingPlanted are the planted cases the gate runs: those a 60 s test
// caught in every seed measured (README "Measured detection"), so that the
// gate proves, in every CI run, that the suite still finds a real bug.
var gatingPlanted = []string{"planted-idempotence-off", "planted-recovery-skip-crc", "planted-offsets-unreplicated", "planted-ack-before-fsync"}

// gatingTxn are the txn suite's cases the gate runs: compaction and
// transactions under kills of the nodes they depend on (expected valid),
// and the planted transaction and compaction bugs every measured run
// caught (expected invalid with their classes).
var gatingTxn = []string{"compact-kill", "txn-coordinator", "planted-read-committed-past-lso", "planted-cleaner-drops-latest"}

// gatingExtra is the gatingTxn and gatingPlanted cases.
func gatingExtra(base Test) []Case {
	txn, err := SelectCases(txnSuite(base), strings.Join(gatingTxn, ","))
	if err != nil {
		panic(err) // gatingTxn names the txn suite's cases
	}
	planted, err := SelectCases(plantedSuite(base), strings.Join(gatingPlanted, ","))
	if err != nil {
		panic(err) // gatingPlanted names the planted suite's cases
	}
	return append(txn, planted...)
}
