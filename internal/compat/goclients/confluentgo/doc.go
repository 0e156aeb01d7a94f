// Package confluentgo checks the broker against confluent-kafka-go, Go
// over librdkafka (bundled with the module, so cgo and a C compiler are
// needed; without cgo the package's one test fails, saying what to
// install):
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
//     made a Flush(30000); and TestProducerFunc and TestProducerFuncDR run
//     with their produce closure patched, so that librdkafka refusing the
//     message to a partition the topic lacks at Produce (once it has the
//     topic's metadata) counts as that message's delivery error, as it
//     does when the refusal comes in the delivery report (before): a race
//     with the metadata answer that hung the test against any broker; and
//     its createTestTopic seeds math/rand with the nanosecond, not the
//     second, so that two tests creating a topic of the same suffix
//     within one second (the transactional ones, against a fast broker)
//     do not draw the same name.
package confluentgo
