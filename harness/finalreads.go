package harness

import (
	"context"
	"fmt"
	"time"
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
func (r *run) finalReads(ctx context.Context) {
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
		r.runWorkers(ctx, rctx, final, final.NewClient, 1, finalProcessBase+round*finalProcessStride, 0)
		cancel()
	}
	if !final.Done() {
		fmt.Fprintf(r.out, "final reads did not reach the end of %s within %s\n", final.Missing(), time.Duration(r.t.FinalTimeout))
	}
}
