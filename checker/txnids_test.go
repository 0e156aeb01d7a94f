package checker

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// txnIDHistory is one committed transaction, read back, and then the
// harness's probe of transactional ids with the given value.
func txnIDHistory(t *testing.T, probe string) History {
	t.Helper()
	var b strings.Builder
	line := historyLines(&b)
	line(`"process":0,"type":"invoke","f":"txn","value":[["send",0,10]]`)
	line(`"process":0,"type":"ok","f":"txn","value":[["send",0,[0,10]]]`)
	line(`"process":1,"type":"invoke","f":"poll","value":[["poll"]]`)
	line(`"process":1,"type":"ok","f":"poll","value":[["poll",{"0":[[0,10]]}]]`)
	if probe != "" {
		line(`"process":"harness","type":"info","f":"txn-id-probe","value":%s`, probe)
	}
	h, err := NewReader(strings.NewReader(b.String())).ReadAll()
	require.NoError(t, err)
	return h
}

// A transactional.id the probe found stuck makes the result invalid with
// stuck-transactional-id, whose example names the id and the refusals;
// ids that started are fine; an id the probe got no answer for leaves the
// verdict unknown; without a probe there is no such checker.
func TestStuckTransactionalID(t *testing.T) {
	analyze := func(probe string) Result {
		return Analyze(context.Background(), txnIDHistory(t, probe), Options{Txn: true, SkipLinear: true})
	}
	res := analyze(`[{"id":"faultline-1","ok":true,"attempts":1,"elapsed-ms":3},` +
		`{"id":"faultline-2","stuck":true,"attempts":90,"elapsed-ms":24012,"refused":81,"refused-ms":20011,"error":"CONCURRENT_TRANSACTIONS"}]`)
	assert.Equal(t, Invalid, res.Valid)
	require.Contains(t, res.Anomalies, AnomalyStuckTxnID)
	r := res.Anomalies[AnomalyStuckTxnID]
	assert.Equal(t, 1, r.Count)
	assert.Equal(t, []int64{4}, r.Examples[0].Ops, "the example points at the probe's event")
	assert.Contains(t, r.Examples[0].Text, `transactional.id "faultline-2": its coordinator answered 81 InitProducerId attempts over 20.0 s with CONCURRENT_TRANSACTIONS, without a break`)

	res = analyze(`[{"id":"faultline-1","ok":true,"attempts":3,"elapsed-ms":520}]`)
	assert.Equal(t, Valid, res.Valid)
	assert.Empty(t, res.Warnings, "a harness event is outside the invoke/complete discipline")
	res = analyze(`[{"id":"faultline-1","attempts":10,"elapsed-ms":30000,"error":"dial tcp: connection refused"}]`)
	assert.Equal(t, Unknown, res.Valid)
	assert.NotContains(t, res.Anomalies, AnomalyStuckTxnID)
	for _, c := range analyze("").Checkers {
		assert.NotEqual(t, "transactional-ids", c.Name)
	}
}
