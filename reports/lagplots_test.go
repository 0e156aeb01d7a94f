package reports

import (
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faultline/faultline/checker"
)

func historyOf(t *testing.T, jsonl string) checker.History {
	t.Helper()
	h, err := checker.NewReader(strings.NewReader(jsonl)).ReadAll()
	require.NoError(t, err)
	return h
}

func TestRealtimeLagIsTheAgeOfTheOldestValueAPollHadNotReached(t *testing.T) {
	h := historyOf(t, `{"index":0,"time":900000000,"process":0,"type":"invoke","f":"send","value":[["send",0,10]]}
{"index":1,"time":1000000000,"process":0,"type":"ok","f":"send","value":[["send",0,[0,10]]]}
{"index":2,"time":1900000000,"process":0,"type":"invoke","f":"send","value":[["send",0,11]]}
{"index":3,"time":2000000000,"process":0,"type":"ok","f":"send","value":[["send",0,[1,11]]]}
{"index":4,"time":2900000000,"process":0,"type":"invoke","f":"send","value":[["send",0,12]]}
{"index":5,"time":3000000000,"process":0,"type":"ok","f":"send","value":[["send",0,[2,12]]]}
{"index":6,"time":3900000000,"process":1,"type":"invoke","f":"poll","value":[["poll"]]}
{"index":7,"time":4000000000,"process":1,"type":"ok","f":"poll","value":[["poll",{"0":[[0,10]]}]]}
{"index":8,"time":4900000000,"process":1,"type":"invoke","f":"poll","value":[["poll"]]}
{"index":9,"time":5000000000,"process":1,"type":"ok","f":"poll","value":[["poll",{"0":[[1,11],[2,12]]}]]}
`)
	lags := realtimeLags(analyze(h))
	assert.Equal(t, []lagPoint{{4e9, 2e9}, {5e9, 0}}, lags[0],
		"at 4 s the poll had reached offset 0; offset 1 was acknowledged at 2 s")
}

// TestRealtimeLagOfAKeyNoOkSendAcknowledged: a poll returning a key whose
// sends all ended info (a power loss took every acknowledgement) has
// nothing to lag behind: lag 0, never a panic (it crashed a gate run).
func TestRealtimeLagOfAKeyNoOkSendAcknowledged(t *testing.T) {
	h := historyOf(t, `{"index":0,"time":900000000,"process":0,"type":"invoke","f":"send","value":[["send",3,10]]}
{"index":1,"time":1000000000,"process":0,"type":"info","f":"send","value":[["send",3,10]]}
{"index":2,"time":3900000000,"process":1,"type":"invoke","f":"poll","value":[["poll"]]}
{"index":3,"time":4000000000,"process":1,"type":"ok","f":"poll","value":[["poll",{"3":[[0,10]]}]]}
`)
	var lags map[int][]lagPoint
	require.NotPanics(t, func() { lags = realtimeLags(analyze(h)) })
	assert.Equal(t, []lagPoint{{4e9, 0}}, lags[3])
}

func TestUnseenAndLagPlotsAreDrawnWithAxesAndLegends(t *testing.T) {
	page := render(t, leaderLossInput(t))
	for _, title := range []string{"unseen: acknowledged values no poll had returned yet", "realtime lag: age of the oldest acknowledged value each poll had not reached"} {
		assert.Equal(t, 1, checkSVGs(t, plotSVG(t, page, title+`"`)))
	}
	contains(t, page, "unseen (2 at the end)")
}

func TestKeyPlotsAreZoomedToTheKeysActiveWindow(t *testing.T) {
	page := render(t, leaderLossInput(t))
	contains(t, page, `aria-label="offsets of key 1 (t0-1), 1.5 s to 20.2 s"`)
	contains(t, page, `aria-label="offsets of key 2 (t0-2), 9.7 s to 20.2 s"`)
	key2 := plotSVG(t, page, "offsets of key 2 (t0-2)")
	assert.NotContains(t, key2, "<title>nemesis kill", "the kill at 4.0 s is outside key 2's window")
	assert.Contains(t, key2, "send 202 → offset 1 acknowledged to op 15 at 11.0 s, not in the final reads", "the value overwritten on key 2 is marked")
}

func TestExamplesSpellOutTheirValuesAsSendsAndOffsets(t *testing.T) {
	page := unescape(render(t, leaderLossInput(t)))
	contains(t, page, "offset 1 of key 2 holds 2 different values [203 202] — send 203 → offset 1 (op 20); send 202 → offset 1 (op 15)")
	contains(t, page, "was never read, though polls reached offset 1 (op 26 read offset 1) — send 202 → offset 1 (op 15)")
}

// TestGuardedTurnsAPanicIntoAnError: a page builder's panic is an error of
// the write, never the end of the process.
func TestGuardedTurnsAPanicIntoAnError(t *testing.T) {
	err := guarded(func(io.Writer) error { panic("index out of range") })(io.Discard)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "index out of range")
	assert.NoError(t, guarded(func(io.Writer) error { return nil })(io.Discard))
}
