package reports

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faultline/faultline/checker"
)

func TestClientErrorsTableAndSummary(t *testing.T) {
	ce := &checker.ClientErrors{
		Count: 4, ByCode: map[string]int{checker.CodeOutOfOrderSequence: 3, checker.CodeUnknownProducerID: 1},
		NoFault: map[string]int{checker.CodeOutOfOrderSequence: 1},
		ByWindow: []checker.ClientErrorWindow{{
			Window: checker.Window{Start: 10e9, End: 20e9, Label: `kill {"nodes":["n1"]}`},
			During: map[string]int{checker.CodeUnknownProducerID: 1, checker.CodeOutOfOrderSequence: 1},
			After:  map[string]int{checker.CodeOutOfOrderSequence: 1},
		}},
		FailOn: []string{checker.CodeUnknownProducerID},
	}
	rows := clientErrorRows(ce)
	require.Len(t, rows, 3)
	assert.Equal(t, "before any fault", rows[0].Period)
	assert.Contains(t, rows[1].Period, "during kill")
	assert.Equal(t, "OUT_OF_ORDER_SEQUENCE_NUMBER ×1, UNKNOWN_PRODUCER_ID ×1", rows[1].Counts)
	assert.Equal(t, 2, rows[1].Total)
	assert.Contains(t, rows[2].Period, "after kill")
	assert.Nil(t, clientErrorRows(nil))

	in := Input{Result: checker.Result{Valid: checker.Invalid, ClientErrors: ce}}
	s := Summary(in)
	assert.Contains(t, s, "client errors a correct broker never returns: 4 (the test fails on UNKNOWN_PRODUCER_ID)")
	var b bytes.Buffer
	require.NoError(t, WriteHTML(&b, in))
	assert.Contains(t, b.String(), `id="client-errors"`)
	assert.Contains(t, b.String(), "UNKNOWN_PRODUCER_ID ×1")
	b.Reset()
	require.NoError(t, WriteHTML(&b, Input{Result: checker.Result{Valid: checker.Valid}}))
	assert.NotContains(t, b.String(), `id="client-errors"`, "no table without client errors")
}

func TestClientErrorHeadlineStatesItsFaultWindow(t *testing.T) {
	var b historyBuilder
	b.send(0, 1, 100, 0, 1000, 4, checker.OK)
	early := b.add(checker.Op{Time: ms(2000), Process: 1, Type: checker.Info, F: "send", Error: checker.CodeOutOfOrderSequence})
	b.nemesis("start-kill", []string{"n1"}, 10000)
	during := b.add(checker.Op{Time: ms(12000), Process: 1, Type: checker.Info, F: "send", Error: checker.CodeUnknownProducerID})
	b.nemesis("stop-kill", []string{"n1"}, 20000)
	after := b.add(checker.Op{Time: ms(25000), Process: 1, Type: checker.Info, F: "send", Error: checker.CodeUnknownProducerID})
	in := Input{Spec: testSpec("client-errors"), History: b.h}
	a := analyze(in.History)
	story := func(ops ...int64) anomalyStory {
		return anomalySentence(in, a, checker.AnomalyClientError, checker.AnomalyReport{Count: len(ops), Examples: []checker.Example{{Key: -1, Ops: ops}}})
	}
	st := story(during)
	assert.Contains(t, st.sentence, "during the nemesis killed n1 (10.0 s – 20.0 s)")
	assert.NotContains(t, st.sentence, "before any fault")
	assert.NotEqual(t, int64(-1), st.nemesisIndex, "the sentence cites the kill")
	assert.Contains(t, story(after).sentence, "after the nemesis killed n1 (10.0 s – 20.0 s)")
	assert.Contains(t, story(early).sentence, "before any fault", "an error before the first fault says so")
	assert.Contains(t, story(early, during).sentence, "during the nemesis killed n1", "errors from before into a fault window name the window")
}
