package compat

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestConfluentPythonTransactionsUnderKills: confluent-kafka-python
// (librdkafka's transactional producer, a client faultline did not write)
// runs transactions of one record on each of three partitions (RF 3,
// min.insync.replicas 2), one in five aborted on purpose, on a three-node
// cluster while the test SIGKILLs the node coordinating its
// transactional id, then a partition leader, then the coordinator again,
// each brought back on its data. A read_committed consumer then reads the
// topic to its end. Every transaction whose commit returned must be read
// whole and once, none that was aborted may be read at all, and one whose
// outcome the client never learned is read whole or not at all.
func TestConfluentPythonTransactionsUnderKills(t *testing.T) {
	if testing.Short() {
		t.Skip("about a minute of kills; skipped with -short")
	}
	confluentPython.require(t)
	c := startKcatCluster(t, 3, 0)
	adm := c.admin(t)
	done := make(chan map[string]any, 1)
	go func() {
		defer close(done)
		// clientStepsAt's require calls run on this goroutine; a failure
		// is seen below as a missing result.
		done <- clientStepsAt(t, confluentPython, c.bootstrap(), 2*time.Minute, []string{"TXN_SECONDS=25"}, "txn_stream")["txn_stream"]
	}()

	// The kills, on the test's goroutine: the coordinator, a leader, the
	// coordinator again, 6 s apart, each node back after 3 s.
	const txnID, topic = "ck-txn-stream-1", "ck-txn-stream"
	var killed []string
	for round := 0; round < 3; round++ {
		time.Sleep(6 * time.Second)
		victim, what := int32(0), "coordinator"
		if round == 1 {
			what = "leader of " + topic + "-0"
			victim, _, _ = partitionState(t, adm, topic)
		} else {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			if co, ok := adm.FindTxnCoordinators(ctx, txnID)[txnID]; ok && co.Err == nil {
				victim = co.NodeID
			}
			cancel()
		}
		if victim <= 0 {
			victim, what = int32(round%3+1), "a node (no "+what+" known)"
		}
		c.kill9(t, victim)
		killed = append(killed, fmt.Sprintf("n%d (%s)", victim, what))
		time.Sleep(3 * time.Second)
		c.restart(t, victim)
	}
	t.Logf("killed: %s", strings.Join(killed, ", "))
	stream, ok := <-done
	require.True(t, ok, "the transactional client failed (see above)")
	waitFullISR(t, adm, topic)

	outcomes := map[string]string{}
	require.NoError(t, json.Unmarshal([]byte(asJSON(t, stream["outcomes"])), &outcomes))
	t.Logf("client errors (last 20): %v", stream["errors"])
	read := clientStepsAt(t, confluentPython, c.bootstrap(), time.Minute, nil, "txn_read")["txn_read"]
	var seen map[string][]string
	require.NoError(t, json.Unmarshal([]byte(asJSON(t, read["seen"])), &seen))
	assert.Equal(t, read["ends"], read["reached"], "the read_committed reader got to every partition's end")

	count := map[string]int{} // value -> times read
	for part, vals := range seen {
		for _, v := range vals {
			count[v]++
			name, j, ok := strings.Cut(v, "-")
			assert.True(t, ok && j == part, "value %s read from partition %s", v, part)
			_, known := outcomes[name]
			assert.True(t, known, "value %s read but no transaction %s was run", v, name)
		}
	}
	tally := map[string]int{}
	for name, outcome := range outcomes {
		tally[outcome]++
		reads := 0
		for j := range 3 {
			n := count[fmt.Sprintf("%s-%d", name, j)]
			assert.LessOrEqual(t, n, 1, "%s-%d read %d times", name, j, n)
			reads += n
		}
		switch outcome {
		case "committed":
			assert.Equal(t, 3, reads, "committed transaction %s: every send read once (read %d of 3)", name, reads)
		case "aborted":
			assert.Zero(t, reads, "aborted transaction %s read (%d of 3 sends)", name, reads)
		default:
			assert.Contains(t, []int{0, 3}, reads, "transaction %s of unknown outcome read in part (%d of 3)", name, reads)
		}
	}
	t.Logf("transactions: %v", tally)
	assert.GreaterOrEqual(t, tally["committed"], 10, "the client committed transactions through the kills")
	assert.Positive(t, tally["aborted"], "and aborted some")
}
