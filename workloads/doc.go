// Package workloads holds what every workload is made of: a Generator of
// operations and a Client that turns them into calls on the system under
// test, after Jepsen's split (client.clj, generator.clj). Each workload is
// a subpackage (queue: Jepsen's Kafka workload).
//
// Workloads reach brokers only through a Kafka client (franz-go); they never
// import broker/... .
package workloads
