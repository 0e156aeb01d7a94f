package checker

// Validity is three-valued, as in Jepsen: merging takes the worst, with
// Invalid > Unknown > Valid. In JSON it is true, false or "unknown".
type Validity int8

const (
	Valid Validity = iota
	Unknown
	Invalid
)

// Merge returns the worse of two validities.
func (v Validity) Merge(o Validity) Validity {
	if o > v {
		return o
	}
	return v
}

// AnomalyReport is one kind of anomaly: how many were found, how many on
// each key, and a bounded number of examples.
type AnomalyReport struct {
	Count int `json:"count"`
	// ByKey counts the anomaly per key; its values add up to Count. Every
	// figure the report shows for a key comes from here.
	ByKey    map[int]int `json:"by-key,omitempty"`
	Examples []Example   `json:"examples"`
	// Allowed marks an anomaly that the test's mode tolerates (Jepsen's
	// allowed-error-types): it is reported but does not make the result
	// invalid.
	Allowed bool `json:"allowed,omitempty"`
}

// ExamplesMax bounds the examples kept per anomaly, as Jepsen condenses its
// errors; Count still counts every case.
const ExamplesMax = 32

// CheckerResult is the outcome of one checker (one junit test case).
type CheckerResult struct {
	Name      string                   `json:"name"`
	Valid     Validity                 `json:"valid"`
	Error     string                   `json:"error,omitempty"` // why it is unknown
	Anomalies map[string]AnomalyReport `json:"anomalies,omitempty"`
	// Visualizations is porcupine's HTML for failing partitions, by key;
	// Merge gathers them into Result.Visualizations.
	Visualizations map[int][]byte `json:"-"`
}

// Result is results.json: the merged verdict, every anomaly by Jepsen's
// name, per-checker outcomes, statistics and performance figures.
type Result struct {
	Valid     Validity                 `json:"valid"`
	Anomalies map[string]AnomalyReport `json:"anomalies"`
	Checkers  []CheckerResult          `json:"checkers"`
	Stats     Stats                    `json:"stats"`
	Perf      Perf                     `json:"perf"`
	// Warnings name each way the history breaks Jepsen's invoke/complete
	// discipline (a process reused after an info, a completion without an
	// invoke, ...). Such a history is analysed all the same, as Jepsen does;
	// the warnings say what the analysis had to assume.
	Warnings []string `json:"warnings,omitempty"`
	// Notes say how the history was read when that needed saying (the
	// integers an EDN history's keywords became).
	Notes []string `json:"notes,omitempty"`
	// Mode is the consumer mode the anomalies were judged in: "subscribe"
	// when SubVia (Jepsen's sub-via: the methods consumers used, "assign"
	// and/or "subscribe") holds subscribe, else "assign"; Txn tells whether
	// transactions were in play.
	Mode   string   `json:"mode,omitempty"`
	SubVia []string `json:"sub-via,omitempty"`
	Txn    bool     `json:"txn,omitempty"`
	// ClientErrors counts the errors clients received that a correct
	// broker never returns to them (SuspectClientErrors), by code and by
	// fault window; nil when there were none.
	ClientErrors *ClientErrors `json:"client-errors,omitempty"`
	// FirstAnomalyNs is the time of the earliest operation an anomaly that
	// makes the result invalid names, counted from the first client
	// operation (time to first anomaly, setup left out).
	FirstAnomalyNs *int64 `json:"first-anomaly-ns,omitempty"`
	// Visualizations holds porcupine's self-contained HTML for some failing
	// partitions, by key (at most Options.VisualizeMax). It is not part of
	// results.json: the harness writes each as linear-<key>.html.
	Visualizations map[int][]byte `json:"-"`
}

// Stats counts operations by function and outcome.
type Stats struct {
	Count int                       `json:"count"`
	ByF   map[string]map[OpType]int `json:"by-f"`
	Keys  int                       `json:"keys"`
	Sends int                       `json:"sends"`
	Polls int                       `json:"polls"`
	// SendsOK counts acknowledged send micro-ops; ValuesRead the distinct
	// (key, value) pairs any ok poll returned; Processes the distinct client
	// processes; DurationNs the time of the last operation.
	SendsOK int `json:"sends-ok"`
	// SendsOKRead counts the acknowledged send micro-ops whose value an ok
	// poll returned; SendsInfo the send micro-ops of indeterminate ops
	// (info, or never completed) and SendsInfoRead those of them whose value
	// an ok poll returned (they landed).
	SendsOKRead   int   `json:"sends-ok-read"`
	SendsInfo     int   `json:"sends-info"`
	SendsInfoRead int   `json:"sends-info-read"`
	ValuesRead    int   `json:"values-read"`
	Processes     int   `json:"processes"`
	DurationNs    int64 `json:"duration-ns"`
	// InfoErrors counts the errors that left client ops indeterminate (at
	// most 32 distinct texts; Jepsen's info-txn-causes).
	InfoErrors map[string]int `json:"info-errors,omitempty"`
}

// Perf holds latency quantiles, throughput over time and unavailability
// windows; the report plots them.
type Perf struct {
	// Latency quantiles in milliseconds per "f:type" (e.g. "send:ok").
	LatencyQuantilesMs map[string]map[string]float64 `json:"latency-quantiles-ms"`
	// Throughput in completed ops per second per bucket, per "f:type".
	ThroughputBucketNs int64                `json:"throughput-bucket-ns"`
	Throughput         map[string][]float64 `json:"throughput"`
	// Unavailable lists windows with no successful send.
	Unavailable []Window `json:"unavailable"`
	// Faults lists the nemesis intervals, for shading plots.
	Faults []Window `json:"faults"`
	// Unseen is, per throughput bucket, how many acknowledged values no ok
	// poll had returned yet at the bucket's end (Jepsen's unseen plot): it
	// returns to zero after a healthy run's final reads and stays up where
	// writes were lost.
	Unseen []int `json:"unseen"`
	// WorstRealtimeLag is the largest realtime lag of any key in any ok
	// poll (Jepsen's worst-realtime-lag, see realtimeLags): how long a
	// consumer went on polling behind a tail it could have reached; the
	// final reads, which reread every log from the beginning, are left
	// out. Nil when no ok poll or txn was made outside the final reads.
	WorstRealtimeLag *RealtimeLag `json:"worst-realtime-lag,omitempty"`
}

// Window is a time interval in nanoseconds since the test started.
type Window struct {
	Start int64  `json:"start"`
	End   int64  `json:"end"`
	Label string `json:"label,omitempty"`
}
