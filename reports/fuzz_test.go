package reports

import (
	"bytes"
	"encoding/json"
	"io"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/require"

	"github.com/faultline/faultline/checker"
)

// FuzzParseSpec: test.json comes from disk; parsing never panics.
func FuzzParseSpec(f *testing.F) {
	f.Add([]byte(`{"name":"x","nemesis":"kill,partition","nodes":5,"time-limit":"60s","broker-config":["a=b"]}`))
	f.Add([]byte(`{"Nodes":["n1"],"TimeLimit":1e18,"partitions":-3,"seed":"x"}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := ParseSpec(data)
		if err == nil {
			_ = s.keyLabel(7)
			_ = s.sortedConfig()
		}
	})
}

// FuzzRenderStoredRun: results.json, test.json and history.jsonl come from
// disk; loading and rendering a run never panics, and a run that loads
// always renders.
func FuzzRenderStoredRun(f *testing.F) {
	in := invalidInput()
	res, err := json.Marshal(in.Result)
	require.NoError(f, err)
	var hist bytes.Buffer
	w := checker.NewWriter(&hist)
	for _, op := range in.History {
		require.NoError(f, w.Write(op))
	}
	require.NoError(f, w.Flush())
	f.Add(res, []byte(`{"name":"t","partitions-per-topic":3}`), hist.Bytes())
	f.Add([]byte(`{"valid":"unknown","perf":{"throughput-bucket-ns":1,"throughput":{"a":[1e300]},"faults":[{"start":-5,"end":-9}]}}`), []byte(`{}`), []byte{})
	f.Add([]byte(`{"valid":false,"anomalies":{"x":{"count":-1,"examples":[{"key":1e30,"ops":[1,2,[3]]}]}}}`), []byte(`[]`),
		[]byte(`{"index":0,"time":-100,"process":0,"type":"invoke","f":"send","value":[["send",1,2]]}`+"\n"))
	f.Fuzz(func(t *testing.T, results, spec, history []byte) {
		fsys := fstest.MapFS{
			FileResults: {Data: results},
			FileSpec:    {Data: spec},
			FileHistory: {Data: history},
		}
		in, err := loadRun(fsys, ".", "fuzz")
		if err != nil {
			return
		}
		if len(in.History) > 2000 {
			return
		}
		if err := WriteHTML(io.Discard, in); err != nil {
			t.Fatalf("render: %v", err)
		}
		if err := WriteJUnit(io.Discard, in); err != nil {
			t.Fatalf("junit: %v", err)
		}
		_ = Summary(in)
	})
}
