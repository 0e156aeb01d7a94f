// Package confluentgo checks the broker against confluent-kafka-go, Go
// over librdkafka (bundled with the module, so cgo and a C compiler are
// needed; without cgo its tests skip, and fail under CI=true):
//
//   - TestConfluentGoTransactionsUnderKill: transactions of 4 sends over 3
//     partitions, one in five aborted, on a three-node cluster while two
//     nodes are SIGKILLed and restarted in turn; a read_committed
//     consumer then finds every committed value once and no aborted one.
//   - TestConfluentGoSuite: confluent-kafka-go's own integration and
//     transactional tests (kafka/integration_test.go and
//     kafka/txn_integration_test.go, written against Apache Kafka in
//     docker compose), run from the module's source against a three-node
//     cluster of the broker through their testconf.json. Nothing is
//     skipped: the ACL and SCRAM tests (faultline serves no authorizer and
//     no SASL) must fail, and only with the client's "not supported by
//     broker"; the three tests that need a SASL listener skip themselves;
//     TestTransactionalProducer runs with one line patched, its Flush(-1),
//     which returns at once with the messages queued in v2.11.1 (a
//     negative timeout is no wait there) and so fails against any broker,
//     made a Flush(30000).
package confluentgo
