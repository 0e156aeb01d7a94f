package reports

import (
	"encoding/json"
	"sort"
)

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
