package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/faultline/faultline/checker"
	"github.com/faultline/faultline/harness/testspec"
	"github.com/faultline/faultline/workloads"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestOldestInFlightPicksTheLongestRunningOperation(t *testing.T) {
	t0 := time.Unix(1000, 0)
	assert.Equal(t, -1, oldestInFlight(nil))
	assert.Equal(t, -1, oldestInFlight([]time.Time{{}, {}}), "none in flight")
	assert.Equal(t, 2, oldestInFlight([]time.Time{t0.Add(time.Second), {}, t0, t0.Add(time.Millisecond)}))
	assert.Equal(t, 0, oldestInFlight([]time.Time{t0, t0}), "ties go to the lowest index")
}

// quickClient completes every operation at once.
type quickClient struct{ closed *atomic.Int32 }

func (q quickClient) Invoke(_ context.Context, op checker.Op) checker.Op {
	time.Sleep(time.Millisecond)
	op.Type = checker.OK
	return op
}
func (q quickClient) Close() { q.closed.Add(1) }

// TestCrashClientsStalledCrashesTheClientHeldUp: with the stalled target,
// of two workers, one whose operations hang and one whose operations
// complete at once, every crash hits the hanging one and says how long
// its operation had been in flight; the quick worker keeps its process.
func TestCrashClientsStalledCrashesTheClientHeldUp(t *testing.T) {
	stuckClosed.Store(0)
	// The worker whose first client was made first hangs, as does each
	// client made after a crash (the crashed worker's); the other worker's
	// first client is quick and never replaced.
	h, made, _ := crashRunOf(t, &onlySends{}, 700*time.Millisecond, testspec.CrashStalled, func(made int, closed *atomic.Int32) workloads.Client {
		if made == 2 {
			return quickClient{closed: closed}
		}
		return &stuckClient{}
	})
	quick := map[int]int{}
	crashed := map[int]bool{}
	crashes := 0
	for _, op := range h {
		if op.Process == checker.HarnessProcess && op.F == checker.FCrashClient {
			crashes++
			var v struct {
				Process  int    `json:"process"`
				InFlight string `json:"in_flight"`
			}
			require.NoError(t, json.Unmarshal(op.Raw, &v))
			crashed[v.Process] = true
			d, err := time.ParseDuration(v.InFlight)
			require.NoError(t, err, "the crash says how long the operation was in flight")
			assert.Greater(t, d, time.Duration(0))
			continue
		}
		if op.Type == checker.OK {
			quick[op.Process]++
		}
	}
	require.GreaterOrEqual(t, crashes, 3, "one crash every 100 ms")
	require.Len(t, quick, 1, "one worker completes its operations")
	for p := range quick {
		assert.False(t, crashed[p], "the quick worker (process %d) is never the one crashed", p)
	}
	// Each stuck operation ignores its cancelled context for 2 s; the
	// crash abandons it, so a successor client starts at once, each crash
	// after the first hits the successor, and every abandoned client is
	// closed once its operation ends, before runWorkers returns.
	assert.GreaterOrEqual(t, made, crashes+1, "a new client after each crash, without waiting out the stuck one")
	assert.Equal(t, int32(made-1), stuckClosed.Load(), "every stuck client closed")
}

var stuckClosed atomic.Int32

// stuckClient's operations take 2 s whatever their context says, as a
// client blocked in a call that ignores cancellation.
type stuckClient struct{}

func (s *stuckClient) Invoke(_ context.Context, op checker.Op) checker.Op {
	time.Sleep(2 * time.Second)
	op.Type = checker.Fail
	return op
}
func (s *stuckClient) Close() { stuckClosed.Add(1) }

// foreverClient's operations return only once the client is closed, as a
// client library call retrying CONCURRENT_TRANSACTIONS with no context.
type foreverClient struct{ closed chan struct{} }

func (f *foreverClient) Invoke(_ context.Context, op checker.Op) checker.Op {
	<-f.closed
	op.Type = checker.Fail
	return op
}
func (f *foreverClient) Close() { close(f.closed) }

// TestInvokeAbandonsACallThatOutlivesItsContext: a call that ignores its
// context is abandoned stuckGrace after the context ends, recorded info
// (stuck), and its client closed stuckGrace later, which ends the call:
// no broker answer can hold a run forever.
func TestInvokeAbandonsACallThatOutlivesItsContext(t *testing.T) {
	defer func(g time.Duration) { stuckGrace = g }(stuckGrace)
	stuckGrace = 50 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	cl := &foreverClient{closed: make(chan struct{})}
	var zombies sync.WaitGroup
	start := time.Now()
	type outcome struct {
		done      checker.Op
		abandoned bool
	}
	returned := make(chan outcome, 1)
	go func() {
		done, abandoned, _ := invoke(ctx, cl, checker.Op{Type: checker.Invoke, F: "send"}, nil, &zombies)
		returned <- outcome{done, abandoned}
	}()
	var o outcome
	select {
	case o = <-returned:
	case <-time.After(5 * time.Second):
		t.Fatal("invoke waited for a call that never returns")
	}
	done, abandoned := o.done, o.abandoned
	assert.True(t, abandoned)
	assert.Equal(t, checker.Info, done.Type)
	assert.Equal(t, errStuck.Error(), done.Error)
	assert.GreaterOrEqual(t, time.Since(start), 70*time.Millisecond, "the context's 20 ms and the grace")
	zombies.Wait()
	select {
	case <-cl.closed:
	default:
		t.Fatal("the stuck client was not closed")
	}
}

// zombieWorld is a fake restartable workload whose clients pause: an
// operation takes 150 ms and does not end while its client is paused.
// events logs pauses, resumes and operation ends by client name.
type zombieWorld struct {
	mu     sync.Mutex
	events []string
	made   int
	closed atomic.Int32
}

func (w *zombieWorld) log(e string) {
	w.mu.Lock()
	w.events = append(w.events, e)
	w.mu.Unlock()
}

func (w *zombieWorld) client(id string) *pausingClient {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.made++
	return &pausingClient{w: w, id: id, name: fmt.Sprintf("%s#%d", id, w.made)}
}

func (w *zombieWorld) Identity(c workloads.Client) string { return c.(*pausingClient).id }
func (w *zombieWorld) NewClientAs(id string) (workloads.Client, error) {
	return w.client(id), nil
}

type pausingClient struct {
	w        *zombieWorld
	id, name string
	paused   atomic.Bool
}

func (c *pausingClient) Invoke(_ context.Context, op checker.Op) checker.Op {
	// Assigns are slow (a group's offsets read under faults), so that
	// crashes pause successors in their first operation too, and a
	// worker holds several zombies at once.
	if op.F == checker.FAssign {
		time.Sleep(400 * time.Millisecond)
	}
	time.Sleep(150 * time.Millisecond)
	for c.paused.Load() {
		time.Sleep(time.Millisecond)
	}
	c.w.log("end " + c.name)
	if op.F == checker.FTxn {
		c.w.log("txn " + c.name)
	}
	op.Type = checker.OK
	return op
}
func (c *pausingClient) Close()  { c.w.closed.Add(1) }
func (c *pausingClient) Pause()  { c.paused.Store(true); c.w.log("pause " + c.name) }
func (c *pausingClient) Resume() { c.paused.Store(false); c.w.log("resume " + c.name) }

// assignThenTxns gives each new process an assign first, then
// transactions, as the queue workload's generator does.
type assignThenTxns struct {
	mu   sync.Mutex
	seen map[int]bool
	n    int64
}

func (g *assignThenTxns) Next(process int) (checker.Op, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.seen[process] {
		g.seen[process] = true
		return checker.Op{Type: checker.Invoke, F: checker.FAssign, Keys: []int{0}}, true
	}
	g.n++
	return checker.Op{Type: checker.Invoke, F: checker.FTxn, Mops: []checker.MicroOp{{F: "send", Key: 0, Value: g.n}}}, true
}
func (g *assignThenTxns) Update(checker.Op) {}

// TestCrashClientsZombiePausesAndResumesAfterTheSuccessor: with the zombie
// target a crash pauses a client mid-operation instead of closing it; the
// operation is recorded info (zombie), a successor takes over the
// client's identity, and the zombie resumes only once that successor's
// first transaction ended (not its first operation, an assign), then
// finishes its own and is closed; a worker whose successors are paused
// in turn holds several zombies, and resumes every one.
func TestCrashClientsZombiePausesAndResumesAfterTheSuccessor(t *testing.T) {
	r, rec := newCrashRun(t)
	r.t.CrashClientsTarget = testspec.CrashZombie
	w := &zombieWorld{}
	n := 0
	var mu sync.Mutex
	newClient := func() (workloads.Client, error) {
		mu.Lock()
		defer mu.Unlock()
		n++
		return w.client(fmt.Sprintf("tx%d", n)), nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	r.runWorkers(context.Background(), ctx, &assignThenTxns{seen: map[int]bool{}}, newClient, w, 2, 0, 300*time.Millisecond)

	h := rec.History()
	zombieAt := map[int]int{} // zombie process -> index of its crash event
	for i, op := range h {
		if op.Process == checker.HarnessProcess && op.F == checker.FCrashClient {
			var v struct {
				Process   int  `json:"process"`
				Successor bool `json:"successor"`
				Zombie    bool `json:"zombie"`
			}
			require.NoError(t, json.Unmarshal(op.Raw, &v))
			if v.Zombie {
				zombieAt[v.Process] = i
				assert.True(t, v.Successor, "a zombie's successor takes over its identity")
			}
		}
	}
	require.GreaterOrEqual(t, len(zombieAt), 2, "a crash every 300 ms, each with an operation in flight")
	for p, at := range zombieAt {
		var last checker.Op
		for _, op := range h[at:] {
			if op.Process == p && op.Type != checker.Invoke {
				last = op
			}
		}
		assert.Equal(t, checker.OK, last.Type, "zombie %d's operation is recorded with its own outcome once it ends, after the crash", p)
	}

	w.mu.Lock()
	events := append([]string(nil), w.events...)
	made := w.made
	w.mu.Unlock()
	at := func(e string, from int) int {
		for i := from; i < len(events); i++ {
			if events[i] == e {
				return i
			}
		}
		return -1
	}
	for i, e := range events {
		name, ok := strings.CutPrefix(e, "pause ")
		if !ok {
			continue
		}
		resumed := at("resume "+name, i)
		require.Greater(t, resumed, i, "%s is resumed", name)
		id, n, _ := strings.Cut(name, "#")
		// successorTxn: a transaction of a client made after this one
		// under its identity ended.
		successorTxn := func(x string) bool {
			other, ok := strings.CutPrefix(x, "txn ")
			oid, on, _ := strings.Cut(other, "#")
			a, _ := strconv.Atoi(n)
			b, _ := strconv.Atoi(on)
			return ok && oid == id && b > a
		}
		successorEnded := slices.ContainsFunc(events[i:resumed], successorTxn)
		// A zombie paused as the run ends is resumed by its worker's
		// end, with no successor transaction after it.
		if slices.ContainsFunc(events[resumed:], successorTxn) || successorEnded {
			assert.True(t, successorEnded, "%s resumes only after a successor under %s ended a transaction: %v", name, id, events)
		}
		assert.Greater(t, at("end "+name, resumed), resumed, "%s finishes its operation once resumed", name)
	}
	assert.Equal(t, int32(made), w.closed.Load(), "every client closed, the zombies too")
}
