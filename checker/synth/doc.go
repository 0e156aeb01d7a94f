// Package synth generates seeded, valid queue-workload histories and plants
// single anomalies in them, for the checker's benchmarks and property tests.
//
// How to use it: Generate(Config) returns a history that follows Jepsen's
// discipline and DESIGN.md's format and passes every check; the same Config
// always yields the same history. Each of Injections() plants one named anomaly
// in a copy of such a history, so a test can assert that the checker finds
// exactly it.
//
// What it must never do: be used as evidence about a real broker (its
// "broker" is a map of slices, linearizable by construction), or be
// imported by anything but tests and benchmarks.
package synth
