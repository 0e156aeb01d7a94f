package harness

import (
	"maps"
	"time"

	"github.com/faultline/faultline/checker"
	"github.com/faultline/faultline/harness/testspec"
	"github.com/faultline/faultline/nemesis"
)

// txnBugs are the planted bugs of transactions and compaction (issue 11),
// run by `faultline suite --suite txn` with the same planted/control pairs
// as the planted suite.
var txnBugs = []plantedBug{
	{name: "txn-markers-before-durable", key: "unsafe.txn.markers.before.durable", txn: true,
		// A leader cut off from its followers only still reaches the
		// transaction coordinator, so it keeps adding its partition to
		// transactions and taking their data (partition:one cut it from
		// the coordinator too, and it took almost none: 1 of 2).
		faults:    nemesis.Spec{{Kind: nemesis.KindPartition, Mode: nemesis.PartitionLeaderCutThenKilled}},
		config:    fastLag,
		anomalies: lossClasses,
		why:       "transactional sends are acknowledged on the leader's append, so a transaction commits (markers written, EndTxn answered) while its data is on the leader alone; a leader cut off or killed takes committed data with it and the marker lands on a successor that never had it"},
	{name: "read-committed-past-lso", key: "unsafe.read.committed.past.lso", txn: true,
		faults:    nemesis.Spec{{Kind: nemesis.KindKill, Mode: nemesis.TargetLeaders}},
		anomalies: []string{checker.AnomalyG1a, checker.AnomalyPrecommittedRead},
		why:       "read_committed fetches stop at the high watermark, not the last stable offset: consumers get open transactions' records, and those of the transactions then aborted are aborted reads"},
	{name: "txn-offsets-kept-on-abort", key: "unsafe.txn.offsets.kept.on.abort", txn: true,
		faults:    nemesis.Spec{{Kind: nemesis.KindKill, Mode: nemesis.TargetLeaders}},
		anomalies: []string{checker.AnomalyAbortedOffsets},
		why:       "an aborted transaction's offsets (TxnOffsetCommit) become the group's committed offsets as a committed one's do, so a transactional consumer newly assigned a partition resumes past records only the aborted transaction had consumed"},
	{name: "txn-init-keeps-open", key: "unsafe.txn.init.keeps.open", txn: true,
		faults:    nemesis.Spec{{Kind: nemesis.KindKill, Mode: nemesis.TargetLeaders}},
		anomalies: []string{checker.AnomalyFencedCommit},
		why:       "an InitProducerId for a transactional id with a transaction open hands out that transaction's producer id and epoch: the producer it should fence commits after its successor started, as a zombie instance of an exactly-once application would"},
	{name: "txn-takeover-commits-aborts", key: "unsafe.txn.takeover.commits.aborts", txn: true,
		faults:    nemesis.Spec{{Kind: nemesis.KindPartition, Mode: nemesis.PartitionCoordinatorCutThenKilled}},
		config:    fastLag,
		anomalies: []string{checker.AnomalyG1a, checker.AnomalyAbortedOffsets},
		why:       "a coordinator that takes over finishes the prepared aborts it loads with commit markers: the transactions its predecessor had aborted (EndTxn answered) before it was cut off from their partitions' leaders and killed become visible (aborted reads), and their consumer offsets the group's"},
	{name: "txn-takeover-leaves-prepared", key: "unsafe.txn.takeover.leaves.prepared", txn: true,
		// Kafka 3.x's protocol, where the client adds its partitions at
		// the coordinator itself: a coordinator cut off from a partition's
		// leader then still takes it into a transaction, whose markers
		// cannot reach it, so the kill leaves the transaction prepared.
		// At transaction.version 2 the leader adds the partition, and a
		// leader cut off from the coordinator adds nothing (seed 1 loaded
		// no prepared transaction at any takeover).
		faults:    nemesis.Spec{{Kind: nemesis.KindPartition, Mode: nemesis.PartitionCoordinatorCutThenKilled}},
		config:    map[string]string{"replica.lag.time.max.ms": "3000", "faultline.transaction.version": "0"},
		anomalies: []string{checker.AnomalyStuckTxnID, checker.AnomalyUnseen},
		why:       "a coordinator that takes over never finishes the prepared transactions it loads: their transactional ids are refused CONCURRENT_TRANSACTIONS for ever (the probe after the final reads finds them stuck), and where the markers had not been written the last stable offset stays below the transaction"},
	{name: "produce-no-epoch-fence", key: "unsafe.produce.no.epoch.fence", txn: true,
		// Kafka 3.x's protocol (the client adds partitions itself) with
		// the partition verification of KIP-890 part 1 off, as before
		// Kafka 3.6: the partition's epoch check is then the only fence
		// against a zombie's late send (at transaction.version 2 the
		// leader asks the coordinator, which refuses the old epoch).
		faults:       nemesis.Spec{{Kind: nemesis.KindKill, Mode: nemesis.TargetLeaders}},
		config:       map[string]string{"faultline.transaction.version": "0", "transaction.partition.verification.enable": "false"},
		crashClients: 3 * time.Second,
		crashTarget:  testspec.CrashZombie,
		anomalies:    []string{checker.AnomalyUnseen, checker.AnomalyLostWrite, checker.AnomalyG1a},
		why:          "a partition takes a batch from an older epoch of its producer: a client paused just as its send left it, while a successor took over its transactional.id and aborted what it had open, resumes, and its late send lands after the abort marker, opening a transaction no coordinator will end, so the last stable offset stays below it and later committed writes are never read (or the successor's next marker there ends it, committing the zombie's write)"},
	{name: "cleaner-drops-latest", key: "unsafe.cleaner.drops.latest", workload: "compact",
		faults:    nemesis.Spec{{Kind: nemesis.KindKill, Mode: nemesis.TargetMajority}},
		config:    fastCleaner,
		anomalies: []string{checker.AnomalyLostLatestValue},
		why:       "a majority of nodes killed and restarted on their data: in the logs they recovered, the cleaner drops each key's latest record of the cleaned range, so a key not written again has lost its latest value when the final scan reads it"},
	{name: "cleaner-past-lso", key: "unsafe.cleaner.past.lso", workload: "compact", txn: true,
		faults:    nemesis.Spec{{Kind: nemesis.KindKill}},
		config:    map[string]string{"log.cleaner.backoff.ms": "250"},
		anomalies: []string{checker.AnomalyG1a, checker.AnomalyLostLatestValue},
		why:       "transactional puts to a compacted topic, a quarter aborted after being held open: the cleaner cleans up to the high watermark, through transactions still open, and moves its checkpoint past records whose fate it could not know; later passes never learn those transactions aborted, so aborted values are read and committed ones lost"},
}

// rollOften rolls a partition's active segment once it is 5 s old, so that
// a test writes producer-state snapshots and transaction indexes of several
// segments.
var rollOften = map[string]string{"log.roll.ms": "5000"}

// fastCleaner makes the cleaner look for work every second (the default
// backoff is 15 s, most of a short test).
var fastCleaner = map[string]string{"log.cleaner.backoff.ms": "1000"}

// txnSuite is `faultline suite --suite txn`: the durability configuration
// running transactions and compaction under kills of the nodes they depend
// on, each expected valid, then each planted transaction or compaction bug
// caught and valid without it.
func txnSuite(base Test) []Case {
	interval := Duration(min(time.Duration(base.NemesisInterval), 8*time.Second))
	txn := durable(base)
	txn.Name, txn.Txn, txn.NemesisInterval = "txn-kill", true, interval
	txn.Nemesis = nemesis.Spec{{Kind: nemesis.KindKill, Mode: nemesis.TargetLeaders}, {Kind: nemesis.KindKill, Mode: nemesis.TargetController}}
	// Segments roll every few seconds (the default is a week or 1 GiB,
	// never within a test): a transaction left open across a roll must
	// survive in the producer-state snapshot written there, and recovery
	// starts from that snapshot rather than the log's first offset.
	maps.Copy(txn.BrokerConfig, rollOften)
	compact := durable(base)
	compact.Name, compact.Workload, compact.NemesisInterval = "compact-kill", "compact", interval
	compact.Nemesis = nemesis.Spec{{Kind: nemesis.KindKill}}
	compact.BrokerConfig["log.cleaner.backoff.ms"] = fastCleaner["log.cleaner.backoff.ms"]
	// The same under transactions: each put a transaction of its own, one
	// in four aborted on purpose after being held open up to 3 s, so
	// segments roll (every second) and the cleaner, looking for work
	// every 250 ms, runs while transactions are open. It must stay below
	// the last stable offset (past it, it would pass records whose
	// transaction is undecided, and never learn which were aborted) and
	// drop aborted records without ever showing one.
	compactTxn := compact
	compactTxn.Name, compactTxn.Txn, compactTxn.BrokerConfig = "compact-txn-kill", true, maps.Clone(compact.BrokerConfig)
	compactTxn.BrokerConfig["log.cleaner.backoff.ms"] = "250"
	// The same while a node's disk is replaced (emptied, then started to
	// fetch everything again) and leaders are killed, so the new disk
	// comes to lead: what it fetched is what the cleaner left, which
	// must still end every transaction it holds.
	compactDisk := compactTxn
	compactDisk.Name, compactDisk.BrokerConfig = "compact-txn-disk-replaced", maps.Clone(compactTxn.BrokerConfig)
	compactDisk.Nemesis = nemesis.Spec{{Kind: nemesis.KindCorrupt, Mode: nemesis.CorruptDiskReplaced}, {Kind: nemesis.KindKill, Mode: nemesis.TargetLeaders}}
	// In the order named, round after round, so that every seed replaces
	// a disk and then kills leaders (drawn at random, a 60 s run may do
	// neither, or never kill after a replacement).
	compactDisk.NemesisCycle = true
	// like is txn under another name and faults, with a config map of its
	// own, so that a change to one case never reaches the others.
	like := func(name string, faults nemesis.Spec) Test {
		t := txn
		t.Name, t.Nemesis, t.BrokerConfig = name, faults, maps.Clone(txn.BrokerConfig)
		return t
	}
	// crashing has t crash a client every interval; the final reads must
	// outlast the last abandoned transaction's timeout (4 × the clients'
	// 5 s request timeout) and the broker's check for it.
	crashing := func(t Test, every time.Duration) Test {
		t.CrashClientsInterval = Duration(every)
		t.FinalTimeout = max(t.FinalTimeout, Duration(60*time.Second))
		return t
	}
	coord := like("txn-coordinator", nemesis.Spec{{Kind: nemesis.KindKill, Mode: nemesis.TargetCoordinator}, {Kind: nemesis.KindPause, Mode: nemesis.TargetCoordinator}})
	// The producers cut off from a coordinator that still leads its
	// __transaction_state partition: its transactions can end only after
	// the heal (or by timeout), never half-way. Cuts are short and many
	// (2 s between events on average) and the transaction timeout shorter
	// still (1 s, checked every 500 ms), so the coordinator aborts by
	// itself transactions whose EndTxn a cut holds up, and that EndTxn,
	// resent by TCP once the cut heals, arrives while the client still
	// waits for it: a delayed EndTxn (KAFKA-17754's shape), which must be
	// refused, never taken as the retry of a commit that happened.
	clients := like("txn-clients-coordinator", nemesis.Spec{{Kind: nemesis.KindPartition, Mode: nemesis.PartitionClientsCoordinator}})
	clients.TxnTimeout, clients.NemesisInterval = Duration(time.Second), Duration(2*time.Second)
	clients.BrokerConfig["transaction.abort.timed.out.transaction.cleanup.interval.ms"] = "500"
	// A power loss of a coordinator's node mid-commit: with every message
	// fsynced before it is acknowledged, nothing committed may be lost.
	power := durable(base)
	power.Name, power.Txn, power.NemesisInterval = "txn-power-coordinator", true, interval
	power.Nemesis = nemesis.Spec{{Kind: nemesis.KindPower, Mode: nemesis.TargetCoordinator}}
	power.BrokerConfig["log.flush.interval.messages"] = "1"
	maps.Copy(power.BrokerConfig, rollOften)
	// Clients crashed mid-transaction leave their transactions open: the
	// broker must abort each when its timeout passes (20 s), or the
	// last stable offset stays below it and read_committed reads stop;
	// half the crashed clients come back under their transactional.id,
	// whose InitProducerId must abort what they left at once.
	crash := crashing(like("txn-crash-clients", nemesis.Spec{{Kind: nemesis.KindKill, Mode: nemesis.TargetLeaders}}), 5*time.Second)
	// Controlled shutdowns (SIGTERM) of coordinators and leaders: the
	// controller moves leaderships off a node that is still up, so markers
	// and appends in flight meet NOT_LEADER_OR_FOLLOWER, and the node
	// restarts from the producer-state snapshots it wrote at shutdown.
	stop := like("txn-stop", nemesis.Spec{{Kind: nemesis.KindStop, Mode: nemesis.TargetCoordinator}, {Kind: nemesis.KindStop, Mode: nemesis.TargetLeaders}})
	// The coordinator cut off from all but the controller and one other
	// node for 10 s, past replica.lag.time.max.ms (3 s here) so that its
	// partitions' ISRs shrink and it goes on deciding transactions, then
	// killed: those whose markers could not reach the leaders it was cut
	// off from are left prepared, for its successor to finish as decided.
	// Clients are crashed too, every 3 s, each time the one whose
	// operation has been in flight longest (the stalled target): a client
	// held up behind the last transaction it committed, still prepared
	// because the cut holds its markers up, as an operator restarts a stuck
	// application. Its successor under its transactional.id (half of
	// them) meets that commit still prepared and must wait for it to
	// finish, never abort it.
	cut := crashing(like("txn-coordinator-cut", nemesis.Spec{{Kind: nemesis.KindPartition, Mode: nemesis.PartitionCoordinatorCutThenKilled}}), 3*time.Second)
	cut.CrashClientsTarget = testspec.CrashStalled
	maps.Copy(cut.BrokerConfig, fastLag)
	// A slow network (a steady 20-80 ms on every packet the targets
	// send, or on a kernel without netem receive) while leaders are shut
	// down and clients crashed every 3 s, the faults overlapping: each
	// transaction's markers take several delays to reach their leaders
	// and be replicated, so a leadership that moves meanwhile answers
	// them NOT_LEADER_OR_FOLLOWER, and a crashed client's successor meets
	// its last commit still prepared. Windows of a millisecond or so on a
	// fast network, of a hundred or more here. (The 50-250 ms jittered
	// delay slows the clients to about one transaction a second, too few
	// to meet the windows.)
	slow := crashing(like("txn-slow", nemesis.Spec{{Kind: nemesis.KindPacket, Mode: nemesis.PacketLatency}, {Kind: nemesis.KindStop, Mode: nemesis.TargetLeaders}}), 3*time.Second)
	slow.NemesisOverlap = true
	// Every committed transaction's producer restarted at once under its
	// transactional.id while partition leaders are killed: a leader killed
	// just after a commit was decided holds its markers up until a new
	// leader is elected, and the restarted producer's InitProducerId meets
	// that commit still prepared. It must wait for it, never abort it.
	// Zombies: every 3 s a client mid-transaction is paused instead of
	// crashed, what it sends held in flight, while a successor takes over
	// its transactional.id (its InitProducerId aborts what the paused one
	// had open, with a bumped epoch); once the successor's first
	// transaction ended, the zombie resumes and its held requests (a
	// send, an EndTxn) reach the brokers with the old epoch. Each must be
	// refused: the coordinator fences its requests and, at
	// transaction.version 2, refuses to add a partition for it, so no
	// partition takes its batch.
	zombies := crashing(like("txn-zombies", nemesis.Spec{{Kind: nemesis.KindKill, Mode: nemesis.TargetLeaders}}), 3*time.Second)
	zombies.CrashClientsTarget = testspec.CrashZombie
	restart := like("txn-restart", nemesis.Spec{{Kind: nemesis.KindKill, Mode: nemesis.TargetLeaders}})
	restart.TxnRestartOneIn = 1
	// Every node killed at once: each recovers every partition from its
	// producer-state snapshot and the log after it (an unclean recovery),
	// and the partitions' leaders afterwards are all recovered replicas,
	// whose last stable offsets come from what the replay made of the
	// transactions' markers.
	all := like("txn-kill-all", nemesis.Spec{{Kind: nemesis.KindKill, Mode: nemesis.TargetAll}})
	cases := []Case{
		{Test: txn, Expect: checker.Valid, Why: "transactions (read_committed) while partition leaders and the controller are killed"},
		{Test: coord, Expect: checker.Valid, Why: "transactions while the node coordinating one of them is killed or paused"},
		{Test: cut, Expect: checker.Valid, Why: "transactions while the node coordinating one of them, cut off from all but two nodes, decides transactions whose markers cannot reach the leaders it is cut off from, and is killed: its successor finishes each as decided; the client held up longest is crashed every 3 s, and a successor under its transactional.id waits for its prepared commit, never aborts it"},
		{Test: stop, Expect: checker.Valid, Why: "transactions while the node coordinating one of them and partition leaders are shut down (controlled, SIGTERM) and restarted, segments rolling every 5 s: leaderships move off live nodes mid-transaction and each node restarts from its producer-state snapshots"},
		{Test: slow, Expect: checker.Valid, Why: "transactions over a slow network (every packet of the targets delayed 20-80 ms) while partition leaders are shut down and clients crashed every 3 s: markers that reach a leader after its leadership moved are sent again to the new one, and a crashed client's successor waits for a prepared commit to finish, never aborts it"},
		{Test: restart, Expect: checker.Valid, Why: "transactions whose producers are all restarted under their transactional.id right after each commit while partition leaders are killed: an InitProducerId that meets a commit still prepared, its markers held up by a dead leader, waits for it and never aborts it"},
		{Test: all, Expect: checker.Valid, Why: "transactions while every node is killed at once, segments rolling every 5 s: every partition is led afterwards by a replica that recovered its transactions, open and ended, from its producer-state snapshot and the log after it"},
		{Test: clients, Expect: checker.Valid, Why: "transactions while the clients cannot reach the node coordinating one of them, which its peers still reach, in short cuts longer than the transaction timeout (1 s): an EndTxn held up by a cut that reaches the coordinator after it aborted the transaction by its timeout is refused"},
		{Test: power, Expect: checker.Valid, Why: "transactions while the node coordinating one of them loses power (every message fsynced)"},
		{Test: zombies, Expect: checker.Valid, Why: "transactions while every 3 s a client mid-transaction is paused, what it sends held in flight, and resumed once a successor under its transactional.id finished a transaction, and partition leaders are killed: everything the zombie sends after its successor's InitProducerId is fenced, and its transaction ends aborted"},
		{Test: crash, Expect: checker.Valid, Why: "transactions while a client is crashed every 5 s, mid-transaction, and partition leaders are killed: every abandoned transaction is aborted, by its timeout or by the InitProducerId of a successor under its transactional.id"},
		{Test: compact, Expect: checker.Valid, Why: "keyed upserts and deletes on a compacted topic while nodes are killed: every key's latest value survives the cleaner"},
		{Test: compactDisk, Expect: checker.Valid, Why: "keyed upserts and deletes on a compacted topic, each a transaction, while a node's disk is replaced (its data dir emptied, so it fetches every partition again from the leaders' cleaned logs) and leaders are killed so that it leads: every key's latest committed value survives and no transaction is left open on it"},
		{Test: compactTxn, Expect: checker.Valid, Why: "keyed upserts and deletes on a compacted topic, each a transaction (a quarter aborted after being held open), while nodes are killed: the cleaner stays below the last stable offset, every key's latest committed value survives it and no aborted value is ever read"},
	}
	return append(cases, plantedCases(base, txnBugs)...)
}
