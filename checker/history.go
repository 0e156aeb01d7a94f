package checker

import (
	"encoding/json"
	"fmt"
	"strings"
)

// OpType is the kind of a history entry, after Jepsen: an invoke is followed
// by exactly one completion (ok, fail or info) from the same process.
type OpType string

const (
	Invoke OpType = "invoke"
	OK     OpType = "ok"
	Fail   OpType = "fail" // certainly did not happen
	Info   OpType = "info" // may or may not have happened
)

// NemesisProcess is the process number of fault operations; it is written
// as the string "nemesis" in history.jsonl.
const NemesisProcess = -1

// HarnessProcess is the process number of what the harness observed of the
// cluster while the run went on (harness events, e.g. FLeaders); it is
// written as the string "harness" in history.jsonl. The analyses ignore
// these ops; the report tells its stories with them.
const HarnessProcess = -2

// FLeaders is the f of a harness event listing partition leaders the
// harness saw change in Metadata responses; its value is a list of
// Leadership.
const FLeaders = "leaders"

// FCrashClient is the f of a harness event recording that crash-clients
// closed a client (value {"process": N}, the process it crashed): the
// process's operation in flight ends info and a new process takes over.
const FCrashClient = "crash-client"

// FStalledReads is the f of a harness event recording why the final reads
// did not reach a key's end: its value is a list of Stall, one per key
// they stopped short on. The checker cites it where it reports values
// those reads never saw (unseen) and finds by its high watermark the
// values polls read that the healed partition no longer holds
// (lost-after-read).
const FStalledReads = "stalled-reads"

// Stall is one key the final reads did not finish, with what the healed
// cluster answered for its partition once they stopped: the high
// watermark, the last stable offset (ListOffsets read_committed) and, in a
// transactional run, the transactions open there (DescribeProducers),
// which hold the LSO. An offset that could not be read is -1, and Error
// says why.
type Stall struct {
	Key           int       `json:"key"`
	Topic         string    `json:"topic"`
	Partition     int32     `json:"partition"`
	HighWatermark int64     `json:"high-watermark"`
	LastStable    int64     `json:"last-stable-offset"`
	OpenTxns      []OpenTxn `json:"open-transactions,omitempty"`
	Error         string    `json:"error,omitempty"`
	// Unrecovered marks a run whose cluster did not serve again after the
	// heal: a node still cut off may have answered for a partition it no
	// longer leads, so its high watermark proves no loss.
	Unrecovered bool `json:"unrecovered,omitempty"`
	// ListedAt is when the harness's look ended, in ms since the epoch
	// (0: not recorded).
	ListedAt int64 `json:"listed-at,omitempty"`
	// TxnTimeoutMs is the transaction timeout of the run's producers, set
	// by a workload whose final reads are read_committed (the compaction
	// workload under --txn): an open transaction holding the last stable
	// offset proves nothing before a coordinator had to abort it (see
	// OpenTxn.OpenForMs).
	TxnTimeoutMs int64 `json:"txn-timeout-ms,omitempty"`
	// Missing marks a partition the healed cluster no longer lists: at
	// each of several looks seconds apart, every broker answered a
	// Metadata request and said its topic does not exist or listed the
	// topic without it. Its log counts as empty (LogEnd).
	Missing bool `json:"missing,omitempty"`
}

// LogEnd is the offset below which the healed partition still holds
// records: its high watermark, 0 for a partition the cluster no longer
// lists (Missing), -1 when neither is known.
func (s Stall) LogEnd() int64 {
	if s.Missing {
		return 0
	}
	return s.HighWatermark
}

// heldBy says what holds the stall's last stable offset: the open
// transactions listed, or why none was.
func (s Stall) heldBy() string {
	switch {
	case len(s.OpenTxns) > 0:
		var open []string
		for _, o := range s.OpenTxns {
			open = append(open, fmt.Sprintf("producer %d epoch %d from offset %d", o.ProducerID, o.Epoch, o.FirstOffset))
		}
		return "held by the open transaction of " + strings.Join(open, ", ")
	case s.Error != "":
		return "its open transactions could not be listed (" + s.Error + ")"
	}
	return "no open transaction was listed"
}

// OpenTxn is a producer's transaction open on a partition.
type OpenTxn struct {
	ProducerID  int64 `json:"producer-id"`
	Epoch       int16 `json:"epoch"`
	FirstOffset int64 `json:"first-offset"`
	// LastTimestamp is the producer's last timestamp on the partition as
	// the broker reports it (DescribeProducers; 0: not known). Brokers
	// differ in what it means (a batch's timestamp, a transaction's start,
	// a broker clock), so no verdict rests on it.
	LastTimestamp int64 `json:"last-timestamp,omitempty"`
	// OpenForMs is how long the harness has seen the transaction open:
	// from the first look that found it, after a final read stopped
	// short, to this one, on the harness's clock (0: this look found it
	// first).
	OpenForMs int64 `json:"open-for-ms,omitempty"`
}

// FTxnIDProbe is the f of a harness event recording, after the final
// reads of a run that used transactions, whether a new producer could
// start under each transactional.id a transaction began under: its value
// is a list of TxnIDProbe.
const FTxnIDProbe = "txn-id-probe"

// TxnIDProbe is one transactional.id probed after the final reads: a new
// producer's InitProducerId for it, retried while the coordinator asked to
// (CONCURRENT_TRANSACTIONS, a coordinator moving or loading) until it
// succeeded or the probe's time ran out. Error is the last refusal or
// failure; Stuck marks an id whose attempts were answered
// CONCURRENT_TRANSACTIONS without a break for 20 s: a transaction of it
// never finished. An id neither OK nor Stuck was not settled (a
// coordinator still moving or unreachable, another refusal, or a cluster
// that did not recover, whose probe is recorded but not judged).
type TxnIDProbe struct {
	ID        string `json:"id"`
	OK        bool   `json:"ok"`
	Stuck     bool   `json:"stuck,omitempty"`
	Attempts  int    `json:"attempts"`
	ElapsedMs int64  `json:"elapsed-ms"`
	// Refused and RefusedMs are the last run of attempts answered
	// CONCURRENT_TRANSACTIONS: how many, and from the first to the last.
	Refused   int    `json:"refused,omitempty"`
	RefusedMs int64  `json:"refused-ms,omitempty"`
	Error     string `json:"error,omitempty"`
}

// TxnIDProbes decodes the value of a harness FTxnIDProbe event; any other
// op has none.
func (o Op) TxnIDProbes() []TxnIDProbe { return harnessList[TxnIDProbe](o, FTxnIDProbe) }

// Stalls decodes the value of a harness FStalledReads event; any other op
// has none.
func (o Op) Stalls() []Stall { return harnessList[Stall](o, FStalledReads) }

// harnessList decodes the value of a harness event of f, a JSON list; any
// other op, or a value that is no such list, has none.
func harnessList[T any](o Op, f string) []T {
	if o.Process != HarnessProcess || o.F != f || len(o.Raw) == 0 {
		return nil
	}
	var out []T
	if json.Unmarshal(o.Raw, &out) != nil {
		return nil
	}
	return out
}

// Leadership is one partition's leader as a Metadata response named it:
// node name (empty when the partition had no leader) and leader epoch (-1
// when the response carried none).
type Leadership struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Leader    string `json:"leader"`
	Epoch     int32  `json:"epoch"`
}

// IsClient tells whether the op is a client's (not the nemesis's or the
// harness's).
func (o Op) IsClient() bool { return o.Process >= 0 }

// Leaderships decodes the value of a harness FLeaders event; any other op
// has none.
func (o Op) Leaderships() []Leadership { return harnessList[Leadership](o, FLeaders) }

// Pair is one record as a poll or a completed send reports it.
type Pair struct {
	Offset int64
	Value  int64
}

// MicroOp is one step of a send, poll or txn operation. In JSON it is
// ["send", k, v] (invoke), ["send", k, [offset|null, v]] (completion),
// ["poll"] (invoke) or ["poll", {"k": [[offset, value], ...]}] (completion).
type MicroOp struct {
	F     string // "send" or "poll"
	Key   int    // send only
	Value int64  // send only
	// Offset is the offset a completed send reports; nil when unknown or not
	// completed.
	Offset *int64
	// Completed marks the completion form of a send (["send", k, [o, v]]).
	Completed bool
	// Polls holds what a completed poll returned, per key, in order; nil for
	// an invoked poll.
	Polls map[int][]Pair
}

// Op is one line of history.jsonl.
type Op struct {
	Index   int64  // position in the history, from 0
	Time    int64  // nanoseconds since the test started
	Process int    // client process number, NemesisProcess or HarnessProcess
	Type    OpType // invoke, ok, fail, info
	F       string // send, poll, txn, assign, subscribe, crash, or a nemesis f
	// Mops is the value of send, poll and txn operations.
	Mops []MicroOp
	// Keys is the value of assign and subscribe operations.
	Keys []int
	// Raw is the value of any other operation (nemesis ops), kept verbatim.
	Raw []byte
	// SeekToBeginning is set on the final reads' assign.
	SeekToBeginning bool
	Error           string
	// RebalanceLog lists the consumer-group rebalances a subscribed
	// consumer went through during this operation ("rebalance-log" in JSON,
	// as Jepsen records it). Keys named there are exempt from the
	// within-operation poll checks.
	RebalanceLog []Rebalance
	// Committed is, on an ok poll of a subscribed consumer, the offset per
	// key whose commit the group coordinator acknowledged after the poll:
	// the next offset to read, one past the last one polled ("committed"
	// in JSON, key -> offset; faultline's own, Jepsen records none). On a
	// txn operation it is the offsets the transaction sent to the group
	// (empty when none); on an ok assign of a transactional consumer, the
	// group's committed offsets the consumer resumed from.
	Committed map[int]int64
	// GroupOffsets is, on a txn operation that aborted after sending
	// offsets, the group's committed offsets of those keys read once the
	// abort was done (RequireStable): none of them may be what only
	// aborted transactions sent ("group-offsets" in JSON; faultline's
	// own).
	GroupOffsets map[int]int64
	// Fenced is set on a txn operation whose producer a newer producer
	// with the same transactional.id fenced before the commit (that one's
	// InitProducerId completed first): the commit must fail and the
	// transaction be aborted ("fenced" in JSON; faultline's own).
	Fenced bool
}

// Rebalance is one entry of an operation's rebalance log: the keys assigned
// to the consumer after the rebalance.
type Rebalance struct {
	Keys []int `json:"keys"`
}

// History is a whole test's operations in index order.
type History []Op
