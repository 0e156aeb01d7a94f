package checker

import (
	"fmt"
	"strings"
)

// AnomalyStuckTxnID is a transactional.id under which no new producer
// could start once the faults were healed (FTxnIDProbe): a liveness
// failure, not a safety one, but an application using that id can never
// produce again.
const AnomalyStuckTxnID = "stuck-transactional-id"

// txnIDProbeOps returns the positions in h of the probe of transactional
// ids (harness FTxnIDProbe events), found in one pass.
func txnIDProbeOps(h History) []int {
	var at []int
	for i := range h {
		if h[i].Process == HarnessProcess && h[i].F == FTxnIDProbe {
			at = append(at, i)
		}
	}
	return at
}

// checkTxnIDs is the "transactional-ids" checker: every id the probe found
// stuck is an AnomalyStuckTxnID, with an example naming the id and the
// probe's attempts. An id the probe could not settle (a coordinator still
// moving or unreachable at the end, or another refusal) makes the check
// unknown, not invalid: no held transaction was seen.
// at are the probe events' positions (txnIDProbeOps).
func checkTxnIDs(h History, at []int, examplesMax int) CheckerResult {
	var stuck []Example
	var unsettled []string
	for _, i := range at {
		for _, p := range h[i].TxnIDProbes() {
			switch {
			case p.Stuck:
				stuck = append(stuck, Example{Key: -1, Ops: []int64{h[i].Index}, Text: fmt.Sprintf(
					"after the faults were healed and the final reads done, a new producer could not start under transactional.id %q: "+
						"its coordinator answered %d InitProducerId attempts over %.1f s with CONCURRENT_TRANSACTIONS, without a break, "+
						"so a transaction of that id was left unfinished (prepared but never completed, or never aborted) and the id can never produce again",
					p.ID, p.Refused, float64(p.RefusedMs)/1000)})
			case !p.OK:
				unsettled = append(unsettled, fmt.Sprintf("%s (%s)", p.ID, p.Error))
			}
		}
	}
	if len(stuck) > 0 {
		n := len(stuck)
		return CheckerResult{Valid: Invalid, Anomalies: map[string]AnomalyReport{AnomalyStuckTxnID: {
			Count: n, Examples: stuck[:min(n, max(1, examplesMax))]}}}
	}
	if n := len(unsettled); n > 0 {
		shown := unsettled[:min(n, 5)]
		more := ""
		if n > len(shown) {
			more = fmt.Sprintf(" and %d more", n-len(shown))
		}
		return CheckerResult{Valid: Unknown, Error: "the probe of transactional ids could not settle " + strings.Join(shown, ", ") + more}
	}
	return CheckerResult{Valid: Valid}
}
