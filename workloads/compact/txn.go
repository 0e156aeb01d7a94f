package compact

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/faultline/faultline/checker"
	"github.com/faultline/faultline/workloads"
)

// Under --txn each put is a transaction of its own (a transactional
// producer per client, one record, committed or aborted), and the final
// scan reads committed records only. One put in AbortOneIn is aborted on
// purpose after being held open for up to MaxHold (longer than the
// compacted topic's segment.ms, so segments roll and the cleaner runs
// while it is open): its record lies in the log, above the last stable
// offset while open and aborted after, and the cleaner must neither clean
// past it nor let it supersede the key's committed value, nor keep it
// visible once cleaned.
const (
	AbortOneIn = 4
	MaxHold    = 3 * time.Second
)

// errAbortedOnPurpose is the error of a put aborted by choice.
const errAbortedOnPurpose = "aborted on purpose"

// txnPut is one client's transactional state: its transactional.id and
// its seeded choice of the puts it aborts and how long it holds them.
type txnPut struct {
	id string
	// began is the workload's set of ids a transaction began under.
	began *workloads.TxnIDs
	rng   *rand.Rand
	// maxHold bounds how long an abort on purpose is held open (MaxHold),
	// and timeout is the transaction timeout.
	maxHold, timeout time.Duration
}

func newTxnPut(o workloads.Options, n int, began *workloads.TxnIDs) *txnPut {
	return &txnPut{id: txnPutID(n), began: began, rng: rand.New(rand.NewPCG(uint64(o.Seed), uint64(n))), maxHold: MaxHold, timeout: workloads.TxnTimeoutOr(o.TxnTimeout, requestTimeout)}
}

// txnPutID is the transactional.id of client n.
func txnPutID(n int) string { return fmt.Sprintf("faultline-compact-%d", n) }

// put writes rec (key k, value v as the history spells it) in a
// transaction of its own and commits it, or aborts it on purpose. It is
// ok once committed, fail once the abort is known to be done (the record
// can never be read), and info when the outcome is unknown.
func (t *txnPut) put(ctx context.Context, cl *kgo.Client, op checker.Op, k int, v string, rec *kgo.Record) checker.Op {
	abort := t.rng.IntN(AbortOneIn) == 0
	hold := time.Duration(t.rng.Int64N(int64(max(t.maxHold, 1))))
	// A hold past the transaction's timeout would turn the abort on
	// purpose into the coordinator's: keep it under half of it.
	hold = min(hold, t.timeout/2)
	offset := "null"
	end := func(typ checker.OpType, errText string) checker.Op {
		op.Type, op.Error = typ, errText
		op.Raw = []byte(fmt.Sprintf("[%d,%s,%s]", k, v, offset))
		return op
	}
	if err := cl.BeginTransaction(); err != nil {
		// Nothing was sent, but a producer that cannot begin will not
		// recover: info retires the client, as the queue workload does.
		return end(checker.Info, "begin: "+err.Error())
	}
	t.began.Add(t.id)
	sctx, cancel := context.WithTimeout(ctx, 3*requestTimeout)
	err := cl.ProduceSync(sctx, rec).FirstErr()
	cancel()
	if err == nil {
		offset = fmt.Sprint(rec.Offset)
	}
	if err != nil || abort {
		why := errAbortedOnPurpose
		if err != nil {
			why = "send: " + err.Error()
		} else {
			select {
			case <-time.After(hold):
			case <-ctx.Done():
			}
		}
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*requestTimeout)
		defer cancel()
		if aerr := cl.EndTransaction(actx, kgo.TryAbort); aerr != nil {
			abortAgain(cl)
			return end(checker.Info, why+"; abort: "+aerr.Error())
		}
		return end(checker.Fail, why)
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*requestTimeout)
	defer cancel()
	if err := cl.EndTransaction(cctx, kgo.TryCommit); err != nil {
		abortAgain(cl)
		return end(checker.Info, "commit: "+err.Error())
	}
	return end(checker.OK, "")
}

// abortAgain tries once more to abort after an EndTransaction that failed
// (franz-go's recovery: the retry re-initialises the producer, which bumps
// its epoch and has the coordinator abort what was open), so that a
// client retired after an info put leaves no transaction holding the last
// stable offset until its timeout. Its outcome changes nothing recorded.
func abortAgain(cl *kgo.Client) {
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	_ = cl.EndTransaction(ctx, kgo.TryAbort)
}
