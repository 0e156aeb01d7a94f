package harness

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/faultline/faultline/checker"
)

// noteFault keeps the faults in force for the progress line.
func (r *run) noteFault(op checker.Op) {
	if op.Type == checker.Invoke {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if name, ok := strings.CutPrefix(op.F, "start-"); ok {
		r.faults = append(r.faults, name+" "+string(op.Raw))
		return
	}
	if name, ok := strings.CutPrefix(op.F, "stop-"); ok {
		for i, f := range r.faults {
			if strings.HasPrefix(f, name+" ") {
				r.faults = append(r.faults[:i], r.faults[i+1:]...)
				break
			}
		}
	}
}

// progress prints a status line every 2 s until stopped.
func (r *run) progress(ctx context.Context) func() {
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		tick := time.NewTicker(2 * time.Second)
		defer tick.Stop()
		last, lastAt := 0, time.Now()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case now := <-tick.C:
				c := r.rec.Counts()
				total := c[checker.OK] + c[checker.Fail] + c[checker.Info]
				rate := float64(total-last) / now.Sub(lastAt).Seconds()
				last, lastAt = total, now
				r.mu.Lock()
				faults := strings.Join(r.faults, "; ")
				r.mu.Unlock()
				if faults == "" {
					faults = "none"
				}
				fmt.Fprintf(r.out, "[%6.1fs] %s %.0fs/%s %.0f ops/s ok=%d fail=%d info=%d faults: %s\n",
					r.elapsed().Seconds(), r.phase, time.Since(r.workStart).Seconds(), time.Duration(r.t.TimeLimit), rate,
					c[checker.OK], c[checker.Fail], c[checker.Info], faults)
			}
		}
	}()
	return func() { close(done); <-stopped }
}
