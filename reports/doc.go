// Package reports turns one checked test run into what people read: a
// self-contained HTML page (report.html), a JUnit file for CI (junit.xml), a
// one-screen terminal summary, and a small web server that browses a store
// of runs (`faultline serve`).
//
// How to use it: build an Input from the test spec, the checker's Result,
// the recorded History and the relative links of the run's other files, then
// call WriteHTML, WriteJUnit or Summary. RenderDir does all of that from a
// stored run directory (`faultline report DIR`); Handler serves a whole store.
//
// The report states the verdict first, in sentences derived from the
// anomalies and the nemesis operations near them, then each anomaly with its
// definition (Jepsen's names) and offending operations, then plots drawn as
// hand-written SVG: latency (log scale) and throughput over time with fault
// intervals shaded, and a per-key offset timeline marking acknowledged
// offsets that no poll returned. Large histories are downsampled
// deterministically; every ok/fail/info outcome that is not ok is kept, and
// the page says when points were dropped.
//
// What it must never do: decide validity (that is the checker's job: the
// report only explains checker.Result), fetch anything from the network (no
// CDN; the page works offline), import broker packages, or serve a file
// outside the store directory.
package reports
