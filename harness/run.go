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
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/faultline/faultline/checker"
	"github.com/faultline/faultline/nemesis"
	"github.com/faultline/faultline/reports"
	"github.com/faultline/faultline/workloads/queue"
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
	// round starts a fresh client (Jepsen's crash), assigns every key from
	// the beginning and polls.
	finalRoundLimit = 10 * time.Second
	// finalPollTimeout is a final read's poll wait (Jepsen: 1 s).
	finalPollTimeout = time.Second
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
// the fault schedule, heal, wait for recovery, final reads, check, report.
// Progress goes to out. Errors before the check are *SetupError.
func Run(ctx context.Context, t Test, out io.Writer) (Outcome, error) {
	if err := t.Validate(); err != nil {
		return Outcome{}, err
	}
	t.Name = t.FullName()
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
		d, err := NewDockerRuntime(ctx, runID)
		if err != nil {
			return Outcome{Dir: dir, RunID: runID}, &SetupError{err}
		}
		d.LogDir = filepath.Join(dir, "nodes")
		rt = d
	default:
		rt = NewProcess(dir)
	}
	r := &run{t: t, dir: dir, rt: rt, out: out}
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
	phase string
	// workStart is when the workload phase began; the time limit counts
	// from there.
	workStart time.Time

	mu     sync.Mutex
	faults []string // faults in force, for the progress line
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
	cluster := Cluster{
		Nodes: t.Nodes, Topology: t.Topology, ClusterID: newClusterID(), BrokerConfig: t.BrokerConfig,
		BrokerBinary: t.BrokerBinary, AgentBinary: t.AgentBinary, NetworkFaults: t.networkFaults(),
	}
	nodes, err := r.rt.Setup(ctx, cluster)
	r.nodes = nodes
	if ctx.Err() != nil {
		return Outcome{}, r.interrupted(ctx, "setup")
	}
	if err != nil {
		return Outcome{Dir: r.dir}, &SetupError{err}
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
		return Outcome{Dir: r.dir}, &SetupError{fmt.Errorf("cluster did not start serving: %w", err)}
	}
	fmt.Fprintf(r.out, "[%6.1fs] cluster serving: %d nodes\n", r.elapsed().Seconds(), len(nodes))

	qopts := queue.Options{
		Seeds: seeds, PartitionsPerTopic: t.PartitionsPerTopic, ReplicationFactor: int16(t.ReplicationFactor),
		Acks: t.Acks, DisableIdempotence: !t.Idempotent,
	}
	topics, err := queue.NewTopics(qopts)
	if err != nil {
		return Outcome{Dir: r.dir}, &SetupError{err}
	}
	defer topics.Close()

	// Main phase: workers and the fault schedule until the time limit.
	r.setPhase("workload")
	gen := queue.NewGenerator(t.Seed, queue.GenOptions{Subscribe: t.Subscribe})
	faults, err := nemesis.Parse(strings.Join(t.Nemesis, ","), r.rt, &clusterView{r: r})
	if err != nil {
		return Outcome{Dir: r.dir}, err
	}
	r.workStart = time.Now()
	mainCtx, cancelMain := context.WithTimeout(ctx, time.Duration(t.TimeLimit))
	defer cancelMain()
	stopProgress := r.progress(mainCtx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		sched := &nemesis.Schedule{Faults: faults, Interval: time.Duration(t.NemesisInterval), Seed: t.Seed}
		sched.Run(mainCtx, func(op checker.Op) { r.noteFault(op); rec.Record(op) })
	}()
	r.runWorkers(ctx, mainCtx, gen, qopts, topics, t.Concurrency, 0)
	wg.Wait()
	stopProgress()
	if ctx.Err() != nil {
		return Outcome{}, r.interrupted(ctx, "the workload")
	}

	// Heal everything the schedule may have left (it heals on its own;
	// this also covers a schedule step that failed half-way).
	r.setPhase("heal")
	r.healAll(ctx)
	r.setPhase("recovery")
	if err := r.waitServing(ctx, time.Duration(t.RecoveryTimeout)); err != nil {
		if ctx.Err() != nil {
			return Outcome{}, r.interrupted(ctx, "recovery")
		}
		fmt.Fprintf(r.out, "cluster did not recover: %v (final reads may be incomplete)\n", err)
	}

	r.setPhase("final reads")
	r.finalReads(ctx, gen, qopts, topics)
	if ctx.Err() != nil {
		return Outcome{}, r.interrupted(ctx, "the final reads")
	}
	if err := rec.Close(); err != nil {
		return Outcome{Dir: r.dir}, &SetupError{err}
	}

	r.setPhase("check")
	opts := checker.Options{}
	if t.Subscribe {
		opts.Mode = checker.ModeSubscribe
	}
	history := rec.History()
	result := checker.Analyze(ctx, history, opts)
	return Outcome{Dir: r.dir, Result: result}, r.writeResults(history, result)
}

// finalReads reads every key from the beginning until each has been read
// up to the highest offset known for it: the highest offset any send or
// poll of the history returned (Jepsen's target) or, if higher, the last
// offset the healed cluster lists. It works in rounds, each with a fresh
// client and process, until every key is read or FinalTimeout passes.
func (r *run) finalReads(ctx context.Context, gen *queue.Generator, qopts queue.Options, topics *queue.Topics) {
	deadline := time.Now().Add(time.Duration(r.t.FinalTimeout))
	targets := gen.MaxOffsets()
	ectx, cancel := context.WithDeadline(ctx, deadline)
	ends, err := topics.EndOffsets(ectx, gen.Keys())
	cancel()
	if err != nil {
		fmt.Fprintf(r.out, "end offsets: %v (reading up to the offsets in the history)\n", err)
	}
	for k, end := range ends {
		if end > 0 && end-1 > targets[k] {
			targets[k] = end - 1
		}
	}
	final := queue.NewFinalGenerator(gen.Keys(), targets)
	qopts.PollTimeout = finalPollTimeout
	for round := 0; !final.Done() && ctx.Err() == nil && time.Now().Before(deadline); round++ {
		end := time.Now().Add(finalRoundLimit)
		if end.After(deadline) {
			end = deadline
		}
		rctx, cancel := context.WithDeadline(ctx, end)
		r.runWorkers(ctx, rctx, final, qopts, topics, 1, finalProcessBase+round*finalProcessStride)
		cancel()
	}
	if !final.Done() {
		fmt.Fprintf(r.out, "final reads did not reach the end of keys %v within %s\n", final.Missing(), time.Duration(r.t.FinalTimeout))
	}
}

// Process numbers of the final reads: round i uses finalProcessBase +
// i*finalProcessStride and up, far from the workers' numbers.
const (
	finalProcessBase   = 1_000_000
	finalProcessStride = 1_000
)

// runWorkers runs concurrency workers until ctx ends or the generator has
// nothing more. The operation a worker has in flight when ctx ends still
// completes and is recorded; only rootCtx ending (Ctrl-C) cuts it short. A
// worker whose operation ends info retires its process and takes a fresh
// number (Jepsen's rule), with a new client.
func (r *run) runWorkers(rootCtx, ctx context.Context, gen workloadsGenerator, qopts queue.Options, topics *queue.Topics, concurrency, processBase int) {
	var genMu sync.Mutex
	var wg sync.WaitGroup
	interval := time.Duration(0)
	if r.t.Rate > 0 {
		interval = time.Duration(float64(concurrency) / r.t.Rate * float64(time.Second))
	}
	for w := range concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			process := processBase + w
			var client *queue.Client
			defer func() {
				if client != nil {
					client.Close()
				}
			}()
			for ctx.Err() == nil {
				if client == nil {
					c, err := queue.NewClient(qopts, topics)
					if err != nil {
						fmt.Fprintf(r.out, "client for process %d: %v\n", process, err)
						return
					}
					client = c
				}
				genMu.Lock()
				op, ok := gen.Next(process)
				genMu.Unlock()
				if !ok {
					return
				}
				op.Process = process
				r.rec.Record(op)
				opCtx, cancel := context.WithTimeout(rootCtx, opTimeout)
				done := client.Invoke(opCtx, op)
				cancel()
				done.Process = process
				r.rec.Record(done)
				genMu.Lock()
				gen.Update(done)
				genMu.Unlock()
				if done.Type == checker.Info {
					client.Close()
					client = nil
					process += concurrency
				}
				if interval > 0 {
					select {
					case <-time.After(interval):
					case <-ctx.Done():
					}
				}
			}
		}()
	}
	wg.Wait()
}

// workloadsGenerator is what runWorkers needs of a generator.
type workloadsGenerator interface {
	Next(process int) (checker.Op, bool)
	Update(checker.Op)
}

func (r *run) noteFault(op checker.Op) {
	if op.Type == checker.Invoke {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if name, ok := strings.CutPrefix(op.F, "start-"); ok {
		r.faults = append(r.faults, name+" "+string(op.Raw))
		return
	}
	if name, ok := strings.CutPrefix(op.F, "stop-"); ok {
		for i, f := range r.faults {
			if strings.HasPrefix(f, name+" ") {
				r.faults = append(r.faults[:i], r.faults[i+1:]...)
				break
			}
		}
	}
}

// progress prints a status line every 2 s until stopped.
func (r *run) progress(ctx context.Context) func() {
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		tick := time.NewTicker(2 * time.Second)
		defer tick.Stop()
		last, lastAt := 0, time.Now()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case now := <-tick.C:
				c := r.rec.Counts()
				total := c[checker.OK] + c[checker.Fail] + c[checker.Info]
				rate := float64(total-last) / now.Sub(lastAt).Seconds()
				last, lastAt = total, now
				r.mu.Lock()
				faults := strings.Join(r.faults, "; ")
				r.mu.Unlock()
				if faults == "" {
					faults = "none"
				}
				fmt.Fprintf(r.out, "[%6.1fs] %s %.0fs/%s %.0f ops/s ok=%d fail=%d info=%d faults: %s\n",
					r.elapsed().Seconds(), r.phase, time.Since(r.workStart).Seconds(), time.Duration(r.t.TimeLimit), rate,
					c[checker.OK], c[checker.Fail], c[checker.Info], faults)
			}
		}
	}()
	return func() { close(done); <-stopped }
}

// healAll resumes, reconnects and restarts every node.
func (r *run) healAll(ctx context.Context) {
	for _, n := range r.nodes {
		_ = r.rt.Resume(ctx, n.Name)
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

// waitServing waits until every broker node is listed by the cluster's
// metadata and a controller is known.
func (r *run) waitServing(ctx context.Context, limit time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	want := 0
	for _, n := range r.nodes {
		if n.Broker {
			want++
		}
	}
	var last error
	for {
		mctx, mcancel := context.WithTimeout(ctx, 3*time.Second)
		md, err := r.metadata(mctx, false)
		mcancel()
		switch {
		case err != nil:
			last = err
		case len(md.Brokers) < want:
			last = fmt.Errorf("%d of %d brokers registered", len(md.Brokers), want)
		case md.ControllerID < 0:
			last = errors.New("no active controller")
		default:
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %v)", ctx.Err(), last)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// metadata asks the cluster directly, bypassing the client's metadata
// cache (kadm's BrokerMetadata and Metadata answer from a cache that can
// stay stale while a cluster starts or fails over); withTopics asks for
// every topic.
func (r *run) metadata(ctx context.Context, withTopics bool) (*kmsg.MetadataResponse, error) {
	req := kmsg.NewPtrMetadataRequest()
	if !withTopics {
		req.Topics = []kmsg.MetadataRequestTopic{}
	}
	return req.RequestWith(ctx, r.adm)
}

func (r *run) writeResults(h checker.History, res checker.Result) error {
	b, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(r.dir, "results.json"), b, 0o644); err != nil {
		return err
	}
	keys := make([]int, 0, len(res.Visualizations))
	for k := range res.Visualizations {
		keys = append(keys, k)
	}
	sort.Ints(keys)
	for _, k := range keys {
		if err := os.WriteFile(filepath.Join(r.dir, reports.LinearVisualizationFile(k)), res.Visualizations[k], 0o644); err != nil {
			return err
		}
	}
	if err := reports.RenderDir(r.dir); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	spec, _ := os.ReadFile(filepath.Join(r.dir, "test.json"))
	s, _ := reports.ParseSpec(spec)
	fmt.Fprintln(r.out, reports.Summary(reports.Input{Spec: s, Result: res, History: h}))
	fmt.Fprintf(r.out, "report: %s\n", filepath.Join(r.dir, "report.html"))
	return nil
}

// clusterView answers the nemesis's questions from live metadata.
type clusterView struct{ r *run }

func (c *clusterView) Nodes() []string {
	names := make([]string, len(c.r.nodes))
	for i, n := range c.r.nodes {
		names[i] = n.Name
	}
	return names
}

func (c *clusterView) name(id int32) string {
	for _, n := range c.r.nodes {
		if n.ID == id {
			return n.Name
		}
	}
	return ""
}

func (c *clusterView) Leaders(ctx context.Context) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	md, err := c.r.metadata(ctx, true)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var out []string
	for _, td := range md.Topics {
		if td.Topic == nil || !strings.HasPrefix(*td.Topic, "t") {
			continue
		}
		for _, p := range td.Partitions {
			if n := c.name(p.Leader); n != "" && !seen[n] {
				seen[n] = true
				out = append(out, n)
			}
		}
	}
	sort.Strings(out)
	return out, nil
}

func (c *clusterView) Controller(ctx context.Context) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	md, err := c.r.metadata(ctx, false)
	if err != nil {
		return "", err
	}
	if n := c.name(md.ControllerID); n != "" {
		return n, nil
	}
	return "", fmt.Errorf("controller %d is not a known node", md.ControllerID)
}
