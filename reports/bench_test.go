package reports

import (
	"bytes"
	"io"
	"testing"

	"github.com/faultline/faultline/checker"
)

// benchInput is a 10^5-operation history over 16 keys with a kill every
// 15 s, and a result naming a few anomalies.
func benchInput(ops int) Input {
	in := invalidInput()
	in.History = syntheticHistory(ops, 16)
	in.Result.Perf = checker.Perf{}
	return in
}

func BenchmarkWriteHTML100k(b *testing.B) {
	in := benchInput(100_000)
	var buf bytes.Buffer
	b.ReportAllocs()
	for b.Loop() {
		buf.Reset()
		if err := WriteHTML(&buf, in); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(buf.Len()), "page-bytes")
}

func BenchmarkWriteHTML1M(b *testing.B) {
	in := benchInput(1_000_000)
	var buf bytes.Buffer
	b.ReportAllocs()
	for b.Loop() {
		buf.Reset()
		if err := WriteHTML(&buf, in); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(buf.Len()), "page-bytes")
}

func BenchmarkSummary100k(b *testing.B) {
	in := benchInput(100_000)
	b.ReportAllocs()
	for b.Loop() {
		_, _ = io.WriteString(io.Discard, Summary(in))
	}
}
