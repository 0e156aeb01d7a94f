package harness

import (
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/faultline/faultline/checker"
)

// recorderFlushInterval is how often buffered history lines reach
// history.jsonl, bounding what a crash of the harness can lose.
const recorderFlushInterval = 250 * time.Millisecond

// Recorder is the history being written: it numbers operations, stamps
// them with the time since the test started, keeps them for the checker
// and streams them to history.jsonl as they happen (flushed every
// recorderFlushInterval, so a crashed run still leaves its history
// behind). Safe for concurrent use.
type Recorder struct {
	start time.Time

	mu      sync.Mutex
	history checker.History
	f       *os.File
	w       *checker.Writer
	err     error
	dirty   bool

	// Client completions by type, read by the progress line without the
	// lock.
	oks, fails, infos atomic.Int64

	stopFlush chan struct{}
	flushDone chan struct{}
}

// NewRecorder starts a history written to path ("" keeps it in memory).
func NewRecorder(path string) (*Recorder, error) {
	r := &Recorder{start: time.Now()}
	if path != "" {
		f, err := os.Create(path)
		if err != nil {
			return nil, fmt.Errorf("history: %w", err)
		}
		r.f, r.w = f, checker.NewWriter(f)
		r.stopFlush, r.flushDone = make(chan struct{}), make(chan struct{})
		go r.flushLoop()
	}
	return r, nil
}

func (r *Recorder) flushLoop() {
	defer close(r.flushDone)
	tick := time.NewTicker(recorderFlushInterval)
	defer tick.Stop()
	for {
		select {
		case <-r.stopFlush:
			return
		case <-tick.C:
			r.mu.Lock()
			if r.w != nil && r.dirty && r.err == nil {
				r.err = r.w.Flush()
				r.dirty = false
			}
			r.mu.Unlock()
		}
	}
}

// Record appends op, filling in its index and time, and returns it.
func (r *Recorder) Record(op checker.Op) checker.Op {
	if op.IsClient() {
		switch op.Type {
		case checker.OK:
			r.oks.Add(1)
		case checker.Fail:
			r.fails.Add(1)
		case checker.Info:
			r.infos.Add(1)
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	op.Index = int64(len(r.history))
	op.Time = time.Since(r.start).Nanoseconds()
	r.history = append(r.history, op)
	if r.w != nil && r.err == nil {
		r.err = r.w.Write(op)
		r.dirty = true
	}
	return op
}

// Counts returns how many client operations completed per type (invokes
// are not counted).
func (r *Recorder) Counts() map[checker.OpType]int {
	return map[checker.OpType]int{
		checker.OK:   int(r.oks.Load()),
		checker.Fail: int(r.fails.Load()),
		checker.Info: int(r.infos.Load()),
	}
}

// History returns a copy of the operations recorded so far.
func (r *Recorder) History() checker.History {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append(checker.History(nil), r.history...)
}

// Elapsed is the time since the test started.
func (r *Recorder) Elapsed() time.Duration { return time.Since(r.start) }

// Close flushes and closes history.jsonl, returning the first write error.
// Operations recorded afterwards are kept in memory only.
func (r *Recorder) Close() error {
	r.mu.Lock()
	if r.w == nil {
		r.mu.Unlock()
		return r.err
	}
	if err := r.w.Flush(); err != nil && r.err == nil {
		r.err = err
	}
	if err := r.f.Close(); err != nil && r.err == nil {
		r.err = err
	}
	r.w = nil
	r.mu.Unlock()
	close(r.stopFlush)
	<-r.flushDone
	return r.err
}
