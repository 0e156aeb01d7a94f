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
	"github.com/faultline/faultline/harness/testspec"
	"github.com/faultline/faultline/workloads"
)

// errCrashed is the error of an operation whose client crash-clients
// closed in the middle of it.
var errCrashed = errors.New("crashed: the client was closed in the middle of the operation (crash-clients)")

// errZombie is the error of an operation whose client crash-clients paused
// (the zombie target) when its call did not end within stuckGrace of the
// pause: it is abandoned, not cancelled, and resumes once a successor's
// transaction took over the client's transactional.id.
var errZombie = errors.New("zombie: the client was paused in the middle of the operation and resumed after a successor took over its transactional.id (crash-clients, zombie target)")

// errStuck is the error of an operation whose call did not return within
// stuckGrace of its context's end: a client library call that ignores its
// context (franz-go's BeginTransaction retries CONCURRENT_TRANSACTIONS for
// as long as a broker answers it) is abandoned, its client closed, so that
// no broker can hold a run forever.
var errStuck = errors.New("stuck: the call did not return within its timeout and a grace period; the client was closed")

// stuckGrace is how long an operation's call may outlive its context
// before invoke abandons it, and how long an abandoned call is waited for
// before its client is closed under it. Workloads bound their own calls
// past the context by less (the queue workload's send waits at most
// 20 s from its start, the compact workload's end of a transaction 20 s).
var stuckGrace = 30 * time.Second

// zombieWait bounds runWorkers' wait for the abandoned operations' clients
// to be closed (each when its call ends, or stuckGrace after it was
// abandoned).
var zombieWait = stuckGrace + 30*time.Second

// workerSlot lets crash-clients reach a worker: the cancel of the
// operation in flight, or a note to retire the idle client.
type workerSlot struct {
	mu        sync.Mutex
	process   int
	cancel    context.CancelCauseFunc
	crashed   bool      // the operation in flight was crashed
	retire    bool      // the idle client was crashed
	successor bool      // with crashed or retire: the next client takes over the crashed one's identity
	since     time.Time // when the operation in flight began (zero: none is)
	// abandon is closed when a crash abandons the operation in flight
	// (the stalled target): the worker stops waiting for it.
	abandon chan struct{}
	// client is the worker's client; zombie, with crashed, is that
	// client paused by a crash with the zombie target, for the worker to
	// resume once a successor's transaction ended.
	client workloads.Client
	zombie workloads.Pausable
}

// setClient notes the worker's client, for a crash with the zombie
// target to pause.
func (s *workerSlot) setClient(c workloads.Client) {
	s.mu.Lock()
	s.client = c
	s.mu.Unlock()
}

// pause makes the worker's client a zombie (the zombie target): its
// operation in flight is abandoned without being cancelled, the client
// paused (workloads.Pausable), and its successor takes over its identity;
// the worker resumes it once a successor's transaction ended.
// false, with nothing done, when no operation is in flight, a crash is
// pending, or the client cannot pause.
func (s *workerSlot) pause() (int, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.client.(workloads.Pausable)
	if !ok || s.crashed || s.retire || s.cancel == nil {
		return s.process, false
	}
	p.Pause()
	s.crashed, s.successor, s.zombie = true, true, p
	close(s.abandon)
	return s.process, true
}

// takeZombie returns the client a zombie crash paused, if any, and forgets
// it.
func (s *workerSlot) takeZombie() workloads.Pausable {
	s.mu.Lock()
	defer s.mu.Unlock()
	z := s.zombie
	s.zombie = nil
	return z
}

// begin notes the operation process starts; it returns the channel closed
// if a crash abandons it.
func (s *workerSlot) begin(process int, cancel context.CancelCauseFunc) <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.process, s.cancel, s.crashed, s.since = process, cancel, false, time.Now()
	s.abandon = make(chan struct{})
	return s.abandon
}

// began returns when the operation in flight began (zero when none is, or
// when it was crashed already: it is no target any more).
func (s *workerSlot) began() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.crashed {
		return time.Time{}
	}
	return s.since
}

// oldestInFlight picks the operation in flight longest of began (each
// worker's start, zero when idle): its index, or -1 when none is in flight.
// Ties go to the lowest index.
func oldestInFlight(began []time.Time) int {
	pick := -1
	for i, t := range began {
		if !t.IsZero() && (pick < 0 || t.Before(began[pick])) {
			pick = i
		}
	}
	return pick
}

// end reports whether the operation that just ended was crashed and, if
// so, whether its client's successor takes over its identity.
func (s *workerSlot) end() (crashed, successor bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cancel, s.since = nil, time.Time{}
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
func (s *workerSlot) crash(successor, abandon bool) (int, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.crashed || s.retire {
		return s.process, s.successor
	}
	s.successor = successor
	if s.cancel != nil {
		s.crashed = true
		s.cancel(errCrashed)
		if abandon {
			close(s.abandon)
		}
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
// clients take over the crashed one's identity (restart.NewClientAs). With
// Test.CrashClientsTarget stalled, the worker crashed is the one whose
// operation has been in flight longest (the event says how long), a
// seeded choice only when none is in flight, and the crash abandons the
// operation at once (invoke): the worker records it info and goes on with
// a new client while the old one finishes its call in the background.
func (r *run) runWorkers(rootCtx, ctx context.Context, gen workloads.Generator, newClient func() (workloads.Client, error), restart workloads.Restartable, concurrency, processBase int, crashEvery time.Duration) {
	var genMu sync.Mutex
	// complete records an operation's completion and tells the
	// generator, from the worker or, for a zombie's operation, when its
	// call ends.
	complete := func(done checker.Op) {
		r.rec.Record(done)
		r.noteWrites(done)
		genMu.Lock()
		gen.Update(done)
		genMu.Unlock()
	}
	var wg sync.WaitGroup
	// zombies are the abandoned operations whose clients are not closed
	// yet: each is closed when its call ends or stuckGrace after it was
	// abandoned, and runWorkers waits for that, at most zombieWait.
	var zombies sync.WaitGroup
	defer func() {
		ended := make(chan struct{})
		go func() { zombies.Wait(); close(ended) }()
		select {
		case <-ended:
		case <-time.After(zombieWait):
			fmt.Fprintf(r.out, "abandoned operations' clients not closed within %s; going on without them\n", zombieWait)
		}
	}()
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
			// paused are this worker's zombies, to resume once a
			// successor's transaction has ended (or the worker stops).
			// Each successor takes over the same transactional.id, so
			// the first transaction one completes fences them all.
			var paused []workloads.Pausable
			resumeAll := func() {
				for _, z := range paused {
					z.Resume()
				}
				paused = nil
			}
			defer func() {
				resumeAll()
				if client != nil {
					client.Close()
				}
			}()
			// identity is what the next client takes over from a crashed
			// one ("" for a fresh client); closed is the identity of the
			// client closed last, which a crash of the worker between its
			// clients names.
			identity, closed := "", ""
			// retire closes the client (unless its abandoned operation's
			// goroutine will) and moves to a new process.
			retire := func(successor, abandoned bool) {
				if restart != nil {
					closed = restart.Identity(client)
				}
				if successor {
					identity = closed
				}
				if !abandoned {
					client.Close()
				}
				client = nil
				process += concurrency
			}
			for ctx.Err() == nil {
				if idle, successor := slot.takeRetire(); idle {
					switch {
					case client != nil:
						retire(successor, false)
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
					slot.setClient(c)
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
				abandon := slot.begin(process, cancelCause)
				done, abandoned, late := invoke(opCtx, client, op, abandon, &zombies)
				crashed, successor := slot.end()
				if len(paused) > 0 && done.F == checker.FTxn && !abandoned && !crashed {
					// A successor's transaction has ended as its own call
					// returned: its InitProducerId (at the transaction's
					// start) holds the identity now, and the zombies come
					// back. (A new process's first operation is an
					// assign, which leaves the producer alone; a
					// transaction crashed or abandoned may have ended
					// before its InitProducerId.)
					resumeAll()
				}
				zombie := slot.takeZombie()
				if zombie != nil && !abandoned {
					// The operation ended before the pause took hold: no
					// zombie, the client retires as crashed.
					zombie.Resume()
					zombie = nil
				}
				if zombie != nil {
					// A paused client's operation is not cut short: its
					// outcome is what its requests make of it once it
					// resumes (a commit its successor fenced fails), and
					// it is recorded when its call ends, under its own
					// process, while the worker goes on as a successor.
					paused = append(paused, zombie)
					zombies.Add(1)
					go func(process int) {
						defer zombies.Done()
						late, ok := <-late
						cancelCause(nil)
						cancel()
						if !ok {
							late = op
							late.Type, late.Error = checker.Info, errZombie.Error()
						}
						late.Process = process
						complete(late)
					}(process)
					retire(successor, abandoned)
					continue
				}
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
				complete(done)
				if done.Type == checker.Info || crashed {
					retire(successor, abandoned)
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

// invoke runs op on client until it completes, abandon is closed (a crash
// with the stalled or zombie target) or the call outlives ctx by
// stuckGrace. An abandoned operation is returned as invoked, info: it goes
// on in the background, as a crashed process's last requests may still
// reach the brokers, and the client is closed when it ends, or after
// stuckGrace if it does not (zombies tracks it). late then yields the
// call's own result if it ends before that close, and is closed either
// way.
func invoke(ctx context.Context, client workloads.Client, op checker.Op, abandon <-chan struct{}, zombies *sync.WaitGroup) (done checker.Op, abandoned bool, late <-chan checker.Op) {
	result := make(chan checker.Op, 1)
	go func(op checker.Op) { result <- client.Invoke(ctx, op) }(op)
	why := errCrashed
	ctxDone := ctx.Done()
	var stuck <-chan time.Time
wait:
	for {
		select {
		case done := <-result:
			return done, false, nil
		case <-abandon:
			break wait
		case <-ctxDone:
			ctxDone, stuck = nil, time.After(stuckGrace)
		case <-stuck:
			why = errStuck
			break wait
		}
	}
	out := make(chan checker.Op, 1)
	zombies.Add(1)
	go func() {
		defer zombies.Done()
		defer close(out)
		select {
		case r := <-result:
			out <- r
		case <-time.After(stuckGrace):
		}
		client.Close()
	}()
	op.Type, op.Error = checker.Info, why.Error()
	return op, true, out
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
		// The seeded draws are made every time, whichever target, so
		// that a run's coin flips do not depend on its timing.
		w := rng.IntN(len(slots))
		flip := coin.IntN(2) == 0
		var inFlight string
		target := r.t.CrashClientsTarget
		if target == testspec.CrashStalled || target == testspec.CrashZombie && slots[w].began().IsZero() {
			began := make([]time.Time, len(slots))
			for i, s := range slots {
				began[i] = s.began()
			}
			if o := oldestInFlight(began); o >= 0 {
				w, inFlight = o, time.Since(began[o]).Round(time.Millisecond).String()
			}
		}
		var process int
		successor, zombie := false, false
		if target == testspec.CrashZombie && restartable {
			process, zombie = slots[w].pause()
			successor = zombie
		}
		if !zombie {
			// Under the zombie target every crash has a successor under
			// the crashed client's identity: a zombie of the worker's
			// still paused waits for one to fence it.
			process, successor = slots[w].crash(restartable && (flip || target == testspec.CrashZombie), target == testspec.CrashStalled)
		}
		raw, _ := json.Marshal(struct {
			Process   int    `json:"process"`
			Successor bool   `json:"successor,omitempty"`
			InFlight  string `json:"in_flight,omitempty"`
			Zombie    bool   `json:"zombie,omitempty"`
		}{process, successor, inFlight, zombie})
		r.rec.Record(checker.Op{Process: checker.HarnessProcess, Type: checker.Info, F: checker.FCrashClient, Raw: raw})
	}
}
