// Package testspec is test.json: the stored form of one test, which the
// harness writes at the start of a run (harness.Test embeds a Spec) and the
// report reads back (reports.SpecOf), so the two agree on every field by
// construction.
//
// How to use it: marshal a Spec with encoding/json to write test.json and
// Decode to read one. Durations are written as Go duration strings ("90s").
//
// What it must never do: import harness or reports (both import it), or hold
// behaviour beyond the file's shape: validating a test and running it are
// the harness's job.
package testspec
