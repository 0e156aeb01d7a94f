package harness

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/faultline/faultline/checker"
	"github.com/faultline/faultline/workloads"
)

// Bounds of the probe of transactional ids: how long an id is probed at
// most, the pause between attempts, and one attempt's bound (above the
// harness client's own retry time, 5 s, so that the client's verdict on a
// retriable answer comes first). An id is stuck when every attempt of the
// last txnProbeStuck of the probe was answered CONCURRENT_TRANSACTIONS: a
// correct coordinator finishes what an id left open in well under a
// second once the cluster serves (it writes the markers and the Complete
// record, or aborts). Every id is probed at once, so the whole probe takes
// at most about txnProbeTimeout and one attempt.
const (
	txnProbeTimeout = 30 * time.Second
	txnProbeStuck   = 20 * time.Second
	txnProbeBackoff = 250 * time.Millisecond
	txnProbeAttempt = 6 * time.Second
)

// txnIDUser is a workload that names the transactional.ids its clients
// began a transaction under (the queue and compact workloads under --txn).
type txnIDUser interface{ UsedTransactionalIDs() []string }

// probeTxnIDs checks, once the final reads are done, that a new producer
// can start under every transactional.id the workload began a
// transaction under (txnIDUser): an InitProducerId for each, retried
// while the coordinator asks to, for up to txnProbeTimeout. It is what an
// application restarting after the faults would do first. A coordinator
// that leaves a transaction prepared and never completes it, or never
// aborts it, answers CONCURRENT_TRANSACTIONS for ever: that id is stuck,
// and no read of the data shows it when the markers were written. The
// answers go into the history as a harness event (checker.FTxnIDProbe),
// which the checker's "transactional-ids" check reads. It runs after the
// final reads because its InitProducerId aborts what an id left open,
// which would unblock reads that stalled on it.
func (r *run) probeTxnIDs(ctx context.Context) {
	user, ok := r.workload.(txnIDUser)
	if !ok || r.adm == nil {
		return
	}
	ids := user.UsedTransactionalIDs()
	if len(ids) == 0 {
		return
	}
	// The timeout the workload's producers used (the broker accepted it).
	timeout := workloads.TxnTimeoutOr(time.Duration(r.t.TxnTimeout), 5*time.Second)
	probes := make([]checker.TxnIDProbe, len(ids))
	var wg sync.WaitGroup
	for i, id := range ids {
		wg.Go(func() { probes[i] = probeTxnID(ctx, r.adm, id, timeout, txnProbeTimeout, txnProbeStuck) })
	}
	wg.Wait()
	if ctx.Err() != nil {
		return // an interrupted probe settles nothing
	}
	settled := 0
	for _, p := range probes {
		switch {
		case p.Stuck:
			fmt.Fprintf(r.out, "transactional.id %s is stuck: %d InitProducerId attempts answered CONCURRENT_TRANSACTIONS over %s\n",
				p.ID, p.Attempts, time.Duration(p.ElapsedMs)*time.Millisecond)
		case !p.OK:
			fmt.Fprintf(r.out, "transactional.id %s: the probe could not settle it (last: %s)\n", p.ID, p.Error)
		default:
			settled++
		}
	}
	if settled == len(probes) {
		fmt.Fprintf(r.out, "[%6.1fs] transactional ids: a new producer started under each of %d\n", r.elapsed().Seconds(), len(ids))
	}
	raw, err := json.Marshal(probes)
	if err != nil {
		fmt.Fprintf(r.out, "probe of transactional ids not recorded: %v\n", err)
		return
	}
	r.rec.Record(checker.Op{Process: checker.HarnessProcess, Type: checker.Info, F: checker.FTxnIDProbe, Raw: raw})
}

// probeTxnID sends InitProducerId for id (asking for txnTimeout) until it
// succeeds, the broker gives an answer that is no request to retry, or
// limit passes. It is stuck when every attempt of at least the last
// stuck of it was answered CONCURRENT_TRANSACTIONS; a coordinator that
// is moving, loading or unreachable at the end leaves it only not ok.
func probeTxnID(ctx context.Context, cl kmsg.Requestor, id string, txnTimeout, limit, stuck time.Duration) (p checker.TxnIDProbe) {
	p.ID = id
	start := time.Now()
	deadline := start.Add(limit)
	defer func() { p.ElapsedMs = time.Since(start).Milliseconds() }()
	var refusedSince time.Time // the first of the current run of CONCURRENT_TRANSACTIONS
	for {
		p.Attempts++
		code, err := initProducerID(ctx, cl, id, txnTimeout)
		switch {
		case err == nil && code == 0:
			p.OK, p.Error = true, ""
			return p
		case err == nil && code == kerr.ConcurrentTransactions.Code:
			if refusedSince.IsZero() {
				refusedSince = time.Now()
			}
		case err == nil && !retryInit(code):
			p.Error = kerr.ErrorForCode(code).Error()
			return p
		default:
			refusedSince = time.Time{}
		}
		if err != nil {
			p.Error = err.Error()
		} else {
			p.Error = kerr.ErrorForCode(code).Error()
		}
		if ctx.Err() != nil {
			return p
		}
		if !time.Now().Add(txnProbeBackoff).Before(deadline) {
			p.Stuck = !refusedSince.IsZero() && time.Since(refusedSince) >= stuck
			return p
		}
		select {
		case <-ctx.Done():
			return p
		case <-time.After(txnProbeBackoff):
		}
	}
}

// initProducerID sends one InitProducerId for id to its coordinator (the
// client finds it) within txnProbeAttempt; the answer's error code, or an
// error when there was no answer.
func initProducerID(ctx context.Context, cl kmsg.Requestor, id string, txnTimeout time.Duration) (int16, error) {
	ctx, cancel := context.WithTimeout(ctx, txnProbeAttempt)
	defer cancel()
	req := kmsg.NewPtrInitProducerIDRequest()
	req.TransactionalID = &id
	req.TransactionTimeoutMillis = int32(txnTimeout.Milliseconds())
	req.ProducerID, req.ProducerEpoch = -1, -1
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		var ke *kerr.Error
		if errors.As(err, &ke) {
			return ke.Code, nil // the client gave up on a retriable answer
		}
		return 0, err
	}
	return resp.ErrorCode, nil
}

// retryInit tells whether an InitProducerId answer asks to come back:
// the previous transaction is still being ended, or the coordinator is
// moving or loading. A producer retries these.
func retryInit(code int16) bool {
	switch code {
	case kerr.ConcurrentTransactions.Code, kerr.CoordinatorLoadInProgress.Code, kerr.CoordinatorNotAvailable.Code,
		kerr.NotCoordinator.Code, kerr.RequestTimedOut.Code:
		return true
	}
	return false
}
