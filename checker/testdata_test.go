package checker

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var rewrite = flag.Bool("rewrite", false, "rewrite testdata/*.expected from the checker's output")

// summarize renders a result as the text kept in testdata/*.expected: the
// verdict, each checker, and every anomaly with its examples' sentences.
func summarize(res Result, readErr error) string {
	var b strings.Builder
	if readErr != nil {
		fmt.Fprintf(&b, "read error: %v\n", readErr)
	}
	fmt.Fprintf(&b, "valid: %s\nmode: %s txn: %v\n", res.Valid, res.Mode, res.Txn)
	for _, w := range res.Warnings {
		fmt.Fprintf(&b, "warning: %s\n", w)
	}
	for _, c := range res.Checkers {
		fmt.Fprintf(&b, "checker %s: %s", c.Name, c.Valid)
		if c.Error != "" {
			fmt.Fprintf(&b, " (%s)", c.Error)
		}
		b.WriteString("\n")
	}
	for _, name := range slices.Sorted(mapsKeys(res.Anomalies)) {
		a := res.Anomalies[name]
		allowed := ""
		if a.Allowed {
			allowed = " (allowed)"
		}
		fmt.Fprintf(&b, "%s: %d%s\n", name, a.Count, allowed)
		for _, ex := range a.Examples {
			fmt.Fprintf(&b, "  - %s\n", ex.Text)
		}
	}
	return b.String()
}

func mapsKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// TestTestdata replays every hand-written history in testdata/ and compares
// the verdict and anomalies with NAME.expected (go test -run TestTestdata
// -rewrite regenerates them; review the diff).
func TestTestdata(t *testing.T) {
	files, err := filepath.Glob("testdata/*.jsonl")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, path := range files {
		name := strings.TrimSuffix(filepath.Base(path), ".jsonl")
		t.Run(name, func(t *testing.T) {
			res, readErr := CheckFile(path, Options{})
			got := summarize(res, readErr)
			want := strings.TrimSuffix(path, ".jsonl") + ".expected"
			if *rewrite {
				require.NoError(t, os.WriteFile(want, []byte(got), 0o644))
				return
			}
			exp, err := os.ReadFile(want)
			require.NoError(t, err, "run go test -run TestTestdata -rewrite to create it")
			assert.Equal(t, string(exp), got)
			if strings.HasPrefix(name, "valid-") {
				assert.Equal(t, Valid, res.Valid, "a valid-* history must check valid")
			} else {
				assert.NotEqual(t, Valid, res.Valid, "an anomalous history must not check valid")
			}
		})
	}
}

func TestTestdataAnomalyPerFile(t *testing.T) {
	// Each anomaly has a history of its own that must show it.
	files := map[string]string{
		AnomalyLostWrite: "lost-write", AnomalyUnseen: "unseen", AnomalyDuplicate: "duplicate",
		AnomalyInconsistentOffsets: "inconsistent-offsets", AnomalyPollSkip: "poll-skip",
		AnomalyIntPollSkip: "int-poll-skip", AnomalyNonmonotonicPoll: "nonmonotonic-poll",
		AnomalyIntNonmonotonicPoll: "int-nonmonotonic-poll", AnomalyNonmonotonicSend: "nonmonotonic-send",
		AnomalyIntNonmonotonicSend: "int-nonmonotonic-send", AnomalyIntSendSkip: "valid-int-send-skip",
		AnomalyG1a: "g1a", AnomalyPrecommittedRead: "precommitted-read", AnomalyNonlinearizable: "nonlinearizable",
		AnomalyG0: "valid-g0", AnomalyG1c: "g1c", AnomalyG1cProcess: "g1c-process", AnomalyG1cRealtime: "g1c-realtime",
		AnomalyLostLatestValue: "lost-latest-value", AnomalyResurrectedDelete: "resurrected-delete",
	}
	for anomaly, file := range files {
		res, err := CheckFile(filepath.Join("testdata", file+".jsonl"), Options{})
		require.NoError(t, err, file)
		assert.Contains(t, res.Anomalies, anomaly, file)
	}
}
