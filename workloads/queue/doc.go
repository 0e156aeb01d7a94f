// Package queue is Jepsen's Kafka workload (jepsen/tests/kafka.clj) for
// franz-go, registered as "queue" through New: integer keys map onto topic-partitions (key k is partition
// k mod P of topic "t<k div P>"); producers send unique integer values
// ([send k v] completes as [send k [offset v]]); consumers poll ([poll]
// completes as [poll {k [[offset v] ...]}]); assign and subscribe (consumer
// groups) are mixed in; keys rotate after a bounded number of writes; and a
// final phase (FinalGenerator) assigns every key from the beginning and
// polls until each key has been read up to its target: the highest offset
// a send or poll returned during the run (Generator.MaxOffsets, as Jepsen
// tracks it), raised to the healed cluster's end offset.
//
// With Options.Txn (`faultline test --txn`) every operation but assign is
// a txn of 1 to 4 sends and polls (GenOptions.Txn) carried out in one
// Kafka transaction by a transactional producer (a transactional.id per
// client) and a read_committed consumer, with the consumer's offsets
// committed in the transaction (recorded as the completion's Committed)
// and one in ten aborted on purpose (fail) after its offsets were sent; a
// consumer newly assigned a key resumes at the group's committed offset
// (recorded as the assign's Committed), so the checker can tell an
// aborted transaction's offsets applied (aborted-offsets); one in 25 about
// to commit is first fenced by a successor with its transactional.id
// (when the successor's InitProducerId completes) and recorded Fenced, so
// the checker can tell a zombie's commit (fenced-commit); and one in ten
// that committed has its producer restarted at once (a new producer with
// the same transactional.id, whose InitProducerId meets the commit with
// its markers perhaps still being written: it must wait for them, never
// abort the commit, or a committed op's sends are lost); see txn.go.
// The final reads of a transactional run go up to the offsets in the
// history only: a partition's end offset is a commit or abort marker no
// read_committed poll returns; and not to the offsets of a transaction
// whose outcome is unknown (info), which may have aborted.
//
// A send that errors is recorded as info (it may have been written: a lost
// acknowledgement, or a retry racing a leader change); a poll that errors
// without returning records is a fail (reads change nothing); one that
// returned records keeps its fetch error in the completion, as evidence
// for the checker's client-errors finding. GenOptions.Mixed makes
// odd-numbered processes subscribe and the others assign; subscribing
// consumers run with a 6 s group session and a 500 ms heartbeat, so a
// rebalance ends within a fault window. The client
// never decides correctness: the checker does. Generators are pure
// functions of their seed and the completions they are told about, and
// are not safe for concurrent use (the harness serialises them).
package queue
