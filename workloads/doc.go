// Package workloads holds what every workload is made of, after Jepsen's
// split (client.clj, generator.clj): a Generator of operations and a Client
// that turns them into calls on the system under test, bundled per run in a
// Workload (the main phase's generator and clients, then the Final phase
// that reads back everything the run wrote). Each workload is a subpackage
// (queue: Jepsen's Kafka workload, with transactions under Options.Txn;
// compact: keyed upserts and deletes to a compacted topic) exporting a New; the command lists them
// in a Registry, and the harness looks Test.Workload up in it and drives the
// result through these interfaces only. Options carry the test's client
// settings; Acks is explicit (its zero value is unset, never acks=0).
//
// Workloads reach brokers only through a Kafka client (franz-go); they never
// import broker/..., and this package imports none of its subpackages.
package workloads
