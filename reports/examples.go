package reports

import (
	"encoding/json"
	"sort"
	"strings"
)

// exampleFacts is what the report can read out of one anomaly example. The
// checker's examples are free-form JSON values; the report looks for the
// field names of checker.Example and Jepsen: "key"/"k" for the partition
// key, "offset"/"offsets" for offsets, "index", "op", "ops", "writer",
// "reader" (numbers, or operations carrying an "index") for operations, and
// "text" for the checker's own sentence.
type exampleFacts struct {
	keys    []int
	offsets []int64
	ops     []int64
	// writers are the ops named "writer"/"writers": the sends an anomaly
	// is about, without the reads that exposed it.
	writers []int64
	// text is the example's own one-sentence account ("text"), if any.
	text string
}

const exampleWalkDepthMax = 8

func factsOf(example any) exampleFacts {
	var f exampleFacts
	v := normalizeJSON(example)
	f.walk(v, "", 0)
	f.keys = uniqueInts(f.keys)
	f.ops = uniqueInt64s(f.ops)
	f.writers = uniqueInt64s(f.writers)
	f.offsets = uniqueInt64s(f.offsets)
	return f
}

// normalizeJSON turns any JSON-encodable value into maps, slices, strings,
// bools and json.Number, so that in-memory examples and examples read back
// from results.json look the same.
func normalizeJSON(v any) any {
	b, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.UseNumber()
	var out any
	if dec.Decode(&out) != nil {
		return nil
	}
	return out
}

func (f *exampleFacts) walk(v any, field string, depth int) {
	if depth > exampleWalkDepthMax {
		return
	}
	switch x := v.(type) {
	case map[string]any:
		if isOpLike(x) {
			if n, ok := asInt(x["index"]); ok {
				f.ops = append(f.ops, n)
			}
			if n, ok := asInt(x["key"]); ok {
				f.keys = append(f.keys, int(n))
			}
			return
		}
		for k, e := range x {
			lk := strings.ToLower(k)
			if t, ok := e.(string); ok && lk == "text" && depth == 0 {
				f.text = t
				continue
			}
			f.walk(e, lk, depth+1)
		}
	case []any:
		for _, e := range x {
			f.walk(e, field, depth+1)
		}
	case json.Number:
		n, ok := asInt(x)
		if !ok {
			return
		}
		switch {
		case field == "key" || field == "k" || field == "keys":
			f.keys = append(f.keys, int(n))
		case field == "offset" || field == "offsets" || strings.HasSuffix(field, "-offset"):
			f.offsets = append(f.offsets, n)
		case isOpField(field):
			f.ops = append(f.ops, n)
			if field == "writer" || field == "writers" {
				f.writers = append(f.writers, n)
			}
		}
	}
}

// isOpLike recognizes an operation embedded in an example.
func isOpLike(m map[string]any) bool {
	_, hasIndex := m["index"]
	_, hasType := m["type"]
	_, hasProcess := m["process"]
	return hasIndex && (hasType || hasProcess)
}

// isOpField recognizes fields holding operation indexes. "log-index" and
// "max-read-index" are positions in a partition's log, not operations.
func isOpField(field string) bool {
	switch field {
	case "index", "indices", "op-index", "op-indices", "op", "ops", "writer", "writers", "reader", "readers",
		"send", "sends", "poll", "polls", "invoke", "completion":
		return true
	}
	return false
}

func asInt(v any) (int64, bool) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, false
	}
	i, err := n.Int64()
	return i, err == nil
}

func uniqueInts(in []int) []int {
	sort.Ints(in)
	out := in[:0]
	for i, v := range in {
		if i == 0 || v != in[i-1] {
			out = append(out, v)
		}
	}
	return out
}

func uniqueInt64s(in []int64) []int64 {
	sort.Slice(in, func(i, j int) bool { return in[i] < in[j] })
	out := in[:0]
	for i, v := range in {
		if i == 0 || v != in[i-1] {
			out = append(out, v)
		}
	}
	return out
}

// exampleJSON renders an example as indented JSON for the page, cut at
// maxLen bytes.
func exampleJSON(example any, maxLen int) string {
	b, err := json.MarshalIndent(example, "", "  ")
	if err != nil {
		return "(example not encodable: " + err.Error() + ")"
	}
	return truncate(string(b), maxLen)
}
