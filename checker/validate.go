package checker

import (
	"fmt"
	"strings"
)

// violationsShown bounds how many discipline violations an error spells out.
const violationsShown = 10

// pairing links each invoke to its completion and back.
type pairing struct {
	// partner[i] is the position of the completion of the invoke at i, or of
	// the invoke of the completion at i; -1 for an invoke that never
	// completed (treated as info) or an unmatched completion.
	partner    []int32
	violations []string
	count      int
}

// invoke is the position of the invoke of the completion at pos, or pos
// itself when it has none.
func (p *pairing) invoke(pos int) int32 {
	if inv := p.partner[pos]; inv >= 0 {
		return inv
	}
	return int32(pos)
}

// seeksToBeginning tells whether the assign at pos, or its invoke, asked
// to read from the beginning (the final reads).
func (p *pairing) seeksToBeginning(h History, pos int) bool {
	return h[pos].SeekToBeginning || p.partner[pos] >= 0 && h[p.partner[pos]].SeekToBeginning
}

func (p *pairing) violate(format string, args ...any) {
	p.count++
	if len(p.violations) < violationsShown {
		p.violations = append(p.violations, fmt.Sprintf(format, args...))
	}
}

// pair matches invokes with completions under Jepsen's discipline: a client
// process has at most one operation outstanding, its completion comes from
// the same process with the same f, and a process whose operation ended info
// never invokes again. Nemesis operations are paired by f (the nemesis may
// have several faults in flight) and are not held to the discipline.
// Invokes still pending at the end are allowed; the checker treats them as
// info, as Jepsen does for a run that was cut short.
func pair(h History) *pairing {
	p := &pairing{partner: make([]int32, len(h))}
	pending := make(map[int]int32)      // client process -> invoke position
	retired := make(map[int]int64)      // client process -> index of its info completion
	nemesis := make(map[string][]int32) // nemesis f -> pending invoke positions
	for i := range p.partner {
		p.partner[i] = -1
	}
	for i, op := range h {
		if i > 0 && op.Index <= h[i-1].Index {
			p.violate("op %d follows op %d: indexes must increase", op.Index, h[i-1].Index)
		}
		if op.Process == HarnessProcess {
			continue
		}
		if op.Process == NemesisProcess {
			if op.Type == Invoke {
				nemesis[op.F] = append(nemesis[op.F], int32(i))
				continue
			}
			if q := nemesis[op.F]; len(q) > 0 {
				p.partner[i], p.partner[q[0]] = q[0], int32(i)
				nemesis[op.F] = q[1:]
			}
			continue
		}
		if op.Process < 0 {
			p.violate("op %d: process %d is not a client process", op.Index, op.Process)
			continue
		}
		if op.Type == Invoke {
			if at, ok := retired[op.Process]; ok {
				p.violate("op %d: process %d invokes again after its op %d ended info", op.Index, op.Process, at)
			}
			if j, ok := pending[op.Process]; ok {
				p.violate("op %d: process %d invokes while its op %d is still pending", op.Index, op.Process, h[j].Index)
			}
			pending[op.Process] = int32(i)
			continue
		}
		j, ok := pending[op.Process]
		if !ok {
			p.violate("op %d: %s completion from process %d, which has no pending invoke", op.Index, op.Type, op.Process)
			continue
		}
		delete(pending, op.Process)
		inv := h[j]
		if inv.F != op.F {
			p.violate("op %d: completion f %q differs from its invoke op %d f %q", op.Index, op.F, inv.Index, inv.F)
		}
		if op.Time < inv.Time {
			p.violate("op %d: completes at %d ns, before its invoke op %d at %d ns", op.Index, op.Time, inv.Index, inv.Time)
		}
		p.partner[i], p.partner[j] = j, int32(i)
		if op.Type == Info {
			retired[op.Process] = op.Index
		}
	}
	return p
}

// Validate checks the history against Jepsen's invoke/complete discipline
// (see pair) and returns an error listing the first violations.
func (h History) Validate() error {
	p := pair(h)
	return p.err()
}

// warnings lists the discipline violations one per entry, the last one
// counting those not spelled out; nil when there are none.
func (p *pairing) warnings() []string {
	if p.count == 0 {
		return nil
	}
	out := append([]string(nil), p.violations...)
	if p.count > len(p.violations) {
		out = append(out, fmt.Sprintf("and %d more violations of the invoke/complete discipline", p.count-len(p.violations)))
	}
	return out
}

func (p *pairing) err() error {
	if p.count == 0 {
		return nil
	}
	more := ""
	if p.count > len(p.violations) {
		more = fmt.Sprintf("; and %d more", p.count-len(p.violations))
	}
	return fmt.Errorf("history breaks the invoke/complete discipline (%d violations): %s%s",
		p.count, strings.Join(p.violations, "; "), more)
}
