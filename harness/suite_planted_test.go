package harness

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faultline/faultline/checker"
	"github.com/faultline/faultline/harness/testspec"
	"github.com/faultline/faultline/nemesis"
	"github.com/faultline/faultline/workloads"
)

// TestPlantedCasesUseTheFaultThatExposesEachBug: every planted case names
// expected anomaly classes and the fault of its bug; its control is the
// same test without the switch, expected valid.
func TestPlantedCasesUseTheFaultThatExposesEachBug(t *testing.T) {
	cases := Suites["planted"](DefaultTest())
	require.Len(t, cases, 24)
	byName := map[string]Case{}
	for _, c := range cases {
		require.NoError(t, c.Test.Validate(testWorkloads), c.Test.Name)
		byName[c.Test.Name] = c
	}
	assertPlantedPairs(t, byName, plantedBugs)
	faults := func(name string) string { return byName["planted-"+name].Test.Nemesis.String() }
	assert.Equal(t, "corrupt:bit-flip-then-leader", faults("recovery-skip-crc"))
	assert.Equal(t, []string{checker.CodeCorruptMessage, checker.CodeDataLoss}, byName["control-recovery-skip-crc"].Test.FailOnClientErrors, "the control fails on corruption served too")
	assert.Equal(t, "power:after-slow-fsync", faults("ack-before-fsync"))
	assert.Equal(t, 1, byName["control-ack-before-fsync"].Test.ReplicationFactor)
	assert.Equal(t, "power:after-fsync-error", faults("ignore-fsync-error"))
	assert.Equal(t, "power:restart-lagging-then-leader", faults("unclean-restart-keeps-isr"))
	assert.Equal(t, "partition:lagging-then-leader", faults("elect-any-replica"))
	assert.Empty(t, byName["planted-unclean-restart-keeps-isr"].Test.BrokerConfig["log.flush.interval.messages"], "the default flush policy")
	assert.Equal(t, "2", byName["planted-unclean-restart-keeps-isr"].Test.BrokerConfig["min.insync.replicas"])
	assert.True(t, byName["planted-unclean-restart-keeps-isr"].Test.networkFaults(), "it cuts the lagging node off")
	assert.Equal(t, "corrupt:unreplicated-tail", faults("follower-skip-validation"))
	assert.Equal(t, "partition:deposed-leader-returns", faults("skip-divergence-truncation"))
	assert.True(t, byName["planted-follower-skip-validation"].Test.networkFaults(), "it cuts the leader off from its followers")
	assert.Equal(t, "10000", byName["control-follower-skip-validation"].Test.BrokerConfig["replica.lag.time.max.ms"], "a follower cut off for the fault stays in the ISR")

	// Seed 4 of ack-before-isr once drew kills only, and missed: faults of
	// two kinds take turns, the partition first, at every seed.
	assert.Equal(t, "partition:leader-cut-then-killed", faults("ack-before-isr"))
	assert.Equal(t, "partition:leader-cut-then-killed", faults("hw-from-leader-leo"))
	for _, name := range []string{"planted-idempotence-off", "control-idempotence-off"} {
		tt := byName[name].Test
		assert.True(t, tt.NemesisCycle, name)
		for seed := int64(1); seed <= 10; seed++ {
			tt.Seed = seed
			events := tt.faultPlan()
			require.NotEmpty(t, events, name)
			assert.Equal(t, nemesis.KindPartition, events[0].Kind, "%s seed %d starts with its partition", name, seed)
			kinds := map[nemesis.Kind]bool{}
			for _, e := range events {
				kinds[e.Kind] = true
			}
			assert.Len(t, kinds, 2, "%s seed %d meets both faults", name, seed)
		}
	}
	assert.False(t, byName["planted-ack-before-fsync"].Test.NemesisCycle, "one fault: nothing to take turns")
}

// TestJudgeWantsTheExpectedAnomalyClass: an invalid result passes an
// invalid case only when it found one of the expected classes.
func TestJudgeWantsTheExpectedAnomalyClass(t *testing.T) {
	c := Case{Expect: checker.Invalid, ExpectAnomalies: []string{checker.AnomalyLostWrite, checker.AnomalyUnseen}}
	assert.Contains(t, lossClasses, checker.AnomalyInconsistentOffsets, "a lost write whose offset is reused")
	res := func(v checker.Validity, anomalies map[string]checker.AnomalyReport) checker.Result {
		return checker.Result{Valid: v, Anomalies: anomalies}
	}
	found, ok := c.Judge(res(checker.Invalid, map[string]checker.AnomalyReport{checker.AnomalyUnseen: {Count: 3}}))
	assert.True(t, ok)
	assert.Equal(t, "invalid", found)

	found, ok = c.Judge(res(checker.Invalid, map[string]checker.AnomalyReport{
		checker.AnomalyDuplicate: {Count: 1}, checker.AnomalyLostWrite: {Count: 2, Allowed: true},
	}))
	assert.False(t, ok, "an allowed lost-write does not count, a duplicate is another class")
	assert.Equal(t, "invalid (duplicate; expected lost-write or unseen)", found)

	_, ok = c.Judge(res(checker.Valid, nil))
	assert.False(t, ok)
	_, ok = Case{Expect: checker.Invalid}.Judge(res(checker.Invalid, map[string]checker.AnomalyReport{checker.AnomalyDuplicate: {Count: 1}}))
	assert.True(t, ok, "no expected classes: any invalid result")
	_, ok = Case{Expect: checker.Valid, ExpectAnomalies: []string{"x"}}.Judge(res(checker.Valid, nil))
	assert.True(t, ok)
}

// TestSuiteTableShowsExpectedAndFoundClasses.
func TestSuiteTableShowsExpectedAndFoundClasses(t *testing.T) {
	r := SuiteRow{Name: "planted-x", Expected: checker.Invalid, ExpectAnomalies: []string{"lost-write", "unseen"}}
	assert.Equal(t, "invalid (lost-write|unseen)", r.expected())
	assert.Equal(t, "valid", SuiteRow{Expected: checker.Valid}.expected())
	assert.Equal(t, "-", firstText(0))
	assert.Equal(t, "12.3s", firstText(12345*time.Millisecond))
}

// blockingClient holds every operation until its context ends, and
// counts the clients made.
type blockingClient struct{ closed *atomic.Int32 }

func (b blockingClient) Invoke(ctx context.Context, op checker.Op) checker.Op {
	select {
	case <-ctx.Done():
	case <-time.After(2 * time.Second):
	}
	op.Type = checker.Fail
	return op
}
func (b blockingClient) Close() { b.closed.Add(1) }

// newCrashRun is a run at seed 3 recording to a history in a temporary
// directory.
func newCrashRun(t *testing.T) (*run, *Recorder) {
	t.Helper()
	rec, err := NewRecorder(filepath.Join(t.TempDir(), "history.jsonl"))
	require.NoError(t, err)
	t.Cleanup(func() { rec.Close() })
	tt := DefaultTest()
	tt.Seed = 3
	return &run{t: tt, rec: rec, out: &bytes.Buffer{}}, rec
}

// crashRun runs two workers of blockingClients from gen for d with a
// client crashed every 100 ms; it returns the history and how many
// clients were made and closed.
func crashRun(t *testing.T, gen workloads.Generator, d time.Duration) (checker.History, int, int) {
	return crashRunOf(t, gen, d, "", func(_ int, closed *atomic.Int32) workloads.Client { return blockingClient{closed: closed} })
}

// crashRunOf is crashRun with the crash target given and the clients mk
// makes (made counts the clients made so far, this one included; closed
// is the count a client's Close adds to).
func crashRunOf(t *testing.T, gen workloads.Generator, d time.Duration, target string, mk func(made int, closed *atomic.Int32) workloads.Client) (checker.History, int, int) {
	t.Helper()
	r, rec := newCrashRun(t)
	r.t.CrashClientsTarget = target
	var mu sync.Mutex
	var closed atomic.Int32
	made := 0
	newClient := func() (workloads.Client, error) {
		mu.Lock()
		defer mu.Unlock()
		made++
		return mk(made, &closed), nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	r.runWorkers(context.Background(), ctx, gen, newClient, nil, 2, 0, 100*time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	return rec.History(), made, int(closed.Load())
}

// onlySends hands out sends forever.
type onlySends struct{ n int64 }

func (g *onlySends) Next(int) (checker.Op, bool) {
	g.n++
	return checker.Op{Type: checker.Invoke, F: "send", Mops: []checker.MicroOp{{F: "send", Key: 0, Value: g.n}}}, true
}
func (g *onlySends) Update(checker.Op) {}

// TestCrashClientsEndsTheOperationInfoAndChangesProcess: a crashed
// client's operation in flight is recorded info with the crash's error,
// the crash is a harness event, and the worker goes on as a new process
// with a new client.
func TestCrashClientsEndsTheOperationInfoAndChangesProcess(t *testing.T) {
	h, made, closed := crashRun(t, &onlySends{}, 700*time.Millisecond)
	crashes, crashedInfo := 0, 0
	processes := map[int]bool{}
	for _, op := range h {
		if op.Process == checker.HarnessProcess && op.F == checker.FCrashClient {
			crashes++
			var v struct{ Process int }
			require.NoError(t, json.Unmarshal(op.Raw, &v))
			assert.Less(t, v.Process, 1000)
			continue
		}
		processes[op.Process] = true
		if op.Type == checker.Info {
			assert.True(t, strings.HasPrefix(op.Error, "crashed:"), op.Error)
			crashedInfo++
		}
	}
	assert.GreaterOrEqual(t, crashes, 3, "one crash every 100 ms")
	assert.GreaterOrEqual(t, crashedInfo, 3, "each crash of an operation in flight ends it info")
	assert.Greater(t, len(processes), 2, "crashed workers continue as new processes")
	assert.Greater(t, made, 2, "each with a new client")
	assert.Equal(t, made, closed, "every client closed")
}

// onlyTxns hands out one-send transactions forever.
type onlyTxns struct{ n int64 }

func (g *onlyTxns) Next(int) (checker.Op, bool) {
	g.n++
	return checker.Op{Type: checker.Invoke, F: checker.FTxn, Mops: []checker.MicroOp{{F: "send", Key: 0, Value: g.n}}}, true
}
func (g *onlyTxns) Update(checker.Op) {}

// TestCrashedTransactionTheClientFailedStaysFail: a crashed transaction
// the workload recorded fail (it never sent its commit) is not turned
// into info: nothing can commit it any more.
func TestCrashedTransactionTheClientFailedStaysFail(t *testing.T) {
	h, _, _ := crashRun(t, &onlyTxns{}, 500*time.Millisecond)
	crashes, fails := 0, 0
	for _, op := range h {
		switch {
		case op.F == checker.FCrashClient:
			crashes++
		case op.Type == checker.Info:
			t.Errorf("op %d: a failed transaction became info: %s", op.Index, op.Error)
		case op.Type == checker.Fail:
			fails++
		}
	}
	assert.GreaterOrEqual(t, crashes, 2)
	assert.GreaterOrEqual(t, fails, 2)
}

// TestSequenceModesNeedTheirRuntime: the sequence faults are valid specs
// and the disk ones need docker.
func TestSequenceModesNeedTheirRuntime(t *testing.T) {
	tt := DefaultTest()
	tt.Nemesis = nemesis.Spec{{Kind: nemesis.KindPower, Mode: nemesis.PowerAfterFsyncError}}
	require.NoError(t, tt.Validate(testWorkloads))
	tt.Runtime = "process"
	assert.ErrorContains(t, tt.Validate(testWorkloads), "need --runtime docker")
}

// TestTxnSuiteCases: the txn suite's valid cases run transactions and
// compaction; each planted case of a transaction or compaction bug has its
// control, the same test without the switch.
func TestTxnSuiteCases(t *testing.T) {
	cases := Suites["txn"](DefaultTest())
	require.Len(t, cases, 14+2*len(txnBugs))
	byName := map[string]Case{}
	for _, c := range cases {
		require.NoError(t, c.Test.Validate(testWorkloads), c.Test.Name)
		byName[c.Test.Name] = c
	}
	assert.True(t, byName["txn-kill"].Test.Txn)
	assert.Equal(t, checker.Valid, byName["txn-kill"].Expect)
	assert.Equal(t, "compact", byName["compact-kill"].Test.Workload)
	assert.False(t, byName["compact-kill"].Test.Txn)
	assert.Equal(t, "compact", byName["compact-txn-kill"].Test.Workload)
	assert.True(t, byName["compact-txn-kill"].Test.Txn, "puts are transactions")
	assert.Equal(t, "kill:coordinator,pause:coordinator", byName["txn-coordinator"].Test.Nemesis.String())
	assert.Equal(t, "power:coordinator", byName["txn-power-coordinator"].Test.Nemesis.String())
	assert.Equal(t, Duration(5*time.Second), byName["txn-crash-clients"].Test.CrashClientsInterval)
	assert.Equal(t, "partition:clients-coordinator", byName["txn-clients-coordinator"].Test.Nemesis.String())
	assert.Equal(t, "stop:coordinator,stop:leaders", byName["txn-stop"].Test.Nemesis.String())
	slow := byName["txn-slow"].Test
	assert.Equal(t, "packet:latency,stop:leaders", slow.Nemesis.String())
	assert.True(t, slow.NemesisOverlap, "the delay overlaps the shutdowns")
	assert.Equal(t, Duration(3*time.Second), slow.CrashClientsInterval)
	assert.Equal(t, 1, byName["txn-restart"].Test.TxnRestartOneIn, "every commit is followed by a restart")
	cc := byName["txn-clients-coordinator"].Test
	assert.Equal(t, Duration(time.Second), cc.TxnTimeout, "shorter than most cuts: the coordinator's timeout races the held-up commit")
	assert.Equal(t, Duration(2*time.Second), cc.NemesisInterval)
	assert.Equal(t, "500", cc.BrokerConfig["transaction.abort.timed.out.transaction.cleanup.interval.ms"])
	assert.Zero(t, byName["txn-kill"].Test.TxnTimeout, "the workload's default elsewhere")
	assert.Zero(t, byName["txn-kill"].Test.TxnRestartOneIn, "the workload's default elsewhere")
	for _, name := range []string{"txn-kill", "txn-coordinator", "txn-stop", "txn-coordinator-cut", "txn-crash-clients", "txn-power-coordinator", "txn-slow", "txn-restart"} {
		assert.Equal(t, "5000", byName[name].Test.BrokerConfig["log.roll.ms"], "%s rolls its segments within the test", name)
	}
	assert.Equal(t, "3000", byName["txn-coordinator-cut"].Test.BrokerConfig["replica.lag.time.max.ms"])
	assert.Equal(t, Duration(3*time.Second), byName["txn-coordinator-cut"].Test.CrashClientsInterval)
	assert.Equal(t, testspec.CrashStalled, byName["txn-coordinator-cut"].Test.CrashClientsTarget, "the client held up behind a prepared commit is the one crashed")
	assert.Empty(t, byName["txn-crash-clients"].Test.CrashClientsTarget, "random, as Jepsen's")
	assert.Equal(t, testspec.CrashZombie, byName["txn-zombies"].Test.CrashClientsTarget)
	for _, name := range []string{"planted-produce-no-epoch-fence", "control-produce-no-epoch-fence"} {
		z := byName[name].Test
		assert.Equal(t, testspec.CrashZombie, z.CrashClientsTarget, name)
		assert.Equal(t, "false", z.BrokerConfig["transaction.partition.verification.enable"], "%s: the partition's epoch check is the only fence", name)
	}

	assert.NotContains(t, byName["txn-kill"].Test.BrokerConfig, "replica.lag.time.max.ms", "the cut case's lag setting stays its own")
	assertPlantedPairs(t, byName, txnBugs)
	assert.True(t, byName["planted-read-committed-past-lso"].Test.Txn)
	assert.Equal(t, "compact", byName["control-cleaner-drops-latest"].Test.Workload)
	assert.Equal(t, []string{checker.AnomalyLostLatestValue}, byName["planted-cleaner-drops-latest"].ExpectAnomalies)
}

// assertPlantedPairs: each bug's planted case is expected invalid with
// anomaly classes and the switch on; its control is the same test without
// the switch, expected valid.
func assertPlantedPairs(t *testing.T, byName map[string]Case, bugs []plantedBug) {
	t.Helper()
	for _, b := range bugs {
		p, c := byName["planted-"+b.name], byName["control-"+b.name]
		assert.Equal(t, checker.Invalid, p.Expect, b.name)
		assert.NotEmpty(t, p.ExpectAnomalies, b.name)
		assert.Equal(t, checker.Valid, c.Expect, b.name)
		assert.Equal(t, "true", p.Test.BrokerConfig[b.key], b.name)
		assert.NotContains(t, c.Test.BrokerConfig, b.key, b.name)
		assert.Equal(t, p.Test.Nemesis, c.Test.Nemesis, b.name)
		assert.Equal(t, p.Test.Txn, c.Test.Txn, b.name)
		assert.Equal(t, p.Test.Workload, c.Test.Workload, b.name)
	}
}

// idClient is a blockingClient with an identity (a transactional.id) that
// notes which process used it.
type idClient struct {
	blockingClient
	id string
	rs *restarter
}

func (c idClient) Invoke(ctx context.Context, op checker.Op) checker.Op {
	c.rs.mu.Lock()
	c.rs.used[op.Process] = c.id
	c.rs.mu.Unlock()
	return c.blockingClient.Invoke(ctx, op)
}

// restarter is a workloads.Restartable of idClients: fresh clients get
// new identities, successors the one handed on, each noted.
type restarter struct {
	mu        sync.Mutex
	closed    atomic.Int32
	made      int
	succeeded []string
	used      map[int]string // process to the identity of its client
}

func (r *restarter) newClient() (workloads.Client, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.made++
	return idClient{blockingClient{closed: &r.closed}, fmt.Sprintf("id-%d", r.made), r}, nil
}

func (r *restarter) Identity(c workloads.Client) string { return c.(idClient).id }

func (r *restarter) NewClientAs(identity string) (workloads.Client, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.succeeded = append(r.succeeded, identity)
	return idClient{blockingClient{closed: &r.closed}, identity, r}, nil
}

// TestCrashedClientIsSucceededUnderItsIdentity: with a Restartable
// workload, a seeded part of the crashed clients (each crash event says
// which) are succeeded under the identity of the client the crashed
// process used, the others by fresh clients.
func TestCrashedClientIsSucceededUnderItsIdentity(t *testing.T) {
	r, rec := newCrashRun(t)
	rs := &restarter{used: map[int]string{}}
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	r.runWorkers(context.Background(), ctx, &onlySends{}, rs.newClient, rs, 2, 0, 100*time.Millisecond)
	handedOn := map[string]int{} // identities the successor crashes hand on
	successors, fresh := 0, 0
	for _, op := range rec.History() {
		if op.F != checker.FCrashClient {
			continue
		}
		var v struct {
			Process   int
			Successor bool
		}
		require.NoError(t, json.Unmarshal(op.Raw, &v))
		if v.Successor {
			successors++
			handedOn[rs.used[v.Process]]++
		} else {
			fresh++
		}
	}
	assert.Positive(t, successors, "some crashed clients are succeeded under their identity")
	assert.Positive(t, fresh, "and some by fresh clients")
	// The last crashes' successors may not be made before the test ends.
	assert.InDelta(t, successors, len(rs.succeeded), 2, "one successor for each crash that hands on")
	for _, id := range rs.succeeded {
		assert.Positive(t, handedOn[id], "successor under %s: no crash handed it on", id)
		handedOn[id]--
	}
	assert.Equal(t, rs.made+len(rs.succeeded), int(rs.closed.Load()), "every client closed")
}

// TestRestartableOnlyUnderTxn: crashed clients are succeeded under their
// identity only in a transactional run.
func TestRestartableOnlyUnderTxn(t *testing.T) {
	wl := &restartableWorkload{}
	tt := DefaultTest()
	assert.Nil(t, restartable(tt, wl))
	tt.Txn = true
	assert.NotNil(t, restartable(tt, wl))
}

type restartableWorkload struct {
	workloads.Workload
	restarter
}
