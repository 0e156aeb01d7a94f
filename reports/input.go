package reports

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/faultline/faultline/checker"
	"github.com/faultline/faultline/harness/testspec"
	"github.com/faultline/faultline/nemesis"
)

// Input is everything one report is rendered from.
type Input struct {
	Spec   Spec
	Result checker.Result
	// History may be nil (a run stored without history.jsonl): the plots are
	// then drawn from Result.Perf alone and offending operations are not
	// listed.
	History checker.History
	Links   Links
	// Notes are shown above the verdict's details: problems met while
	// loading the run (a history that breaks the invoke/complete
	// discipline, a missing file).
	Notes []string
}

// Spec is the part of the test spec (test.json) the report shows and uses.
type Spec struct {
	Name         string
	Workload     string
	Nemesis      nemesis.Spec
	Nodes        []string
	Seed         int64
	TimeLimit    time.Duration
	BrokerConfig map[string]string
	// Subscribe is set when consumers used consumer groups (subscribe): as in
	// Jepsen, poll-skip and nonmonotonic-poll are then allowed across
	// rebalances. The report also sets it when the history holds a subscribe
	// operation.
	Subscribe bool
	// PartitionsPerTopic maps key k to topic t<k/P>, partition k%P, as the
	// queue workload does; 0 shows bare keys.
	PartitionsPerTopic int
	// Expected is the verdict the suite the test ran in expects ("valid",
	// "invalid"), and Suite that suite run's stamp (SuiteIndexFile); empty
	// outside a suite.
	Expected string
	Suite    string
	// Raw is the whole spec as stored, shown verbatim in the report.
	Raw map[string]any
}

// Link is one relative link from the report to another file of the run.
type Link struct {
	Name string
	Href string
}

// Links are the run's other files, relative to the directory of
// report.html. Empty fields are not shown.
type Links struct {
	Spec    string // test.json
	History string // history.jsonl
	Results string // results.json
	JUnit   string // junit.xml
	// Timeline is the per-process timeline page (timeline.html).
	Timeline string
	// NodeLogs are the brokers' logs, one per node (nodes/<node>/broker.log).
	NodeLogs []Link
	// Porcupine are porcupine's visualizations, one per failing partition;
	// the first is embedded in the page.
	Porcupine []Link
}

// SpecOf is the report's view of a test as the harness stores it in
// test.json; raw is the file's object, shown verbatim (nil to derive it from
// t).
func SpecOf(t testspec.Spec, raw map[string]any) Spec {
	if raw == nil {
		b, _ := json.Marshal(t)
		_ = json.Unmarshal(b, &raw)
	}
	s := Spec{
		Name: t.Name, Workload: t.Workload, Nemesis: t.Nemesis, Seed: t.Seed,
		TimeLimit: time.Duration(t.TimeLimit), BrokerConfig: t.BrokerConfig,
		Subscribe: t.Subscribe, PartitionsPerTopic: t.PartitionsPerTopic, Raw: raw,
		Expected: t.Expected, Suite: t.Suite,
	}
	for i := 1; i <= t.Nodes && i <= 1000; i++ {
		s.Nodes = append(s.Nodes, "n"+strconv.Itoa(i))
	}
	return s
}

// ParseSpec reads test.json: as the harness writes it (testspec.Spec, read
// through SpecOf), or else a spec of another tool's making. For those it is
// tolerant of how fields are named (time-limit, time_limit and TimeLimit are the same field) and of
// their shapes: nemesis as "kill,partition" or a list (read with the
// --nemesis grammar, nemesis.Spec), nodes as a count or a
// list of names, broker config as an object or a list of "k=v", the time
// limit as a Go duration string or a number (seconds below 10^6, else
// nanoseconds, which is how time.Duration marshals).
func ParseSpec(data []byte) (Spec, error) {
	var raw map[string]any
	if err := json.Unmarshal(data, &raw); err != nil {
		return Spec{}, fmt.Errorf("parse test spec: %w", err)
	}
	if t, err := testspec.Decode(data); err == nil {
		return SpecOf(t, raw), nil
	}
	fields := make(map[string]any, len(raw))
	for k, v := range raw {
		fields[normalizeFieldName(k)] = v
	}
	get := func(names ...string) (any, bool) {
		for _, n := range names {
			if v, ok := fields[n]; ok && v != nil {
				return v, true
			}
		}
		return nil, false
	}
	s := Spec{Raw: raw}
	if v, ok := get("name", "testname", "test"); ok {
		s.Name = scalarString(v)
	}
	if v, ok := get("workload"); ok {
		s.Workload = scalarString(v)
	}
	if v, ok := get("nemesis", "nemeses", "faults"); ok {
		b, _ := json.Marshal(v)
		if err := json.Unmarshal(b, &s.Nemesis); err != nil {
			return Spec{}, fmt.Errorf("parse test spec: %w", err)
		}
	}
	if v, ok := get("nodes", "nodenames", "hosts"); ok {
		if n, isNum := v.(float64); isNum {
			for i := 1; i <= int(n) && i <= 1000; i++ {
				s.Nodes = append(s.Nodes, "n"+strconv.Itoa(i))
			}
		} else {
			s.Nodes = stringList(v)
		}
	}
	if v, ok := get("seed"); ok {
		switch x := v.(type) {
		case float64:
			s.Seed = int64(x)
		case string:
			s.Seed, _ = strconv.ParseInt(x, 10, 64)
		}
	}
	if v, ok := get("timelimit", "duration"); ok {
		s.TimeLimit = parseDuration(v)
	}
	if v, ok := get("brokerconfig", "brokerconfigs", "config"); ok {
		s.BrokerConfig = stringMap(v)
	}
	if v, ok := get("subscribe"); ok {
		b, _ := v.(bool)
		s.Subscribe = b
	}
	if v, ok := get("subvia", "mode", "consumermode"); ok {
		s.Subscribe = s.Subscribe || strings.Contains(strings.ToLower(fmt.Sprint(v)), "subscribe")
	}
	if v, ok := get("expected", "expect", "expectedvalidity"); ok {
		s.Expected = scalarString(v)
	}
	if v, ok := get("partitionspertopic", "partitions"); ok {
		if n, isNum := v.(float64); isNum && n > 0 {
			s.PartitionsPerTopic = int(n)
		}
	}
	return s, nil
}

// rawField returns a scalar field of the stored spec by normalized name.
func rawField(raw map[string]any, name string) (string, bool) {
	for k, v := range raw {
		if normalizeFieldName(k) != name || v == nil {
			continue
		}
		switch v.(type) {
		case map[string]any, []any:
			return "", false
		}
		return scalarString(v), true
	}
	return "", false
}

func normalizeFieldName(k string) string {
	k = strings.ToLower(k)
	return strings.NewReplacer("-", "", "_", "", " ", "").Replace(k)
}

func scalarString(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	default:
		b, _ := json.Marshal(x)
		return string(b)
	}
}

func stringList(v any) []string {
	switch x := v.(type) {
	case string:
		var out []string
		for _, p := range strings.Split(x, ",") {
			if p = strings.TrimSpace(p); p != "" {
				out = append(out, p)
			}
		}
		return out
	case []any:
		out := make([]string, 0, len(x))
		for _, e := range x {
			out = append(out, scalarString(e))
		}
		return out
	default:
		return []string{scalarString(v)}
	}
}

func stringMap(v any) map[string]string {
	out := map[string]string{}
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			out[k] = scalarString(e)
		}
	case []any:
		for _, e := range x {
			k, val, _ := strings.Cut(scalarString(e), "=")
			out[k] = val
		}
	case string:
		for _, e := range strings.Split(x, ",") {
			if k, val, ok := strings.Cut(e, "="); ok {
				out[strings.TrimSpace(k)] = strings.TrimSpace(val)
			}
		}
	}
	return out
}

func parseDuration(v any) time.Duration {
	switch x := v.(type) {
	case string:
		if d, err := time.ParseDuration(x); err == nil {
			return d
		}
		if f, err := strconv.ParseFloat(x, 64); err == nil {
			return time.Duration(f * float64(time.Second))
		}
	case float64:
		if x < 1e6 {
			return time.Duration(x * float64(time.Second))
		}
		return time.Duration(x)
	}
	return 0
}

// keyLabel names a key as the user knows it: "key 2 (t0-2)".
func (s Spec) keyLabel(key int) string {
	if s.PartitionsPerTopic <= 0 {
		return "key " + strconv.Itoa(key)
	}
	return fmt.Sprintf("key %d (t%d-%d)", key, key/s.PartitionsPerTopic, key%s.PartitionsPerTopic)
}

// sortedConfig returns the broker config as sorted "k=v" pairs.
func (s Spec) sortedConfig() [][2]string {
	out := make([][2]string, 0, len(s.BrokerConfig))
	for k, v := range s.BrokerConfig {
		out = append(out, [2]string{k, v})
	}
	sort.Slice(out, func(i, j int) bool { return out[i][0] < out[j][0] })
	return out
}
