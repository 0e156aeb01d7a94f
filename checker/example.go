package checker

// Example is one instance of an anomaly, as the checker reports it in
// AnomalyReport.Examples. Fields that do not apply to an anomaly are left
// out of the JSON; Text always says in one sentence what happened. Op
// references (Writer, Reader, Ops) are op indexes of completions in the
// history, so the report can show those lines.
type Example struct {
	Key     int     `json:"key"`
	Value   *int64  `json:"value,omitempty"`
	Values  []int64 `json:"values,omitempty"`
	Offset  *int64  `json:"offset,omitempty"`
	Offsets []int64 `json:"offsets,omitempty"`
	// Count is the number of offsets (duplicate) or values (unseen)
	// involved.
	Count int `json:"count,omitempty"`
	// Delta is the distance in log positions between two reads or sends
	// (poll-skip and nonmonotonic cases): >1 skipped, <1 went backwards.
	Delta *int64 `json:"delta,omitempty"`
	// Skipped lists values the log holds between two reads (at most
	// ExamplesMax of them).
	Skipped []int64 `json:"skipped,omitempty"`
	// LogIndex is the value's position in the key's log with gaps removed
	// (Jepsen's "index"); MaxReadIndex the highest position any ok poll
	// observed (lost-write).
	LogIndex     *int64  `json:"log-index,omitempty"`
	MaxReadIndex *int64  `json:"max-read-index,omitempty"`
	Writer       *int64  `json:"writer,omitempty"`
	Reader       *int64  `json:"reader,omitempty"`
	Ops          []int64 `json:"ops,omitempty"`
	// Result is porcupine's verdict for a partition (nonlinearizable).
	Result string `json:"result,omitempty"`
	// Steps spells out a dependency cycle (G0, G1c and their process and
	// realtime variants) edge by edge; Ops lists the cycle's operations in
	// order, the last step leading back to the first.
	Steps []CycleStep `json:"steps,omitempty"`
	Text  string      `json:"text"`
}

func ptr[T any](v T) *T { return &v }

// OpIndexes lists, without repeats, the operations the example names: its
// writer, its reader and Ops, in that order.
func (e Example) OpIndexes() []int64 {
	var out []int64
	add := func(i int64) {
		for _, o := range out {
			if o == i {
				return
			}
		}
		out = append(out, i)
	}
	if e.Writer != nil {
		add(*e.Writer)
	}
	if e.Reader != nil {
		add(*e.Reader)
	}
	for _, o := range e.Ops {
		add(o)
	}
	return out
}

// Senders lists the sends the example is about, without the reads that
// exposed them: its writer, or else Ops for an anomaly that names only
// sends (unseen).
func (e Example) Senders() []int64 {
	if e.Writer != nil {
		return []int64{*e.Writer}
	}
	if e.Reader == nil {
		return e.OpIndexes()
	}
	return nil
}

// OffsetsNamed lists the offsets the example names (Offset, then Offsets).
func (e Example) OffsetsNamed() []int64 {
	var out []int64
	if e.Offset != nil {
		out = append(out, *e.Offset)
	}
	return append(out, e.Offsets...)
}

// HasKey tells whether the example is about one key (an empty history's is
// not).
func (e Example) HasKey() bool { return e.Key >= 0 }
