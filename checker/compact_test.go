package checker

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func compaction(t *testing.T, lines string) CheckerResult {
	t.Helper()
	return CompactionChecker(Options{}).Check(context.Background(), parseLines(t, lines))
}

// TestCompactionUnexplainedLaterValue: a value above the latest
// acknowledged offset that no uncertain put wrote is a lost latest value.
func TestCompactionUnexplainedLaterValue(t *testing.T) {
	res := compaction(t, `{"index":0,"time":0,"process":0,"type":"invoke","f":"put","value":[1,10]}
{"index":1,"time":1,"process":0,"type":"ok","f":"put","value":[1,10,0]}
{"index":2,"time":2,"process":1,"type":"invoke","f":"scan","value":null}
{"index":3,"time":3,"process":1,"type":"ok","f":"scan","value":{"1":[[0,10],[5,99]]}}
`)
	assert.Equal(t, Invalid, res.Valid)
	require.Contains(t, res.Anomalies, AnomalyLostLatestValue)
	assert.Contains(t, res.Anomalies[AnomalyLostLatestValue].Examples[0].Text, "value 99 at offset 5")
}

// TestCompactionDeletedKeyTombstoneGone: an acknowledged delete whose
// tombstone the cleaner already removed (after delete.retention.ms) leaves
// no record: valid. A latest value that vanished is not.
func TestCompactionDeletedKeyTombstoneGone(t *testing.T) {
	res := compaction(t, `{"index":0,"time":0,"process":0,"type":"invoke","f":"put","value":[1,10]}
{"index":1,"time":1,"process":0,"type":"ok","f":"put","value":[1,10,0]}
{"index":2,"time":2,"process":0,"type":"invoke","f":"put","value":[1,null]}
{"index":3,"time":3,"process":0,"type":"ok","f":"put","value":[1,null,1]}
{"index":4,"time":4,"process":0,"type":"invoke","f":"put","value":[2,20]}
{"index":5,"time":5,"process":0,"type":"ok","f":"put","value":[2,20,2]}
{"index":6,"time":6,"process":1,"type":"invoke","f":"scan","value":null}
{"index":7,"time":7,"process":1,"type":"ok","f":"scan","value":{}}
`)
	assert.Equal(t, Invalid, res.Valid)
	assert.Equal(t, 1, res.Anomalies[AnomalyLostLatestValue].Count, "key 2's value is gone; key 1's absence is its delete")
	assert.Equal(t, 2, res.Anomalies[AnomalyLostLatestValue].Examples[0].Key)
}

// TestCompactionWithoutScanIsUnknown: puts but no final scan prove nothing.
func TestCompactionWithoutScanIsUnknown(t *testing.T) {
	res := compaction(t, `{"index":0,"time":0,"process":0,"type":"invoke","f":"put","value":[1,10]}
{"index":1,"time":1,"process":0,"type":"ok","f":"put","value":[1,10,0]}
`)
	assert.Equal(t, Unknown, res.Valid)
}

// TestCompactionMalformedValueIsUnknown: a put whose value breaks the
// schema makes the checker unknown with the op named, never a panic.
func TestCompactionMalformedValueIsUnknown(t *testing.T) {
	res := compaction(t, `{"index":0,"time":0,"process":0,"type":"invoke","f":"put","value":["a",10]}
{"index":1,"time":1,"process":0,"type":"ok","f":"put","value":["a",10,0]}
`)
	assert.Equal(t, Unknown, res.Valid)
	assert.Contains(t, res.Error, "op 1")
}

func FuzzParsePut(f *testing.F) {
	for _, s := range []string{`[1,2]`, `[1,null,3]`, `[1,2,null]`, `[]`, `[1,2,3,4]`, `{"a":1}`, `[1.5,2]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		pv, err := ParsePut(b)
		if err == nil && pv.Offset != nil && pv.Value == nil {
			_ = *pv.Offset
		}
	})
}

func FuzzParseScan(f *testing.F) {
	for _, s := range []string{`{"1":[[0,1],[1,null]]}`, `{}`, `{"x":[]}`, `{"1":[[0]]}`, `null`, `{"1":[[0,1,2]]}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := ParseScan(b)
		if err == nil {
			for _, es := range m {
				for range es {
				}
			}
		}
	})
}

// TestCompactionAbortedValueIsAnAbortedRead: under transactions a put that
// failed (its transaction aborted) must never show in the committed scan;
// when the cleaner (or a broken index) lets it through, that is G1a, and
// the key's latest committed value is judged as before.
func TestCompactionAbortedValueIsAnAbortedRead(t *testing.T) {
	res := compaction(t, `{"index":0,"time":0,"process":0,"type":"invoke","f":"put","value":[1,10]}
{"index":1,"time":1,"process":0,"type":"ok","f":"put","value":[1,10,0]}
{"index":2,"time":2,"process":0,"type":"invoke","f":"put","value":[1,11]}
{"index":3,"time":3,"process":0,"type":"fail","f":"put","value":[1,11,2],"error":"aborted on purpose"}
{"index":4,"time":4,"process":1,"type":"invoke","f":"scan","value":null}
{"index":5,"time":5,"process":1,"type":"ok","f":"scan","value":{"1":[[0,10],[2,11]]}}
`)
	assert.Equal(t, Invalid, res.Valid)
	require.Contains(t, res.Anomalies, AnomalyG1a)
	assert.Equal(t, "the final scan op 5 shows value 11 of key 1 at offset 2, written by op 3, which failed (its transaction aborted)",
		res.Anomalies[AnomalyG1a].Examples[0].Text)
	assert.Contains(t, res.Anomalies, AnomalyLostLatestValue, "the aborted value also stands last, over the committed one")

	res = compaction(t, `{"index":0,"time":0,"process":0,"type":"invoke","f":"put","value":[1,10]}
{"index":1,"time":1,"process":0,"type":"ok","f":"put","value":[1,10,0]}
{"index":2,"time":2,"process":0,"type":"invoke","f":"put","value":[1,11]}
{"index":3,"time":3,"process":0,"type":"fail","f":"put","value":[1,11,2],"error":"aborted on purpose"}
{"index":4,"time":4,"process":1,"type":"invoke","f":"scan","value":null}
{"index":5,"time":5,"process":1,"type":"ok","f":"scan","value":{"1":[[0,10]]}}
`)
	assert.Equal(t, Valid, res.Valid, "the aborted record is skipped: the committed value is last")

	res = compaction(t, `{"index":0,"time":0,"process":0,"type":"invoke","f":"put","value":[1,10]}
{"index":1,"time":1,"process":0,"type":"ok","f":"put","value":[1,10,0]}
{"index":2,"time":2,"process":0,"type":"invoke","f":"put","value":[1,11]}
{"index":3,"time":3,"process":0,"type":"fail","f":"put","value":[1,11,2],"error":"aborted on purpose"}
{"index":4,"time":4,"process":1,"type":"invoke","f":"scan","value":null}
{"index":5,"time":5,"process":1,"type":"ok","f":"scan","value":{}}
`)
	assert.Equal(t, Invalid, res.Valid)
	assert.Contains(t, res.Anomalies, AnomalyLostLatestValue, "a cleaner that let the open transaction's record supersede the committed one, then dropped both")
}

// TestCompactionAbortedDeleteIsAnAbortedRead: an aborted delete's
// tombstone, known by the offset its answered send reported, must not show
// either.
func TestCompactionAbortedDeleteIsAnAbortedRead(t *testing.T) {
	res := compaction(t, `{"index":0,"time":0,"process":0,"type":"invoke","f":"put","value":[1,10]}
{"index":1,"time":1,"process":0,"type":"ok","f":"put","value":[1,10,0]}
{"index":2,"time":2,"process":0,"type":"invoke","f":"put","value":[1,null]}
{"index":3,"time":3,"process":0,"type":"fail","f":"put","value":[1,null,2],"error":"aborted on purpose"}
{"index":4,"time":4,"process":1,"type":"invoke","f":"scan","value":null}
{"index":5,"time":5,"process":1,"type":"ok","f":"scan","value":{"1":[[0,10],[2,null]]}}
`)
	assert.Equal(t, Invalid, res.Valid)
	require.Contains(t, res.Anomalies, AnomalyG1a)
	assert.Equal(t, "the final scan op 5 shows the tombstone of key 1 at offset 2, written by op 3, which failed (its transaction aborted)",
		res.Anomalies[AnomalyG1a].Examples[0].Text)
}
