package harness

import (
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/faultline/faultline/checker"
)

// Recorder is the history being written: it numbers operations, stamps
// them with the time since the test started, keeps them for the checker
// and streams them to history.jsonl as they happen (so a crashed run still
// leaves its history behind). Safe for concurrent use.
type Recorder struct {
	start time.Time

	mu      sync.Mutex
	history checker.History
	f       *os.File
	w       *checker.Writer
	err     error
	counts  map[checker.OpType]int
}

// NewRecorder starts a history written to path ("" keeps it in memory).
func NewRecorder(path string) (*Recorder, error) {
	r := &Recorder{start: time.Now(), counts: map[checker.OpType]int{}}
	if path != "" {
		f, err := os.Create(path)
		if err != nil {
			return nil, fmt.Errorf("history: %w", err)
		}
		r.f, r.w = f, checker.NewWriter(f)
	}
	return r, nil
}

// Record appends op, filling in its index and time, and returns it.
func (r *Recorder) Record(op checker.Op) checker.Op {
	r.mu.Lock()
	defer r.mu.Unlock()
	op.Index = int64(len(r.history))
	op.Time = time.Since(r.start).Nanoseconds()
	r.history = append(r.history, op)
	if op.Process != checker.NemesisProcess {
		r.counts[op.Type]++
	}
	if r.w != nil && r.err == nil {
		r.err = r.w.Write(op)
	}
	return op
}

// Counts returns how many client operations were recorded per type.
func (r *Recorder) Counts() map[checker.OpType]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[checker.OpType]int, len(r.counts))
	for k, v := range r.counts {
		out[k] = v
	}
	return out
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
func (r *Recorder) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.w == nil {
		return r.err
	}
	if err := r.w.Flush(); err != nil && r.err == nil {
		r.err = err
	}
	if err := r.f.Close(); err != nil && r.err == nil {
		r.err = err
	}
	r.w = nil
	return r.err
}
