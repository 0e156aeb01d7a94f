package workloads

import (
	"slices"
	"sync"
)

// TxnIDsMax bounds a TxnIDs set: ids past it are not kept.
const TxnIDsMax = 1024

// TxnIDs is the set of transactional.ids a workload's clients began a
// transaction under: what the harness probes after the final reads (a
// workload's UsedTransactionalIDs). It keeps the first TxnIDsMax and
// counts the others. Safe for concurrent use; the zero value is empty.
type TxnIDs struct {
	mu      sync.Mutex
	ids     map[string]bool
	dropped map[string]bool
}

// Add notes that a transaction began under id; on a nil set it does
// nothing.
func (s *TxnIDs) Add(id string) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ids == nil {
		s.ids = map[string]bool{}
	}
	switch {
	case s.ids[id]:
	case len(s.ids) < TxnIDsMax:
		s.ids[id] = true
	default:
		if s.dropped == nil {
			s.dropped = map[string]bool{}
		}
		s.dropped[id] = true
	}
}

// Dropped returns how many ids were not kept, past TxnIDsMax.
func (s *TxnIDs) Dropped() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.dropped)
}

// List returns the ids, sorted.
func (s *TxnIDs) List() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.ids))
	for id := range s.ids {
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}
