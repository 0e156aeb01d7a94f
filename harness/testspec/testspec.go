package testspec

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	"github.com/faultline/faultline/nemesis"
	"github.com/faultline/faultline/workloads"
)

// Duration is a time.Duration written as "90s" in test.json.
type Duration time.Duration

// MarshalJSON writes the duration as a Go duration string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON reads a Go duration string.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration: %w", err)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("duration: %w", err)
	}
	*d = Duration(v)
	return nil
}

// Crash-clients targets (Spec.CrashClientsTarget).
const (
	CrashRandom  = "random"
	CrashStalled = "stalled"
	CrashZombie  = "zombie"
)

// Spec is one whole test, Jepsen's test map as a plain value: what to run
// against, which workload, which faults, for how long, with which seed. The
// same Spec (same seed) replays the same schedule and workload choices.
type Spec struct {
	Name string `json:"name"`
	// Workload is looked up in the registry the harness runs with.
	Workload string       `json:"workload"`
	Nemesis  nemesis.Spec `json:"nemesis"`
	// NemesisInterval is the mean time between fault starts and stops
	// (each gap is drawn in [0, 2×interval), Jepsen's stagger) and the
	// stable, fault-free period between rounds.
	NemesisInterval Duration `json:"nemesis-interval"`
	// Schedule, when set, is the fault schedule to execute instead of one
	// drawn from the seed: the events a stored run executed
	// (schedule.json: slots of Nemesis, modes, seeds, nodes), replayed on
	// the same targets at the same times
	// (`faultline test --replay`, the shrinker's candidates).
	Schedule []nemesis.Event `json:"schedule,omitempty"`
	// NemesisCycle starts the faults in the order Nemesis names them,
	// round after round, instead of drawing each at random.
	NemesisCycle bool `json:"nemesis-cycle,omitempty"`
	// NemesisOverlap lets faults of different kinds overlap within a
	// round (nemesis.PlanOptions.Overlap).
	NemesisOverlap bool     `json:"nemesis-overlap,omitempty"`
	Nodes          int      `json:"nodes"`
	Topology       string   `json:"topology"`
	TimeLimit      Duration `json:"time-limit"`
	// Rate is the target of invocations per second over all workers (0:
	// as fast as the workers go).
	Rate        float64 `json:"rate"`
	Concurrency int     `json:"concurrency"`
	Seed        int64   `json:"seed"`
	// BrokerConfig overrides server.properties keys on every node.
	BrokerConfig map[string]string `json:"broker-config"`
	// Client options.
	Acks               workloads.Acks `json:"acks"`
	Idempotent         bool           `json:"idempotent"`
	ReplicationFactor  int            `json:"replication-factor"`
	PartitionsPerTopic int            `json:"partitions-per-topic"`
	Subscribe          bool           `json:"subscribe"`
	// MixedConsumers makes every other worker's consumers subscribe and the
	// others assign, in one run (--consumer-mode mixed); Subscribe is then
	// ignored.
	MixedConsumers bool `json:"mixed-consumers,omitempty"`
	// CrashClientsInterval, when positive, crashes a client every interval
	// (Jepsen's crash-clients): a random worker's operation in flight is
	// cancelled and ends info (a transaction the workload found could only
	// end aborted stays fail), its client is closed, and a new client with
	// a new process number takes over.
	CrashClientsInterval Duration `json:"crash-clients-interval,omitempty"`
	// CrashClientsTarget is which client crash-clients crashes:
	// CrashRandom ("" too), a seeded choice of worker, as Jepsen does; or
	// CrashStalled, the worker whose operation has been in flight longest
	// (a client stuck behind the broker: a commit whose markers are held
	// up, an unavailable coordinator), as an operator restarts a stuck
	// application; a seeded choice when none is in flight. A stalled
	// crash abandons the operation at once (recorded info) and the
	// successor starts at once, while the crashed client's call goes on,
	// its context cancelled, until it returns and the client is closed:
	// the zombie a successor's fencing exists for. CrashZombie (under
	// --txn) makes that zombie certain: a worker with an operation in
	// flight (the seeded one if it has, else the one in flight longest)
	// is paused, not closed, as a process frozen by a long GC pause is,
	// just as its next Produce request leaves it: from there what it
	// sends is held in flight (workloads.Pausable); the worker stops
	// waiting for its operation, which is not cancelled; a successor
	// takes over its transactional.id; and once the successor's first
	// transaction has ended (its InitProducerId bumped the epoch and
	// aborted what the paused one had open) the zombie resumes, its held
	// requests reach the brokers with the old epoch, and it goes on with
	// its operation, recorded with its own outcome when it ends (info if
	// it has not within 30 s). Every request it makes from then on must
	// be fenced. With no operation in flight, or a client that cannot
	// pause, the crash is a plain one whose successor takes over the
	// identity (a zombie of the worker's still paused waits for it).
	CrashClientsTarget string `json:"crash-clients-target,omitempty"`
	// FailOnClientErrors are client error codes (checker's
	// SuspectClientErrors) that make the test invalid when a client gets one.
	FailOnClientErrors []string `json:"fail-on-client-errors,omitempty"`
	// Txn makes the queue workload's operations transactions of up to 4
	// sends and polls (transactional producers, read_committed consumers).
	Txn bool `json:"txn,omitempty"`
	// TxnRestartOneIn is the odds that a committed transaction's producer
	// is restarted at once under its transactional.id (the queue
	// workload's; 0: its default, one in ten; 1: after every commit;
	// negative: never).
	TxnRestartOneIn int `json:"txn-restart-one-in,omitempty"`
	// TxnTimeout is the transactional producers' transaction.timeout.ms
	// (the queue and compact workloads'; 0: four request timeouts, 20 s):
	// how long a coordinator lets a transaction stay open before it aborts
	// it by itself.
	TxnTimeout Duration `json:"txn-timeout,omitempty"`
	// Runtime is "docker" or "process".
	Runtime string `json:"runtime"`
	// DockerHosts places the nodes on Docker Engines (`--docker-host`):
	// node -> endpoint (unix://PATH, tcp://HOST:PORT, context:NAME or a
	// context name). A run stores it with every node placed (the default
	// host written out); empty: every node on the one Engine of
	// DOCKER_HOST.
	DockerHosts map[string]string `json:"docker-hosts,omitempty"`
	// Store is the directory runs are written under.
	Store string `json:"store"`
	// RecoveryTimeout bounds waiting for the cluster after healing;
	// FinalTimeout bounds the final reads.
	RecoveryTimeout Duration `json:"recovery-timeout"`
	FinalTimeout    Duration `json:"final-timeout"`
	// BrokerBinary and AgentBinary are the executables to run (static for
	// Docker).
	BrokerBinary string `json:"broker-binary"`
	// DB is the broker profile (harness/profile): a built-in name
	// (faultline, kfake, apache-kafka) or a profile file; empty is
	// faultline.
	DB          string `json:"db,omitempty"`
	AgentBinary string `json:"agent-binary"`
	// Expected is the verdict a suite expects of this test ("valid" or
	// "invalid"), and Suite the suite run it ran in (the stamp of the
	// suite's index page, suites/<stamp>.html in the store); both are empty
	// for a test run on its own.
	Expected string `json:"expected,omitempty"`
	Suite    string `json:"suite,omitempty"`
}

// Decode reads test.json as the harness writes it; a field of another
// shape or name is an error.
func Decode(data []byte) (Spec, error) {
	var s Spec
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return Spec{}, fmt.Errorf("decode test.json: %w", err)
	}
	return s, nil
}
