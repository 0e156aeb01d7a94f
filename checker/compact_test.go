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

// compactionStalled is a transactional compaction history whose final
// scan never got to the end: key 1's latest acknowledged put at offset
// 4, key 2's at offset 1 (both in partition 0), key 3's at offset 7 (in
// partition 1), and the harness's stalled-reads event with stalls (the
// JSON objects of its list).
func compactionStalled(t *testing.T, stalls string) CheckerResult {
	t.Helper()
	return compaction(t, `{"index":0,"time":0,"process":0,"type":"invoke","f":"put","value":[1,10]}
{"index":1,"time":1,"process":0,"type":"ok","f":"put","value":[1,10,0]}
{"index":2,"time":2,"process":0,"type":"invoke","f":"put","value":[2,20]}
{"index":3,"time":3,"process":0,"type":"ok","f":"put","value":[2,20,1]}
{"index":4,"time":4,"process":0,"type":"invoke","f":"put","value":[1,11]}
{"index":5,"time":5,"process":0,"type":"ok","f":"put","value":[1,11,4]}
{"index":6,"time":6,"process":0,"type":"invoke","f":"put","value":[3,30]}
{"index":7,"time":7,"process":0,"type":"ok","f":"put","value":[3,30,7]}
{"index":8,"time":8,"process":1,"type":"invoke","f":"scan","value":null}
{"index":9,"time":9,"process":1,"type":"fail","f":"scan","value":null,"error":"scan did not reach the end of partitions map[0:6]"}
{"index":10,"time":10,"process":"harness","type":"info","f":"stalled-reads","value":[`+stalls+`]}
`)
}

// TestCompactionStuckLastStableOffsetIsUnseen: with no scan to the end, a
// key whose latest acknowledged put lies at or above a last stable offset
// held below the high watermark, by a transaction the harness has seen
// open for longer than its timeout and the abort check's grace, can never
// be read committed: unseen, the open transaction named. A key below it
// (2) and a key of a partition the scans finished (3) are not judged, and
// a young transaction opened above the put does not hold it.
func TestCompactionStuckLastStableOffsetIsUnseen(t *testing.T) {
	p0 := `"topic":"c0","partition":0,"high-watermark":6,"last-stable-offset":2,"txn-timeout-ms":10000,` +
		`"open-transactions":[{"producer-id":7,"epoch":3,"first-offset":2,"open-for-ms":30000},{"producer-id":8,"epoch":1,"first-offset":5,"open-for-ms":10}]`
	res := compactionStalled(t, `{"key":1,`+p0+`},{"key":2,`+p0+`}`)
	assert.Equal(t, Invalid, res.Valid)
	require.Contains(t, res.Anomalies, AnomalyUnseen)
	a := res.Anomalies[AnomalyUnseen]
	assert.Equal(t, 1, a.Count)
	assert.Equal(t, 1, a.Examples[0].Key)
	assert.Equal(t, int64(4), *a.Examples[0].Offset)
	assert.Equal(t, int64(5), *a.Examples[0].Writer)
	assert.Contains(t, a.Examples[0].Text, "last stable offset 2, below its high watermark 6: held by the open transaction of producer 7 epoch 3 from offset 2 (seen open for 30000 ms), each seen open")
	assert.Contains(t, a.Examples[0].Text, "past the 10000 ms transaction timeout")
	assert.NotContains(t, a.Examples[0].Text, "producer 8")
}

// TestCompactionHighWatermarkBelowLatestIsLost: a latest acknowledged put
// at or above the healed partition's high watermark is gone, whatever the
// last stable offset (here not listed) and in any run.
func TestCompactionHighWatermarkBelowLatestIsLost(t *testing.T) {
	res := compactionStalled(t, `{"key":1,"topic":"c0","partition":0,"high-watermark":3,"last-stable-offset":-1,"error":"last stable offset: timeout"}`)
	assert.Equal(t, Invalid, res.Valid)
	require.Contains(t, res.Anomalies, AnomalyLostLatestValue)
	assert.Contains(t, res.Anomalies[AnomalyLostLatestValue].Examples[0].Text, "high watermark 3, listed after them, is at or below it")
}

// TestCompactionStallsThatProveNothingAreUnknown: stalls that do not show
// a put out of every reader's reach leave the final state unknown, with
// the reason: a last stable offset at the high watermark (the scan could
// have read on), a cluster that never served again after the heal,
// offsets that could not be listed, a scan that was not read_committed (no
// transaction timeout recorded), no open transaction listed, none starting
// at the last stable offset, one seen open for no longer than its timeout
// and the abort check's grace (or first seen by this look, whatever the
// broker's own timestamp says), and a young one below the put beside an
// old one.
func TestCompactionStallsThatProveNothingAreUnknown(t *testing.T) {
	const held = `"topic":"c0","partition":0,"high-watermark":6,"last-stable-offset":2`
	const txn = `{"producer-id":7,"epoch":3,"first-offset":2,"open-for-ms":30000}`
	for name, c := range map[string]struct{ stall, why string }{
		"not held":          {`{"key":1,"topic":"c0","partition":0,"high-watermark":6,"last-stable-offset":6}`, "no key's latest acknowledged put"},
		"unrecovered":       {`{"key":1,` + held + `,"txn-timeout-ms":10000,"open-transactions":[` + txn + `],"unrecovered":true}`, "no key's latest acknowledged put"},
		"unlisted":          {`{"key":1,"topic":"c0","partition":0,"high-watermark":-1,"last-stable-offset":-1,"error":"high watermark: timeout"}`, "no key's latest acknowledged put"},
		"not committed":     {`{"key":1,` + held + `,"open-transactions":[` + txn + `]}`, "no key's latest acknowledged put"},
		"nothing open":      {`{"key":1,` + held + `,"txn-timeout-ms":10000}`, "but no transaction listed open at or below the put starts there (no open transaction was listed)"},
		"not at the lso":    {`{"key":1,` + held + `,"txn-timeout-ms":10000,"open-transactions":[{"producer-id":7,"epoch":3,"first-offset":3,"open-for-ms":30000}]}`, "starts there"},
		"within timeout":    {`{"key":1,` + held + `,"txn-timeout-ms":10000,"open-transactions":[{"producer-id":7,"epoch":3,"first-offset":2,"open-for-ms":20000}]}`, "seen open for 20000 ms: within its 10000 ms timeout"},
		"first seen now":    {`{"key":1,` + held + `,"txn-timeout-ms":10000,"open-transactions":[{"producer-id":7,"epoch":3,"first-offset":2,"last-timestamp":5}]}`, "seen open for 0 ms"},
		"a young one below": {`{"key":1,` + held + `,"txn-timeout-ms":10000,"open-transactions":[` + txn + `,{"producer-id":8,"epoch":1,"first-offset":3,"open-for-ms":100}]}`, "producer 8 epoch 1 from offset 3, seen open for 100 ms"},
	} {
		t.Run(name, func(t *testing.T) {
			res := compactionStalled(t, c.stall)
			assert.Equal(t, Unknown, res.Valid)
			assert.Contains(t, res.Error, "the final scans stopped short")
			assert.Contains(t, res.Error, c.why)
		})
	}
}

// TestCompactionStallsGiveWayToAScan: once a scan reached the end, the
// stalls of earlier attempts are not judged; the scan is.
func TestCompactionStallsGiveWayToAScan(t *testing.T) {
	res := compaction(t, `{"index":0,"time":0,"process":0,"type":"invoke","f":"put","value":[1,10]}
{"index":1,"time":1,"process":0,"type":"ok","f":"put","value":[1,10,4]}
{"index":2,"time":2,"process":"harness","type":"info","f":"stalled-reads","value":[{"key":1,"topic":"c0","partition":0,"high-watermark":3,"last-stable-offset":3}]}
{"index":3,"time":3,"process":1,"type":"invoke","f":"scan","value":null}
{"index":4,"time":4,"process":1,"type":"ok","f":"scan","value":{"1":[[4,10]]}}
`)
	assert.Equal(t, Valid, res.Valid, "%v", res.Anomalies)
}
