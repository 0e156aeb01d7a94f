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

// Bounds of the probe of transactional ids. An id is stuck once its
// attempts have been answered CONCURRENT_TRANSACTIONS without a break for
// txnProbeStuck: a correct coordinator finishes what an id left open in
// well under a second once the cluster serves (it writes the markers and
// the Complete record, or aborts). Other answers that ask to come back (a
// coordinator moving or loading) and unanswered attempts break the run;
// an id is given up unsettled once txnProbeTimeout has passed outside such
// a run, or txnProbeTimeout+txnProbeStuck in all. Attempts are
// txnProbeBackoff apart, each bounded by txnProbeAttempt (above the
// harness client's own 5 s of retries, mostly: a retry that must find the
// coordinator again can take longer, and ends the attempt unanswered).
// txnProbeParallel ids are probed at once (a broker answers a connection's
// requests in order, a few dozen at a time), and the whole probe stops at
// txnProbeTotal: ids it did not reach are unsettled.
const (
	txnProbeTimeout  = 30 * time.Second
	txnProbeStuck    = 20 * time.Second
	txnProbeBackoff  = 250 * time.Millisecond
	txnProbeAttempt  = 6 * time.Second
	txnProbeParallel = 32
	txnProbeTotal    = 3 * time.Minute
)

// txnIDUser is a workload that names the transactional.ids its clients
// began a transaction under (the queue and compact workloads under
// --txn), and how many more it did not keep.
type txnIDUser interface {
	UsedTransactionalIDs() (ids []string, dropped int)
}

// probeTxnIDs checks, once the final reads are done, that a new producer
// can start under every transactional.id the workload began a
// transaction under (txnIDUser): an InitProducerId for each, retried
// while the coordinator asks to. It is what an application restarting
// after the faults would do first. A coordinator that leaves a
// transaction prepared and never completes it, or never aborts it,
// answers CONCURRENT_TRANSACTIONS for ever: that id is stuck, and no read
// of the data shows it when the markers were written. The answers go into
// the history as a harness event (checker.FTxnIDProbe), which the
// checker's "transactional-ids" check reads. It runs after the final
// reads because its InitProducerId aborts what an id left open, which
// would unblock reads that stalled on it. When the cluster did not
// recover (recovered false), a correct coordinator may still be waiting
// for a partition's leader: the answers are recorded but no id is called
// stuck.
func (r *run) probeTxnIDs(ctx context.Context, recovered bool) {
	user, ok := r.workload.(txnIDUser)
	if !ok || r.adm == nil {
		return
	}
	ids, dropped := user.UsedTransactionalIDs()
	if dropped > 0 {
		fmt.Fprintf(r.out, "transactional ids: probing the first %d; %d more were not kept\n", len(ids), dropped)
	}
	if len(ids) == 0 {
		return
	}
	r.setPhase("transactional ids")
	// The timeout the workload's producers used (the broker accepted it).
	timeout := workloads.TxnTimeoutOr(time.Duration(r.t.TxnTimeout), workloads.DefaultRequestTimeout)
	pctx, cancel := context.WithTimeout(ctx, txnProbeTotal)
	defer cancel()
	probes := make([]checker.TxnIDProbe, len(ids))
	sem := make(chan struct{}, txnProbeParallel)
	var wg sync.WaitGroup
	for i, id := range ids {
		wg.Go(func() {
			probes[i] = checker.TxnIDProbe{ID: id, Error: "not probed: the probe's time ran out"}
			select {
			case sem <- struct{}{}:
			case <-pctx.Done():
				return
			}
			defer func() { <-sem }()
			probes[i] = probeTxnID(pctx, r.adm, id, timeout, txnProbeTimeout, txnProbeStuck)
		})
	}
	wg.Wait()
	if ctx.Err() != nil {
		return // an interrupted probe settles nothing
	}
	started := 0
	for i := range probes {
		p := &probes[i]
		if p.Stuck && !recovered {
			p.Stuck = false
			p.Error = "not judged, the cluster did not recover: " + p.Error
		}
		switch {
		case p.Stuck:
			fmt.Fprintf(r.out, "transactional.id %s is stuck: %d InitProducerId attempts answered CONCURRENT_TRANSACTIONS over %s\n",
				p.ID, p.Refused, time.Duration(p.RefusedMs)*time.Millisecond)
		case p.OK:
			started++
		}
	}
	if started == len(probes) {
		fmt.Fprintf(r.out, "[%6.1fs] transactional ids: a new producer started under each of %d\n", r.elapsed().Seconds(), len(ids))
	} else {
		fmt.Fprintf(r.out, "[%6.1fs] transactional ids: a new producer started under %d of %d\n", r.elapsed().Seconds(), started, len(ids))
	}
	raw, err := json.Marshal(probes)
	if err != nil {
		fmt.Fprintf(r.out, "probe of transactional ids not recorded: %v\n", err)
		return
	}
	r.rec.Record(checker.Op{Process: checker.HarnessProcess, Type: checker.Info, F: checker.FTxnIDProbe, Raw: raw})
}

// probeTxnID sends InitProducerId for id (asking for txnTimeout) until it
// succeeds, the broker gives an answer that is no request to retry, the
// answers have been CONCURRENT_TRANSACTIONS without a break for stuck (it
// is stuck), or limit has passed outside such a run (limit+stuck in all).
func probeTxnID(ctx context.Context, cl kmsg.Requestor, id string, txnTimeout, limit, stuck time.Duration) (p checker.TxnIDProbe) {
	p.ID = id
	start := time.Now()
	deadline, last := start.Add(limit), start.Add(limit+stuck)
	defer func() { p.ElapsedMs = time.Since(start).Milliseconds() }()
	var refusedSince time.Time // the first of the current run of CONCURRENT_TRANSACTIONS
	for {
		p.Attempts++
		code, err := initProducerID(ctx, cl, id, txnTimeout)
		if err == nil && code == 0 {
			p.OK, p.Error = true, ""
			return p
		}
		if err != nil {
			p.Error = err.Error()
		} else {
			p.Error = kerr.ErrorForCode(code).Error()
		}
		switch {
		case err == nil && code == kerr.ConcurrentTransactions.Code:
			now := time.Now()
			if refusedSince.IsZero() {
				refusedSince = now
			}
			p.Refused++
			p.RefusedMs = now.Sub(refusedSince).Milliseconds()
			if now.Sub(refusedSince) >= stuck {
				p.Stuck = true
				return p
			}
		case err == nil && !retryInit(code):
			return p
		default:
			refusedSince, p.Refused, p.RefusedMs = time.Time{}, 0, 0
		}
		if ctx.Err() != nil {
			return p
		}
		if now := time.Now(); now.After(last) || now.After(deadline) && refusedSince.IsZero() {
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
