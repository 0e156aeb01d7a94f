package replica

import (
	"context"
	"testing"

	"github.com/faultline/faultline/broker/storage"
)

// FuzzProduce feeds arbitrary bytes to the produce path (the client's
// records go through storage validation, the producer-state checks and the
// leader's HW bookkeeping): it must never panic, must append only on
// success, and a successful append must move the log end past the offsets
// it reports.
func FuzzProduce(f *testing.F) {
	f.Add(batch("a"))
	f.Add(idempotent(3, 0, "x", "y"))
	f.Add(append(batch("a"), batch("b")...))
	f.Add([]byte{0, 0, 0, 0})
	b := startBroker(f, f.TempDir(), 1)
	f.Cleanup(func() { b.stop(f) })
	b.createTopic(f, "fuzz", 1, nil)
	l, ok := b.lm.GetLog(storage.TopicPartition{Topic: "fuzz", Partition: 0})
	if !ok {
		f.Fatal("no log")
	}
	f.Fuzz(func(t *testing.T, records []byte) {
		before := l.LogEndOffset()
		res := b.m.Produce(context.Background(), "fuzz", 0, append([]byte(nil), records...), 1)
		after := l.LogEndOffset()
		if res.ErrorCode != 0 {
			if after != before {
				t.Fatalf("failed produce (code %d) moved the log end from %d to %d", res.ErrorCode, before, after)
			}
			return
		}
		if res.BaseOffset < 0 || res.BaseOffset >= after {
			t.Fatalf("base offset %d outside the log [0, %d)", res.BaseOffset, after)
		}
	})
}
