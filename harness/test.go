package harness

import (
	"fmt"
	"strings"
	"time"

	"github.com/moby/moby/client"

	"github.com/faultline/faultline/checker"
	"github.com/faultline/faultline/harness/profile"
	"github.com/faultline/faultline/harness/testspec"
	"github.com/faultline/faultline/nemesis"
	"github.com/faultline/faultline/workloads"
)

// Duration is a time.Duration written as "90s" in test.json.
type Duration = testspec.Duration

// Test is one whole test (test.json's testspec.Spec, stored as the run
// starts) plus what the harness does with it: Validate, the workload's and
// the checker's options, its full name.
type Test struct {
	testspec.Spec
	// dockerClientOpts, when set, adds Engine client options per endpoint
	// of a placed run (tests count the calls through each client).
	dockerClientOpts func(endpoint string) []client.Opt
}

// DefaultTest returns the defaults `faultline test` documents.
func DefaultTest() Test {
	return Test{Spec: testspec.Spec{
		Workload:           "queue",
		Nemesis:            nemesis.Spec{{Kind: nemesis.KindNone}},
		NemesisInterval:    Duration(15 * time.Second),
		Nodes:              5,
		Topology:           "combined",
		TimeLimit:          Duration(60 * time.Second),
		Rate:               0,
		Concurrency:        10,
		Acks:               workloads.AcksAll,
		Idempotent:         true,
		ReplicationFactor:  3,
		PartitionsPerTopic: 4,
		Runtime:            "docker",
		Store:              "store",
		RecoveryTimeout:    Duration(60 * time.Second),
		FinalTimeout:       Duration(60 * time.Second),
		BrokerBinary:       "bin/broker",
		AgentBinary:        "bin/faultline",
	}}
}

// Validate checks a test before anything is started, its workload against
// reg; its errors are bad arguments (exit 254).
func (t Test) Validate(reg workloads.Registry) error {
	var problems []string
	if _, err := reg.Lookup(t.Workload); err != nil {
		problems = append(problems, "--workload: "+err.Error())
	}
	if t.Nodes < 1 || t.Nodes > 9 {
		problems = append(problems, fmt.Sprintf("--nodes: must be 1..9, got %d", t.Nodes))
	}
	if time.Duration(t.TimeLimit) <= 0 {
		problems = append(problems, "--time-limit: must be positive")
	}
	prof, err := profile.Load(t.DB)
	if err != nil {
		problems = append(problems, err.Error())
	}
	if t.Nodes >= 1 && t.Nodes <= 9 && prof != nil {
		if err := (Cluster{Nodes: t.Nodes, Topology: t.Topology, ClusterID: "validate", Profile: prof}).Validate(); err != nil {
			problems = append(problems, err.Error())
		}
	}
	if prof != nil && prof.Controller == "none" {
		for _, f := range t.Nemesis {
			if f.Mode == nemesis.TargetController {
				problems = append(problems, fmt.Sprintf("--nemesis %s: the %s profile cannot name the active controller (its profile says controller: none)", f, prof.Name))
			}
		}
	}
	if t.Rate < 0 {
		problems = append(problems, fmt.Sprintf("--rate: must not be negative, got %g", t.Rate))
	}
	if t.PartitionsPerTopic < 1 {
		problems = append(problems, fmt.Sprintf("--partitions-per-topic: must be at least 1, got %d", t.PartitionsPerTopic))
	}
	if t.Concurrency < 1 {
		problems = append(problems, fmt.Sprintf("--concurrency: must be at least 1, got %d", t.Concurrency))
	}
	if !t.Acks.IsSet() {
		problems = append(problems, "--acks: must be -1 (all), 0 or 1, got none")
	}
	if t.ReplicationFactor < 1 || t.ReplicationFactor > t.Nodes {
		problems = append(problems, fmt.Sprintf("--replication-factor: must be 1..nodes (%d), got %d", t.Nodes, t.ReplicationFactor))
	}
	if t.Txn && (t.Acks != workloads.AcksAll || !t.Idempotent) {
		problems = append(problems, "--txn: transactions need --acks -1 and the idempotent producer")
	}
	if !t.Txn {
		for _, f := range t.Nemesis {
			// partition:coordinator is the consumer group's coordinator;
			// kill, pause and power aim at the transaction coordinator.
			if (f.Mode == nemesis.TargetCoordinator && f.Kind != nemesis.KindPartition) || f.Mode == nemesis.PartitionClientsCoordinator || f.Mode == nemesis.PartitionCoordinatorCutThenKilled {
				problems = append(problems, fmt.Sprintf("--nemesis %s: needs --txn (only transactional ids have a transaction coordinator)", f))
			}
		}
	}
	if t.Txn && t.Subscribe {
		problems = append(problems, "--txn: transactional operations assign partitions; drop --subscribe")
	}
	if t.Runtime != "docker" && t.Runtime != "process" {
		problems = append(problems, fmt.Sprintf("--runtime: must be docker or process, got %q", t.Runtime))
	}
	if len(t.DockerHosts) > 0 {
		if t.Runtime != "docker" {
			problems = append(problems, "--docker-host: places nodes on Docker Engines; needs --runtime docker")
		} else {
			problems = append(problems, ValidateDockerHosts(t.DockerHosts, t.Nodes)...)
		}
	}
	if err := t.Nemesis.Validate(); err != nil {
		problems = append(problems, "--nemesis: "+err.Error())
	}
	if t.Runtime == "process" && t.diskFaults() {
		problems = append(problems, "--nemesis: power, disk and corrupt faults need --runtime docker")
	}
	if t.Schedule != nil {
		if err := nemesis.ValidateEvents(t.Nemesis, t.Schedule); err != nil {
			problems = append(problems, "schedule: "+err.Error()+" (the events name the slots of the --nemesis list the run had)")
		}
	}
	if t.Runtime == "process" && (t.Nemesis.Has(nemesis.KindPacket) || t.Nemesis.Has(nemesis.KindLaggingFailover)) {
		problems = append(problems, "--nemesis: packet and lagging-failover faults need --runtime docker")
	}
	if time.Duration(t.NemesisInterval) <= 0 {
		problems = append(problems, "--nemesis-interval: must be positive")
	}
	if err := checker.ValidateClientErrorCodes(t.FailOnClientErrors); err != nil {
		problems = append(problems, "--fail-on-client-error: "+err.Error())
	}
	if time.Duration(t.CrashClientsInterval) < 0 {
		problems = append(problems, "--crash-clients-interval: must not be negative")
	}
	if t.CrashClientsTarget != "" && t.CrashClientsInterval <= 0 {
		problems = append(problems, "--crash-clients-target: needs --crash-clients-interval")
	}
	if t.TxnRestartOneIn != 0 && !t.Txn {
		problems = append(problems, "--txn-restart-one-in: needs --txn")
	}
	if t.TxnTimeout != 0 && !t.Txn {
		problems = append(problems, "--txn-timeout: needs --txn")
	}
	if d := time.Duration(t.TxnTimeout); d < 0 || d != 0 && (d < time.Millisecond || d > 15*time.Minute) {
		problems = append(problems, fmt.Sprintf("--txn-timeout: must be between 1ms and 15m (Kafka's transaction.max.timeout.ms), got %s", d))
	}
	switch t.CrashClientsTarget {
	case "", testspec.CrashRandom, testspec.CrashStalled:
	case testspec.CrashZombie:
		if !t.Txn {
			problems = append(problems, "--crash-clients-target zombie: needs --txn (a zombie is fenced by its successor's transactional.id)")
		}
	default:
		problems = append(problems, fmt.Sprintf("--crash-clients-target: must be %s, %s or %s, got %q", testspec.CrashRandom, testspec.CrashStalled, testspec.CrashZombie, t.CrashClientsTarget))
	}
	if len(problems) > 0 {
		return fmt.Errorf("%s", strings.Join(problems, "\n"))
	}
	return nil
}

// networkFaults reports whether the nemesis list names a fault on the
// nodes' network (partitions, packet faults, lagging-failover), which needs
// CAP_NET_ADMIN in the nodes.
func (t Test) networkFaults() bool { return t.Nemesis.NeedsNetAdmin() }

// faultPlan is the schedule the run executes: the test's fixed events when
// it has them (a replay, a shrinker's candidate), else drawn from the seed
// (nemesis.Plan); either way written as schedule.json as it ran.
func (t Test) faultPlan() []nemesis.Event {
	if t.Schedule != nil {
		return t.Schedule
	}
	return nemesis.Plan(t.Nemesis, nemesis.PlanOptions{
		Interval: time.Duration(t.NemesisInterval), Limit: time.Duration(t.TimeLimit), Overlap: t.NemesisOverlap, Cycle: t.NemesisCycle,
	}, t.Seed)
}

// diskFaults reports whether the nemesis list names a fault on the nodes'
// disks (the fault filesystem or corruption of a stopped node's data).
func (t Test) diskFaults() bool {
	return t.Nemesis.OnFaultFS() || t.Nemesis.Has(nemesis.KindCorrupt)
}

// WorkloadOptions are the workload's settings for a cluster reached at
// seeds.
func (t Test) WorkloadOptions(seeds []string) workloads.Options {
	return workloads.Options{
		Seeds: seeds, Seed: t.Seed, Acks: t.Acks, Idempotent: t.Idempotent,
		ReplicationFactor: t.ReplicationFactor, PartitionsPerTopic: t.PartitionsPerTopic, Subscribe: t.Subscribe && !t.MixedConsumers,
		MixedConsumers:  t.MixedConsumers,
		Txn:             t.Txn,
		TxnRestartOneIn: t.TxnRestartOneIn,
		TxnTimeout:      time.Duration(t.TxnTimeout),
	}
}

// checkerOptions are the checker's settings for the test's consumers.
func (t Test) checkerOptions() checker.Options {
	opts := checker.Options{FailOnClientErrors: t.FailOnClientErrors}
	if t.Subscribe && !t.MixedConsumers {
		opts.Mode = checker.ModeSubscribe
	}
	opts.Txn = t.Txn
	return opts
}

// FullName is the test's directory name in the store: the given name, or
// one made of workload, nemeses and node count.
func (t Test) FullName() string {
	if t.Name != "" {
		return t.Name
	}
	return fmt.Sprintf("%s-%s-%dn", t.Workload, strings.Join(t.Nemesis.Names(), "+"), t.Nodes)
}
