package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/faultline/faultline/checker"
	"github.com/faultline/faultline/workloads"
)

// Process numbers of the final reads: round i uses finalProcessBase +
// i*finalProcessStride and up, far from the workers' numbers.
const (
	finalProcessBase   = 1_000_000
	finalProcessStride = 1_000
)

// finalReads runs the workload's final phase (every key read from the
// beginning up to the highest offset known for it) in rounds, each with
// a fresh client and process, until it is done or FinalTimeout passes.
func (r *run) finalReads(ctx context.Context, recovered bool) {
	deadline := time.Now().Add(time.Duration(r.t.FinalTimeout))
	ectx, cancel := context.WithDeadline(ctx, deadline)
	final := r.workload.Final(ectx, r.out)
	cancel()
	for round := 0; !final.Done() && ctx.Err() == nil && time.Now().Before(deadline); round++ {
		end := time.Now().Add(finalRoundLimit)
		if end.After(deadline) {
			end = deadline
		}
		rctx, cancel := context.WithDeadline(ctx, end)
		r.runWorkers(ctx, rctx, final, final.NewClient, nil, 1, finalProcessBase+round*finalProcessStride, 0)
		cancel()
	}
	if !final.Done() {
		fmt.Fprintf(r.out, "final reads did not reach the end of %s within %s\n", final.Missing(), time.Duration(r.t.FinalTimeout))
		r.recordStalls(ctx, final, recovered)
	}
}

// recordStalls asks a final phase that can say why its reads stopped
// short (workloads.StallExplainer) and records the answer in the history
// as a harness event, which the checker cites where it reports the
// values those reads never saw. Without recovered (the cluster did not
// serve again after the heal) each entry is marked Unrecovered: a node
// still cut off may answer for a partition it no longer leads.
func (r *run) recordStalls(ctx context.Context, final workloads.Final, recovered bool) {
	e, ok := final.(workloads.StallExplainer)
	if !ok || ctx.Err() != nil {
		return
	}
	stalls := e.Stalls(ctx)
	if len(stalls) == 0 || ctx.Err() != nil {
		return // an interrupted lookup answers nothing worth keeping
	}
	printed := map[string]bool{} // one line a partition: a compacted topic's keys share them
	for i := range stalls {
		s := &stalls[i]
		s.Unrecovered = !recovered
		tp := fmt.Sprintf("%s-%d", s.Topic, s.Partition)
		if printed[tp] {
			continue
		}
		printed[tp] = true
		note := ""
		if len(s.OpenTxns) > 0 {
			note = fmt.Sprintf(", %d open transaction(s)", len(s.OpenTxns))
		}
		if s.Missing {
			fmt.Fprintf(r.out, "  %s: no longer listed by the cluster\n", tp)
			continue
		}
		if s.Error != "" {
			note += " (" + strings.ReplaceAll(s.Error, "\n", "; ") + ")"
		}
		fmt.Fprintf(r.out, "  %s: high watermark %d, last stable offset %d%s\n",
			tp, s.HighWatermark, s.LastStable, note)
	}
	raw, err := json.Marshal(stalls)
	if err != nil {
		fmt.Fprintf(r.out, "stalled reads not recorded: %v\n", err)
		return
	}
	r.rec.Record(checker.Op{Process: checker.HarnessProcess, Type: checker.Info, F: checker.FStalledReads, Raw: raw})
}
