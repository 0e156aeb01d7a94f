package harness

import (
	"fmt"
	"maps"
	"strings"
	"time"

	"github.com/faultline/faultline/checker"
	"github.com/faultline/faultline/nemesis"
)

// plantedBug is one planted broker bug, an unsafe.* switch of the
// reference broker, and the test that must catch it. The harness names the
// switch as a broker config key only: it reaches the broker through
// server.properties like any other key.
type plantedBug struct {
	// name names the pair of cases: planted-<name> with the switch,
	// control-<name> without it.
	name string
	// key is the unsafe.* switch.
	key string
	// faults are the faults that expose the bug.
	faults nemesis.Spec
	// config are broker keys both cases share beyond the durability
	// configuration.
	config map[string]string
	// subscribe makes the consumers join consumer groups (the case needs
	// committed offsets).
	subscribe bool
	// singleCopy runs both cases with one replica per partition (min ISR
	// 1): the bug is the leader's alone.
	singleCopy bool
	// failOnClient are client error codes that fail both cases (a correct
	// broker never returns them, whatever the faults).
	failOnClient []string
	// txn runs both cases as transactions (--txn, read_committed).
	txn bool
	// crashClients, when positive, crashes a client every interval in
	// both cases (Jepsen's crash-clients): the replacement is a new group
	// member that starts from the group's committed offsets.
	crashClients time.Duration
	// crashTarget is which client those crashes hit
	// (Test.CrashClientsTarget; "" random).
	crashTarget string
	// workload names the workload both cases run ("" is the base's).
	workload string
	// anomalies are the checker's anomaly classes the bug should produce:
	// the planted case is caught only when it finds at least one of them.
	anomalies []string
	why       string
}

// fastLag makes a follower that stops fetching leave the ISR within a
// nemesis interval, so that failovers can land on a lagging replica.
var fastLag = map[string]string{"replica.lag.time.max.ms": "3000"}

// flushPerMessage is the configuration that promises every acknowledged
// write was fsynced first.
var flushPerMessage = map[string]string{"log.flush.interval.messages": "1"}

// Anomaly classes the planted cases expect.
var (
	// lossClasses: an acknowledged write lost shows as lost-write or
	// unseen, as inconsistent-offsets once a later write reuses its
	// offset, or as lost-after-read when polls had read it before.
	lossClasses       = []string{checker.AnomalyLostWrite, checker.AnomalyUnseen, checker.AnomalyInconsistentOffsets, checker.AnomalyLostAfterRead}
	corruptionClasses = []string{checker.AnomalyClientError, checker.AnomalyUnseen, checker.AnomalyLostWrite, checker.AnomalyInconsistentOffsets, checker.AnomalyLostAfterRead}
	// corruptionEvidence: a client that got a batch failing its CRC, or saw
	// a log end before what it had read, was served corruption.
	corruptionEvidence = []string{checker.CodeCorruptMessage, checker.CodeDataLoss}
)

// plantedBugs are the twelve planted bugs of issue 10 (txnBugs, suite_txn.go, has the six of transactions and compaction), each a real class of
// replication or durability bug of Kafka-like systems, with the fault that
// exposes it.
var plantedBugs = []plantedBug{
	// A node cut off at random (partition:one) often led no partition
	// being written (seed 1 of hw-from-leader-leo missed so), and kills
	// alone rarely land between an acknowledgement and its replication
	// (seed 4 of ack-before-isr): the fault is aimed at a written
	// partition's leader and kills it inside that window.
	{name: "ack-before-isr", key: "unsafe.ack.before.isr",
		faults:    nemesis.Spec{{Kind: nemesis.KindPartition, Mode: nemesis.PartitionLeaderCutThenKilled}},
		anomalies: lossClasses,
		why:       "acks=all answered after the leader's append alone: a leader cut off or killed takes acknowledged writes with it"},
	{name: "hw-from-leader-leo", key: "unsafe.hw.from.leader.leo",
		faults:    nemesis.Spec{{Kind: nemesis.KindPartition, Mode: nemesis.PartitionLeaderCutThenKilled}},
		anomalies: lossClasses,
		why:       "the high watermark follows the leader's log end: writes are acknowledged and read before the ISR has them, and lost with the leader"},
	{name: "elect-any-replica", key: "unsafe.elect.any.replica",
		faults:    nemesis.Spec{{Kind: nemesis.KindPartition, Mode: nemesis.PartitionLaggingThenLeader}},
		config:    fastLag,
		anomalies: lossClasses,
		why:       "a follower cut off from every node but the controller stays live and leaves its ISRs; the leaders are then killed, and it may be elected although unclean election is off, truncating the others to its shorter log"},
	{name: "skip-divergence-truncation", key: "unsafe.skip.divergence.truncation",
		faults:    nemesis.Spec{{Kind: nemesis.KindPartition, Mode: nemesis.PartitionDeposedLeaderReturns}},
		config:    fastLag,
		anomalies: []string{checker.AnomalyInconsistentOffsets, checker.AnomalyLostWrite},
		why:       "a leader cut off from every other node is deposed while producers still append to it; when the cut heals it keeps that tail instead of cutting it off at the new leader's epoch, and once the rest of the ISR is killed it leads again, so offsets the ISR had acknowledged with other values now hold its own"},
	{name: "skip-epoch-fencing", key: "unsafe.skip.epoch.fencing",
		faults:    nemesis.Spec{{Kind: nemesis.KindPartition, Mode: nemesis.PartitionLeaderAndFollower}},
		config:    fastLag,
		anomalies: lossClasses,
		why:       "a leader and one in-sync follower are cut off from the other nodes (not from clients) for longer than the session timeout: the controller fences both and elects the third replica, while the old leader drops it from its ISR on its own and acknowledges acks=all writes with the follower; they are truncated away when the cut heals"},
	{name: "recovery-skip-crc", key: "unsafe.recovery.skip.crc",
		faults:       nemesis.Spec{{Kind: nemesis.KindCorrupt, Mode: nemesis.CorruptBitFlipThenLeader}},
		failOnClient: corruptionEvidence,
		anomalies:    corruptionClasses,
		why:          "a bit flipped in a batch of a stopped node survives its recovery; once the rest of that partition's ISR is killed the node leads it and serves the batch, which clients refuse by its CRC (CORRUPT_MESSAGE), so what follows it is never read"},
	{name: "idempotence-off", key: "unsafe.idempotence.off",
		faults:    nemesis.Spec{{Kind: nemesis.KindPartition}, {Kind: nemesis.KindKill, Mode: nemesis.TargetLeaders}},
		anomalies: []string{checker.AnomalyDuplicate},
		why:       "an idempotent producer's retry after a timeout or a failover is appended a second time"},
	{name: "ack-before-fsync", key: "unsafe.ack.before.fsync",
		faults:     nemesis.Spec{{Kind: nemesis.KindPower, Mode: nemesis.PowerAfterSlowFsync}},
		config:     flushPerMessage,
		singleCopy: true,
		anomalies:  lossClasses,
		why:        "with flush.messages=1, writes are acknowledged before their fsync; with slow fsyncs, a power loss of every node drops what was in flight (one replica per partition: a follower fsyncs before it fetches again, so with replicas the leader's early ack is covered by theirs)"},
	{name: "offsets-unreplicated", key: "unsafe.offsets.unreplicated",
		faults:       nemesis.Spec{{Kind: nemesis.KindPartition, Mode: nemesis.PartitionCoordinator}},
		subscribe:    true,
		crashClients: 5 * time.Second,
		anomalies:    []string{checker.AnomalyLostCommit},
		why:          "the group's coordinator is cut off from the other nodes (not from clients) for longer than the session timeout: its __consumer_offsets partition fails over to a replica of the ISR, while the consumers' commits are acknowledged on the cut node alone; a client is crashed every 5 s, and a replacement that joins the group at the new coordinator, which never had those commits, polls its keys from below an offset the group had committed (nonmonotonic-poll alone is allowed across rebalances)"},
	{name: "ignore-fsync-error", key: "unsafe.ignore.fsync.error",
		faults:    nemesis.Spec{{Kind: nemesis.KindPower, Mode: nemesis.PowerAfterFsyncError}},
		config:    flushPerMessage,
		anomalies: lossClasses,
		why:       "every node's fsyncs fail with EIO, then every node loses power: the writes acknowledged over the failed fsyncs are gone (a correct broker takes its log dir offline and acknowledges nothing)"},
	{name: "unclean-restart-keeps-isr", key: "unsafe.unclean.restart.keeps.isr",
		faults: nemesis.Spec{{Kind: nemesis.KindPower, Mode: nemesis.PowerRestartLaggingThenLeader}},
		// A follower that stops fetching stays in the ISR for 20 s, past
		// the kill 10 s after the restart and the 3 s session that then
		// fences the killed: only how the node registered again decides
		// whether it is in the ISR then.
		config:    map[string]string{"replica.lag.time.max.ms": "20000"},
		anomalies: lossClasses,
		why:       "default flush, min ISR 2: a node loses its unflushed tail in a power cut and comes straight back, cut off from all but the controller so it cannot fetch the tail again. A correct controller lets the new incarnation in only once the old one's session expired, which fences it out of its ISRs; with the switch it is taken for the old one, registers at once and keeps its ISR places, so when the rest of one ISR is killed 10 s later it is elected with the shorter log and the others truncate to it"},
	{name: "follower-skip-validation", key: "unsafe.follower.skip.validation",
		faults: nemesis.Spec{{Kind: nemesis.KindCorrupt, Mode: nemesis.CorruptUnreplicatedTail}},
		// A follower cut off for the few seconds of the fault stays in
		// the ISR.
		config:    map[string]string{"replica.lag.time.max.ms": "10000"},
		anomalies: lossClasses,
		why:       "a leader cut off from its followers (not from the controller) has a bit flipped in the last batch appended to its partitions, one no follower has; the followers fetch it when the cut heals and append it unchecked, so it is acknowledged while every replica holds it damaged, and consumers are refused it by its CRC from then on (a correct follower refuses the batch, so it is never acknowledged, and the partition stalls)"},
}

// plantedSuite is `faultline suite --suite planted`: per planted bug, the
// test that must come out invalid with the switch on and valid, with the
// same faults and seed, without it.
func plantedSuite(base Test) []Case { return plantedCases(base, plantedBugs) }

// plantedCases is the planted and the control case of each of bugs.
func plantedCases(base Test, bugs []plantedBug) []Case {
	interval := Duration(min(time.Duration(base.NemesisInterval), 8*time.Second))
	var cases []Case
	for _, b := range bugs {
		control := durable(base)
		control.Name, control.Nemesis, control.NemesisInterval = "control-"+b.name, b.faults, interval
		// Faults of more than one kind start in the order named, round
		// after round, so that every seed meets each of them: drawn at
		// random, a 60 s run of "partition:one,kill:leaders" is sometimes
		// kills only, and a kill alone rarely catches an unreplicated
		// acknowledgement.
		control.NemesisCycle = len(b.faults) > 1
		control.Subscribe = b.subscribe
		control.Txn = control.Txn || b.txn
		if b.workload != "" {
			control.Workload = b.workload
		}
		control.FailOnClientErrors = b.failOnClient
		control.CrashClientsInterval = Duration(b.crashClients)
		control.CrashClientsTarget = b.crashTarget
		if b.singleCopy {
			control.ReplicationFactor = 1
			control.BrokerConfig["min.insync.replicas"] = "1"
		}
		maps.Copy(control.BrokerConfig, b.config)
		planted := control
		planted.Name = "planted-" + b.name
		planted.BrokerConfig = maps.Clone(control.BrokerConfig)
		planted.BrokerConfig["unsafe.enable"] = "true"
		planted.BrokerConfig[b.key] = "true"
		why := fmt.Sprintf("%s: %s; expects %s", b.key, b.why, strings.Join(b.anomalies, " or "))
		cases = append(cases,
			Case{Test: planted, Expect: checker.Invalid, ExpectAnomalies: b.anomalies, Why: why},
			Case{Test: control, Expect: checker.Valid, Why: "the same test without " + b.key})
	}
	return cases
}
