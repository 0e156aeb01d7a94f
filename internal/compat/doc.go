// Package compat checks the real broker binary against Kafka clients that
// faultline did not write: kcat (librdkafka, C), kafka-python (pure Python,
// with its own codecs) and confluent-kafka-python (librdkafka's admin and
// group APIs), all from Debian packages (apt-get install -y kcat
// python3-kafka python3-confluent-kafka python3-lz4 python3-snappy
// python3-zstandard; .ci/run installs them).
//
// Its tests build cmd/broker, start it from a hand-written Kafka-style
// server.properties on a free loopback port, and drive it with those
// clients as subprocesses: metadata, produce with every acks mode and
// idempotence, consume with exact offsets, consumer groups that commit and
// resume or rebalance, auto topic creation, every compression codec,
// message size and timestamp limits, kill -9 during a produce, and torn
// segment tails. cluster_test.go does the same for clusters: three
// combined nodes, and three voters plus two brokers, started from
// properties files as the README tells users, with kcat producing while
// the partition leader and then the active controller are kill -9ed. franz-go appears only to cross-check
// what a foreign client wrote. kgosuite_test.go runs franz-go's own
// integration suite (the kgo package's tests, at go.mod's version, with
// KGO_SEEDS pointing at a three-node cluster), once plain and once with its
// chaos dialer over the exactly-once and group chains. The Go clients
// with dependencies of their own (IBM/sarama, confluent-kafka-go and its
// suite) are in internal/compat/goclients, a module of its own.
//
// Run it with `go test ./internal/compat/` (about 3 min; franz-go's suite is 2 of them, skipped with -short). To check another
// build of the broker, name its binary in FAULTLINE_COMPAT_BROKER.
//
// The clients come from Debian's packages, installed by `make deps` (which
// `make test` runs). A test whose client is still missing skips with the
// command that installs it; in CI (CI=true, as .ci/run sets) it fails
// instead, so CI cannot pass without the foreign clients. A test that fails here
// documents an incompatibility of the broker; it must never be made to
// pass by weakening what it checks.
//
// The package has no production code and must never be imported.
package compat
