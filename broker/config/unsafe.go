package config

import (
	"fmt"
	"sort"
	"strings"
)

// UnsafeEnableKey must be true for any unsafe.* switch to be accepted: a
// switch set without it is refused at load.
const UnsafeEnableKey = "unsafe.enable"

// The unsafe.* switches. Each plants one real class of replication or
// durability bug by changing one decision of the broker; the harness's
// planted suite proves its checker catches each. Off by default, never in
// a default config.
const (
	UnsafeAckBeforeISR             = "unsafe.ack.before.isr"
	UnsafeHWFromLeaderLEO          = "unsafe.hw.from.leader.leo"
	UnsafeElectAnyReplica          = "unsafe.elect.any.replica"
	UnsafeSkipDivergenceTruncation = "unsafe.skip.divergence.truncation"
	UnsafeSkipEpochFencing         = "unsafe.skip.epoch.fencing"
	UnsafeRecoverySkipCRC          = "unsafe.recovery.skip.crc"
	UnsafeIdempotenceOff           = "unsafe.idempotence.off"
	UnsafeAckBeforeFsync           = "unsafe.ack.before.fsync"
	UnsafeOffsetsUnreplicated      = "unsafe.offsets.unreplicated"
	UnsafeIgnoreFsyncError         = "unsafe.ignore.fsync.error"
	UnsafeUncleanRestartKeepsISR   = "unsafe.unclean.restart.keeps.isr"
	UnsafeFollowerSkipValidation   = "unsafe.follower.skip.validation"
	// The planted bugs of transactions and compaction (issue 11).
	UnsafeTxnMarkersBeforeDurable   = "unsafe.txn.markers.before.durable"
	UnsafeReadCommittedPastLSO      = "unsafe.read.committed.past.lso"
	UnsafeCleanerDropsLatest        = "unsafe.cleaner.drops.latest"
	UnsafeCleanerPastLSO            = "unsafe.cleaner.past.lso"
	UnsafeTxnOffsetsKeptOnAbort     = "unsafe.txn.offsets.kept.on.abort"
	UnsafeTxnInitKeepsOpen          = "unsafe.txn.init.keeps.open"
	UnsafeTxnTakeoverCommitsAborts  = "unsafe.txn.takeover.commits.aborts"
	UnsafeTxnTakeoverLeavesPrepared = "unsafe.txn.takeover.leaves.prepared"
	UnsafeProduceNoEpochFence       = "unsafe.produce.no.epoch.fence"
)

// unsafeBugs says, per switch, the bug it plants (for the startup WARN).
var unsafeBugs = map[string]string{
	UnsafeAckBeforeISR:              "acks=all is answered after the leader's append, before the ISR has the write",
	UnsafeHWFromLeaderLEO:           "the high watermark follows the leader's log end alone, not the ISR's",
	UnsafeElectAnyReplica:           "any live replica may be elected leader, ignoring the ISR and unclean.leader.election.enable",
	UnsafeSkipDivergenceTruncation:  "a rejoining follower never asks where its log diverged, so it keeps a divergent tail",
	UnsafeSkipEpochFencing:          "a leader puts its ISR shrink in force before the controller commits it, so a leader cut off from the controller keeps acknowledging acks=all writes after it was replaced",
	UnsafeRecoverySkipCRC:           "recovery after an unclean shutdown does not check batch CRCs",
	UnsafeIdempotenceOff:            "idempotent producers' retries are appended again instead of deduplicated",
	UnsafeAckBeforeFsync:            "appends are acknowledged before the fsync that flush.messages promises",
	UnsafeOffsetsUnreplicated:       "consumer offset commits are acknowledged once written on the coordinator, before replication",
	UnsafeIgnoreFsyncError:          "a failed fsync is ignored and the data acknowledged as durable",
	UnsafeUncleanRestartKeepsISR:    "a restarted broker is taken for its old incarnation: it registers at once, even after an unclean shutdown, and stays in its old ISRs",
	UnsafeFollowerSkipValidation:    "followers append the leader's batches without checking their CRCs",
	UnsafeTxnMarkersBeforeDurable:   "transactional batches are acknowledged on the leader's append, so transactions commit (markers written, EndTxn answered) while their data is on the leader alone",
	UnsafeReadCommittedPastLSO:      "read_committed fetches stop at the high watermark instead of the last stable offset, returning open transactions' records",
	UnsafeCleanerDropsLatest:        "after an unclean shutdown the log cleaner counts each key's latest record in the cleaned range as superseded and drops it",
	UnsafeCleanerPastLSO:            "the log cleaner cleans up to the high watermark, through transactions still open, and moves its checkpoint past records whose transaction it could not decide",
	UnsafeTxnOffsetsKeptOnAbort:     "the offsets a transaction sent to a consumer group (TxnOffsetCommit) become the group's committed offsets when it aborts, as when it commits",
	UnsafeTxnTakeoverCommitsAborts:  "a transaction coordinator that takes over a __transaction_state partition finishes the prepared aborts it loads with commit markers",
	UnsafeTxnTakeoverLeavesPrepared: "a transaction coordinator that takes over a __transaction_state partition loads the prepared transactions it finds but never finishes them (no markers, no Complete record): their transactional ids are refused with CONCURRENT_TRANSACTIONS for ever",
	UnsafeProduceNoEpochFence:       "a batch from an older epoch of a producer than the partition has seen is appended instead of refused with INVALID_PRODUCER_EPOCH, so a fenced zombie's late send still lands",
	UnsafeTxnInitKeepsOpen:          "an InitProducerId for a transactional id with a transaction open hands out the open transaction's producer id and epoch, neither fencing its producer nor aborting it",
}

// UnsafeSwitches lists every unsafe.* switch, sorted.
func UnsafeSwitches() []string {
	out := make([]string, 0, len(unsafeBugs))
	for k := range unsafeBugs {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// UnsafeBug describes the bug an unsafe.* switch plants ("" for an unknown
// key).
func UnsafeBug(key string) string { return unsafeBugs[key] }

// parseUnsafe checks the unsafe.* keys: unsafe.enable and the known
// switches, booleans; a switch set to true only with unsafe.enable=true.
func (l *loader) parseUnsafe(keys []string) {
	enable := false
	if v, ok := l.raw[UnsafeEnableKey]; ok {
		switch strings.ToLower(strings.TrimSpace(v)) {
		case "true":
			enable = true
		case "false":
		default:
			l.problemf(UnsafeEnableKey, "must be true or false, got %q", strings.TrimSpace(v))
		}
	}
	l.c.UnsafeEnable = enable
	for _, k := range keys {
		if k == UnsafeEnableKey {
			continue
		}
		v := strings.TrimSpace(l.raw[k])
		if _, known := unsafeBugs[k]; !known {
			l.problemf(k, "unknown unsafe switch; the switches are %s", strings.Join(UnsafeSwitches(), ", "))
			continue
		}
		switch strings.ToLower(v) {
		case "true":
			if !enable {
				l.problemf(k, "refused: a planted bug (%s) needs %s=true as well; never set it for real data", unsafeBugs[k], UnsafeEnableKey)
				continue
			}
			l.c.Unsafe[k] = true
		case "false":
			l.c.Unsafe[k] = false
		default:
			l.problemf(k, "must be true or false, got %q", v)
		}
	}
}

// UnsafeWarnings are the startup WARN lines, one per switch in effect.
func (c *Config) UnsafeWarnings() []string {
	var out []string
	for _, k := range c.EnabledUnsafe() {
		out = append(out, fmt.Sprintf("UNSAFE SWITCH %s=true IN EFFECT (planted bug, never for real data): %s", k, unsafeBugs[k]))
	}
	return out
}
