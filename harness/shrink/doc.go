// Package shrink finds a smaller reproduction of a failing test run: delta
// debugging (Zeller's ddmin) over the run's fault events, then a shorter
// time limit. It is the pure core of `faultline shrink`: it never runs
// anything itself, it asks a predicate whether a candidate (the faults to
// keep, the time limit) still fails, and the caller's predicate does the
// runs (harness.Shrink).
//
// How to use it: describe the failing run as a Problem (its fault IDs in
// start order, when each ended, its time limit) and call Minimize with a
// predicate and a bound on candidates and time.
//
// What it must never do: run tests, read files or look at the clock; the
// predicate and Options.Expired are the only way it learns anything.
package shrink
