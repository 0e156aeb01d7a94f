// Package txn is the transaction coordinator of the faultline broker:
// InitProducerId with a transactional id, AddPartitionsToTxn,
// AddOffsetsToTxn, EndTxn, DescribeTransactions, ListTransactions and
// FindCoordinator for transactions, with each transactional id's state
// stored in the replicated __transaction_state topic in Kafka's record
// format (TransactionLogKey v0, TransactionLogValue v1).
//
// # Shape
//
// state.go is the decision core, a pure state machine over Metadata:
// InitProducerID, AddPartitions, EndTxn, Complete, TimedOut and Abort each
// take the current metadata and return a Decision (an error code, the
// metadata to persist, whether markers must follow). Nothing in it does
// I/O or reads a clock. The Coordinator around it owns the
// __transaction_state partitions this broker leads (loading each one when
// it becomes leader, as the group coordinator does for
// __consumer_offsets), persists every decision with acks=all before it
// answers, sends the commit or abort markers through a MarkerWriter and
// aborts transactions older than their timeout.
//
// # Guarantees
//
//   - A transactional id lives on partition abs(javaHashCode(id)) mod the
//     partition count of __transaction_state, as in Kafka, and the
//     coordinator epoch is that partition's leader epoch: markers of a
//     deposed coordinator are refused by the partitions (a higher epoch
//     has been seen there).
//   - Every InitProducerId bumps the epoch, fencing the previous
//     incarnation of the producer (PRODUCER_FENCED for its requests,
//     INVALID_PRODUCER_EPOCH for its batches once a marker with the new
//     epoch is in the partition). An open transaction is aborted first.
//   - A decision is answered only once its record is committed in
//     __transaction_state; after a failover the new coordinator finishes
//     every prepared transaction (it resends the markers). EndTxn answers
//     once PrepareCommit or PrepareAbort is committed, as Kafka's does;
//     the markers follow in the background (Config.MarkerWaitMs makes it
//     wait for them), and the next request on the transactional id waits
//     up to Config.BusyWaitMs for them before CONCURRENT_TRANSACTIONS.
//     From the markers on the transaction reads as complete (entry.view);
//     its Complete record waits Config.CompleteDelayMs on a timer (no
//     goroutine sleeps for it), and is not written, the timer stopped,
//     when the next transaction's first record came first.
//   - EndTxn v5 (KIP-890 part 2) bumps the epoch at every end, so a
//     delayed EndTxn of an earlier transaction is fenced. Clients that
//     end with EndTxn v0-v4 keep their epoch across transactions, and
//     for them a retried EndTxn is recognised only while the same state
//     holds (KAFKA-17754 is not prevented for them). Under TV2 an abort
//     with nothing open (after an empty, committed or aborted
//     transaction) still bumps the epoch: the client cannot know whether
//     a leader added a partition for it.
//   - AddPartitionsToTxn v4, the brokers' batched form: partition leaders
//     add partitions for a transactional Produce v12 (KIP-890 part 2, the
//     client adds none itself) and, with VerifyOnly, check that a client
//     of the older protocol added the partition before its first batch
//     (KIP-890 part 1, VerifyPartitions), which changes nothing. A
//     leader on the coordinator's node calls AddForLeader, the same
//     work without the request.
//
// # What it must never do
//
// Panic on bytes from the network or the log; answer a client before the
// decision is durable; write markers for a transaction whose prepare
// record is not committed.
package txn
