package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/faultline/faultline/checker"
	"github.com/faultline/faultline/harness"
	"github.com/faultline/faultline/harness/profile"
	"github.com/faultline/faultline/nemesis"
	"github.com/faultline/faultline/nemesis/agent"
	"github.com/faultline/faultline/nemesis/faultfs"
	"github.com/faultline/faultline/reports"
	"github.com/faultline/faultline/workloads"
	"github.com/faultline/faultline/workloads/compact"
	"github.com/faultline/faultline/workloads/queue"
)

const usage = `faultline: prove that a Kafka-compatible broker keeps its durability promises.

Usage:
  faultline test   [flags]          run a test: cluster, workload, faults, check, report
  faultline suite  [--suite gating|single] [flags]   run a suite of tests with expected verdicts (make test-jepsen)
  faultline matrix [--seeds N] [--only CELL,...] [--list] [flags]
                   the guarantee matrix: configurations × faults × planted bugs, with an index report
                   (make test-jepsen-matrix)
  faultline shrink RUN_DIR [--runs-per-candidate 2] [--budget 30m]
                   shrink an invalid run to its smallest reproduction (fewer faults, shorter time limit)
  faultline check  HISTORY.jsonl    re-check a stored history
  faultline report RUN_DIR          re-render report.html and junit.xml of a stored run
  faultline serve  [--store DIR] [--addr HOST:PORT]   browse the store in a web browser
  faultline profiles [NAME|PATH]    list the built-in broker profiles (--db), or check and show one
  faultline agent  drop IP[,IP...] | heal | status | dial HOST:PORT | run | disk CMD | corrupt
                   the in-node fault agent (inside node containers)

Exit codes (as Jepsen's): 0 valid, 1 anomalies found, 2 unknown, 254 bad arguments, 255 internal error.
Run 'faultline <command> --help' for a command's flags.
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return harness.ExitBadArgs
	}
	switch args[0] {
	case "test":
		return cmdTest(args[1:], stdout, stderr)
	case "suite":
		return cmdSuite(args[1:], stdout, stderr)
	case "matrix":
		return cmdMatrix(args[1:], stdout, stderr)
	case "shrink":
		return cmdShrink(args[1:], stdout, stderr)
	case "check":
		return cmdCheck(args[1:], stdout, stderr)
	case "report":
		return cmdReport(args[1:], stdout, stderr)
	case "serve":
		return cmdServe(args[1:], stdout, stderr)
	case "agent":
		return cmdAgent(args[1:], stdout, stderr)
	case "profiles":
		return cmdProfiles(args[1:], stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	}
	fmt.Fprintf(stderr, "faultline: unknown command %q\n\n%s", args[0], usage)
	return harness.ExitBadArgs
}

// kvFlags collects repeated k=v flags.
type kvFlags map[string]string

func (k kvFlags) String() string { return "" }
func (k kvFlags) Set(s string) error {
	key, v, ok := strings.Cut(s, "=")
	if !ok || key == "" {
		return fmt.Errorf("want key=value, got %q", s)
	}
	k[key] = v
	return nil
}

// clientFlags are the client-fault and client-evidence flags that test
// and suite share.
type clientFlags struct {
	failOn       string
	consumerMode string
	crashEvery   time.Duration
	crashTarget  string
}

func (c *clientFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&c.failOn, "fail-on-client-error", "", "comma-separated client error codes that make the test invalid when a client gets one ("+strings.Join(checker.SuspectClientErrors, ", ")+"); each is counted in results.json's client-errors either way (default none)")
	fs.StringVar(&c.consumerMode, "consumer-mode", "", "assign, subscribe (consumer groups) or mixed (odd-numbered processes subscribe, the others assign, in one run); default: --subscribe's choice")
	fs.DurationVar(&c.crashEvery, "crash-clients-interval", 0, "crash a seeded choice of client every interval (Jepsen's crash-clients): its operation in flight ends info (a transaction that can only end aborted stays fail) and a new client with a new process number takes over, under --txn half of them (seeded) with the crashed client's transactional.id (default 0: never)")
	fs.StringVar(&c.crashTarget, "crash-clients-target", "", "which client --crash-clients-interval crashes: random (a seeded choice, Jepsen's; the default), stalled (the one whose operation has been in flight longest, as an operator restarts a stuck application: a client held up behind a prepared commit or an unavailable coordinator; a seeded choice when none is in flight) or zombie (--txn: a client mid-operation is paused instead, what it sends held in flight, while a successor takes over its transactional.id; it resumes once a successor's transaction ended, and everything it sends then must be fenced; a plain crash, with a successor, when no operation is in flight or the client cannot pause)")
}

// apply sets the flags' choices on t; the error names the bad flag.
func (c *clientFlags) apply(t *harness.Test) error {
	if c.failOn != "" {
		t.FailOnClientErrors = nil
		for _, code := range strings.Split(c.failOn, ",") {
			if code = strings.TrimSpace(code); code != "" {
				t.FailOnClientErrors = append(t.FailOnClientErrors, code)
			}
		}
	}
	switch c.consumerMode {
	case "":
	case "assign":
		t.Subscribe, t.MixedConsumers = false, false
	case "subscribe":
		t.Subscribe, t.MixedConsumers = true, false
	case "mixed":
		t.Subscribe, t.MixedConsumers = false, true
	default:
		return fmt.Errorf("--consumer-mode: must be assign, subscribe or mixed, got %q", c.consumerMode)
	}
	t.CrashClientsInterval = harness.Duration(c.crashEvery)
	if c.crashTarget != "" {
		t.CrashClientsTarget = c.crashTarget
	}
	return nil
}

// workloadRegistry lists the workloads --workload names.
var workloadRegistry = workloads.Registry{"queue": queue.New, "compact": compact.New}

func cmdTest(args []string, stdout, stderr io.Writer) int {
	t, code := parseTest(args, stderr)
	if code >= 0 {
		return code
	}
	ctx, stop := interruptible()
	defer stop()
	out, err := harness.Run(ctx, t, workloadRegistry, stdout)
	if err != nil {
		fmt.Fprintf(stderr, "faultline test: %v\n", err)
		var setup *harness.SetupError
		if errors.As(err, &setup) || errors.Is(err, harness.ErrInterrupted) || out.Dir != "" {
			return harness.ExitInternal
		}
		return harness.ExitBadArgs
	}
	return out.ExitCode()
}

// parseTest reads `faultline test`'s flags into a validated Test. A code
// of 0 or more means stop and exit with it (--help, bad arguments); -1
// means run the test.
func parseTest(args []string, stderr io.Writer) (harness.Test, int) {
	t := harness.DefaultTest()
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var nemesisList, replay, schedule, dockerHosts string
	acks := t.Acks.Int()
	limit := time.Duration(t.TimeLimit)
	interval := time.Duration(t.NemesisInterval)
	recovery := time.Duration(t.RecoveryTimeout)
	txnTimeout := time.Duration(t.TxnTimeout)
	final := time.Duration(t.FinalTimeout)
	brokerConfig := kvFlags{}
	var clients clientFlags
	clients.register(fs)
	fs.StringVar(&t.Name, "name", "", "test name, the store directory under --store (default: workload-nemesis-Nn)")
	fs.StringVar(&t.Workload, "workload", t.Workload, "workload: queue (Jepsen's Kafka workload; --txn for transactions) or compact (keyed upserts and deletes to a cleanup.policy=compact topic, checked against the latest acknowledged value per key)")
	fs.StringVar(&nemesisList, "nemesis", "none", nemesisHelp)
	fs.DurationVar(&interval, "nemesis-interval", interval, "mean time between fault events (each gap drawn uniform in [0, 2×interval): Jepsen's stagger), and the fault-free stable period between rounds")
	fs.BoolVar(&t.NemesisCycle, "nemesis-cycle", false, "take the --nemesis entries in the order the list names them, round after round (default false: each drawn at random; not with --nemesis-overlap)")
	fs.BoolVar(&t.NemesisOverlap, "nemesis-overlap", false, "let faults of different kinds overlap: each kind of the --nemesis list runs on a timeline of its own in rounds of 4×interval, all healed before each stable period (default: one entry in force at a time)")
	fs.IntVar(&t.Nodes, "nodes", t.Nodes, "number of nodes n1..nK")
	fs.StringVar(&t.Topology, "topology", t.Topology, "combined (the first min(3, nodes) nodes are broker+controller, the rest brokers) or split (n1..n3 controllers only, the rest brokers; needs 4+ nodes)")
	fs.DurationVar(&limit, "time-limit", limit, "how long the workload runs before healing and final reads")
	fs.Float64Var(&t.Rate, "rate", t.Rate, "target operations per second over all workers (default 0: as fast as the workers go)")
	fs.IntVar(&t.Concurrency, "concurrency", t.Concurrency, "number of client workers")
	fs.Int64Var(&t.Seed, "seed", 0, "seed of the fault schedule and the workload's choices, printed and stored in test.json (default: a random seed)")
	fs.StringVar(&t.Runtime, "runtime", t.Runtime, "docker (nodes in containers) or process (local child processes on 127.0.0.x; kill and pause only)")
	fs.StringVar(&dockerHosts, "docker-host", "", "place nodes on Docker Engines: NODE=ENDPOINT,... with ENDPOINT unix:///PATH, tcp://HOST:PORT, context:NAME or a Docker context's name; nodes not named run on DOCKER_HOST (else the local socket); the nodes' addresses must be routable between the hosts and from here (README: Several Docker hosts) (default none: every node on DOCKER_HOST)")
	fs.StringVar(&t.Store, "store", t.Store, "directory runs are written under")
	fs.Var(brokerConfig, "broker-config", "server.properties override for every node, key=value (repeatable; default none)")
	fs.IntVar(&acks, "acks", acks, "producer acks: -1 (all), 1 or 0")
	fs.BoolVar(&t.Idempotent, "idempotent", t.Idempotent, "idempotent producer (only with acks=-1; --idempotent=false turns it off)")
	fs.IntVar(&t.ReplicationFactor, "replication-factor", t.ReplicationFactor, "replication factor of the workload's topics (capped at --nodes)")
	fs.IntVar(&t.PartitionsPerTopic, "partitions-per-topic", t.PartitionsPerTopic, "partitions per topic; key k is partition k mod P of topic t<k div P>")
	fs.BoolVar(&t.Subscribe, "subscribe", t.Subscribe, "consumers subscribe through consumer groups instead of assigning partitions (default false: assign)")
	fs.BoolVar(&t.Txn, "txn", t.Txn, "queue workload: every operation is a transaction of up to 4 sends and polls over several partitions (transactional producers, read_committed consumers, offsets committed in the transaction, one in ten aborted on purpose); compact workload: every put is a transaction of its own (one in four aborted on purpose after being held open up to 3 s) and the final scan reads committed records; after the final reads every transactional.id a transaction began under is probed with a new producer's InitProducerId (stuck-transactional-id when its coordinator answers CONCURRENT_TRANSACTIONS without a break for 20 s); needs --acks -1, the idempotent producer and assign (default false)")
	fs.IntVar(&t.TxnRestartOneIn, "txn-restart-one-in", t.TxnRestartOneIn, "with --txn: the odds that a committed transaction's producer is restarted at once under its transactional.id, its InitProducerId meeting the commit's markers perhaps still being written (1: after every commit; negative: never; default 0: one in ten)")
	fs.DurationVar(&txnTimeout, "txn-timeout", txnTimeout, "with --txn: the producers' transaction.timeout.ms, after which a coordinator aborts an open transaction by itself; shorter than a partition between clients and coordinator, it races the coordinator's abort against the client's commit (default 0: four request timeouts, 20 s)")
	fs.DurationVar(&recovery, "recovery-timeout", recovery, "how long to wait for the cluster to recover after healing")
	fs.DurationVar(&final, "final-timeout", final, "bound on the final reads (every key read from the beginning up to the highest offset known for it)")
	fs.StringVar(&t.DB, "db", "", "the broker under test: a built-in profile ("+strings.Join(profile.Builtin(), ", ")+") or a profile file (YAML; see `faultline profiles`); default faultline, the reference broker")
	fs.StringVar(&t.BrokerBinary, "broker-binary", t.BrokerBinary, "broker executable (static, for docker)")
	fs.StringVar(&t.AgentBinary, "agent-binary", t.AgentBinary, "faultline executable used as the in-node agent (docker)")
	fs.StringVar(&replay, "replay", "", "a stored run (its directory or its test.json): run it again with the same spec, seed and fault schedule, each fault at the same time on the same nodes, from its schedule.json (other flags are ignored; default none)")
	fs.StringVar(&schedule, "schedule", "", "schedule.json of a stored run: execute these fault events (times, slots, modes, seeds, nodes) instead of drawing a schedule from the seed; --nemesis must be the list the run had, whose slots the events name (default none)")
	fs.Usage = func() {
		fmt.Fprint(stderr, `usage: faultline test [flags]
Starts a cluster, runs the workload under the faults, heals, waits for
recovery, reads every partition to its end, checks the history and writes
DIR/<test>/<time>/{history.jsonl,results.json,report.html,junit.xml,test.json,nodes/<node>/broker.log}
(DIR is --store; DIR/latest points at the newest run). Ctrl-C heals and
removes the cluster; a second Ctrl-C exits at once.
Exit: 0 valid, 1 anomalies found, 2 unknown, 254 bad arguments, 255 setup
failed or interrupted.

Flags:
`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return t, 0
		}
		return t, harness.ExitBadArgs
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "faultline test: unexpected arguments %v\n", fs.Args())
		return t, harness.ExitBadArgs
	}
	seedSet := false
	fs.Visit(func(f *flag.Flag) { seedSet = seedSet || f.Name == "seed" })
	if !seedSet {
		t.Seed = time.Now().UnixNano() % 1_000_000_007
	}
	if replay != "" {
		var exact bool
		var warning string
		var err error
		if t, exact, warning, err = harness.LoadReplay(replay); err != nil {
			fmt.Fprintf(stderr, "faultline test: --replay: %v\n", err)
			return t, harness.ExitBadArgs
		}
		if warning != "" {
			fmt.Fprintf(stderr, "faultline test: --replay: warning: %s\n", warning)
		}
		if !exact {
			fmt.Fprintf(stderr, "faultline test: --replay %s: the run has no %s (stored before schedules were recorded): the schedule is drawn from seed %d again\n", replay, harness.FileSchedule, t.Seed)
		}
	} else {
		spec, err := nemesis.ParseSpec(nemesisList)
		if err != nil {
			fmt.Fprintf(stderr, "faultline test: --nemesis: %v\n", err)
			return t, harness.ExitBadArgs
		}
		t.Nemesis = spec
		if t.Acks, err = workloads.AcksOf(acks); err != nil {
			fmt.Fprintf(stderr, "faultline test: --acks: %v\n", err)
			return t, harness.ExitBadArgs
		}
		t.TimeLimit, t.NemesisInterval = harness.Duration(limit), harness.Duration(interval)
		t.RecoveryTimeout, t.FinalTimeout = harness.Duration(recovery), harness.Duration(final)
		t.TxnTimeout = harness.Duration(txnTimeout)
		if len(brokerConfig) > 0 {
			t.BrokerConfig = brokerConfig
		}
		if t.ReplicationFactor > t.Nodes {
			t.ReplicationFactor = t.Nodes
		}
		if err := clients.apply(&t); err != nil {
			fmt.Fprintf(stderr, "faultline test: %v\n", err)
			return t, harness.ExitBadArgs
		}
		if dockerHosts != "" {
			if t.DockerHosts, err = harness.ParseDockerHosts(dockerHosts); err != nil {
				fmt.Fprintf(stderr, "faultline test: --docker-host: %v\n", err)
				return t, harness.ExitBadArgs
			}
		}
		if schedule != "" {
			if t.Schedule, err = harness.ReadSchedule(schedule); err != nil {
				fmt.Fprintf(stderr, "faultline test: --schedule: %v\n", err)
				return t, harness.ExitBadArgs
			}
		}
	}
	if err := t.Validate(workloadRegistry); err != nil {
		fmt.Fprintf(stderr, "faultline test: %v\n", err)
		return t, harness.ExitBadArgs
	}
	return t, -1
}

// interruptible returns a context that the first Ctrl-C (or SIGTERM)
// cancels: the run then heals its faults and removes its cluster. A second
// Ctrl-C is no longer caught and ends the process at once (the leftovers
// are removed by the next run).
func interruptible() (context.Context, context.CancelFunc) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		stop()
	}()
	return ctx, stop
}

// nemesisHelp documents every kind of the --nemesis grammar
// (nemesis.ParseSpec).
const nemesisHelp = `faults, comma-separated; KIND or KIND:MODE (no mode: one chosen at random each time); A+B composes faults of different kinds into one entry, started one after another and in force together (partition:one+kill:leaders: a leader killed while a node is cut off). Kinds:
  none                  no faults
  kill:MODE             SIGKILL, restart on the same data when it stops
  pause:MODE            SIGSTOP, SIGCONT when it stops
  stop:MODE             controlled shutdown (SIGTERM), restart on the same data when it stops
  partition:MODE        node-to-node traffic cut (never clients): one, halves, majorities-ring, controller; also lagging-then-leader (a node cut off from all but the controller for 10 s, leaving its ISRs, then the rest of one ISR it replicates killed), leader-and-follower (a leader and one in-sync follower cut off together past the session timeout: a zombie leader), deposed-leader-returns (a leader cut off from every node for 10 s while producers still write to it, healed, and once back in the ISR the rest of that ISR killed so it leads again), leader-cut-then-killed (a leader of a partition being written cut off from its followers only, then killed 1 s later while they are still in the ISR), coordinator (the group coordinator cut off from the other nodes), clients-coordinator (the clients cut off from a transaction coordinator; --txn), coordinator-cut-then-killed (a transaction coordinator cut off from all but the controller and one other node for 10 s, then killed with its last transactions' markers undelivered; --txn)
  packet:MODE           netem on the targets' interface (client traffic too), targets drawn from one, minority, leaders, all: delay (50-250 ms ± a quarter), loss (10-40%), duplicate (10-50%), reorder (25-50% sent ahead of a 20-80 ms delay), latency (20-80 ms, no jitter, nothing reordered); on a kernel without sch_netem loss is a netfilter rule on the node's input, delay, latency and reorder a netfilter queue the node's agent holds packets in, and duplicate is refused
  lagging-failover:MODE a follower of a partition is cut off (cut) or slowed (slow: 85% packet loss) until the metadata shows it out of the ISR, then healed and the partition's leader killed at once; restart when it stops
  rolling-restart       every node in turn: SIGTERM, start, back in every ISR before the next
  membership            one node shut down (SIGTERM) until no ISR lists it, brought back on its kept data dir when it stops, and waited for until it is back in every ISR
  power:MODE            power loss on the fault filesystem (unsynced writes dropped, torn or reordered); also follower-then-leader (a follower's power cut, then a leader killed), after-fsync-error (every node's fsyncs fail with EIO for 10 s, then every node's power is cut), after-slow-fsync (the same with fsyncs slowed to 300 ms), restart-lagging-then-leader (a node's power cut and restarted, then as lagging-then-leader)
  disk-error:MODE, disk-full:MODE, disk-slow:MODE   EIO, ENOSPC, latency on the fault filesystem
  corrupt:MODE          kill, damage the stopped node's data, restart when it stops; also bit-flip (one node, one bit of one batch), bit-flip-then-leader (then the rest of that partition's ISR killed so the node leads it), unreplicated-tail (no kill: a live leader drops its followers' packets, and once they are settled and it has appended past them a bit is flipped in the last batch of each partition it leads that none of them has; then healed), disk-replaced (one node's data dir emptied as a new disk would be, meta.properties and the metadata log kept: it fetches everything again)
Process MODEs: one, minority, majority, leaders, controller, all, coordinator (all and coordinator only when named; coordinator, the node coordinating one of the workload's transactional ids, needs --txn). Clock faults are not offered: a container shares the host's clock.`

func cmdSuite(args []string, stdout, stderr io.Writer) int {
	base := harness.DefaultTest()
	fs := flag.NewFlagSet("suite", flag.ContinueOnError)
	fs.SetOutput(stderr)
	name := fs.String("suite", "gating", "suite to run: "+strings.Join(harness.SuiteNames(), ", ")+" (gating: what `make test-jepsen` runs; disk: power losses, disk errors, corruption; planted: each planted bug caught and valid without it; txn: transactions and compaction under kills of the coordinator, leaders and nodes, and their planted bugs; single: one node, none and kill)")
	only := fs.String("only", "", "comma-separated test names (or name prefixes ending in *) of the suite to run; default all")
	limit := fs.Duration("time-limit", 90*time.Second, "time limit of each test")
	interval := time.Duration(base.NemesisInterval)
	fs.DurationVar(&interval, "nemesis-interval", interval, "mean time between fault events (staggered in [0, 2×interval)) and the stable period between rounds")
	fs.IntVar(&base.Nodes, "nodes", base.Nodes, "number of nodes (the single suite always uses 1)")
	fs.StringVar(&base.Runtime, "runtime", base.Runtime, "docker or process")
	fs.StringVar(&base.Store, "store", base.Store, "directory runs are written under")
	fs.Int64Var(&base.Seed, "seed", 1, "seed of every test in the suite")
	fs.IntVar(&base.Concurrency, "concurrency", base.Concurrency, "client workers per test")
	fs.StringVar(&base.DB, "db", "", "broker profile of every test (default faultline; the kfake suite sets kfake)")
	fs.StringVar(&base.BrokerBinary, "broker-binary", base.BrokerBinary, "broker executable")
	fs.StringVar(&base.AgentBinary, "agent-binary", base.AgentBinary, "faultline executable for the in-node agent")
	var clients clientFlags
	clients.register(fs)
	fs.Usage = func() {
		fmt.Fprint(stderr, `usage: faultline suite [--suite NAME] [--only TEST,...] [flags]
Runs every test of a suite and prints a table: test, expected verdict (and,
for a case that must find a bug, the anomaly classes that count as finding
it), found verdict, the anomalies found, the time of the first operation
an anomaly names (from the workload's first operation), ok/FAILED. An
invalid case passes only when it found one of its expected classes. The
table is also written as <store>/suites/<time>.html (linked from faultline
serve); each run's test.json records the expected verdict. Exit: 0 when
every test came out as expected, 1 when one did not, 254 bad arguments.

Flags:
`)
		fs.PrintDefaults()
	}
	if code := parseFlags(fs, args, -1); code >= 0 {
		return code
	}
	mk, ok := harness.Suites[*name]
	if !ok {
		fmt.Fprintf(stderr, "faultline suite: unknown suite %q (known: %s)\n", *name, strings.Join(harness.SuiteNames(), ", "))
		return harness.ExitBadArgs
	}
	base.TimeLimit, base.NemesisInterval = harness.Duration(*limit), harness.Duration(interval)
	if err := clients.apply(&base); err != nil {
		fmt.Fprintf(stderr, "faultline suite: %v\n", err)
		return harness.ExitBadArgs
	}
	cases, err := harness.SelectCases(mk(base), *only)
	if err != nil {
		fmt.Fprintf(stderr, "faultline suite: %v\n", err)
		return harness.ExitBadArgs
	}
	for _, c := range cases {
		if err := c.Test.Validate(workloadRegistry); err != nil {
			fmt.Fprintf(stderr, "faultline suite: %s: %v\n", c.Test.FullName(), err)
			return harness.ExitBadArgs
		}
	}
	ctx, stop := interruptible()
	defer stop()
	if _, all := harness.RunSuite(ctx, cases, workloadRegistry, stdout); !all {
		fmt.Fprintln(stdout, "suite FAILED: a test came out other than expected")
		return harness.ExitInvalid
	}
	fmt.Fprintln(stdout, "suite passed: every test came out as expected")
	return 0
}

func cmdMatrix(args []string, stdout, stderr io.Writer) int {
	base := harness.DefaultTest()
	fs := flag.NewFlagSet("matrix", flag.ContinueOnError)
	fs.SetOutput(stderr)
	seeds := fs.Int("seeds", 1, "runs of each cell, with seeds --seed .. --seed+N-1")
	only := fs.String("only", "", "comma-separated cell names (or prefixes ending in *, e.g. 'm-acksall.isr2.clean.flushdef-*,m-planted-*'); default every cell")
	list := fs.Bool("list", false, "print the cells with their expected verdicts and exit without running anything")
	limit := fs.Duration("time-limit", 60*time.Second, "time limit of each run")
	interval := 10 * time.Second
	fs.DurationVar(&interval, "nemesis-interval", interval, "time between starting and stopping faults")
	fs.StringVar(&base.Runtime, "runtime", base.Runtime, "docker or process (process: kill and pause cells only)")
	fs.StringVar(&base.Store, "store", base.Store, "directory runs are written under; the index goes to STORE/matrix/<time>/")
	fs.Int64Var(&base.Seed, "seed", 1, "first seed of every cell")
	fs.IntVar(&base.Concurrency, "concurrency", base.Concurrency, "client workers per run")
	fs.StringVar(&base.BrokerBinary, "broker-binary", base.BrokerBinary, "broker executable")
	fs.StringVar(&base.AgentBinary, "agent-binary", base.AgentBinary, "faultline executable for the in-node agent")
	fs.Usage = func() {
		fmt.Fprint(stderr, `usage: faultline matrix [--seeds N] [--only CELL,...] [--list] [flags]
The guarantee matrix: every configuration (acks 1/all x min ISR 1/2 x
unclean election on/off x flush policy default/per message) under every
fault this tree's nemesis has (none, kill, pause, partition, leader-loss,
power, power-all, disk, mixed, and packet, membership, composed once they
exist), each planted bug (unsafe.*) under its named test's faults with its
control, and each planted bug under every fault. Each cell states what it
must come out as: valid (the guarantee configuration: acks=all, min ISR 2,
unclean off, plus flush per message under power loss), invalid (a
documented trade-off or a planted bug loses data; found in at least 90% of
the seeds) or either (nothing promised). Writes STORE/matrix/<time>/index.html
(expected against found per cell, detection rate over seeds and time to the
first anomaly per planted bug, a link to every run) and matrix.json, after
every cell. All cells are many hours; pick a slice with --only.
Exit: 0 when every cell came out as expected, 1 when one did not, 254 bad
arguments.

Flags:
`)
		fs.PrintDefaults()
	}
	if code := parseFlags(fs, args, -1); code >= 0 {
		return code
	}
	if *seeds < 1 {
		fmt.Fprintln(stderr, "faultline matrix: --seeds must be at least 1")
		return harness.ExitBadArgs
	}
	base.TimeLimit, base.NemesisInterval = harness.Duration(*limit), harness.Duration(interval)
	cells, err := harness.SelectMatrixCells(harness.MatrixCells(base), *only)
	if err != nil {
		fmt.Fprintf(stderr, "faultline matrix: %v\n", err)
		return harness.ExitBadArgs
	}
	if *list {
		for _, c := range cells {
			fmt.Fprintf(stdout, "%s\t%s\t%s\n", c.Test.Name, c.Expect, c.Why)
		}
		fmt.Fprintf(stdout, "%d cells\n", len(cells))
		return 0
	}
	for _, c := range cells {
		if err := c.Test.Validate(workloadRegistry); err != nil {
			fmt.Fprintf(stderr, "faultline matrix: %s: %v\n", c.Test.Name, err)
			return harness.ExitBadArgs
		}
	}
	ctx, stop := interruptible()
	defer stop()
	_, all, err := harness.RunMatrix(ctx, cells, *seeds, base.Store, workloadRegistry, stdout)
	if err != nil {
		fmt.Fprintf(stderr, "faultline matrix: %v\n", err)
		return harness.ExitInternal
	}
	if !all {
		return harness.ExitInvalid
	}
	return 0
}

func cmdShrink(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("shrink", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var opts harness.ShrinkOptions
	fs.IntVar(&opts.RunsPerCandidate, "runs-per-candidate", 2, "runs of each candidate; it reproduces when any run is invalid with one of the original's anomaly classes")
	fs.DurationVar(&opts.Budget, "budget", 30*time.Minute, "bound on the whole search's wall time")
	fs.IntVar(&opts.MaxCandidates, "max-candidates", 30, "bound on the candidates tried")
	fs.Usage = func() {
		fmt.Fprint(stderr, `usage: faultline shrink [flags] RUN_DIR
Shrinks an invalid stored run (its directory or its test.json; it must have
the schedule.json every run now writes) to its smallest reproduction: delta
debugging over its fault events (a fault's start and stop are kept or
dropped together; no faults at all is tried first), then a shorter time
limit. Each candidate is an exact replay (same seed, the kept faults at
their recorded times on their recorded nodes) under <test>-shrink in the
store. Prints the smallest reproduction as a command line and writes
RUN_DIR/shrink.json (every candidate and what its runs found) and
RUN_DIR/shrink-schedule.json (the smallest schedule).
Exit: 0 when it ran (whether or not it shrank), 254 bad arguments (not a
run, a valid run, no schedule.json), 255 interrupted.

Flags:
`)
		fs.PrintDefaults()
	}
	if code := parseFlags(fs, args, 1); code >= 0 {
		return code
	}
	ctx, stop := interruptible()
	defer stop()
	rep, err := harness.Shrink(ctx, fs.Arg(0), opts, workloadRegistry, stdout)
	if err != nil {
		fmt.Fprintf(stderr, "faultline shrink: %v\n", err)
		if rep.Run != "" {
			return harness.ExitInternal
		}
		return harness.ExitBadArgs
	}
	return 0
}

func cmdCheck(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("check", flag.ContinueOnError)
	fs.SetOutput(stderr)
	subscribe := fs.Bool("subscribe", false, "consumers used subscribe (allows poll-skip and nonmonotonic-poll); inferred from the history when it has subscribe ops")
	linearTimeout := fs.Duration("linear-timeout", 10*time.Second, "porcupine's bound per partition; past it the partition is unknown")
	jsonOut := fs.Bool("json", false, "print results.json instead of the summary")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: faultline check [flags] HISTORY.jsonl|HISTORY.edn\nRe-checks a stored history and prints the verdict; exit 0 valid, 1 invalid, 2 unknown.\nA .edn file is read in Jepsen's notation (history.edn, or ops as Jepsen's checker tests write them:\n{:process 0 :type :invoke :f :txn :value [[:send :x :a] [:poll]]}); keywords used as keys or values\nbecome integers, each mapping printed as a note (\"notes\" in --json).")
		fs.PrintDefaults()
	}
	if code := parseFlags(fs, args, 1); code >= 0 {
		return code
	}
	opts := checker.Options{LinearTimeout: *linearTimeout}
	if *subscribe {
		opts.Mode = checker.ModeSubscribe
	}
	h, notes, err := checker.ReadAnyHistory(fs.Arg(0))
	if err != nil && h == nil {
		fmt.Fprintf(stderr, "faultline check: %v\n", err)
		return harness.ExitBadArgs
	}
	res := checker.Analyze(context.Background(), h, opts)
	res.Notes = notes
	if !*jsonOut {
		for _, n := range notes {
			fmt.Fprintf(stdout, "note: %s\n", n)
		}
	}
	if *jsonOut {
		b, _ := json.MarshalIndent(res, "", "  ")
		fmt.Fprintln(stdout, string(b))
	} else {
		fmt.Fprintln(stdout, reports.Summary(reports.Input{Result: res, History: h}))
	}
	return harness.Outcome{Result: res}.ExitCode()
}

func cmdReport(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("report", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: faultline report RUN_DIR\nRe-renders report.html and junit.xml from a stored run's results.json, history.jsonl and test.json.")
	}
	if code := parseFlags(fs, args, 1); code >= 0 {
		return code
	}
	if err := reports.RenderDir(fs.Arg(0)); err != nil {
		fmt.Fprintf(stderr, "faultline report: %v\n", err)
		return harness.ExitInternal
	}
	fmt.Fprintf(stdout, "wrote %s/report.html and junit.xml\n", strings.TrimRight(fs.Arg(0), "/"))
	return 0
}

func cmdServe(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	store := fs.String("store", "store", "directory of stored runs")
	addr := fs.String("addr", "127.0.0.1:8080", "address to listen on")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: faultline serve [--store DIR] [--addr HOST:PORT]\nServes the stored runs under DIR (their reports, histories and node logs) to a web browser until Ctrl-C.")
		fs.PrintDefaults()
	}
	if code := parseFlags(fs, args, -1); code >= 0 {
		return code
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintf(stderr, "faultline serve: %v\n", err)
		return harness.ExitBadArgs
	}
	fmt.Fprintf(stdout, "serving %s at http://%s/\n", *store, ln.Addr())
	srv := &http.Server{Handler: reports.Handler(*store), ReadHeaderTimeout: 10 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		fmt.Fprintf(stderr, "faultline serve: %v\n", err)
		return harness.ExitInternal
	}
	return 0
}

func cmdAgent(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "--help" || args[0] == "-h" {
		fmt.Fprint(stderr, agentUsage)
		if len(args) == 0 {
			return harness.ExitBadArgs
		}
		return 0
	}
	switch args[0] {
	case "drop":
		if len(args) != 2 {
			fmt.Fprintln(stderr, "faultline agent drop: want one comma-separated list of IPv4 addresses")
			return harness.ExitBadArgs
		}
		var addrs []netip.Addr
		for _, s := range strings.Split(args[1], ",") {
			a, err := netip.ParseAddr(strings.TrimSpace(s))
			if err != nil {
				fmt.Fprintf(stderr, "faultline agent drop: %v\n", err)
				return harness.ExitBadArgs
			}
			addrs = append(addrs, a)
		}
		if err := agent.Drop(addrs); err != nil {
			fmt.Fprintf(stderr, "faultline agent drop: %v\n", err)
			return harness.ExitInternal
		}
	case "heal":
		if err := agent.Heal(); err != nil {
			fmt.Fprintf(stderr, "faultline agent heal: %v\n", err)
			return harness.ExitInternal
		}
	case "dial":
		// A reachability probe for partition tests: exit 0 when a TCP
		// connection to HOST:PORT opens within 2 s, 1 when it does not.
		if len(args) != 2 {
			fmt.Fprintln(stderr, "faultline agent dial: want HOST:PORT")
			return harness.ExitBadArgs
		}
		conn, err := net.DialTimeout("tcp", args[1], 2*time.Second)
		if err != nil {
			fmt.Fprintf(stdout, "unreachable %s: %v\n", args[1], err)
			return 1
		}
		conn.Close()
		fmt.Fprintf(stdout, "connected %s\n", args[1])
	case "run":
		return cmdAgentRun(args[1:], stderr)
	case "disk":
		if len(args) < 2 {
			fmt.Fprintln(stderr, "faultline agent disk: want a fault filesystem command (power, eio, enospc, slow, heal, status)")
			return harness.ExitBadArgs
		}
		out, err := agent.Send(agent.SocketPath, "disk "+strings.Join(args[1:], " "))
		fmt.Fprint(stdout, out)
		if err != nil {
			fmt.Fprintf(stderr, "faultline agent disk: %v\n", err)
			return harness.ExitInternal
		}
	case "corrupt":
		return cmdAgentCorrupt(args[1:], stdout, stderr)
	case "log-end":
		return cmdAgentLogEnd(args[1:], stdout, stderr)
	case "flip-tail":
		return cmdAgentFlipTail(args[1:], stdout, stderr)
	case "netem":
		return cmdAgentNetem(args[1:], stdout, stderr)
	case "delay-queue":
		n, err := agent.ParseNetem(args[1:])
		if err == nil && (n.Loss > 0 || n.Duplicate > 0) {
			err = errors.New("only delay, jitter and reorder are held in the queue")
		}
		if err != nil {
			fmt.Fprintf(stderr, "faultline agent delay-queue: %v\n", err)
			return harness.ExitBadArgs
		}
		if err := agent.ServeDelayQueueUntilSignal(n); err != nil {
			fmt.Fprintf(stderr, "faultline agent delay-queue: %v\n", err)
			return harness.ExitInternal
		}
	case "status":
		addrs, err := agent.Dropped()
		if err != nil {
			fmt.Fprintf(stderr, "faultline agent status: %v\n", err)
			return harness.ExitInternal
		}
		for _, a := range addrs {
			fmt.Fprintln(stdout, a)
		}
	default:
		fmt.Fprintf(stderr, "faultline agent: unknown command %q\n", args[0])
		return harness.ExitBadArgs
	}
	return 0
}

const agentUsage = `usage: faultline agent COMMAND (runs inside a node container)
  drop IP[,IP...]   drop packets from these IPv4 sources (needs CAP_NET_ADMIN)
  heal              remove every drop rule
  status            list the dropped sources
  dial HOST:PORT    exit 0 when a TCP connection opens within 2 s, 1 when not
  run --backing DIR --mount DIR -- BROKER ARGS...
                    mount the fault filesystem at --mount over --backing (needs
                    CAP_SYS_ADMIN and /dev/fuse), run the broker on it and take
                    disk commands until the broker ends
  disk CMD...       pass a fault filesystem command to the running agent:
                    power [torn] [reorder] [block=N] [seed=N] (kills the broker
                    and drops the unsynced writes; the node goes down), eio,
                    enospc, slow, heal, status
  corrupt --dir DIR --seed N [--kind KIND]
                    corrupt a stopped node's data dir as the seed decides and
                    print what was done (JSON); --kind keeps to one
                    corruption (torn-tail, bit-flip, index-truncate,
                    index-garbage, checkpoint-delete)
  log-end --dir DIR --partitions TOPIC-N[,...]
                    print the log end offset each partition's active segment
                    holds (JSON)
  flip-tail --dir DIR --after TOPIC-N=OFFSET[,...] --seed N
                    on a live leader cut off from its followers: flip one bit
                    in the records of the last batch of each partition at or
                    above OFFSET (the greatest of its followers' log ends, so
                    none of them has it); prints what was done (JSON)
  netem [delay=D] [jitter=D] [loss=P] [duplicate=P] [reorder=P]
                    make a netem qdisc the root of eth0 (replacing the one in
                    force): every packet the node sends is delayed, dropped (P
                    percent), duplicated or reordered (needs CAP_NET_ADMIN);
                    on a kernel without sch_netem, loss is a netfilter rule
                    and delay, jitter and reorder a netfilter queue held by
                    a delay-queue process; duplication is refused
  netem heal        remove the netem qdisc or the fallbacks (the delay queue
                    lets what it holds go and ends)
  netem status      print eth0's root qdisc kind (netem while a fault holds),
                    or netfilter-loss / netfilter-delay for the fallbacks
  delay-queue [delay=D] [jitter=D] [reorder=P]
                    hold the packets of the agent's netfilter queue (started
                    by netem; ends on SIGTERM, letting every packet go)
`

// cmdAgentNetem installs, heals or shows the packet fault on the node's
// interface.
func cmdAgentNetem(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "faultline agent netem: want KEY=VALUE fields, heal or status")
		return harness.ExitBadArgs
	}
	var err error
	switch args[0] {
	case "heal":
		err = agent.HealNetem(agent.DefaultInterface)
	case "status":
		var kind string
		if kind, err = agent.NetemKind(agent.DefaultInterface); err == nil {
			fmt.Fprintln(stdout, kind)
		}
	default:
		n, perr := agent.ParseNetem(args)
		if perr != nil {
			fmt.Fprintf(stderr, "faultline agent %v\n", perr)
			return harness.ExitBadArgs
		}
		err = agent.ApplyNetem(agent.DefaultInterface, n)
	}
	if err != nil {
		fmt.Fprintf(stderr, "faultline agent %v\n", err)
		return harness.ExitInternal
	}
	return 0
}

func cmdAgentRun(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("agent run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	backing := fs.String("backing", "", "the backing dir (on the node's volume)")
	mount := fs.String("mount", "", "where the broker's data dir is mounted")
	if err := fs.Parse(args); err != nil {
		return harness.ExitBadArgs
	}
	if *backing == "" || *mount == "" || fs.NArg() == 0 {
		fmt.Fprintln(stderr, "faultline agent run: want --backing DIR --mount DIR -- BROKER ARGS...")
		return harness.ExitBadArgs
	}
	for _, dir := range []string{*backing, *mount} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			fmt.Fprintf(stderr, "faultline agent run: %v\n", err)
			return harness.ExitInternal
		}
	}
	disk, err := faultfs.Mount(*backing, *mount, faultfs.Options{})
	if err != nil {
		fmt.Fprintf(stderr, "faultline agent run: mount the fault filesystem: %v\n", err)
		return harness.ExitInternal
	}
	return agent.Run(context.Background(), disk, agent.RunOptions{Argv: fs.Args()}, stderr)
}

func cmdAgentCorrupt(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("agent corrupt", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("dir", "", "the stopped node's log dir")
	seed := fs.Uint64("seed", 0, "decides what is corrupted")
	kind := fs.String("kind", "", "the one corruption to do ("+strings.Join([]string{agent.CorruptTornTail, agent.CorruptBitFlip, agent.CorruptIndexTruncate, agent.CorruptIndexGarbage, agent.CorruptCheckpoint, agent.CorruptDiskReplaced}, ", ")+"); any when empty ("+agent.CorruptDiskReplaced+" only when named)")
	if err := fs.Parse(args); err != nil {
		return harness.ExitBadArgs
	}
	if *dir == "" {
		fmt.Fprintln(stderr, "faultline agent corrupt: want --dir DIR")
		return harness.ExitBadArgs
	}
	files, err := agent.ListFiles(*dir)
	if err != nil {
		fmt.Fprintf(stderr, "faultline agent corrupt: %v\n", err)
		return harness.ExitInternal
	}
	c, err := agent.PlanCorruptionOf(*seed, files, *kind)
	if err == nil {
		err = agent.ApplyCorruption(*dir, c)
	}
	if err != nil {
		fmt.Fprintf(stderr, "faultline agent corrupt: %v\n", err)
		return harness.ExitInternal
	}
	out, _ := json.Marshal(struct {
		agent.Corruption
		Did string `json:"did"`
	}{c, c.String()})
	fmt.Fprintf(stdout, "%s\n", out)
	return 0
}

func cmdAgentLogEnd(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("agent log-end", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("dir", "", "the node's log dir")
	parts := fs.String("partitions", "", "comma-separated partition directories (topic-N)")
	if err := fs.Parse(args); err != nil {
		return harness.ExitBadArgs
	}
	if *dir == "" || *parts == "" {
		fmt.Fprintln(stderr, "faultline agent log-end: want --dir DIR and --partitions TOPIC-N[,...]")
		return harness.ExitBadArgs
	}
	ends, err := agent.LogEnds(*dir, strings.Split(*parts, ","))
	if err != nil {
		fmt.Fprintf(stderr, "faultline agent log-end: %v\n", err)
		return harness.ExitInternal
	}
	out, _ := json.Marshal(ends)
	fmt.Fprintf(stdout, "%s\n", out)
	return 0
}

func cmdAgentFlipTail(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("agent flip-tail", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("dir", "", "the live leader's log dir")
	afterList := fs.String("after", "", "comma-separated TOPIC-N=OFFSET: the partitions to flip and the offset the flipped batch must start at or above")
	seed := fs.Uint64("seed", 0, "decides which bit of each batch is flipped")
	if err := fs.Parse(args); err != nil {
		return harness.ExitBadArgs
	}
	after := map[string]int64{}
	for _, entry := range strings.Split(*afterList, ",") {
		p, o, ok := strings.Cut(entry, "=")
		off, err := strconv.ParseInt(o, 10, 64)
		if !ok || err != nil || p == "" {
			fmt.Fprintf(stderr, "faultline agent flip-tail: --after entry %q: want TOPIC-N=OFFSET\n", entry)
			return harness.ExitBadArgs
		}
		after[p] = off
	}
	if *dir == "" {
		fmt.Fprintln(stderr, "faultline agent flip-tail: want --dir DIR")
		return harness.ExitBadArgs
	}
	flips, err := agent.FlipTails(*dir, after, *seed)
	out, _ := json.Marshal(flips)
	fmt.Fprintf(stdout, "%s\n", out)
	if err != nil {
		fmt.Fprintf(stderr, "faultline agent flip-tail: %v\n", err)
		return harness.ExitInternal
	}
	return 0
}

// cmdProfiles lists the built-in broker profiles, or loads one (a name or
// a file) and prints it, so a profile can be checked before a run.
func cmdProfiles(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "-help") {
		fmt.Fprint(stdout, `usage: faultline profiles [NAME|PATH]
Without an argument, lists the built-in broker profiles that --db names.
With one, loads and validates the profile (a built-in name or a YAML file)
and prints its commands; a bad profile prints one line per bad field and
exits 254. See the README's "Testing another broker" for the fields.
`)
		return 0
	}
	if len(args) == 0 {
		for _, name := range profile.Builtin() {
			p, err := profile.Load(name)
			if err != nil {
				fmt.Fprintf(stderr, "faultline profiles: %s: %v\n", name, err)
				return harness.ExitInternal
			}
			fmt.Fprintf(stdout, "%-14s %s\n", name, p.Description)
		}
		return 0
	}
	p, err := profile.Load(args[0])
	if err != nil {
		fmt.Fprintf(stderr, "faultline profiles: %v\n", err)
		return harness.ExitBadArgs
	}
	fmt.Fprintf(stdout, "name:        %s\ndescription: %s\nmax nodes:   %d\ntopologies:  %s\ncontroller:  %s\ndurable:     %t\nformat:      %s\nstart:       %s\nsignals:     stop %s, kill %s, pause %s, resume %s\n",
		p.Name, p.Description, p.MaxNodes, strings.Join(p.Topologies, ","), p.Controller, p.IsDurable(),
		strings.Join(p.Format, " "), strings.Join(p.Start, " "), p.Signals.Stop, p.Signals.Kill, p.Signals.Pause, p.Signals.Resume)
	return 0
}

// parseFlags parses a command's flags and checks it got want positional
// arguments (-1: any). It returns -1 to go on, or the exit code: 0 after
// --help, ExitBadArgs for bad flags or the wrong number of arguments (with
// the usage printed).
func parseFlags(fs *flag.FlagSet, args []string, want int) int {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return harness.ExitBadArgs
	}
	if want >= 0 && fs.NArg() != want {
		fs.Usage()
		return harness.ExitBadArgs
	}
	return -1
}
