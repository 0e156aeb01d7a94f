package reports

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
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

// BenchmarkRenderDir100k measures `faultline report DIR` on a stored
// 10^5-operation run: decoding history.jsonl and results.json, rendering
// report.html and junit.xml, writing both.
func BenchmarkRenderDir100k(b *testing.B) {
	in := benchInput(100_000)
	dir := b.TempDir()
	res, err := json.Marshal(in.Result)
	if err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, FileResults), res, 0o644); err != nil {
		b.Fatal(err)
	}
	if err := checker.WriteHistory(filepath.Join(dir, FileHistory), in.History); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := RenderDir(dir); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkWriteRun1M measures what the harness does at the end of a
// 10^6-operation run: report.html, timeline.html and junit.xml from the
// values in memory.
func BenchmarkWriteRun1M(b *testing.B) {
	in := benchInput(1_000_000)
	dir := b.TempDir()
	b.ReportAllocs()
	for b.Loop() {
		if err := WriteRun(dir, in); err != nil {
			b.Fatal(err)
		}
	}
}
