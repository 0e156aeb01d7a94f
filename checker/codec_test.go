package checker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// designExample is the history excerpt from DESIGN.md, byte for byte.
const designExample = `{"index":0,"time":1000,"process":0,"type":"invoke","f":"send","value":[["send",3,17]]}
{"index":1,"time":2000,"process":0,"type":"ok","f":"send","value":[["send",3,[5,17]]]}
{"index":2,"time":3000,"process":1,"type":"invoke","f":"poll","value":[["poll"]]}
{"index":3,"time":4000,"process":1,"type":"ok","f":"poll","value":[["poll",{"3":[[4,16],[5,17]]}]]}
{"index":4,"time":5000,"process":1,"type":"invoke","f":"assign","value":[3,4]}
`

func TestDecodeDesignExample(t *testing.T) {
	h, err := NewReader(strings.NewReader(designExample)).ReadAll()
	require.NoError(t, err)
	require.Len(t, h, 5)
	assert.Equal(t, []MicroOp{{F: FSend, Key: 3, Value: 17}}, h[0].Mops)
	five := int64(5)
	assert.Equal(t, []MicroOp{{F: FSend, Key: 3, Value: 17, Offset: &five, Completed: true}}, h[1].Mops)
	assert.Equal(t, []MicroOp{{F: FPoll}}, h[2].Mops)
	assert.Equal(t, map[int][]Pair{3: {{4, 16}, {5, 17}}}, h[3].Mops[0].Polls)
	assert.Equal(t, []int{3, 4}, h[4].Keys)
	assert.Equal(t, OK, h[1].Type)
	assert.Equal(t, int64(4000), h[3].Time)

	var out bytes.Buffer
	w := NewWriter(&out)
	for _, op := range h {
		require.NoError(t, w.Write(op))
	}
	require.NoError(t, w.Flush())
	assert.Equal(t, designExample, out.String(), "encoding must reproduce DESIGN.md's lines")
}

func TestCodecForms(t *testing.T) {
	lines := []string{
		`{"index":7,"time":9,"process":"nemesis","type":"info","f":"start-kill","value":{"nodes":["n1","n2"]}}`,
		`{"index":8,"time":10,"process":2,"type":"info","f":"send","value":[["send",3,[null,17]]],"error":"timed out \"x\""}`,
		`{"index":9,"time":11,"process":3,"type":"ok","f":"assign","value":[1,2],"seek-to-beginning":true}`,
		`{"index":10,"time":12,"process":3,"type":"ok","f":"poll","value":[["poll",{}]],"rebalance-log":[{"keys":[1]}]}`,
		`{"index":11,"time":13,"process":4,"type":"ok","f":"txn","value":[["send",1,[0,5]],["poll",{"1":[[0,5]],"2":[]}]]}`,
		`{"index":12,"time":14,"process":4,"type":"info","f":"crash"}`,
		`{"index":13,"time":15,"process":3,"type":"ok","f":"poll","value":[["poll",{"1":[[4,9]]}]],"committed":{"1":5,"2":7}}`,
		`{"index":14,"time":16,"process":4,"type":"fail","f":"txn","value":[["send",1,[6,8]]],"error":"fenced","committed":{},"fenced":true}`,
	}
	for _, line := range lines {
		var op Op
		require.NoError(t, json.Unmarshal([]byte(line), &op), line)
		got, err := json.Marshal(op)
		require.NoError(t, err)
		assert.Equal(t, line, string(got))
	}
	var op Op
	require.NoError(t, json.Unmarshal([]byte(lines[0]), &op))
	assert.Equal(t, NemesisProcess, op.Process)
	require.NoError(t, json.Unmarshal([]byte(lines[1]), &op))
	assert.Nil(t, op.Mops[0].Offset)
	assert.True(t, op.Mops[0].Completed)
	require.NoError(t, json.Unmarshal([]byte(lines[2]), &op))
	assert.True(t, op.SeekToBeginning)
	require.NoError(t, json.Unmarshal([]byte(lines[3]), &op))
	assert.NotNil(t, op.Mops[0].Polls, "a completed empty poll is not an invoked poll")
	assert.Equal(t, []Rebalance{{Keys: []int{1}}}, op.RebalanceLog)
	require.NoError(t, json.Unmarshal([]byte(lines[6]), &op))
	assert.Equal(t, map[int]int64{1: 5, 2: 7}, op.Committed)
}

func TestDecodeErrors(t *testing.T) {
	cases := map[string]string{
		`{"index":0,"time":1,"process":0,"type":"done","f":"send"}`:                                   "type",
		`{"index":0,"time":1,"process":"n1","type":"ok","f":"send"}`:                                  "process",
		`{"index":0,"time":1,"process":-2,"type":"ok","f":"send"}`:                                    "process",
		`{"time":1,"process":0,"type":"ok","f":"send"}`:                                               "index",
		`{"index":0,"time":1,"process":0,"type":"ok"}`:                                                `"f"`,
		`{"index":0,"time":1,"process":0,"type":"ok","f":"send","value":[["send",1]]}`:                "3",
		`{"index":0,"time":1,"process":0,"type":"ok","f":"send","value":[["send",1,1.5]]}`:            "integer",
		`{"index":0,"time":1,"process":0,"type":"ok","f":"send","value":[["send",1,null]]}`:           "integer",
		`{"index":0,"time":1,"process":0,"type":"ok","f":"send","value":[["write",1,2]]}`:             "unknown micro-op",
		`{"index":0,"time":1,"process":0,"type":"ok","f":"poll","value":[["poll",{"a":[]}]]}`:         "poll result",
		`{"index":0,"time":1,"process":0,"type":"ok","f":"poll","value":[["poll",{"1":[[null,2]]}]]}`: "pair",
		`{"index":0,"time":1,"process":0,"type":"ok","f":"assign","value":["a"]}`:                     "keys",
		`not json`: "invalid",
	}
	for line, want := range cases {
		var op Op
		err := json.Unmarshal([]byte(line), &op)
		require.Error(t, err, line)
		assert.Contains(t, err.Error(), want, line)
	}
}

func TestReaderNamesTheLine(t *testing.T) {
	in := designExample + "\n" + `{"index":5,"time":6000,"process":1,"type":"ok","f":"assign","value":[3,"x"]}` + "\n"
	r := NewReader(strings.NewReader(in))
	for range 5 {
		_, err := r.Read()
		require.NoError(t, err)
	}
	_, err := r.Read()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "history line 7")
}

func TestReaderBoundsLines(t *testing.T) {
	huge := `{"index":0,"f":"x","type":"ok","process":0,"value":"` + strings.Repeat("a", LineBytesMax) + `"}`
	_, err := NewReader(strings.NewReader(huge)).Read()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "longer than")
}

func TestReaderEOF(t *testing.T) {
	_, err := NewReader(strings.NewReader("\n\n")).Read()
	assert.True(t, errors.Is(err, io.EOF))
}

func TestValidityJSON(t *testing.T) {
	for v, s := range map[Validity]string{Valid: "true", Invalid: "false", Unknown: `"unknown"`} {
		b, err := json.Marshal(v)
		require.NoError(t, err)
		assert.Equal(t, s, string(b))
		var back Validity
		require.NoError(t, json.Unmarshal(b, &back))
		assert.Equal(t, v, back)
	}
	var v Validity
	assert.Error(t, json.Unmarshal([]byte(`"maybe"`), &v))
}

func TestResultJSONRoundTrip(t *testing.T) {
	res, err := CheckFile(filepath.Join("testdata", "lost-write.jsonl"), Options{})
	require.NoError(t, err)
	b, err := json.Marshal(res)
	require.NoError(t, err)
	assert.Contains(t, string(b), `"valid":false`)
	assert.Contains(t, string(b), `"lost-write":{"count":1`)
	var back Result
	require.NoError(t, json.Unmarshal(b, &back))
	assert.Equal(t, Invalid, back.Valid)
	assert.Equal(t, 1, back.Anomalies[AnomalyLostWrite].Count)
}

func TestWriteReadHistoryFile(t *testing.T) {
	h, err := NewReader(strings.NewReader(designExample)).ReadAll()
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "history.jsonl")
	require.NoError(t, WriteHistory(path, h))
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, designExample, string(data))
	back, err := ReadHistory(path)
	require.NoError(t, err)
	assert.Equal(t, h, back)
}

func FuzzDecodeOp(f *testing.F) {
	for _, line := range strings.Split(designExample, "\n") {
		f.Add([]byte(line))
	}
	f.Add([]byte(`{"index":8,"time":10,"process":"nemesis","type":"info","f":"start-kill","value":["n1"]}`))
	f.Add([]byte(`{"index":11,"time":13,"process":4,"type":"ok","f":"txn","value":[["send",1,[null,5]],["poll",{"1":[[0,5]]}]],"rebalance-log":[{"keys":[1]}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var op Op
		if err := json.Unmarshal(data, &op); err != nil {
			return
		}
		enc, err := json.Marshal(op)
		require.NoError(t, err)
		var back Op
		require.NoError(t, json.Unmarshal(enc, &back), "%s", enc)
		enc2, err := json.Marshal(back)
		require.NoError(t, err)
		assert.Equal(t, string(enc), string(enc2))
		// Whatever decodes must also be checkable without a panic.
		Analyze(t.Context(), History{op, back}, Options{})
	})
}

// FuzzAnalyze feeds arbitrary histories (one op per line; undecodable lines
// are dropped) to the whole checker: it must return a verdict, never panic.
func FuzzAnalyze(f *testing.F) {
	files, err := filepath.Glob(filepath.Join("testdata", "*.jsonl"))
	require.NoError(f, err)
	for _, path := range files {
		data, err := os.ReadFile(path)
		require.NoError(f, err)
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var h History
		for _, line := range bytes.Split(data, []byte("\n")) {
			var op Op
			if json.Unmarshal(line, &op) == nil {
				h = append(h, op)
			}
		}
		res := Analyze(t.Context(), h, Options{LinearTimeout: 100 * time.Millisecond})
		_, err := json.Marshal(res)
		require.NoError(t, err)
	})
}

func TestHarnessEventsRoundTripAndAreIgnored(t *testing.T) {
	h := readTestdata(t, "lost-write")
	event := Op{Process: HarnessProcess, Type: Info, F: FLeaders,
		Raw: []byte(`[{"topic":"t0","partition":0,"leader":"n2","epoch":7}]`)}
	b, err := event.MarshalJSON()
	require.NoError(t, err)
	assert.Contains(t, string(b), `"process":"harness"`)
	var back Op
	require.NoError(t, back.UnmarshalJSON(b))
	assert.Equal(t, HarnessProcess, back.Process)
	assert.Equal(t, []Leadership{{Topic: "t0", Partition: 0, Leader: "n2", Epoch: 7}}, back.Leaderships())

	var with History
	for i, op := range h {
		if i == 2 {
			with = append(with, event)
		}
		with = append(with, op)
	}
	for i := range with {
		with[i].Index = int64(i)
	}
	without := Analyze(context.Background(), h, Options{})
	res := Analyze(context.Background(), with, Options{})
	assert.Empty(t, res.Warnings, "harness events are outside the invoke/complete discipline")
	assert.Equal(t, without.Valid, res.Valid)
	assert.Equal(t, without.Stats.Count, res.Stats.Count)
	assert.Equal(t, without.Stats.Processes, res.Stats.Processes)
	for name, a := range without.Anomalies {
		assert.Equal(t, a.Count, res.Anomalies[name].Count, name)
	}
}
