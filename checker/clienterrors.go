package checker

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
)

// AnomalyClientError is the anomaly a test gets when its clients received
// an error that Options.FailOnClientErrors names: errors a correct broker
// never returns to a well-behaved client, made a failure on request.
const AnomalyClientError = "client-error"

// Client error codes: Kafka's error names, as franz-go prints them at the
// start of an error's text, plus the two faults franz-go's consumer finds
// on its own and names in words.
const (
	CodeOutOfOrderSequence = "OUT_OF_ORDER_SEQUENCE_NUMBER"
	CodeUnknownProducerID  = "UNKNOWN_PRODUCER_ID"
	CodeInvalidEpoch       = "INVALID_PRODUCER_EPOCH"
	CodeDuplicateSequence  = "DUPLICATE_SEQUENCE_NUMBER"
	CodeInvalidPIDMapping  = "INVALID_PRODUCER_ID_MAPPING"
	CodeCorruptMessage     = "CORRUPT_MESSAGE"
	CodeInvalidRecord      = "INVALID_RECORD"
	// CodeDataLoss is franz-go's ErrDataLoss: a consumer found a partition
	// ending before an offset it had already read (the log lost records).
	CodeDataLoss = "DATA_LOSS"
)

// SuspectClientErrors are the codes the client-errors finding counts:
// errors a correct broker never returns to a well-behaved idempotent
// producer or consumer, whatever the faults (a retry after a failover
// keeps its sequence; a batch the broker serves passed its CRC when it was
// written; a log never ends before what was read from it).
var SuspectClientErrors = []string{
	CodeOutOfOrderSequence, CodeUnknownProducerID, CodeInvalidEpoch, CodeDuplicateSequence,
	CodeInvalidPIDMapping, CodeCorruptMessage, CodeInvalidRecord, CodeDataLoss,
}

// clientErrorText maps the words franz-go uses for faults it finds itself
// onto their code.
var clientErrorText = map[string]string{
	"does not match calculated crc": CodeCorruptMessage,
	"lost records; the client":      CodeDataLoss,
}

// ClientErrorCode returns the suspect code an error text carries, or "".
func ClientErrorCode(text string) string {
	for _, code := range SuspectClientErrors {
		if strings.Contains(text, code) {
			return code
		}
	}
	for words, code := range clientErrorText {
		if strings.Contains(text, words) {
			return code
		}
	}
	return ""
}

// ClientErrors is the client-errors finding of results.json: how often
// clients received each suspect error, and when, relative to the faults.
type ClientErrors struct {
	Count  int            `json:"count"`
	ByCode map[string]int `json:"by-code"`
	// NoFault counts the errors received before any fault started.
	NoFault map[string]int `json:"no-fault,omitempty"`
	// ByWindow counts, per fault window, the errors received while it was
	// in force (During) and after it ended, before the next one started
	// (After).
	ByWindow []ClientErrorWindow `json:"by-window,omitempty"`
	// FailOn are the codes that make the test invalid (Options.
	// FailOnClientErrors).
	FailOn []string `json:"fail-on,omitempty"`
	// Examples are the first errors, at most ExamplesMax.
	Examples []ClientErrorExample `json:"examples,omitempty"`
}

// ClientErrorWindow is one fault window's count of suspect errors.
type ClientErrorWindow struct {
	Window
	During map[string]int `json:"during,omitempty"`
	After  map[string]int `json:"after,omitempty"`
}

// ClientErrorExample is one suspect error a client received.
type ClientErrorExample struct {
	Op      int64  `json:"op"`
	Time    int64  `json:"time"`
	Process int    `json:"process"`
	F       string `json:"f"`
	Code    string `json:"code"`
	Error   string `json:"error"`
}

// clientErrors finds the suspect errors of client completions in h, with
// the fault windows faults (faultWindows' order: by start). It returns nil
// when there is none.
func clientErrors(h History, faults []Window, failOn []string, examplesMax int) *ClientErrors {
	windows := slices.Clone(faults)
	sort.SliceStable(windows, func(i, j int) bool { return windows[i].Start < windows[j].Start })
	var ce *ClientErrors
	var byWindow map[int]*ClientErrorWindow
	for i := range h {
		op := &h[i]
		if !op.IsClient() || op.Type == Invoke || op.Error == "" {
			continue
		}
		code := ClientErrorCode(op.Error)
		if code == "" {
			continue
		}
		if ce == nil {
			ce = &ClientErrors{ByCode: map[string]int{}, FailOn: failOn}
			byWindow = map[int]*ClientErrorWindow{}
		}
		ce.Count++
		ce.ByCode[code]++
		if len(ce.Examples) < examplesMax {
			ce.Examples = append(ce.Examples, ClientErrorExample{Op: op.Index, Time: op.Time, Process: op.Process, F: op.F, Code: code, Error: op.Error})
		}
		w, during := windowOf(windows, op.Time)
		if w < 0 {
			if ce.NoFault == nil {
				ce.NoFault = map[string]int{}
			}
			ce.NoFault[code]++
			continue
		}
		cw := byWindow[w]
		if cw == nil {
			cw = &ClientErrorWindow{Window: windows[w]}
			byWindow[w] = cw
		}
		m := &cw.After
		if during {
			m = &cw.During
		}
		if *m == nil {
			*m = map[string]int{}
		}
		(*m)[code]++
	}
	if ce == nil {
		return nil
	}
	for _, w := range slices.Sorted(maps.Keys(byWindow)) {
		ce.ByWindow = append(ce.ByWindow, *byWindow[w])
	}
	return ce
}

// windowOf returns the window in force at t (during) or, failing that, the
// one that ended last before t; -1 before every window.
func windowOf(windows []Window, t int64) (int, bool) {
	last, lastEnd := -1, int64(-1)
	for i, w := range windows {
		if w.Start <= t && t <= w.End {
			return i, true
		}
		if w.End < t && w.End >= lastEnd {
			last, lastEnd = i, w.End
		}
	}
	return last, false
}

// checkClientErrors is the "client-errors" checker: invalid when ce counts
// a code of failOn, with one example per such error (up to examplesMax).
func checkClientErrors(ce *ClientErrors, failOn []string, examplesMax int) CheckerResult {
	res := CheckerResult{Name: "client-errors", Valid: Valid}
	if ce == nil || len(failOn) == 0 {
		return res
	}
	var a *AnomalyReport
	for _, code := range failOn {
		n := ce.ByCode[code]
		if n == 0 {
			continue
		}
		if a == nil {
			a = &AnomalyReport{Examples: []Example{}}
		}
		a.Count += n
	}
	if a == nil {
		return res
	}
	for _, ex := range ce.Examples {
		if slices.Contains(failOn, ex.Code) && len(a.Examples) < examplesMax {
			a.Examples = append(a.Examples, Example{Key: -1, Ops: []int64{ex.Op}, Text: fmt.Sprintf(
				"process %d's %s got %s, which a correct broker never returns to it: %s", ex.Process, ex.F, ex.Code, ex.Error)})
		}
	}
	res.Valid = Invalid
	res.Anomalies = map[string]AnomalyReport{AnomalyClientError: *a}
	return res
}

// ValidateClientErrorCodes checks a --fail-on-client-error list: each
// code one of SuspectClientErrors.
func ValidateClientErrorCodes(codes []string) error {
	for _, c := range codes {
		if !slices.Contains(SuspectClientErrors, c) {
			return fmt.Errorf("unknown client error %q (known: %s)", c, strings.Join(SuspectClientErrors, ", "))
		}
	}
	return nil
}

// firstAnomalyNs is when an anomaly making res invalid was first seen:
// over its examples, the earliest time at which every operation an
// example names had happened (the op that revealed it), counted from the
// first client operation (the workload's start, setup left out); nil
// without one.
func firstAnomalyNs(res Result, h History) *int64 {
	start := int64(0)
	for i := range h {
		if h[i].IsClient() {
			start = h[i].Time
			break
		}
	}
	var first *int64
	for _, name := range res.BadAnomalies() {
		for _, ex := range res.Anomalies[name].Examples {
			seen, ok := int64(-1), false
			for _, idx := range ex.OpIndexes() {
				i := sort.Search(len(h), func(i int) bool { return h[i].Index >= idx })
				if i < len(h) && h[i].Index == idx {
					seen, ok = max(seen, h[i].Time), true
				}
			}
			if ok && (first == nil || seen < *first) {
				first = &seen
			}
		}
	}
	if first != nil {
		t := max(0, *first-start)
		first = &t
	}
	return first
}
