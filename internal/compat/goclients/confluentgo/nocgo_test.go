//go:build !cgo

package confluentgo

import (
	"os"
	"testing"
)

// TestConfluentGoNeedsCgo stands for this package's tests where cgo is
// off (CGO_ENABLED=0 or no C compiler): librdkafka is C.
func TestConfluentGoNeedsCgo(t *testing.T) {
	msg := "confluent-kafka-go needs cgo: install a C compiler (apt-get install gcc) and run with CGO_ENABLED=1"
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}
