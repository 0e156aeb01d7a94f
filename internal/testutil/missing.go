package testutil

import (
	"os"
	"strings"
	"testing"
)

// Missing ends a test whose outside tool (a foreign Kafka client, a
// browser) is not installed. Outside CI it skips with msg, which should say
// how to install the tool (`make deps` does); in CI (CI=true, as .ci/run
// sets) it fails, so a CI machine without the tool cannot pass without
// running the test.
func Missing(t testing.TB, msg string) {
	t.Helper()
	if InCI() {
		t.Fatal(msg + " (failing, not skipping, because CI is set)")
	}
	t.Skip(msg)
}

// InCI reports whether the tests run in CI, as CI services and .ci/run say
// through the CI environment variable.
func InCI() bool {
	v := strings.ToLower(os.Getenv("CI"))
	return v != "" && v != "0" && v != "false"
}
