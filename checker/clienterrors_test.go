package checker

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestClientErrorCodeReadsKafkaNamesAndFranzGoWords(t *testing.T) {
	for text, want := range map[string]string{
		"OUT_OF_ORDER_SEQUENCE_NUMBER: The broker received an out of order sequence number.": CodeOutOfOrderSequence,
		"UNKNOWN_PRODUCER_ID: This exception is raised by the broker if it could not locate": CodeUnknownProducerID,
		"encoded crc 1a2b does not match calculated crc 3c4d":                                CodeCorruptMessage,
		"topic t1 partition 2 lost records; the client consumed to offset 40 but was reset":  CodeDataLoss,
		"NOT_LEADER_FOR_PARTITION: This server is not the leader":                            "",
		"context deadline exceeded": "",
	} {
		assert.Equal(t, want, ClientErrorCode(text), text)
	}
	assert.NoError(t, ValidateClientErrorCodes([]string{CodeOutOfOrderSequence, CodeDataLoss}))
	assert.ErrorContains(t, ValidateClientErrorCodes([]string{"NOT_LEADER"}), `unknown client error "NOT_LEADER" (known: OUT_OF_ORDER_SEQUENCE_NUMBER`)
}

// clientErrorHistory: one error before any fault, two during a kill, one
// after it, and a benign error that is not counted.
func clientErrorHistory() History {
	oos := "OUT_OF_ORDER_SEQUENCE_NUMBER: out of order"
	ops := []Op{
		{Process: 0, Type: Invoke, F: FSend, Time: 1, Mops: []MicroOp{{F: FSend, Key: 1, Value: 1}}},
		{Process: 0, Type: Info, F: FSend, Time: 2, Error: oos, Mops: []MicroOp{{F: FSend, Key: 1, Value: 1}}},
		{Process: NemesisProcess, Type: Invoke, F: "start-kill", Time: 10},
		{Process: NemesisProcess, Type: OK, F: "start-kill", Time: 11, Raw: []byte(`{"nodes":["n1"]}`)},
		{Process: 10, Type: Invoke, F: FSend, Time: 12, Mops: []MicroOp{{F: FSend, Key: 1, Value: 2}}},
		{Process: 10, Type: Info, F: FSend, Time: 13, Error: "UNKNOWN_PRODUCER_ID: gone", Mops: []MicroOp{{F: FSend, Key: 1, Value: 2}}},
		{Process: 1, Type: Invoke, F: FPoll, Time: 14, Mops: []MicroOp{{F: FPoll}}},
		{Process: 1, Type: Fail, F: FPoll, Time: 15, Error: "encoded crc 1 does not match calculated crc 2"},
		{Process: NemesisProcess, Type: Invoke, F: "stop-kill", Time: 20},
		{Process: NemesisProcess, Type: OK, F: "stop-kill", Time: 21},
		{Process: 2, Type: Invoke, F: FPoll, Time: 22, Mops: []MicroOp{{F: FPoll}}},
		{Process: 2, Type: Fail, F: FPoll, Time: 23, Error: "NOT_LEADER_FOR_PARTITION: no"},
		{Process: 20, Type: Invoke, F: FSend, Time: 24, Mops: []MicroOp{{F: FSend, Key: 1, Value: 3}}},
		{Process: 20, Type: Info, F: FSend, Time: 25, Error: oos, Mops: []MicroOp{{F: FSend, Key: 1, Value: 3}}},
	}
	for i := range ops {
		ops[i].Index = int64(i)
	}
	return ops
}

func TestClientErrorsAreCountedByCodeAndFaultWindow(t *testing.T) {
	res := Analyze(context.Background(), clientErrorHistory(), Options{SkipLinear: true})
	ce := res.ClientErrors
	require.NotNil(t, ce)
	assert.Equal(t, 4, ce.Count)
	assert.Equal(t, map[string]int{CodeOutOfOrderSequence: 2, CodeUnknownProducerID: 1, CodeCorruptMessage: 1}, ce.ByCode)
	assert.Equal(t, map[string]int{CodeOutOfOrderSequence: 1}, ce.NoFault)
	require.Len(t, ce.ByWindow, 1)
	w := ce.ByWindow[0]
	assert.Equal(t, int64(11), w.Start)
	assert.Equal(t, int64(21), w.End)
	assert.Contains(t, w.Label, "kill")
	assert.Equal(t, map[string]int{CodeUnknownProducerID: 1, CodeCorruptMessage: 1}, w.During)
	assert.Equal(t, map[string]int{CodeOutOfOrderSequence: 1}, w.After)
	require.Len(t, ce.Examples, 4)
	assert.Equal(t, int64(5), ce.Examples[1].Op)
	assert.NotContains(t, res.Anomalies, AnomalyClientError, "counted, not failed, unless asked")
}

func TestFailOnClientErrorsMakesTheResultInvalid(t *testing.T) {
	h := clientErrorHistory()
	res := Analyze(context.Background(), h, Options{SkipLinear: true, FailOnClientErrors: []string{CodeUnknownProducerID}})
	assert.Equal(t, Invalid, res.Valid)
	a := res.Anomalies[AnomalyClientError]
	assert.Equal(t, 1, a.Count)
	require.Len(t, a.Examples, 1)
	assert.Contains(t, a.Examples[0].Text, "UNKNOWN_PRODUCER_ID")
	assert.Equal(t, []int64{5}, a.Examples[0].Ops)
	require.NotNil(t, res.FirstAnomalyNs)
	assert.Equal(t, int64(12), *res.FirstAnomalyNs, "the time of the first op an anomaly names, from the first client op")
	assert.Equal(t, []string{CodeUnknownProducerID}, res.ClientErrors.FailOn)

	res = Analyze(context.Background(), h, Options{SkipLinear: true, FailOnClientErrors: []string{CodeDataLoss}})
	assert.NotContains(t, res.Anomalies, AnomalyClientError, "no client got DATA_LOSS")
}
