// Package checker is faultline's history model and its judges: the
// history.jsonl codec, Jepsen's Kafka analyses, porcupine linearizability
// per partition, and the performance figures the report plots. It is a pure
// function of a history: it imports nothing of the harness, reaches no
// broker, and must never panic on a history read from disk (malformed input
// is an error naming the line; a checker that fails anyway becomes unknown).
//
// # Recording and reading histories
//
// The harness records with a Writer (one JSON object per line, see
// DESIGN.md "History") and the checker reads with a Reader or ReadHistory.
// Jepsen's discipline (History.Validate) is that each client invoke gets
// exactly one completion from the same process with the same f, a process
// whose op ended info never invokes again, and invokes left pending at the
// end count as info (their sends may have happened). A history that breaks
// it (Jepsen's own checker tests reuse a process after an info) is analysed
// all the same, as Jepsen's checker does: each completion is paired with the
// process's latest invoke, a completion without one still counts for what it
// read or wrote, a reused process's order checks carry on past its info op
// (an info or failed poll is checked but leaves the process where its last
// ok poll did), and Result.Warnings names every violation.
//
// # Checking
//
// Analyze(ctx, h, Options) runs these checkers through Compose, which runs
// them concurrently and turns a panic or timeout into unknown:
//
//   - "history": a history with no completed send or poll tested nothing
//     and is invalid ("empty-transaction-graph", the name Jepsen's
//     checker reports it under, and counts against validity).
//   - "queue": Jepsen's analyses (jepsen/tests/kafka.clj) with its names:
//     lost-write, unseen, duplicate, inconsistent-offsets, poll-skip,
//     int-poll-skip, nonmonotonic-poll, int-nonmonotonic-poll,
//     nonmonotonic-send, int-nonmonotonic-send, int-send-skip, G1a and
//     precommitted-read. They run over a per-key version order built from
//     every poll and from every send with a known offset that must have
//     committed (ok, or info with a value some ok poll read), in linear
//     passes with memory proportional to the values. Two departures from
//     Jepsen, both for read_committed: G1a counts a read of a definitely
//     failed send by an op of any outcome, not only an ok one (a poll is
//     no part of its op's transaction, so what it returned was returned);
//     and in txn mode a record whose send definitely failed is no skipped
//     value for poll-skip and int-poll-skip (read_committed must pass
//     over it), nor part of the log porcupine judges. Four analyses are
//     faultline's own. Three are in commits.go: lost-commit, a subscribed consumer
//     newly assigned a key that first polls it below an offset whose
//     commit was acknowledged (Op.Committed, "committed" in the history)
//     before that poll began; Jepsen cannot tell this rewind from a
//     rebalance's, which its nonmonotonic-poll allows. And
//     aborted-offsets, a group offset that a transactional consumer
//     resumed at (an ok assign's Committed) or an aborted txn op read back
//     after its abort (its GroupOffsets) and that only definitely aborted
//     txn ops sent to the group (their Committed), no committed or
//     indeterminate one. And fenced-commit, a txn op that committed though
//     a successor with its transactional.id had been initialized first
//     (Op.Fenced, "fenced" in the history). The fourth is lost-after-read (queue.go),
//     a value polls read, every offset of which is at or above the high
//     watermark the harness listed once the final reads stopped short on
//     its key (the stalled-reads event): consumers read only below the
//     high watermark, so the record was committed, and the healed
//     partition no longer holds it. Jepsen's lost-write and unseen count
//     only values no poll read, so a committed tail lost after it was read
//     and never written over (a power loss of every replica near the end
//     of a run, say) shows in neither.
//   - "cycles": Elle's cycle search, as kafka.clj runs it. Every send,
//     poll and txn completion is a transaction in a dependency graph with
//     ww edges (the writers of consecutive values of a key's version
//     order), wr edges (the writer of a value to every op that polled it),
//     process edges (consecutive ok ops of one process) and realtime edges
//     (an ok op to each op invoked after it completed, transitively
//     reduced). For each of G0 (ww), G1c (ww and wr, at least one wr),
//     G0-process, G1c-process, G0-realtime and G1c-realtime (which must
//     also use a process or realtime edge), Tarjan's algorithm finds the
//     components of the graph restricted to those edges, and a
//     breadth-first search finds a short cycle in each (bounded work per
//     component). Each cycle is an Example whose Steps spell every edge
//     out: which op sent or polled which value of which key at which
//     offset, or which process and times order the two ops.
//   - "compaction" (only when the history has put ops, the compact
//     workload's): the last ok scan of the compacted topic must show, last
//     for each key, its latest acknowledged put, or a later put whose
//     outcome is unknown (lost-latest-value, resurrected-delete); a
//     deleted key may be absent or keep its tombstone. Without an ok scan
//     the final state is unknown, but for a key of a partition the final
//     scans stopped short on (the stalled-reads event): a latest
//     acknowledged put at or above the partition's high watermark is a
//     lost-latest-value (the healed partition no longer holds it), and
//     one at or above a last stable offset held below the high watermark
//     by transactions the harness has seen open (OpenTxn.OpenForMs) for
//     longer than the transaction timeout (Stall.TxnTimeoutMs) and 15 s
//     more is unseen: no read_committed reader can ever reach it. A
//     transaction seen open for less may still be aborted by a correct
//     coordinator, and proves nothing.
//   - "transactional-ids" (only when the history has a harness
//     "txn-id-probe" event): a transactional.id under which no new producer
//     could start after the faults healed (TxnIDProbe.Stuck) is a
//     stuck-transactional-id: a liveness failure, the one anomaly that is
//     not about data; an id the probe could not settle otherwise (a
//     coordinator still moving or unreachable) makes the check unknown.
//   - "linearizable": porcupine on each key, with the log model described
//     in linear.go; a partition that times out or exceeds
//     Options.LinearOpsMax is unknown, a failing one yields
//     "nonlinearizable" with the op where the longest order breaks, and
//     porcupine's HTML in Result.Visualizations (also VisualizeKey).
//
// Validity merges Invalid > Unknown > Valid. As in Jepsen's
// allowed-error-types, int-send-skip and G0 never invalidate a result, and
// when consumers may subscribe (Jepsen's sub-via holds subscribe:
// Options.Mode, or else the methods the history's assign and subscribe ops
// used, in Result.SubVia) neither do poll-skip and nonmonotonic-poll; they
// are still reported, with AnomalyReport.Allowed set. Every other anomaly found, unseen included,
// makes the result invalid: an acknowledged value no poll returned by the
// end of the final reads is loss as far as the test can tell, with one
// refinement for the G1c family. Jepsen allows G1c whenever it infers ww
// edges (its ww-deps), because without write isolation a cycle such as
// T1 <ww T2 <wr T1 is normal; faultline always infers them and judges each
// cycle instead: it first looks for a cycle that needs no ww edge, and such
// a cycle is an anomaly under read_committed (a wr, process or realtime
// edge T1 → T2 means T1 committed before T2 did), while one found only
// through a ww edge is reported as allowed. G1c is allowed only when every
// cycle reported under it runs through a ww edge.
//
// Where this checker departs from kafka.clj, on purpose: a value found at
// several offsets is placed at its first one in the version order (Jepsen's
// by-value map keeps its last), and a send or poll that met it at a known
// offset is judged at that offset, so that an op reading a duplicate's
// copies in log order is never taken for a skip or a reordering (Jepsen
// flags the ops around every copy but the last); an assign or subscribe with seek-to-beginning
// starts the process's reads afresh (Jepsen gives the final reads a new
// process instead); invokes never completed count as info sends.
//
// Each example is an Example: key, offsets, values, the op indexes involved
// and one sentence of text. AnomalyReport.ByKey counts each anomaly per
// key, so that every figure shown for a key is the checker's.
//
// # Faults in the history
//
// The nemesis records each fault as ops of process "nemesis": f
// "start-<fault>" when it begins and "stop-<fault>" when it ends (e.g.
// start-kill / stop-kill, start-partition / stop-partition, start-pause /
// stop-pause), each an invoke followed by a completion (ok or info) whose
// value (any JSON, e.g. ["n1"]) names the targets. Perf.Faults holds one
// window per fault, from the start op's completion to the stop op's
// completion (open faults run to the end of the history; a second start of
// a fault already in force is ignored); any other nemesis f is an instant.
// Perf.Unavailable lists windows of at least Options.UnavailableMin in which
// sends were being made but none succeeded, labelled with the faults in
// force. Perf.WorstRealtimeLag is kafka.clj's worst-realtime-lag: the
// longest any ok poll began after the offset past its process's position
// in a key was known to exist (see realtimeLags for how assign, subscribe
// and a resumed offset move that position). Unlike kafka.clj it leaves out
// a process that sought to the beginning (the final reads), whose lag would
// be the run's length.
//
// # Harness events in the history
//
// What the harness saw of the cluster while the run went on is recorded as
// ops of process "harness" (HarnessProcess), each a single info op with no
// invoke. f "leaders" (FLeaders) lists the partitions whose leader or leader
// epoch changed in the Metadata responses the harness polled, as Leadership
// values:
//
//	{"index":812,"time":52100000000,"process":"harness","type":"info","f":"leaders",
//	 "value":[{"topic":"t6","partition":2,"leader":"n4","epoch":7}]}
//
// The first event names every partition of the workload's topics; later
// ones only what changed; leader "" means the response named no leader.
// This is what a client saw, never the broker's internals. The analyses
// ignore these ops (they are outside the invoke/complete discipline and
// the statistics); the report uses them to say which node led a partition
// when a write was acknowledged and when a new leader took over.
//
// A harness event f "crash-client" (FCrashClient) records that the harness
// crashed a client process (value {"process": N}, with "successor": true
// when the process's successor takes over its transactional.id, and
// "in_flight": how long its operation had been in flight, when the
// harness crashed the most stalled client, and "zombie": true when the
// client was paused rather than closed and resumed after its successor
// took over, a zombie whose requests must be fenced); that
// process's open operation is recorded info (or fail, for a transaction
// that can only end aborted), a zombie's with its own outcome when its
// call ends. One f "stalled-reads" (FStalledReads, a
// list of Stall) records for the keys the final reads did not finish the
// partition's high watermark, last stable offset and, in transactional
// runs, open transactions, or that the healed cluster no longer lists the
// partition at all (Stall.Missing, after several looks at every broker,
// an empty log then); the unseen example of such a key cites it, and
// values polls read at or above that high watermark are lost-after-read.
// One f "txn-id-probe" (FTxnIDProbe, a list of TxnIDProbe), recorded after
// the final reads of a run that used transactions, says for each
// transactional.id a transaction began under whether a new producer could
// start under it; the
// "transactional-ids" checker reads it.
//
// # Client errors as evidence
//
// Analyze counts the errors of client completions that a correct broker
// never returns to a well-behaved client (SuspectClientErrors: Kafka's
// error names as franz-go prints them, plus CORRUPT_MESSAGE and DATA_LOSS
// for what franz-go's consumer finds itself) into Result.ClientErrors, by
// code and per fault window; Options.FailOnClientErrors adds the
// "client-errors" checker, which makes the result invalid
// (AnomalyClientError) when a named code occurs. Result.FirstAnomalyNs is
// the time of the earliest operation an invalidating anomaly names.
//
// # Jepsen's notation
//
// ReadEDNHistory reads Jepsen's EDN: history.edn (one op map per line,
// tagged #jepsen.history.Op or not) or a vector of op maps, as Jepsen's
// checker tests write them ({:process 0 :type :ok :f :txn :value
// [[:send :x [0 :a]] [:poll {:y [[0 :b]]}]]}). Keywords used as keys or
// values become integers, in order of first appearance and above any
// integer of the same kind in the history; the mapping comes back as notes
// (Result.Notes). A missing :index or :time is the op's position.
// ReadAnyHistory picks the reader by the file's suffix (.edn or not).
//
// CheckFile(path, Options) is what `faultline check` calls.
package checker
