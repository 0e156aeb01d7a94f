package reports

import (
	"context"
	"html"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/faultline/faultline/checker"
)

// TestWriteHTMLSpellsOutCycles: a G1c cycle is shown as a list of its
// steps, each saying which op sent or polled what, at which offset.
func TestWriteHTMLSpellsOutCycles(t *testing.T) {
	h, err := checker.NewReader(strings.NewReader(`{"index":0,"time":0,"process":0,"type":"invoke","f":"txn","value":[["send",0,1],["poll"]]}
{"index":1,"time":1,"process":1,"type":"invoke","f":"txn","value":[["send",1,2],["poll"]]}
{"index":2,"time":2,"process":0,"type":"ok","f":"txn","value":[["send",0,[0,1]],["poll",{"1":[[0,2]]}]]}
{"index":3,"time":3,"process":1,"type":"ok","f":"txn","value":[["send",1,[0,2]],["poll",{"0":[[0,1]]}]]}
`)).ReadAll()
	require.NoError(t, err)
	res := checker.Analyze(context.Background(), h, checker.Options{})
	require.Contains(t, res.Anomalies, checker.AnomalyG1c)
	in := validInput()
	in.Result, in.History = res, h
	page := render(t, in)
	contains(t, page, html.EscapeString("Cycle op 2 → op 3 → op 2:"))
	contains(t, page, html.EscapeString("wr: op 2 sent 1 to key 0 at offset 0, and op 3 polled it"))
	contains(t, page, html.EscapeString("wr: op 3 sent 2 to key 1 at offset 0, and op 2 polled it"))
	contains(t, page, "G1c — 1 found")
}
