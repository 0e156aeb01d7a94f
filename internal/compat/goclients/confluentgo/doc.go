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
//     cluster of the broker through their testconf.json. Left out: the
//     ACL and SCRAM tests (faultline serves no authorization or SASL),
//     TestTransactionalAPI (no broker: it checks the client's errors), and
//     TestTransactionalProducer, whose Flush(-1) returns at once in
//     v2.11.1 (a negative timeout is no wait at all there) and so fails
//     against any broker.
package confluentgo
