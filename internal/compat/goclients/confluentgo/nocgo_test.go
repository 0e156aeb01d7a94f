//go:build !cgo

package confluentgo

import "testing"

// TestConfluentGoNeedsCgo stands for this package's tests where cgo is
// off (CGO_ENABLED=0 or no C compiler): librdkafka is C, so they cannot
// run, and the package fails saying what to install rather than passing
// with nothing checked. make test installs a C compiler where one is
// missing (scripts/deps.sh).
func TestConfluentGoNeedsCgo(t *testing.T) {
	t.Fatal("confluent-kafka-go needs cgo: install a C compiler (apt-get install gcc, or make deps) and run with CGO_ENABLED=1")
}
