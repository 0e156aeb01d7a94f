package txn

import (
	"cmp"
	"math"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
)

// State is a transaction's state, numbered as in Kafka's
// __transaction_state records.
type State int8

// The states of a transactional id (Kafka's TransactionState).
const (
	Empty             State = 0
	Ongoing           State = 1
	PrepareCommit     State = 2
	PrepareAbort      State = 3
	CompleteCommit    State = 4
	CompleteAbort     State = 5
	Dead              State = 6
	PrepareEpochFence State = 7
)

var stateNames = [...]string{"Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort", "Dead", "PrepareEpochFence"}

func (s State) String() string {
	if s >= 0 && int(s) < len(stateNames) {
		return stateNames[s]
	}
	return "Unknown"
}

// prepared reports whether the state waits for its markers.
func (s State) prepared() bool { return s == PrepareCommit || s == PrepareAbort }

// TopicPartition names a partition of a transaction.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// Metadata is everything the coordinator knows about one transactional id;
// it is what a __transaction_state record holds. The transition functions
// take a Metadata and return the next one without changing their input.
type Metadata struct {
	TransactionalID string
	ProducerID      int64
	// PrevProducerID is the producer id before the last id rollover
	// (epoch exhaustion), so that a retry under it is recognised; -1 none.
	PrevProducerID int64
	ProducerEpoch  int16
	// LastProducerEpoch is the epoch before the last bump made by the
	// coordinator itself (a timeout or a fence) or by an EndTxn under
	// TV2, -1 none: the client may still hold it, and its InitProducerId
	// or EndTxn retry under it must be answered (told it was fenced, or
	// given the epoch that replaced it), not mistaken for a zombie. As in
	// Kafka it is not in the __transaction_state record: a coordinator
	// that loaded the id knows none.
	LastProducerEpoch int16
	TimeoutMs         int32
	State             State
	Partitions        []TopicPartition // sorted, no duplicates
	StartMs           int64            // start of the current transaction, -1 none
	UpdateMs          int64
	// TV2 is set when the client ends transactions with EndTxn v5+
	// (KIP-890 part 2): every EndTxn then bumps the epoch.
	TV2 bool
}

func (m Metadata) clone() Metadata {
	m.Partitions = append([]TopicPartition(nil), m.Partitions...)
	return m
}

// Has reports whether tp is part of the current transaction.
func (m Metadata) Has(tp TopicPartition) bool {
	_, found := slices.BinarySearchFunc(m.Partitions, tp, compareTP)
	return found
}

func compareTP(a, b TopicPartition) int {
	if c := strings.Compare(a.Topic, b.Topic); c != 0 {
		return c
	}
	return cmp.Compare(a.Partition, b.Partition)
}

// add puts the partitions of tps that m lacks into m.Partitions, which it
// keeps sorted and free of duplicates, and reports whether any was new.
func (m *Metadata) add(tps []TopicPartition) bool {
	n := len(m.Partitions)
	for _, tp := range tps {
		// Only the first n are sorted until the sort below.
		if _, found := slices.BinarySearchFunc(m.Partitions[:n], tp, compareTP); !found && !slices.Contains(m.Partitions[n:], tp) {
			m.Partitions = append(m.Partitions, tp)
		}
	}
	if len(m.Partitions) == n {
		return false
	}
	slices.SortFunc(m.Partitions, compareTP)
	return true
}

// Decision is what a transition decided: an error code for the client
// (0 for success), and when Write is set the new Metadata to persist
// before answering. Markers is set when the new state is PrepareCommit or
// PrepareAbort: once Next is durable, markers go to its partitions and
// Complete(Next) is persisted after them.
type Decision struct {
	Code    int16
	Next    Metadata
	Write   bool
	Markers bool
	// Retry: the client must retry later (CONCURRENT_TRANSACTIONS while
	// markers are in flight); Code is set accordingly.
	Retry bool
}

func fail(code int16) Decision { return Decision{Code: code} }

// maxEpoch is the largest epoch before the producer id must roll over:
// Kafka keeps Short.MaxValue out of use so that a bump is always possible.
const maxEpoch = math.MaxInt16 - 1

// InitRequest is an InitProducerId with a transactional id.
type InitRequest struct {
	TimeoutMs int32
	// ProducerID and ProducerEpoch are -1 for a new producer, or the id and
	// epoch the client holds (KIP-360: a client recovering from an error
	// asks for a bump of what it has).
	ProducerID    int64
	ProducerEpoch int16
	// UnsafeKeepOpen plants Unsafe.InitKeepsOpen.
	UnsafeKeepOpen bool
}

// InitProducerID decides an InitProducerId for cur (nil when the
// transactional id is unknown). newID allocates a fresh producer id; it is
// called at most once. A transaction in progress is aborted first: the
// epoch is bumped, the state becomes PrepareAbort (markers follow) and the
// client is told CONCURRENT_TRANSACTIONS, to retry once the abort is done.
func InitProducerID(cur *Metadata, txnID string, req InitRequest, newID func() (int64, error), nowMs int64) Decision {
	if cur == nil {
		if req.ProducerID >= 0 {
			// The client claims an id this coordinator never gave
			// out for the transactional id.
			return fail(kerr.InvalidProducerIDMapping.Code)
		}
		id, err := newID()
		if err != nil {
			return fail(kerr.CoordinatorNotAvailable.Code)
		}
		return Decision{Write: true, Next: Metadata{
			TransactionalID: txnID, ProducerID: id, PrevProducerID: -1, ProducerEpoch: 0, LastProducerEpoch: -1,
			TimeoutMs: req.TimeoutMs, State: Empty, StartMs: -1, UpdateMs: nowMs,
		}}
	}
	m := cur.clone()
	switch m.State {
	case PrepareCommit, PrepareAbort, PrepareEpochFence:
		return Decision{Code: kerr.ConcurrentTransactions.Code, Retry: true}
	case Dead:
		return fail(kerr.ConcurrentTransactions.Code)
	}
	if req.ProducerID >= 0 {
		// KIP-360: the epoch the client holds must be the current one,
		// or the one a coordinator bump replaced.
		known := req.ProducerID == m.ProducerID && (req.ProducerEpoch == m.ProducerEpoch || req.ProducerEpoch == m.LastProducerEpoch) ||
			req.ProducerID == m.PrevProducerID
		if !known {
			return fail(kerr.ProducerFenced.Code)
		}
		if req.ProducerID == m.ProducerID && req.ProducerEpoch == m.LastProducerEpoch && m.State != Ongoing {
			// A retry of an InitProducerId whose bump already happened.
			return Decision{Next: m}
		}
	}
	if m.State == Ongoing && req.UnsafeKeepOpen && req.ProducerID < 0 {
		return Decision{Next: m}
	}
	if m.State == Ongoing {
		// Fence the producer of the open transaction and abort it.
		next, err := bumpEpoch(m, newID)
		if err != nil {
			return fail(kerr.CoordinatorNotAvailable.Code)
		}
		next.LastProducerEpoch = -1
		next.State = PrepareAbort
		next.UpdateMs = nowMs
		return Decision{Code: kerr.ConcurrentTransactions.Code, Write: true, Markers: true, Retry: true, Next: next}
	}
	next, err := bumpEpoch(m, newID)
	if err != nil {
		return fail(kerr.CoordinatorNotAvailable.Code)
	}
	next.LastProducerEpoch = -1
	next.TimeoutMs = req.TimeoutMs
	next.State = Empty
	next.Partitions = nil
	next.StartMs = -1
	next.UpdateMs = nowMs
	return Decision{Write: true, Next: next}
}

// bumpEpoch returns m with the next epoch, recording the one it replaces
// as LastProducerEpoch (InitProducerId, which fences that epoch, clears
// it), or rolling to a fresh producer id when the epoch is exhausted.
func bumpEpoch(m Metadata, newID func() (int64, error)) (Metadata, error) {
	if m.ProducerEpoch >= maxEpoch {
		id, err := newID()
		if err != nil {
			return m, err
		}
		m.PrevProducerID = m.ProducerID
		m.ProducerID = id
		m.ProducerEpoch = 0
		return m, nil
	}
	m.LastProducerEpoch = m.ProducerEpoch
	m.ProducerEpoch++
	return m, nil
}

// checkProducer validates the id and epoch of a request in a transaction.
func checkProducer(m Metadata, producerID int64, epoch int16) int16 {
	switch {
	case producerID != m.ProducerID:
		return kerr.InvalidProducerIDMapping.Code
	case epoch < m.ProducerEpoch:
		return kerr.ProducerFenced.Code
	case epoch > m.ProducerEpoch:
		return kerr.ProducerFenced.Code
	}
	return 0
}

// AddPartitions decides an AddPartitionsToTxn (or AddOffsetsToTxn, whose
// partition is the group's __consumer_offsets partition). Adding to a
// finished transaction starts the next one.
func AddPartitions(cur *Metadata, producerID int64, epoch int16, tps []TopicPartition, nowMs int64) Decision {
	if cur == nil {
		return fail(kerr.InvalidProducerIDMapping.Code)
	}
	if code := checkProducer(*cur, producerID, epoch); code != 0 {
		return fail(code)
	}
	m := cur.clone()
	switch m.State {
	case PrepareCommit, PrepareAbort, PrepareEpochFence:
		return Decision{Code: kerr.ConcurrentTransactions.Code, Retry: true}
	case Dead:
		return fail(kerr.InvalidTxnState.Code)
	case Empty, CompleteCommit, CompleteAbort:
		m.State = Ongoing
		m.Partitions = nil
		m.StartMs = nowMs
		m.add(tps)
		m.UpdateMs = nowMs
		return Decision{Write: true, Next: m}
	}
	if !m.add(tps) {
		return Decision{Next: m}
	}
	m.UpdateMs = nowMs
	return Decision{Write: true, Next: m}
}

// VerifyPartitions decides an AddPartitionsToTxn v4+ entry with VerifyOnly
// (KIP-890 part 1): before appending a transactional batch of a client
// that adds its partitions itself, the partition's leader asks whether the
// partition is in the producer's open transaction. Nothing changes: 0 when
// it is; the producer's fencing error when its id or epoch is not the
// current one; INVALID_TXN_STATE when no transaction is open or the
// partition is not in it (a produce delayed past its transaction's end,
// which would otherwise open a transaction nobody ends); CONCURRENT_
// TRANSACTIONS while the previous one is being ended.
func VerifyPartitions(cur *Metadata, producerID int64, epoch int16, tps []TopicPartition) int16 {
	if cur == nil {
		return kerr.InvalidProducerIDMapping.Code
	}
	if code := checkProducer(*cur, producerID, epoch); code != 0 {
		return code
	}
	switch {
	case cur.State == PrepareCommit || cur.State == PrepareAbort || cur.State == PrepareEpochFence:
		return kerr.ConcurrentTransactions.Code
	case cur.State != Ongoing:
		return kerr.InvalidTxnState.Code
	}
	for _, tp := range tps {
		if !cur.Has(tp) {
			return kerr.InvalidTxnState.Code
		}
	}
	return 0
}

// EndRequest is an EndTxn.
type EndRequest struct {
	ProducerID int64
	Epoch      int16
	Commit     bool
	// TV2: EndTxn v5+ (KIP-890 part 2): the epoch is bumped by every
	// EndTxn and returned to the client, so a delayed or retried EndTxn
	// of an earlier transaction carries an epoch older than the current
	// one and can never decide a later transaction.
	TV2 bool
}

// EndTxn decides an EndTxn. Ending an open transaction moves it to
// PrepareCommit or PrepareAbort (Markers set). A retry of an EndTxn that
// already took effect is answered with success and changes nothing; under
// TV2 the retry is recognised by the previous epoch and the same outcome.
func EndTxn(cur *Metadata, req EndRequest, newID func() (int64, error), nowMs int64) Decision {
	if cur == nil {
		return fail(kerr.InvalidProducerIDMapping.Code)
	}
	m := cur.clone()
	if req.TV2 && m.TV2 {
		// The retry of the EndTxn that ended the last transaction: the
		// epoch it carries is the one before that EndTxn's bump.
		retry := req.ProducerID == m.ProducerID && req.Epoch == m.ProducerEpoch-1 ||
			req.ProducerID == m.PrevProducerID && m.ProducerEpoch == 0
		if retry {
			switch {
			case m.State == CompleteCommit && req.Commit, m.State == CompleteAbort && !req.Commit:
				return Decision{Next: m}
			case m.State == PrepareCommit && req.Commit, m.State == PrepareAbort && !req.Commit:
				return Decision{Code: kerr.ConcurrentTransactions.Code, Retry: true}
			}
			return fail(kerr.ProducerFenced.Code)
		}
	}
	if req.ProducerID != m.ProducerID {
		return fail(kerr.InvalidProducerIDMapping.Code)
	}
	if req.TV2 && m.TV2 && m.State.prepared() && req.Epoch == m.ProducerEpoch {
		// The previous transaction's markers are still being written,
		// and the request carries the epoch its EndTxn bumped to: it
		// ends the next transaction, which cannot have begun yet (a
		// producer told of the commit at once, which aborts its next
		// transaction before any partition joined it). Retried, it
		// meets the complete state.
		return Decision{Code: kerr.ConcurrentTransactions.Code, Retry: true}
	}
	if req.Epoch != m.ProducerEpoch {
		if req.Epoch == m.LastProducerEpoch && m.State == CompleteAbort && !req.Commit {
			// The coordinator fenced the transaction (a timeout) and
			// the client asks for the abort that already happened.
			return Decision{Next: m}
		}
		return fail(kerr.ProducerFenced.Code)
	}
	if !req.Commit && req.TV2 && (m.State == Empty || m.State == CompleteCommit || m.State == CompleteAbort) {
		// KIP-890: an abort with nothing open still bumps the epoch.
		// Under TV2 the client cannot know whether a partition leader
		// put a partition in the transaction yet (it sends no
		// AddPartitionsToTxn), so it may abort a transaction the
		// coordinator never saw open: after an empty one, or after a
		// committed or aborted one.
		next, err := bumpEpoch(m, newID)
		if err != nil {
			return fail(kerr.CoordinatorNotAvailable.Code)
		}
		next.State = CompleteAbort
		next.TV2 = true
		next.UpdateMs = nowMs
		return Decision{Write: true, Next: next}
	}
	switch m.State {
	case Ongoing:
		m.State = PrepareAbort
		if req.Commit {
			m.State = PrepareCommit
		}
		m.UpdateMs = nowMs
		m.TV2 = req.TV2
		if req.TV2 {
			next, err := bumpEpoch(m, newID)
			if err != nil {
				return fail(kerr.CoordinatorNotAvailable.Code)
			}
			// As Kafka does, the bump keeps the epoch it replaced: a
			// client that never heard this EndTxn's outcome and
			// re-initialises at the epoch it holds (KIP-360) is known
			// and answered with this one.
			m = next
		}
		return Decision{Write: true, Markers: true, Next: m}
	case CompleteCommit:
		if req.Commit && !req.TV2 {
			return Decision{Next: m}
		}
	case CompleteAbort:
		if !req.Commit && !req.TV2 {
			return Decision{Next: m}
		}
	case PrepareCommit:
		if req.Commit {
			return Decision{Code: kerr.ConcurrentTransactions.Code, Retry: true}
		}
	case PrepareAbort:
		if !req.Commit {
			return Decision{Code: kerr.ConcurrentTransactions.Code, Retry: true}
		}
	}
	return fail(kerr.InvalidTxnState.Code)
}

// Complete is the state after the markers of a prepared transaction were
// written: CompleteCommit or CompleteAbort, with no partitions. It returns
// false when m is not prepared.
func Complete(m Metadata, nowMs int64) (Metadata, bool) {
	if !m.State.prepared() {
		return m, false
	}
	next := m.clone()
	next.State = CompleteAbort
	if m.State == PrepareCommit {
		next.State = CompleteCommit
	}
	next.Partitions = nil
	next.StartMs = -1
	next.UpdateMs = nowMs
	return next, true
}

// TimedOut reports whether m is an open transaction older than its timeout.
func TimedOut(m Metadata, nowMs int64) bool {
	return m.State == Ongoing && m.StartMs >= 0 && nowMs-m.StartMs > int64(m.TimeoutMs)
}

// Abort decides the abort of an open transaction that timed out: the
// epoch is bumped (fencing the producer that abandoned it, whose later
// EndTxn gets PRODUCER_FENCED and whose batches INVALID_PRODUCER_EPOCH)
// and the transaction moves to PrepareAbort.
func Abort(cur Metadata, newID func() (int64, error), nowMs int64) Decision {
	if cur.State != Ongoing {
		return fail(kerr.InvalidTxnState.Code)
	}
	next, err := bumpEpoch(cur.clone(), newID)
	if err != nil {
		return fail(kerr.CoordinatorNotAvailable.Code)
	}
	next.State = PrepareAbort
	next.UpdateMs = nowMs
	return Decision{Write: true, Markers: true, Next: next}
}
