package reports

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/faultline/faultline/checker"
)

func TestSummaryInvalid(t *testing.T) {
	s := Summary(invalidInput())
	assert.Contains(t, s, "INVALID: 3 acknowledged writes were lost on key 2 (t0-2) after the nemesis killed n1 at 41.2 s")
	assert.Contains(t, s, "  - 1 value was written at two offsets")
	assert.Regexp(t, `lost-write\s+3\n\s+e\.g\. value 102 acknowledged at offset 2 of key 2 was never read\n`, s)
	assert.Regexp(t, `duplicate\s+1\n`, s)
	assert.Regexp(t, `send\s+6 ok\s+0 fail\s+0 info`, s)
	assert.Regexp(t, `send:ok\s+4\.00 /\s+4\.00`, s)
	assert.Contains(t, s, "no successful send for 2.8 s in 1 window:\n  41.2 s – 44.0 s")
	assert.LessOrEqual(t, strings.Count(s, "\n"), 40, "fits one screen")
}

func TestSummaryValidAndUnknown(t *testing.T) {
	s := Summary(validInput())
	assert.True(t, strings.HasPrefix(s, "queue-kill-valid\nVALID: no anomalies"), s)
	assert.Contains(t, s, "sends succeeded throughout")

	s = Summary(unknownInput())
	assert.Contains(t, s, "UNKNOWN: the linearizable checker could not decide: porcupine timed out after 30s on key 2")
	assert.Contains(t, s, "checker linearizable: unknown: porcupine timed out")

	in := unknownInput()
	in.Result.Anomalies = map[string]checker.AnomalyReport{"duplicate": {Count: 2, Examples: []checker.Example{{Key: 1, Offsets: []int64{3, 4}}}}}
	assert.Contains(t, Summary(in), `    e.g. {"key":1,"offsets":[3,4],"text":""}`)
}

func TestErrorsOfFailedAndIndeterminateOps(t *testing.T) {
	s := Summary(validInput())
	assert.Contains(t, s, "errors of failed / indeterminate ops:\n       1 fail      0 info  NOT_LEADER_OR_FOLLOWER\n")
	page := render(t, validInput())
	contains(t, page, `<td class="value">NOT_LEADER_OR_FOLLOWER</td><td class="num">1</td><td class="num">0</td>`)

	in := validInput()
	in.History = nil
	in.Result.Stats.InfoErrors = map[string]int{"timed out": 4, "": 1}
	s = Summary(in)
	assert.Contains(t, s, "     0 fail      4 info  timed out\n")
	assert.Contains(t, s, "     0 fail      1 info  (no error text)\n")
}
