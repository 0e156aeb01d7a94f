package reports

import (
	"bytes"
	"encoding/xml"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faultline/faultline/checker"
)

type parsedJUnit struct {
	XMLName  xml.Name `xml:"testsuites"`
	Tests    int      `xml:"tests,attr"`
	Failures int      `xml:"failures,attr"`
	Errors   int      `xml:"errors,attr"`
	Suites   []struct {
		Name  string `xml:"name,attr"`
		Tests int    `xml:"tests,attr"`
		Cases []struct {
			Name    string `xml:"name,attr"`
			Failure *struct {
				Message string `xml:"message,attr"`
				Text    string `xml:",chardata"`
			} `xml:"failure"`
			Error *struct {
				Message string `xml:"message,attr"`
			} `xml:"error"`
			Skipped *struct{} `xml:"skipped"`
		} `xml:"testcase"`
		SystemOut string `xml:"system-out"`
	} `xml:"testsuite"`
}

func junitOf(t *testing.T, in Input) parsedJUnit {
	t.Helper()
	var buf bytes.Buffer
	require.NoError(t, WriteJUnit(&buf, in))
	var j parsedJUnit
	require.NoError(t, xml.Unmarshal(buf.Bytes(), &j), buf.String())
	require.Len(t, j.Suites, 1)
	return j
}

func TestJUnitInvalidHasOneCasePerCheckerWithFailure(t *testing.T) {
	j := junitOf(t, invalidInput())
	s := j.Suites[0]
	assert.Equal(t, "queue-kill-acks1", s.Name)
	require.Len(t, s.Cases, 2)
	assert.Equal(t, 2, s.Tests)
	assert.Equal(t, 1, j.Failures)
	assert.Equal(t, 0, j.Errors)
	queue, lin := s.Cases[0], s.Cases[1]
	assert.Equal(t, "queue", queue.Name)
	require.NotNil(t, queue.Failure)
	assert.Equal(t, "invalid: 3 acknowledged writes were lost (lost-write); 1 value was written at two offsets (duplicate)", queue.Failure.Message)
	assert.Contains(t, queue.Failure.Text, "lost-write: 3")
	assert.Contains(t, queue.Failure.Text, "first example:")
	assert.Equal(t, "linearizable", lin.Name)
	assert.Nil(t, lin.Failure)
	assert.Nil(t, lin.Error)
	assert.Contains(t, s.SystemOut, "INVALID: 3 acknowledged writes were lost")
}

func TestJUnitUnknownIsAnError(t *testing.T) {
	j := junitOf(t, unknownInput())
	s := j.Suites[0]
	require.Len(t, s.Cases, 2)
	assert.Nil(t, s.Cases[0].Failure)
	require.NotNil(t, s.Cases[1].Error)
	assert.Nil(t, s.Cases[1].Skipped, "unknown is never a skip")
	assert.Equal(t, "unknown: porcupine timed out after 30s on key 2", s.Cases[1].Error.Message)
	assert.Equal(t, 1, j.Errors)
	assert.Equal(t, 0, j.Failures)
}

func TestJUnitValidAndWithoutCheckers(t *testing.T) {
	j := junitOf(t, validInput())
	assert.Zero(t, j.Failures+j.Errors)
	assert.Len(t, j.Suites[0].Cases, 2)

	in := invalidInput()
	in.Result.Checkers = nil
	j = junitOf(t, in)
	require.Len(t, j.Suites[0].Cases, 1, "the merged verdict stands in for missing checkers")
	require.NotNil(t, j.Suites[0].Cases[0].Failure)
	assert.Equal(t, "faultline", j.Suites[0].Cases[0].Name)
}

func TestJUnitAllowedAnomaliesDoNotFailTheMessage(t *testing.T) {
	in := validInput()
	in.Result.Mode = checker.ModeSubscribe
	in.Result.Valid = checker.Invalid
	in.Result.Checkers = []checker.CheckerResult{{Name: "queue", Valid: checker.Invalid, Anomalies: map[string]checker.AnomalyReport{
		"poll-skip": {Count: 1, Allowed: true}, "unseen": {Count: 2},
	}}}
	j := junitOf(t, in)
	require.NotNil(t, j.Suites[0].Cases[0].Failure)
	assert.Equal(t, "invalid: 2 acknowledged writes were never read back (unseen)", j.Suites[0].Cases[0].Failure.Message)
}
