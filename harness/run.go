package harness

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/faultline/faultline/checker"
	"github.com/faultline/faultline/harness/profile"
	"github.com/faultline/faultline/nemesis"
	"github.com/faultline/faultline/workloads"
)

// Exit codes, as Jepsen's CLI.
const (
	ExitValid    = 0
	ExitInvalid  = 1
	ExitUnknown  = 2
	ExitBadArgs  = 254
	ExitInternal = 255
)

// Outcome is what a run produced.
type Outcome struct {
	Dir string
	// RunID labels everything the run created in Docker
	// (io.faultline.run=<RunID>) and names its containers.
	RunID  string
	Result checker.Result
	// Faults tallies the fault starts of the history: a run whose every
	// start failed may not have tested what it was meant to.
	Faults FaultTally
}

// FaultTally counts a history's fault starts (the nemesis's start-*
// completions) and those that failed: refused by the runtime or the
// kernel, or broken (an agent that cannot run in the node).
type FaultTally struct {
	Started, Failed int
	// FirstError is the first failed start's error.
	FirstError string
}

// AllFailed reports whether faults were started and every start failed.
func (f FaultTally) AllFailed() bool { return f.Started > 0 && f.Failed == f.Started }

func (f FaultTally) String() string {
	return fmt.Sprintf("%d of %d fault starts failed (first: %s)", f.Failed, f.Started, firstLine(f.FirstError))
}

// tallyFaults counts the fault starts of h.
func tallyFaults(h checker.History) FaultTally {
	var f FaultTally
	for _, op := range h {
		if op.Process != checker.NemesisProcess || op.Type == checker.Invoke || !strings.HasPrefix(op.F, "start-") {
			continue
		}
		f.Started++
		if op.Type != checker.OK {
			f.Failed++
			if f.FirstError == "" {
				f.FirstError = op.F + ": " + op.Error
			}
		}
	}
	return f
}

// ErrInterrupted is returned (wrapped) when the run's context ended before
// a verdict (Ctrl-C): the faults were healed and everything the run
// created was removed; the history so far is in the store.
var ErrInterrupted = errors.New("interrupted")

// Timeouts of the phases that are not part of the Test.
const (
	// opTimeout bounds one client operation; an operation in flight when
	// the time limit ends still gets its completion recorded.
	opTimeout = 20 * time.Second
	// healTimeout bounds healing after Ctrl-C.
	healTimeout = time.Minute
	// finalRoundLimit is the length of one round of final reads: each
	// round starts fresh clients (Jepsen's crash) that read from the
	// beginning.
	finalRoundLimit = 10 * time.Second
)

// ExitCode maps the verdict onto the CLI's exit code.
func (o Outcome) ExitCode() int {
	switch o.Result.Valid {
	case checker.Valid:
		return ExitValid
	case checker.Invalid:
		return ExitInvalid
	}
	return ExitUnknown
}

// SetupError marks a failure before any verdict could be reached (exit
// 255).
type SetupError struct{ Err error }

func (e *SetupError) Error() string { return "setup: " + e.Err.Error() }
func (e *SetupError) Unwrap() error { return e.Err }

// newClusterID returns a Kafka cluster id: a random UUID, base64url
// without padding (22 characters).
func newClusterID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// Run performs a whole test: set up the cluster, run the workload under
// the fault schedule, heal, wait for recovery, final reads, the probe of
// transactional ids, check, report.
// Test.Workload is looked up in reg. Progress goes to out. Errors before
// the check are *SetupError.
func Run(ctx context.Context, t Test, reg workloads.Registry, out io.Writer) (Outcome, error) {
	if err := t.Validate(reg); err != nil {
		return Outcome{}, err
	}
	newWorkload, err := reg.Lookup(t.Workload)
	if err != nil {
		return Outcome{}, err
	}
	t.Name = t.FullName()
	if len(t.DockerHosts) > 0 {
		t.DockerHosts = Placement(t.DockerHosts, t.Nodes)
	}
	stamp := time.Now().UTC().Format("20060102T150405.000Z")
	dir := filepath.Join(t.Store, t.FullName(), stamp)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return Outcome{}, &SetupError{err}
	}
	latest := filepath.Join(t.Store, "latest")
	_ = os.Remove(latest)
	if rel, err := filepath.Rel(t.Store, dir); err == nil {
		_ = os.Symlink(rel, latest)
	}
	spec, _ := json.MarshalIndent(t, "", "  ")
	if err := os.WriteFile(filepath.Join(dir, "test.json"), spec, 0o644); err != nil {
		return Outcome{Dir: dir}, &SetupError{err}
	}
	runID := "fl" + strconv.FormatInt(time.Now().UnixNano()%1_000_000_000_000, 36)
	fmt.Fprintf(out, "faultline: %s seed=%d run=%s store=%s\n", t.FullName(), t.Seed, runID, dir)

	var rt Runtime
	switch t.Runtime {
	case "docker":
		var d *DockerRuntime
		if len(t.DockerHosts) > 0 {
			d, err = NewDockerRuntimeOn(ctx, runID, t.DockerHosts, t.dockerClientOpts)
		} else {
			d, err = NewDockerRuntime(ctx, runID)
		}
		if err != nil {
			return Outcome{Dir: dir, RunID: runID}, &SetupError{err}
		}
		d.LogDir = filepath.Join(dir, "nodes")
		rt = d
	default:
		rt = NewProcess(dir)
	}
	r := &run{t: t, dir: dir, rt: rt, out: out, newWorkload: newWorkload}
	o, err := r.execute(ctx)
	r.teardown()
	o.Dir, o.RunID = dir, runID
	return o, err
}

type run struct {
	t     Test
	dir   string
	rt    Runtime
	out   io.Writer
	nodes []Node
	rec   *Recorder
	adm   *kgo.Client // metadata probes (waitServing, nemesis targets)
	// newWorkload builds Test.Workload once the cluster serves; workload
	// is what it built.
	newWorkload workloads.New
	workload    workloads.Workload
	phase       string
	// workStart is when the workload phase began; the time limit counts
	// from there.
	workStart time.Time

	// replayNotes say where a replay's live cluster disagreed with the
	// recorded steps it drove (nemesis.ReplayNotes); the report shows them.
	replayNotes []string

	mu sync.Mutex
	// ids maps a node's name to the broker id the cluster reports for it
	// where that is not its node.id (learnIDs): kfake numbers its one
	// broker 0.
	ids    map[string]int32
	faults []string // faults in force, for the progress line
	// written is when each key last had a send acknowledged (noteWrites),
	// for the faults that aim at the partitions being written now, and
	// sends how many it had.
	written map[int]time.Time
	sends   map[int]int
}

// noteWrites notes the keys op (a completion) wrote.
func (r *run) noteWrites(op checker.Op) {
	if op.Type != checker.OK {
		return
	}
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, m := range op.Mops {
		if m.F == checker.FSend {
			if r.written == nil {
				r.written, r.sends = map[int]time.Time{}, map[int]int{}
			}
			r.written[m.Key] = now
			r.sends[m.Key]++
		}
	}
}

// writtenSince returns the keys with a send acknowledged since t, and
// of them those with fewer than fresh sends acknowledged (fresh <= 0: all).
func (r *run) writtenSince(t time.Time, fresh int) (keys, young []int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k, at := range r.written {
		if !at.Before(t) {
			keys = append(keys, k)
			if fresh <= 0 || r.sends[k] < fresh {
				young = append(young, k)
			}
		}
	}
	sort.Ints(keys)
	sort.Ints(young)
	return keys, young
}

func (r *run) setPhase(p string) {
	r.mu.Lock()
	r.phase = p
	r.mu.Unlock()
	fmt.Fprintf(r.out, "[%6.1fs] phase: %s\n", r.elapsed().Seconds(), p)
}

func (r *run) elapsed() time.Duration {
	if r.rec == nil {
		return 0
	}
	return r.rec.Elapsed()
}

// teardown stops every node and removes what the run created; it runs
// after Ctrl-C too, with a context of its own.
func (r *run) teardown() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if r.adm != nil {
		r.adm.Close()
	}
	if err := r.rt.Teardown(ctx); err != nil {
		fmt.Fprintf(r.out, "teardown: %v\n", err)
	}
}

// interrupted ends a run whose context was cancelled (Ctrl-C) during phase:
// heal every fault with a context of its own, keep the history, and say
// so; the caller tears the cluster down.
func (r *run) interrupted(ctx context.Context, phase string) error {
	fmt.Fprintf(r.out, "[%6.1fs] interrupted during %s: healing and removing the cluster\n", r.elapsed().Seconds(), phase)
	if len(r.nodes) > 0 {
		hctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), healTimeout)
		r.healAll(hctx)
		cancel()
	}
	if r.rec != nil {
		if err := r.rec.Close(); err != nil {
			fmt.Fprintf(r.out, "history: %v\n", err)
		}
	}
	return fmt.Errorf("%w during %s (%v); the history so far is in %s", ErrInterrupted, phase, context.Cause(ctx), filepath.Join(r.dir, "history.jsonl"))
}

func (r *run) execute(ctx context.Context) (Outcome, error) {
	t := r.t
	rec, err := NewRecorder(filepath.Join(r.dir, "history.jsonl"))
	if err != nil {
		return Outcome{Dir: r.dir}, &SetupError{err}
	}
	r.rec = rec
	defer rec.Close()

	r.setPhase("setup")
	prof, err := profile.Load(t.DB)
	if err != nil {
		return Outcome{Dir: r.dir}, &SetupError{err}
	}
	cluster := Cluster{Profile: prof,
		Nodes: t.Nodes, Topology: t.Topology, ClusterID: newClusterID(), BrokerConfig: t.BrokerConfig,
		BrokerBinary: t.BrokerBinary, AgentBinary: t.AgentBinary, NetworkFaults: t.networkFaults(),
		DiskFaults: t.Nemesis.OnFaultFS(),
	}
	nodes, err := r.rt.Setup(ctx, cluster)
	r.nodes = nodes
	if ctx.Err() != nil {
		return Outcome{}, r.interrupted(ctx, "setup")
	}
	if err != nil {
		return Outcome{Dir: r.dir}, &SetupError{err}
	}
	if p, ok := r.rt.(interface{ Placement() []string }); ok && len(r.t.DockerHosts) > 0 {
		fmt.Fprintf(r.out, "[%6.1fs] placement: %s\n", r.elapsed().Seconds(), strings.Join(p.Placement(), "; "))
	}
	var seeds []string
	for _, n := range nodes {
		if n.Broker {
			seeds = append(seeds, n.Addr)
		}
	}
	admCl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.RetryTimeout(5*time.Second))
	if err != nil {
		return Outcome{Dir: r.dir}, &SetupError{err}
	}
	r.adm = admCl
	if err := r.waitServing(ctx, 60*time.Second); err != nil {
		if ctx.Err() != nil {
			return Outcome{}, r.interrupted(ctx, "setup")
		}
		if len(t.DockerHosts) > 0 {
			err = fmt.Errorf("%w (the nodes are on several Docker hosts: each node's address must be routable from here and from the other hosts; see the README's \"Several Docker hosts\")", err)
		}
		return Outcome{Dir: r.dir}, &SetupError{fmt.Errorf("cluster did not start serving: %w", err)}
	}
	fmt.Fprintf(r.out, "[%6.1fs] cluster serving: %d nodes\n", r.elapsed().Seconds(), len(nodes))

	wl, err := r.newWorkload(t.WorkloadOptions(seeds))
	if err != nil {
		return Outcome{Dir: r.dir}, &SetupError{err}
	}
	defer wl.Close()
	r.workload = wl
	stopLeaders := r.watchLeaders(ctx)
	defer stopLeaders()

	// Main phase: workers and the fault schedule until the time limit.
	r.setPhase("workload")
	r.workStart = time.Now()
	mainCtx, cancelMain := context.WithTimeout(ctx, time.Duration(t.TimeLimit))
	defer cancelMain()
	stopProgress := r.progress(mainCtx)
	var wg sync.WaitGroup
	var executed []nemesis.Event
	wg.Add(1)
	go func() {
		defer wg.Done()
		sched := &nemesis.Schedule{Faults: t.Nemesis.Faults(r.rt, &clusterView{r: r}), Events: t.faultPlan()}
		sched.Run(mainCtx, func(op checker.Op) { r.noteFault(op); rec.Record(op) })
		executed = sched.Executed()
	}()
	r.runWorkers(ctx, mainCtx, wl.Generator(), wl.NewClient, restartable(t, wl), t.Concurrency, 0, time.Duration(t.CrashClientsInterval))
	wg.Wait()
	stopProgress()
	if err := writeSchedule(r.dir, executed); err != nil {
		fmt.Fprintf(r.out, "schedule: %v\n", err)
	}
	r.replayNotes = nemesis.ReplayNotes(executed)
	for _, n := range r.replayNotes {
		fmt.Fprintf(r.out, "replay: %s\n", n)
	}
	if ctx.Err() != nil {
		return Outcome{}, r.interrupted(ctx, "the workload")
	}

	// Heal everything the schedule may have left (it heals on its own;
	// this also covers a schedule step that failed half-way).
	r.setPhase("heal")
	r.healAll(ctx)
	r.setPhase("recovery")
	recovered := true
	if err := r.waitServing(ctx, time.Duration(t.RecoveryTimeout)); err != nil {
		recovered = false
		if ctx.Err() != nil {
			return Outcome{}, r.interrupted(ctx, "recovery")
		}
		fmt.Fprintf(r.out, "cluster did not recover: %v (final reads may be incomplete)\n", err)
	}

	r.setPhase("final reads")
	r.finalReads(ctx, recovered)
	stopLeaders()
	if ctx.Err() != nil {
		return Outcome{}, r.interrupted(ctx, "the final reads")
	}
	r.probeTxnIDs(ctx, recovered)
	if ctx.Err() != nil {
		return Outcome{}, r.interrupted(ctx, "the probe of transactional ids")
	}
	if err := rec.Close(); err != nil {
		return Outcome{Dir: r.dir}, &SetupError{err}
	}

	r.setPhase("check")
	history := rec.History()
	faults := tallyFaults(history)
	if faults.Failed > 0 {
		fmt.Fprintf(r.out, "faults: %s\n", faults)
	}
	result := checker.Analyze(ctx, history, t.checkerOptions())
	return Outcome{Dir: r.dir, Result: result, Faults: faults}, r.writeResults(history, result)
}

// healAll resumes, reconnects and restarts every node.
func (r *run) healAll(ctx context.Context) {
	net, _ := r.rt.(nemesis.Network)
	for _, n := range r.nodes {
		_ = r.rt.Resume(ctx, n.Name)
		if net != nil && (r.t.Nemesis.Has(nemesis.KindPacket) || r.t.Nemesis.Has(nemesis.KindLaggingFailover)) {
			if err := net.Netem(ctx, n.Name, ""); err != nil {
				fmt.Fprintf(r.out, "heal packets of %s: %v\n", n.Name, err)
			}
		}
		if err := r.rt.Isolate(ctx, n.Name, nil); err != nil && !errors.Is(err, ErrUnsupported) {
			fmt.Fprintf(r.out, "heal %s: %v\n", n.Name, err)
		}
		if up, err := r.rt.Running(ctx, n.Name); err == nil && !up {
			if err := r.rt.Start(ctx, n.Name); err != nil {
				fmt.Fprintf(r.out, "restart %s: %v\n", n.Name, err)
			}
		}
	}
}
