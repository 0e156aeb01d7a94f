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
	// faults are the faults that expose the bug. Where the fault the bug
	// needs is not in the nemesis yet, substitute says which one it is and
	// faults holds the closest one that exists.
	faults     nemesis.Spec
	substitute string
	// config are broker keys both cases share beyond the durability
	// configuration.
	config map[string]string
	// subscribe makes the consumers join consumer groups (the case needs
	// committed offsets).
	subscribe bool
	// anomalies are the checker's anomaly classes the bug should produce.
	anomalies []string
	why       string
}

// fastLag makes a follower that stops fetching leave the ISR within a
// nemesis interval, so that failovers can land on a lagging replica.
var fastLag = map[string]string{"replica.lag.time.max.ms": "3000"}

// plantedBugs are the twelve planted bugs of issue 10, each a real class of
// replication or durability bug of Kafka-like systems.
var plantedBugs = []plantedBug{
	{name: "ack-before-isr", key: "unsafe.ack.before.isr",
		faults:    nemesis.Spec{{Kind: nemesis.KindPartition, Mode: nemesis.PartitionOne}, {Kind: nemesis.KindKill, Mode: nemesis.TargetLeaders}},
		anomalies: []string{"lost-write", "unseen"},
		why:       "acks=all answered after the leader's append alone: a leader cut off or killed takes acknowledged writes with it"},
	{name: "hw-from-leader-leo", key: "unsafe.hw.from.leader.leo",
		faults:    nemesis.Spec{{Kind: nemesis.KindPartition, Mode: nemesis.PartitionOne}, {Kind: nemesis.KindKill, Mode: nemesis.TargetLeaders}},
		anomalies: []string{"lost-write", "unseen"},
		why:       "the high watermark follows the leader's log end: writes are acknowledged and read before the ISR has them, and lost with the leader"},
	{name: "elect-any-replica", key: "unsafe.elect.any.replica",
		faults:    nemesis.Spec{{Kind: nemesis.KindPartition, Mode: nemesis.PartitionRing}, {Kind: nemesis.KindKill, Mode: nemesis.TargetLeaders}},
		config:    fastLag,
		anomalies: []string{"lost-write", "inconsistent-offsets"},
		why:       "a follower cut off from its leader but not from the controller stays live and drops out of the ISR; when the leader dies it may be elected although unclean election is off, and truncates the others"},
	{name: "skip-divergence-truncation", key: "unsafe.skip.divergence.truncation",
		faults:    nemesis.Spec{{Kind: nemesis.KindPartition, Mode: nemesis.PartitionOne}, {Kind: nemesis.KindKill, Mode: nemesis.TargetLeaders}},
		config:    fastLag,
		anomalies: []string{"inconsistent-offsets", "lost-write"},
		why:       "a deposed leader keeps its unreplicated tail when it rejoins, so one offset holds two values once it leads again"},
	{name: "skip-epoch-fencing", key: "unsafe.skip.epoch.fencing",
		faults:    nemesis.Spec{{Kind: nemesis.KindPause, Mode: nemesis.TargetLeaders}, {Kind: nemesis.KindPartition, Mode: nemesis.PartitionOne}},
		config:    fastLag,
		anomalies: []string{"inconsistent-offsets", "lost-write"},
		why:       "a paused old leader wakes up and answers fetches of its old epoch; followers append what it accepted meanwhile"},
	{name: "recovery-skip-crc", key: "unsafe.recovery.skip.crc",
		faults:     nemesis.Spec{{Kind: nemesis.KindKill}},
		substitute: "offline corruption of a segment tail (bit flip) while the node is down",
		anomalies:  []string{"inconsistent-offsets", "unseen"},
		why:        "recovery keeps a bit-flipped batch after an unclean shutdown and the broker serves it"},
	{name: "idempotence-off", key: "unsafe.idempotence.off",
		faults:    nemesis.Spec{{Kind: nemesis.KindPartition}, {Kind: nemesis.KindKill, Mode: nemesis.TargetLeaders}},
		anomalies: []string{"duplicate"},
		why:       "an idempotent producer's retry after a timeout or a failover is appended a second time"},
	{name: "ack-before-fsync", key: "unsafe.ack.before.fsync",
		faults:     nemesis.Spec{{Kind: nemesis.KindKill, Mode: nemesis.TargetAll}},
		substitute: "power loss of every node (unsynced writes dropped); kill -9 keeps the page cache",
		config:     map[string]string{"log.flush.interval.messages": "1"},
		anomalies:  []string{"lost-write", "unseen"},
		why:        "with flush.messages=1, writes are acknowledged before their fsync and a power loss of the ISR drops them"},
	{name: "offsets-unreplicated", key: "unsafe.offsets.unreplicated",
		faults:    nemesis.Spec{{Kind: nemesis.KindPartition, Mode: nemesis.PartitionOne}, {Kind: nemesis.KindKill, Mode: nemesis.TargetLeaders}},
		subscribe: true,
		anomalies: []string{"nonmonotonic-poll", "duplicate"},
		why:       "offset commits are acknowledged before __consumer_offsets is replicated; a coordinator failover rewinds a group to older offsets"},
	{name: "ignore-fsync-error", key: "unsafe.ignore.fsync.error",
		faults:     nemesis.Spec{{Kind: nemesis.KindKill, Mode: nemesis.TargetAll}},
		substitute: "fsync failing with EIO on a leader, then power loss; kill -9 keeps the page cache",
		config:     map[string]string{"log.flush.interval.messages": "1"},
		anomalies:  []string{"lost-write", "unseen"},
		why:        "a failed fsync is ignored and the write acknowledged; the power loss that follows drops it"},
	{name: "unclean-restart-keeps-isr", key: "unsafe.unclean.restart.keeps.isr",
		faults:     nemesis.Spec{{Kind: nemesis.KindKill, Mode: nemesis.TargetMinority}, {Kind: nemesis.KindKill, Mode: nemesis.TargetLeaders}},
		substitute: "power loss of a follower (its unflushed tail dropped), then a leader kill",
		config:     fastLag,
		anomalies:  []string{"lost-write"},
		why:        "a broker back from an unclean shutdown stays in its old ISRs and is elected although its log lost a tail"},
	{name: "follower-skip-validation", key: "unsafe.follower.skip.validation",
		faults:     nemesis.Spec{{Kind: nemesis.KindKill, Mode: nemesis.TargetLeaders}},
		substitute: "corruption of a leader's segment (bit flip) that a follower then fetches",
		anomalies:  []string{"inconsistent-offsets", "unseen"},
		why:        "followers append batches without checking their CRC, so a corrupt batch spreads and is served after a failover"},
}

// plantedSuite is `faultline suite --suite planted`: per planted bug, the
// test that must come out invalid with the switch on and valid, with the
// same faults and seed, without it.
func plantedSuite(base Test) []Case {
	interval := Duration(min(time.Duration(base.NemesisInterval), 8*time.Second))
	var cases []Case
	for _, b := range plantedBugs {
		control := durable(base)
		control.Name, control.Nemesis, control.NemesisInterval = "control-"+b.name, b.faults, interval
		control.Subscribe = b.subscribe
		maps.Copy(control.BrokerConfig, b.config)
		planted := control
		planted.Name = "planted-" + b.name
		planted.BrokerConfig = maps.Clone(control.BrokerConfig)
		planted.BrokerConfig["unsafe.enable"] = "true"
		planted.BrokerConfig[b.key] = "true"
		why := fmt.Sprintf("%s: %s; expects %s", b.key, b.why, strings.Join(b.anomalies, " or "))
		if b.substitute != "" {
			why += fmt.Sprintf(" (needs %s; runs %s until that fault exists)", b.substitute, strings.Join(b.faults.Names(), ","))
		}
		cases = append(cases,
			Case{Test: planted, Expect: checker.Invalid, Why: why},
			Case{Test: control, Expect: checker.Valid, Why: "the same test without " + b.key})
	}
	return cases
}
