package compat

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestFranzGoSuite runs franz-go's own integration tests (the _test.go
// files of github.com/twmb/franz-go/pkg/kgo, at the version go.mod pins)
// against a three-node cluster of the real binary, started as README.md's
// "Run a cluster by hand" shows. franz-go's authors wrote them against
// Apache Kafka and Redpanda; they check exactly-once end to end
// (TestTxnEtl: transactional consume-transform-produce chains through
// GroupTransactSession with read_committed consumers, every record exactly
// once), consumer groups under rebalances (TestGroupETL), produce and
// fetch of every shape, and KGO_TEST_CHAOS=1 adds their own dialer that
// fails connections at random. The suite reads KGO_SEEDS and KGO_TEST_RF;
// KGO_TEST_RECORDS bounds its record counts (default 500000).
//
// A failure here is the broker disagreeing with tests it was not written
// for: it must be fixed in the broker, never by narrowing the run.
func TestFranzGoSuite(t *testing.T) {
	if testing.Short() {
		t.Skip("franz-go's suite takes about 90 s; skipped with -short")
	}
	// The go command that runs this test runs franz-go's; on PATH, else
	// in the GOROOT this test was built with.
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	_, err = os.Stat(goBin)
	require.NoError(t, err, "the go command to run franz-go's tests with")
	c := startKcatCluster(t, 3, 0)
	for _, chaos := range []bool{false, true} {
		name, run := "all", ""
		if chaos {
			// The chaos dialer only matters where connections carry
			// state: the exactly-once and group chains.
			name, run = "chaos", "TestTxnEtl|TestGroupETL"
		}
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
			defer cancel()
			args := []string{"test", "-count", "1", "-timeout", "5m"}
			if run != "" {
				args = append(args, "-run", run)
			}
			cmd := exec.CommandContext(ctx, goBin, append(args, "github.com/twmb/franz-go/pkg/kgo")...)
			cmd.Env = append(os.Environ(),
				"KGO_SEEDS="+c.bootstrap(),
				"KGO_TEST_RF=3",
				"KGO_TEST_RECORDS=20000",
			)
			if chaos {
				cmd.Env = append(cmd.Env, "KGO_TEST_CHAOS=1")
			}
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			err := cmd.Run()
			if err != nil {
				t.Logf("franz-go's failures:\n%s", failures(out.String()))
				t.Logf("its output (clipped):\n%s", clip(out.String()))
			}
			require.NoError(t, err, "go test github.com/twmb/franz-go/pkg/kgo against the cluster at %s", c.bootstrap())
			require.Regexp(t, `(?m)^ok\s+github.com/twmb/franz-go/pkg/kgo`, out.String())
		})
	}
}

// failures is every line of go test's output that reports a failure, with
// the test's own messages under it.
func failures(out string) string {
	fail := regexp.MustCompile(`^\s*(--- FAIL|panic:|\S+_test\.go:\d+:)`)
	var b strings.Builder
	for _, l := range strings.Split(out, "\n") {
		if fail.MatchString(l) {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}
