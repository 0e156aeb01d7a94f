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
