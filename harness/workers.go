package harness

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/faultline/faultline/checker"
	"github.com/faultline/faultline/workloads"
)

// runWorkers runs concurrency workers, each with a client from newClient,
// until ctx ends or the generator has nothing more. The operation a worker has in flight when ctx ends still
// completes and is recorded; only rootCtx ending (Ctrl-C) cuts it short. A
// worker whose operation ends info retires its process and takes a fresh
// number (Jepsen's rule), with a new client.
func (r *run) runWorkers(rootCtx, ctx context.Context, gen workloads.Generator, newClient func() (workloads.Client, error), concurrency, processBase int) {
	var genMu sync.Mutex
	var wg sync.WaitGroup
	interval := time.Duration(0)
	if r.t.Rate > 0 {
		interval = time.Duration(float64(concurrency) / r.t.Rate * float64(time.Second))
	}
	for w := range concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			process := processBase + w
			var client workloads.Client
			defer func() {
				if client != nil {
					client.Close()
				}
			}()
			for ctx.Err() == nil {
				if client == nil {
					c, err := newClient()
					if err != nil {
						fmt.Fprintf(r.out, "client for process %d: %v\n", process, err)
						return
					}
					client = c
				}
				genMu.Lock()
				op, ok := gen.Next(process)
				genMu.Unlock()
				if !ok {
					return
				}
				op.Process = process
				r.rec.Record(op)
				opCtx, cancel := context.WithTimeout(rootCtx, opTimeout)
				done := client.Invoke(opCtx, op)
				cancel()
				done.Process = process
				r.rec.Record(done)
				genMu.Lock()
				gen.Update(done)
				genMu.Unlock()
				if done.Type == checker.Info {
					client.Close()
					client = nil
					process += concurrency
				}
				if interval > 0 {
					select {
					case <-time.After(interval):
					case <-ctx.Done():
					}
				}
			}
		}()
	}
	wg.Wait()
}
