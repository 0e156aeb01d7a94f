// Package testutil holds helpers shared by faultline's integration tests:
// a Kafka-aware connection wrapper that loses chosen responses (to make a
// client retry a request the broker already handled), and helpers to build
// and run the real broker binary.
//
// It is imported only from _test.go files and must never be imported by
// production code.
package testutil
