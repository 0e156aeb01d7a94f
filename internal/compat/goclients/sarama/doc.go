// Package sarama checks the broker against IBM/sarama, a Go Kafka client
// faultline did not write (see package goclients): a transactional producer
// (begin, sends over three partitions, commit, every fifth aborted) and a
// consume-transform-produce loop (a consumer group whose offsets go into
// each transaction, AddMessageToTxn), each on a three-node cluster of the
// broker binary with a node killed and restarted half-way, read back by a
// read_committed consumer: every committed record exactly once, no
// aborted one. `make test` runs it (cd internal/compat/goclients && go test ./...).
package sarama
