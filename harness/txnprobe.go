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
)

// Bounds of the probe of transactional ids: how long one id may keep being
// refused before it counts as stuck (a correct coordinator finishes what
// an id left open in well under a second once the cluster serves: it
// writes the markers and the Complete record, or aborts), the pause
// between attempts, one attempt's bound, and how many ids are probed at
// once.
const (
	txnProbeTimeout  = 30 * time.Second
	txnProbeBackoff  = 250 * time.Millisecond
	txnProbeAttempt  = 5 * time.Second
	txnProbeParallel = 8
)

// probeTxnIDs checks, once the final reads are done, that a new producer
// can start under every transactional.id the workload lists
// (txnIDLister): an InitProducerId for each, retried while the
// coordinator asks to, for up to txnProbeTimeout. It is what an
// application restarting after the faults would do first. A coordinator
// that leaves a transaction prepared and never completes it, or never
// aborts it, answers CONCURRENT_TRANSACTIONS for ever: that id is stuck,
// and no read of the data shows it when the markers were written. The
// answers go into the history as a harness event (checker.FTxnIDProbe),
// which the checker's "transactional-ids" check reads. It runs after the
// final reads because its InitProducerId aborts what an id left open,
// which would unblock reads that stalled on it.
func (r *run) probeTxnIDs(ctx context.Context) {
	lister, ok := r.workload.(txnIDLister)
	if !ok || r.adm == nil {
		return
	}
	ids := lister.TransactionalIDs()
	if len(ids) == 0 {
		return
	}
	probes := make([]checker.TxnIDProbe, len(ids))
	sem := make(chan struct{}, txnProbeParallel)
	var wg sync.WaitGroup
	for i, id := range ids {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			probes[i] = probeTxnID(ctx, r.adm, id, txnProbeTimeout)
		})
	}
	wg.Wait()
	if ctx.Err() != nil {
		return // an interrupted probe settles nothing
	}
	stuck := 0
	for _, p := range probes {
		if p.Stuck {
			stuck++
			fmt.Fprintf(r.out, "transactional.id %s is stuck: %d InitProducerId attempts refused over %s (last: %s)\n",
				p.ID, p.Attempts, time.Duration(p.ElapsedMs)*time.Millisecond, p.Error)
		}
	}
	if stuck == 0 {
		fmt.Fprintf(r.out, "[%6.1fs] transactional ids: a new producer started under each of %d\n", r.elapsed().Seconds(), len(ids))
	}
	raw, err := json.Marshal(probes)
	if err != nil {
		fmt.Fprintf(r.out, "probe of transactional ids not recorded: %v\n", err)
		return
	}
	r.rec.Record(checker.Op{Process: checker.HarnessProcess, Type: checker.Info, F: checker.FTxnIDProbe, Raw: raw})
}

// probeTxnID sends InitProducerId for id until it succeeds, the broker
// gives an answer that is no request to retry, or limit passes.
// It is stuck when the time ran out and the last attempt was answered
// with such a request; with no answer at all it is only not ok.
func probeTxnID(ctx context.Context, cl kmsg.Requestor, id string, limit time.Duration) (p checker.TxnIDProbe) {
	p.ID = id
	start := time.Now()
	deadline := start.Add(limit)
	defer func() { p.ElapsedMs = time.Since(start).Milliseconds() }()
	for {
		p.Attempts++
		code, err := initProducerID(ctx, cl, id)
		switch {
		case err == nil && code == 0:
			p.OK, p.Error = true, ""
			return p
		case err != nil:
			p.Error = err.Error()
		default:
			p.Error = kerr.ErrorForCode(code).Error()
			if !retryInit(code) {
				return p
			}
		}
		if ctx.Err() != nil {
			return p
		}
		if !time.Now().Add(txnProbeBackoff).Before(deadline) {
			p.Stuck = err == nil // the broker answered, and kept refusing
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
func initProducerID(ctx context.Context, cl kmsg.Requestor, id string) (int16, error) {
	ctx, cancel := context.WithTimeout(ctx, txnProbeAttempt)
	defer cancel()
	req := kmsg.NewPtrInitProducerIDRequest()
	req.TransactionalID = &id
	req.TransactionTimeoutMillis = 60_000
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
