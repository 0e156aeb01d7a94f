package reports

import (
	"bytes"
	"context"
	"encoding/xml"
	"html"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faultline/faultline/checker"
)

// TestReportsOfCheckerTestdata renders the checker's own known-good and
// known-bad histories through the real checker: the headline matches the
// verdict, every anomaly found gets a section, the plots are well-formed
// SVG and junit has one case per checker.
func TestReportsOfCheckerTestdata(t *testing.T) {
	paths, err := filepath.Glob(filepath.Join("..", "checker", "testdata", "*.jsonl"))
	require.NoError(t, err)
	require.NotEmpty(t, paths)
	for _, p := range paths {
		t.Run(filepath.Base(p), func(t *testing.T) {
			h, err := checker.ReadHistory(p)
			require.False(t, err != nil && h == nil, "every testdata history decodes: %v", err)
			res := checker.Analyze(context.Background(), h, checker.Options{})
			in := Input{Spec: Spec{Name: filepath.Base(p)}, Result: res, History: h}
			page := render(t, in)
			parseLoose(t, page)
			checkSVGs(t, page)
			word := validityWord(res.Valid)
			contains(t, page, `<div class="headline">`+word+": ")
			for name, rep := range res.Anomalies {
				if rep.Count > 0 {
					contains(t, page, `id="anomaly-`+name+`"`)
				}
			}
			if res.Valid == checker.Invalid {
				lacks(t, page, html.EscapeString("the checkers found the history inconsistent"))
			}

			var buf bytes.Buffer
			require.NoError(t, WriteJUnit(&buf, in))
			var j parsedJUnit
			require.NoError(t, xml.Unmarshal(buf.Bytes(), &j))
			assert.Len(t, j.Suites[0].Cases, max(len(res.Checkers), 1))
			assert.True(t, strings.HasPrefix(Summary(in), filepath.Base(p)+"\n"+word))
		})
	}
}

func TestLostWriteTestdataSentence(t *testing.T) {
	h, err := checker.ReadHistory(filepath.Join("..", "checker", "testdata", "lost-write.jsonl"))
	require.NoError(t, err)
	res := checker.Analyze(context.Background(), h, checker.Options{})
	require.Equal(t, checker.Invalid, res.Valid)
	s := Summary(Input{Result: res, History: h})
	assert.Contains(t, s, "INVALID: 1 acknowledged write was lost on key 0 (lost-write; acknowledged at 4.0 µs)")
}

func TestBadgesCountWhatTheCheckerCounts(t *testing.T) {
	h, err := checker.ReadHistory(filepath.Join("..", "checker", "testdata", "lost-write.jsonl"))
	require.NoError(t, err)
	res := checker.Analyze(context.Background(), h, checker.Options{})
	require.Equal(t, 1, res.Anomalies[checker.AnomalyLostWrite].ByKey[0])
	require.Equal(t, 1, res.Anomalies[checker.AnomalyUnseen].ByKey[0])
	page := render(t, Input{Result: res, History: h})
	contains(t, page, `<span class="badge forbidden">1 lost</span>`)
	contains(t, page, `<span class="badge unknown">1 unseen</span>`)
	contains(t, page, "send 11 → offset 1 acknowledged to op 3")

	// The badge follows the checker even where the history alone would
	// count otherwise.
	res.Anomalies[checker.AnomalyUnseen] = checker.AnomalyReport{Count: 7, ByKey: map[int]int{0: 7}}
	contains(t, render(t, Input{Result: res, History: h}), `<span class="badge unknown">7 unseen</span>`)
}

func TestDisciplineWarningsAreShown(t *testing.T) {
	h, err := checker.ReadHistory(filepath.Join("..", "checker", "testdata", "valid-discipline-warnings.jsonl"))
	require.NoError(t, err)
	res := checker.Analyze(context.Background(), h, checker.Options{})
	page := render(t, Input{Result: res, History: h})
	contains(t, page, `<div class="headline">VALID: `)
	contains(t, page, html.EscapeString("op 6: process 2 invokes again after its op 5 ended info"))
	assert.Contains(t, Summary(Input{Result: res, History: h}), "\n  - op 6: process 2 invokes again after its op 5 ended info\n")
}
