package reports

import (
	"fmt"
	"sort"
	"strings"

	"github.com/faultline/faultline/checker"
)

// anomalyKind describes one of Jepsen's anomaly names in plain language.
type anomalyKind struct {
	Name       string
	Definition string
	// one and many phrase a count of this anomaly as the start of a
	// sentence; many has one %d verb.
	one, many string
	// loss marks anomalies about acknowledged writes that went missing; the
	// verdict then relates them to the fault that followed the writes.
	loss bool
	// overwrite marks anomalies of the log's writes (an offset written
	// twice, a send landing out of order): like a loss, their cause may come
	// after the first write they name.
	overwrite bool
	// unseenTime marks anomalies whose examples name the operations that
	// could not be explained, not the one that showed the anomaly
	// (porcupine's): when it was seen is unknown, so no fault is ruled out
	// for beginning after their operations.
	unseenTime bool
}

// anomalyCatalog lists every anomaly name the checker may report, in the
// order the report presents them (the worst first).
var anomalyCatalog = []anomalyKind{
	{Name: checker.AnomalyLostWrite, loss: true,
		Definition: "An acknowledged send sits below the highest offset any poll read on its partition, yet no poll ever returned it: the log lost a committed record.",
		one:        "1 acknowledged write was lost", many: "%d acknowledged writes were lost"},
	{Name: checker.AnomalyLostAfterRead, loss: true,
		Definition: "Polls read these values, so they lay below the partition's high watermark and were committed; once the faults had healed, the final reads stopped short of them and the partition's high watermark was at or below every offset they had been read at, or the cluster no longer listed the partition at all: the cluster lost records consumers had already read. (faultline's check: Jepsen's lost-write and unseen count only values no poll ever read.)",
		one:        "1 value consumers had read was lost", many: "%d values consumers had read were lost"},
	{Name: checker.AnomalyUnseen, loss: true,
		Definition: "An acknowledged send that no poll had returned by the end of the test, after the final reads. Either it was lost above the highest offset read, or reads never caught up. In the compaction workload: a key's latest acknowledged put that no final scan could reach, because it lies at or above a last stable offset held below the high watermark by a transaction the harness saw open for longer than its timeout and was never ended (every read_committed reader stops there).",
		one:        "1 acknowledged write was never read back", many: "%d acknowledged writes were never read back"},
	{Name: checker.AnomalyInconsistentOffsets, overwrite: true, Definition: "One offset of a partition held two or more different values, as seen by sends and polls.",
		one: "1 offset held two different values", many: "%d offsets held two or more different values"},
	{Name: checker.AnomalyDuplicate, overwrite: true, Definition: "One value appeared at more than one offset of a partition: a send was written twice.",
		one: "1 value was written at two offsets", many: "%d values were written at more than one offset"},
	{Name: checker.AnomalyG1a, Definition: "Aborted read: a poll returned a value whose send definitely failed.",
		one: "1 poll read a value whose send had failed", many: "%d polls read values whose sends had failed"},
	{Name: checker.AnomalyPrecommittedRead, Definition: "A transaction read its own write before committing, under read_committed isolation.",
		one: "1 transaction read its own uncommitted write", many: "%d transactions read their own uncommitted writes"},
	{Name: checker.AnomalyAbortedOffsets, Definition: "A consumer group's committed offset, as a transactional consumer newly assigned a partition resumed from it or an aborted transaction read it back once its abort was done, was one that only transactions that aborted had sent (TxnOffsetCommit): the broker kept an aborted transaction's offsets, so an exactly-once application would skip the records that transaction had consumed.",
		one: "1 group offset came from an aborted transaction", many: "%d group offsets came from aborted transactions"},
	{Name: checker.AnomalyFencedCommit, Definition: "A transaction committed although a newer producer with the same transactional.id had been initialized (InitProducerId) before its commit was sent: the broker must fence the older producer, abort its open transaction and refuse its commit, or a zombie instance of an exactly-once application commits alongside its successor.",
		one: "1 transaction of a fenced producer committed", many: "%d transactions of fenced producers committed"},
	{Name: checker.AnomalyLostCommit, Definition: "A consumer newly assigned a partition in a rebalance first polled it below an offset whose commit the group coordinator had acknowledged before: the group lost a committed offset.",
		one: "1 consumer went back behind an acknowledged commit", many: "%d consumers went back behind acknowledged commits"},
	{Name: checker.AnomalyPollSkip,
		Definition: "A consumer's next poll on a partition started after the offset following the last one it read: offsets were skipped between two polls. Legal across consumer-group rebalances.",
		one:        "1 time a consumer skipped offsets between polls", many: "%d times a consumer skipped offsets between polls"},
	{Name: checker.AnomalyIntPollSkip, Definition: "Within a single poll, the records of one partition jumped over offsets that exist.",
		one: "1 poll skipped offsets inside its own result", many: "%d polls skipped offsets inside their own results"},
	{Name: checker.AnomalyNonmonotonicPoll,
		Definition: "A consumer's next poll on a partition went backwards or repeated an offset it had already read. Legal across consumer-group rebalances.",
		one:        "1 time a consumer's poll went backwards", many: "%d times a consumer's poll went backwards"},
	{Name: checker.AnomalyIntNonmonotonicPoll, Definition: "Within a single poll, offsets of one partition went backwards or repeated.",
		one: "1 poll returned offsets out of order", many: "%d polls returned offsets out of order"},
	{Name: checker.AnomalyNonmonotonicSend, overwrite: true, Definition: "One producer's later send to a partition was acknowledged at a lower offset than its earlier send.",
		one: "1 time a producer's later send landed at a lower offset", many: "%d times a producer's later send landed at a lower offset"},
	{Name: checker.AnomalyIntNonmonotonicSend, Definition: "Within one transaction, a later send to a partition landed at a lower offset than an earlier one.",
		one: "1 transaction's sends landed out of order", many: "%d transactions' sends landed out of order"},
	{Name: checker.AnomalyIntSendSkip, Definition: "Another writer's record landed between two sends of one transaction to the same partition. Normal in Kafka, always allowed.",
		one: "1 transaction had another writer's record between its sends", many: "%d transactions had other writers' records between their sends"},
	{Name: checker.AnomalyG0, Definition: "Write cycle: transactions whose writes are ordered differently on two partitions (write-write dependency cycle). Kafka does not prevent it; always allowed.",
		one: "1 write-write cycle between transactions", many: "%d write-write cycles between transactions"},
	{Name: checker.AnomalyG1c, Definition: "Circular information flow: transactions each of which depends on the next through write-read (one polled what another sent) and write-write edges. A cycle of write-read edges alone is impossible under read_committed; one through a write-write edge is allowed, because Kafka does not isolate writes.",
		one: "1 dependency cycle through a write-read edge", many: "%d dependency cycles through write-read edges"},
	{Name: checker.AnomalyG1cProcess, Definition: "A G1c cycle that also uses a process edge (one client's operations in the order it made them).",
		one: "1 G1c cycle through a process edge", many: "%d G1c cycles through process edges"},
	{Name: checker.AnomalyG1cRealtime, Definition: "A G1c cycle that also uses a realtime edge (an operation that completed before another was invoked).",
		one: "1 G1c cycle through a realtime edge", many: "%d G1c cycles through realtime edges"},
	{Name: checker.AnomalyG0Process, Definition: "A write-write cycle that also uses a process edge. Kafka does not isolate writes; always allowed.",
		one: "1 write cycle through a process edge", many: "%d write cycles through process edges"},
	{Name: checker.AnomalyG0Realtime, Definition: "A write-write cycle that also uses a realtime edge. Kafka does not isolate writes; always allowed.",
		one: "1 write cycle through a realtime edge", many: "%d write cycles through realtime edges"},
	{Name: checker.AnomalyLostLatestValue, loss: true, Definition: "Compaction: the final scan of a compacted topic does not show a key's latest acknowledged value last (an older value, a tombstone, nothing, or a value no write of the key made), or, when no scan reached the end, the value lay at or above the healed partition's high watermark: the partition no longer holds it.",
		one: "1 key lost its latest acknowledged value", many: "%d keys lost their latest acknowledged values"},
	{Name: checker.AnomalyResurrectedDelete, loss: true, Definition: "Compaction: a key whose latest acknowledged write was a delete (tombstone) came back in the final scan with an older value.",
		one: "1 deleted key came back", many: "%d deleted keys came back"},
	{Name: checker.AnomalyStuckTxnID, Definition: "Liveness: after the faults were healed and the final reads done, a new producer could not start under a transactional.id the test had used: its coordinator answered InitProducerId with CONCURRENT_TRANSACTIONS without a break for 20 s. A transaction of that id was left unfinished at its coordinator, prepared but never completed or never aborted, so an application using the id can never produce again, and read_committed consumers may stop at its partitions.",
		one: "1 transactional.id was left stuck", many: "%d transactional.ids were left stuck"},
	{Name: checker.AnomalyClientError, Definition: "Clients received an error the test was told a correct broker never returns to a well-behaved client (--fail-on-client-error, e.g. CORRUPT_MESSAGE or DATA_LOSS): the broker served damaged or missing data it had acknowledged. The client-errors section lists each code with the operations that got it and the faults in force.",
		one: "clients received an error a correct broker never returns", many: "clients received %d errors a correct broker never returns"},
	{Name: checker.AnomalyEmptyTransactionGraph,
		Definition: "The history holds no completed send or poll: the test exercised nothing, so it cannot pass (Jepsen's checker finds such a history invalid too).",
		one:        "the history holds no completed send or poll", many: "the history holds no completed send or poll"},
	{Name: checker.AnomalyNonlinearizable, overwrite: true, unseenTime: true, Definition: "Porcupine found no order of the operations on a partition that explains what the clients observed, treating the partition as one log (sends append, polls read a contiguous slice).",
		one: "porcupine found no linearizable order of the operations", many: "porcupine found no linearizable order of the operations"},
}

var anomalyByName = func() map[string]*anomalyKind {
	m := make(map[string]*anomalyKind, len(anomalyCatalog))
	for i := range anomalyCatalog {
		m[anomalyCatalog[i].Name] = &anomalyCatalog[i]
	}
	return m
}()

// causeFollows tells whether the fault behind the anomaly may come after
// the writes it names (a loss or an overwrite), rather than before the
// read that showed it.
func (k anomalyKind) causeFollows() bool { return k.loss || k.overwrite }

// kindOf returns the catalog entry for a name, or a generic one for a name
// the catalog does not know (a checker added after this package).
func kindOf(name string) anomalyKind {
	if k, ok := anomalyByName[name]; ok {
		return *k
	}
	return anomalyKind{
		Name:       name,
		Definition: "Reported by the checker; this report has no description of it.",
		one:        "1 " + name + " anomaly", many: "%d " + name + " anomalies",
	}
}

// isAllowed says whether an anomaly is tolerated in the run's mode: the
// checker's mark on a reported anomaly, and for one not reported the
// checker's table of allowed anomalies (checker.AllowedAnomalies).
func isAllowed(name string, rep checker.AnomalyReport, r checker.Result) bool {
	if rep.Count > 0 {
		return rep.Allowed
	}
	return checker.AllowedAnomalies(subscribeMode(r))[name]
}

// subscribeMode tells whether the checker judged the run in subscribe mode.
func subscribeMode(r checker.Result) bool { return r.Mode == checker.ModeSubscribe }

// phrase states a count of the anomaly; a kind whose phrase holds no
// count (nonlinearizable, counted in partitions) is followed by its keys.
func (k anomalyKind) phrase(count int) string {
	if count == 1 || !strings.Contains(k.many, "%d") {
		return k.one
	}
	return fmt.Sprintf(k.many, count)
}

// countFree tells whether phrase leaves the count out.
func (k anomalyKind) countFree() bool { return !strings.Contains(k.many, "%d") }

// orderedAnomalyNames returns the names in results first in catalog order,
// then unknown names alphabetically.
func orderedAnomalyNames[V any](m map[string]V) []string {
	var out, extra []string
	for _, k := range anomalyCatalog {
		if _, ok := m[k.Name]; ok {
			out = append(out, k.Name)
		}
	}
	for name := range m {
		if _, ok := anomalyByName[name]; !ok {
			extra = append(extra, name)
		}
	}
	sort.Strings(extra)
	return append(out, extra...)
}
