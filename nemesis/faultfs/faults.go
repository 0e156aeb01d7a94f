package faultfs

import (
	"fmt"
	"math/rand"
	"path"
	"strings"
	"syscall"
	"time"
)

// Faults is the set of faults in force, as data: Decide answers, for one
// operation at one instant, how long to delay it and which error to fail
// it with. It does no I/O and reads no clock.
type Faults struct {
	eio     []eioRule
	slow    []slowRule
	noSpace *int64 // bytes writes may still grow the files by; nil: no quota
}

type eioRule struct {
	EIOFault
	until time.Time // zero: until healed
}

type slowRule struct {
	SlowFault
	until time.Time
	rng   *rand.Rand
}

// AddEIO starts an EIO fault at now.
func (f *Faults) AddEIO(e EIOFault, now time.Time) {
	f.eio = append(f.eio, eioRule{EIOFault: e, until: deadline(now, e.For)})
}

// AddSlow starts a latency fault at now.
func (f *Faults) AddSlow(s SlowFault, now time.Time) {
	f.slow = append(f.slow, slowRule{SlowFault: s, until: deadline(now, s.For), rng: rand.New(rand.NewSource(s.Seed))})
}

// SetNoSpace starts (or replaces) the ENOSPC quota.
func (f *Faults) SetNoSpace(n NoSpaceFault) {
	left := n.Bytes
	f.noSpace = &left
}

// Heal ends every fault.
func (f *Faults) Heal() { *f = Faults{} }

func deadline(now time.Time, d time.Duration) time.Time {
	if d == 0 {
		return time.Time{}
	}
	return now.Add(d)
}

func live(until, now time.Time) bool { return until.IsZero() || now.Before(until) }

// Decision is what to do with one operation.
type Decision struct {
	Delay time.Duration
	Errno syscall.Errno // 0: go ahead
}

// Decide is the fate of op on the file at rel (relative to the root) at
// now; grow is how many bytes a write adds past the file's end. A write
// that goes ahead uses up grow bytes of the ENOSPC quota.
func (f *Faults) Decide(now time.Time, op Ops, rel string, grow int64) Decision {
	var d Decision
	f.slow = keepLive(f.slow, now, func(r slowRule) time.Time { return r.until })
	for _, r := range f.slow {
		if r.Ops&op != 0 && matches(r.Path, rel) {
			d.Delay += r.Delay
			if r.Jitter > 0 {
				d.Delay += time.Duration(r.rng.Int63n(int64(r.Jitter)))
			}
		}
	}
	f.eio = keepLive(f.eio, now, func(r eioRule) time.Time { return r.until })
	for _, r := range f.eio {
		if r.Ops&op != 0 && matches(r.Path, rel) {
			d.Errno = syscall.EIO
			return d
		}
	}
	if op == OpWrite && f.noSpace != nil && grow > 0 {
		if grow > *f.noSpace {
			d.Errno = syscall.ENOSPC
			return d
		}
		*f.noSpace -= grow
	}
	return d
}

func keepLive[T any](rules []T, now time.Time, until func(T) time.Time) []T {
	out := rules[:0]
	for _, r := range rules {
		if live(until(r), now) {
			out = append(out, r)
		}
	}
	return out
}

// matches applies a fault's glob to a path relative to the root: a glob
// without a slash matches the base name, at any depth.
func matches(glob, rel string) bool {
	if glob == "" {
		return true
	}
	if !strings.Contains(glob, "/") {
		rel = path.Base(rel)
	}
	ok, _ := path.Match(glob, rel)
	return ok
}

// String lists the faults in force at now, one per line.
func (f *Faults) String(now time.Time) string {
	var lines []string
	for _, r := range f.eio {
		if live(r.until, now) {
			lines = append(lines, Command{Verb: "eio", EIO: r.EIOFault}.String()+remaining(r.until, now))
		}
	}
	for _, r := range f.slow {
		if live(r.until, now) {
			lines = append(lines, Command{Verb: "slow", Slow: r.SlowFault}.String()+remaining(r.until, now))
		}
	}
	if f.noSpace != nil {
		lines = append(lines, fmt.Sprintf("enospc: %d bytes left", *f.noSpace))
	}
	if len(lines) == 0 {
		return "no faults"
	}
	return strings.Join(lines, "\n")
}

func remaining(until, now time.Time) string {
	if until.IsZero() {
		return " (until healed)"
	}
	return fmt.Sprintf(" (%s left)", until.Sub(now).Round(time.Millisecond))
}
