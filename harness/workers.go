package harness

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/faultline/faultline/checker"
	"github.com/faultline/faultline/workloads"
)

// errCrashed is the error of an operation whose client crash-clients
// closed in the middle of it.
var errCrashed = errors.New("crashed: the client was closed in the middle of the operation (crash-clients)")

// workerSlot lets crash-clients reach a worker: the cancel of the
// operation in flight, or a note to retire the idle client.
type workerSlot struct {
	mu        sync.Mutex
	process   int
	cancel    context.CancelCauseFunc
	crashed   bool // the operation in flight was crashed
	retire    bool // the idle client was crashed
	successor bool // with crashed or retire: the next client takes over the crashed one's identity
}

func (s *workerSlot) begin(process int, cancel context.CancelCauseFunc) {
	s.mu.Lock()
	s.process, s.cancel, s.crashed = process, cancel, false
	s.mu.Unlock()
}

// end reports whether the operation that just ended was crashed and, if
// so, whether its client's successor takes over its identity.
func (s *workerSlot) end() (crashed, successor bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cancel = nil
	return s.takeLocked(&s.crashed)
}

// takeRetire reports whether the idle client was crashed and, if so,
// whether its successor takes over its identity.
func (s *workerSlot) takeRetire() (retire, successor bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.takeLocked(&s.retire)
}

// takeLocked clears the crash note *flag (crashed or retire) and the
// successor note that came with it, and returns both.
func (s *workerSlot) takeLocked(flag *bool) (taken, successor bool) {
	taken, successor = *flag, *flag && s.successor
	if taken {
		*flag, s.successor = false, false
	}
	return taken, successor
}

// crash closes the worker's client: the operation in flight is cancelled
// (it ends info), or the idle client is retired before the next one; with
// successor the next client takes over its identity. A crash the worker
// has not acted on yet stands as it is. It returns the process crashed
// and whether its successor takes over its identity.
func (s *workerSlot) crash(successor bool) (int, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.crashed || s.retire {
		return s.process, s.successor
	}
	s.successor = successor
	if s.cancel != nil {
		s.crashed = true
		s.cancel(errCrashed)
	} else {
		s.retire = true
	}
	return s.process, successor
}

// runWorkers runs concurrency workers, each with a client from newClient,
// until ctx ends or the generator has nothing more. The operation a worker
// has in flight when ctx ends still completes and is recorded; only rootCtx
// ending (Ctrl-C) cuts it short. A worker whose operation ends info retires
// its process and takes a fresh number (Jepsen's rule), with a new client.
// With crashEvery positive, a seeded choice of worker has its client
// crashed every crashEvery until ctx ends (Jepsen's crash-clients): its
// operation in flight is cut short and recorded info (a transaction the
// workload found aborted stays fail), and a new client
// with a new process number takes over; each crash is a harness event
// (checker.FCrashClient). With restart not nil, a seeded half of those new
// clients take over the crashed one's identity (restart.NewClientAs).
func (r *run) runWorkers(rootCtx, ctx context.Context, gen workloads.Generator, newClient func() (workloads.Client, error), restart workloads.Restartable, concurrency, processBase int, crashEvery time.Duration) {
	var genMu sync.Mutex
	var wg sync.WaitGroup
	interval := time.Duration(0)
	if r.t.Rate > 0 {
		interval = time.Duration(float64(concurrency) / r.t.Rate * float64(time.Second))
	}
	slots := make([]*workerSlot, concurrency)
	for w := range concurrency {
		slots[w] = &workerSlot{process: processBase + w}
	}
	for w := range concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			slot := slots[w]
			process := processBase + w
			var client workloads.Client
			defer func() {
				if client != nil {
					client.Close()
				}
			}()
			// identity is what the next client takes over from a crashed
			// one ("" for a fresh client); closed is the identity of the
			// client closed last, which a crash of the worker between its
			// clients names.
			identity, closed := "", ""
			retire := func(successor bool) {
				if restart != nil {
					closed = restart.Identity(client)
				}
				if successor {
					identity = closed
				}
				client.Close()
				client = nil
				process += concurrency
			}
			for ctx.Err() == nil {
				if idle, successor := slot.takeRetire(); idle {
					switch {
					case client != nil:
						retire(successor)
					case successor:
						identity = closed
					}
				}
				if client == nil {
					var c workloads.Client
					var err error
					if identity != "" {
						c, err = restart.NewClientAs(identity)
						if err != nil {
							err = fmt.Errorf("successor under %s: %w", identity, err)
						}
						identity = ""
					} else {
						c, err = newClient()
					}
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
				opCtx, cancelCause := context.WithCancelCause(opCtx)
				slot.begin(process, cancelCause)
				done := client.Invoke(opCtx, op)
				crashed, successor := slot.end()
				cancelCause(nil)
				cancel()
				done.Process = process
				// A crashed transaction the workload found failed can only
				// end aborted (no commit at its epoch was sent, or a
				// successor fenced it), so it stays fail, an aborted
				// transaction whose records no one may read; any other
				// crashed op is indeterminate.
				if crashed && done.Type != checker.OK && (done.F != checker.FTxn || done.Type != checker.Fail) {
					done.Type, done.Error = checker.Info, errCrashed.Error()
				}
				r.rec.Record(done)
				r.noteWrites(done)
				genMu.Lock()
				gen.Update(done)
				genMu.Unlock()
				if done.Type == checker.Info || crashed {
					retire(successor)
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
	if crashEvery > 0 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.crashClients(ctx, slots, crashEvery, restart != nil)
		}()
	}
	wg.Wait()
}

// restartable is wl as a workloads.Restartable when crashed clients of t
// may be succeeded under their identity: under --txn, where the identity is
// a transactional.id; nil otherwise.
func restartable(t Test, wl workloads.Workload) workloads.Restartable {
	if !t.Txn {
		return nil
	}
	r, _ := wl.(workloads.Restartable)
	return r
}

// crashClients crashes one worker's client, chosen with the test's seed,
// every interval until ctx ends. With restartable, a seeded half of the
// crashed clients are succeeded under their identity (a transactional.id
// comes back, as an application restarted after a crash); the others'
// successors start afresh, leaving what they had open to the broker's
// timeouts.
func (r *run) crashClients(ctx context.Context, slots []*workerSlot, every time.Duration, restartable bool) {
	rng := rand.New(rand.NewPCG(uint64(r.t.Seed), 0x6372617368))
	coin := rand.New(rand.NewPCG(uint64(r.t.Seed), 0x73756363657373))
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		w := rng.IntN(len(slots))
		process, successor := slots[w].crash(restartable && coin.IntN(2) == 0)
		raw, _ := json.Marshal(struct {
			Process   int  `json:"process"`
			Successor bool `json:"successor,omitempty"`
		}{process, successor})
		r.rec.Record(checker.Op{Process: checker.HarnessProcess, Type: checker.Info, F: checker.FCrashClient, Raw: raw})
	}
}
