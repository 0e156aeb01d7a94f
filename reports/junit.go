package reports

import (
	"encoding/xml"
	"fmt"
	"io"
	"strings"

	"github.com/faultline/faultline/checker"
)

// The JUnit file has one test suite named after the test and one test case
// per checker (checker.Result.Checkers):
//   - valid   -> a passing case;
//   - invalid -> a case with a <failure> whose message is the anomaly summary
//     and whose text lists every anomaly with its count and first example;
//   - unknown -> a case with an <error>, not <skipped>: the checker could not
//     decide, faultline exits 2, and CI must not read that as a pass, which
//     most CI systems do with skipped cases.
// A result that lists no checkers gets a single case for the merged verdict.

type junitSuites struct {
	XMLName  xml.Name     `xml:"testsuites"`
	Name     string       `xml:"name,attr"`
	Tests    int          `xml:"tests,attr"`
	Failures int          `xml:"failures,attr"`
	Errors   int          `xml:"errors,attr"`
	Suites   []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name      string      `xml:"name,attr"`
	Tests     int         `xml:"tests,attr"`
	Failures  int         `xml:"failures,attr"`
	Errors    int         `xml:"errors,attr"`
	Skipped   int         `xml:"skipped,attr"`
	TimeS     string      `xml:"time,attr"`
	Props     *junitProps `xml:"properties,omitempty"`
	Cases     []junitCase `xml:"testcase"`
	SystemOut string      `xml:"system-out,omitempty"`
}

type junitProps struct {
	Props []junitProp `xml:"property"`
}

type junitProp struct {
	Name  string `xml:"name,attr"`
	Value string `xml:"value,attr"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	ClassName string        `xml:"classname,attr"`
	TimeS     string        `xml:"time,attr"`
	Failure   *junitProblem `xml:"failure,omitempty"`
	Error     *junitProblem `xml:"error,omitempty"`
}

type junitProblem struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr"`
	Text    string `xml:",chardata"`
}

// WriteJUnit writes junit.xml for one run.
func WriteJUnit(w io.Writer, in Input) error {
	name := in.Spec.Name
	if name == "" {
		name = "faultline"
	}
	durationS := "0"
	if n := len(in.History); n > 0 {
		durationS = fmt.Sprintf("%.3f", float64(in.History[n-1].Time)/1e9)
	}
	suite := junitSuite{Name: name, TimeS: durationS, SystemOut: Summary(in)}
	if in.Spec.Raw != nil || in.Spec.Seed != 0 {
		suite.Props = &junitProps{Props: []junitProp{
			{Name: "seed", Value: fmt.Sprint(in.Spec.Seed)},
			{Name: "workload", Value: in.Spec.Workload},
			{Name: "nemesis", Value: in.Spec.Nemesis.String()},
		}}
	}
	checkers := in.Result.Checkers
	if len(checkers) == 0 {
		checkers = []checker.CheckerResult{{Name: "faultline", Valid: in.Result.Valid, Anomalies: in.Result.Anomalies}}
	}
	for _, c := range checkers {
		tc := junitCase{Name: c.Name, ClassName: "faultline." + name, TimeS: "0"}
		switch c.Valid {
		case checker.Valid:
		case checker.Invalid:
			tc.Failure = &junitProblem{
				Message: failureMessage(c, in.Result),
				Type:    "invalid",
				Text:    anomalyDetail(c.Anomalies),
			}
			suite.Failures++
		default:
			why := c.Error
			if why == "" {
				why = "the checker could not decide"
			}
			tc.Error = &junitProblem{Message: "unknown: " + why, Type: "unknown", Text: anomalyDetail(c.Anomalies)}
			suite.Errors++
		}
		suite.Cases = append(suite.Cases, tc)
	}
	suite.Tests = len(suite.Cases)
	doc := junitSuites{Name: name, Tests: suite.Tests, Failures: suite.Failures, Errors: suite.Errors, Suites: []junitSuite{suite}}
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return fmt.Errorf("write junit: %w", err)
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return fmt.Errorf("write junit: %w", err)
	}
	if _, err := io.WriteString(w, "\n"); err != nil {
		return fmt.Errorf("write junit: %w", err)
	}
	return nil
}

// failureMessage summarizes an invalid checker in one line:
// "invalid: lost-write 3, duplicate 1".
func failureMessage(c checker.CheckerResult, r checker.Result) string {
	var parts []string
	for _, name := range orderedAnomalyNames(c.Anomalies) {
		rep := c.Anomalies[name]
		if rep.Count <= 0 || isAllowed(name, rep, r) {
			continue
		}
		parts = append(parts, kindOf(name).phrase(rep.Count)+" ("+name+")")
	}
	if len(parts) == 0 {
		if c.Error != "" {
			return "invalid: " + c.Error
		}
		return "invalid"
	}
	return "invalid: " + strings.Join(parts, "; ")
}

func anomalyDetail(m map[string]checker.AnomalyReport) string {
	var b strings.Builder
	for _, name := range orderedAnomalyNames(m) {
		rep := m[name]
		fmt.Fprintf(&b, "%s: %d\n  %s\n", name, rep.Count, kindOf(name).Definition)
		if len(rep.Examples) > 0 {
			fmt.Fprintf(&b, "  first example: %s\n", compactExample(rep.Examples[0], 600))
		}
	}
	return b.String()
}
