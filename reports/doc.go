// Package reports turns one checked test run into what people read: a
// self-contained HTML page (report.html), a JUnit file for CI (junit.xml), a
// one-screen terminal summary, and a small web server that browses a store
// of runs (`faultline serve`).
//
// How to use it: build an Input from the test spec (SpecOf, from the
// harness's testspec.Spec that test.json holds), the checker's Result, the
// recorded History and the relative links of the run's other files
// (RunLinks), then call WriteRun (report.html and junit.xml), WriteHTML,
// WriteJUnit or Summary; the harness does so with the values in memory at
// the end of a run. RenderDir does the same from a stored run directory
// (`faultline report DIR`), reading history.jsonl through the checker's
// codec and test.json through ParseSpec; LoadDir gives the Input it renders.
//
// Every finding comes from the checker, typed: anomaly examples are
// checker.Example values, whether an anomaly is allowed is the checker's
// AnomalyReport.Allowed (checker.AllowedAnomalies for one not found), the
// consumer mode is Result.Mode, and each count shown for a key is the
// checker's AnomalyReport.ByKey. The checker's warnings about a history that
// breaks the invoke/complete discipline are shown as notes. Handler serves a
// whole store: an index of runs newest first (test, time, nemesis,
// duration, expected and found verdict, anomalies) and of suite runs, each
// run's report and files.
//
// A valid run's page opens with what was checked: the writes acknowledged
// and read back, the indeterminate sends that did and did not land, the time
// under each kind of fault, availability and the longest outage (the
// checker's Stats and Perf). The page states the verdict first, in sentences
// derived from the anomalies and the nemesis operations near them ("INVALID:
// 3 acknowledged writes were lost on key 2 (t0-2) after the nemesis killed
// n1 at 41.2 s"; a fault begun after an anomaly other than a loss was
// first seen is never its cause), then, for each partition with anomalies that are not
// allowed, one story of a few timed steps tying them to their cause: the
// acknowledged write the checker names ("send 26116 → offset 188
// acknowledged by n2 (leader of t6-2, epoch 6)"), the fault overlapping that
// partition's window (each partition is blamed on its own fault), the
// leaders the harness saw afterwards (its "leaders" events, never the
// broker's internals), the write acknowledged over the same offset, and what
// the final reads found there; then each anomaly with its definition
// (Jepsen's names) and the offending operations (values written for people:
// "send 26116 to key 3 → offset 188", "poll key 3: 187→26115, 188→31812"),
// then a fault timeline (faultTimeline: one lane per node with what the
// nemesis did to it, each kind drawn and named by faultLooks with a grey
// default for kinds it does not know; one lane per partition with
// anomalies with the leaders the harness saw; the final-read phase shaded),
// then plots drawn as hand-written SVG: latency per function (log scale,
// colored by outcome) and throughput over time with fault intervals
// as bands coloured and labelled by kind (kill, pause, partition, disk),
// the final-read phase marked,
// and unavailability marked, Jepsen's unseen plot (the checker's
// Perf.Unseen), a realtime-lag plot (computed here from the history: per
// poll, the age of the oldest acknowledged value it had not reached), and
// an offset timeline, zoomed to the key's active window, for each key with
// anomalies that marks acknowledged values the final reads did not return
// and the leaders the harness saw on that partition
// (keys without anomalies share one compact grid). Porcupine's visualizations
// (linear-<key>.html, see LinearVisualizationFile) are linked and the first
// is embedded; PorcupinePage, which the harness stores them through, opens
// each at its first error. Large histories are downsampled deterministically
// (time buckets keep their fastest and slowest operation); fail and info
// points are all kept, and the page says what was dropped. Styles and the
// one small script (legend toggling) are embedded; the page loads nothing
// from the network.
//
// WriteRun also writes timeline.html (WriteTimeline), Jepsen's per-process
// timeline: one lane per process, one bar per operation from invoke to
// completion coloured by outcome; a history of more than 3000 operations
// is shown as a window around the first anomaly's operation, as the page
// says. WriteSuiteIndex writes a suite run's page (suites/<stamp>.html in
// the store), which Handler's index links beside each run's expected and
// found verdict.
//
// In junit.xml every checker is one test case: invalid is a <failure>
// carrying the anomaly summary, unknown is an <error> (not <skipped>, which
// most CI systems count as passing, while faultline exits 2 on unknown).
//
// What it must never do: decide validity (that is the checker's job: the
// report only explains checker.Result), fetch anything from the network,
// import broker packages, or serve a file outside the store directory.
package reports
