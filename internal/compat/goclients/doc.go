// Package goclients checks the broker against Go Kafka clients faultline
// did not write, in a module of its own so that they never become
// dependencies of faultline itself. This package starts the clusters they
// run against: three processes of the broker binary, built from the
// enclosing module (or FAULTLINE_COMPAT_BROKER), killed and restarted on
// their data. The clients' tests are in its packages:
//
//   - sarama: IBM/sarama's transactional producer and consume-transform-
//     produce loop under a node's kill;
//   - confluentgo: confluent-kafka-go (librdkafka, bundled; needs cgo) in
//     transactions under kills, and confluent-kafka-go's own integration
//     and transactional test suites.
//
// `make test` runs them (cd internal/compat/goclients && go test ./...).
package goclients
