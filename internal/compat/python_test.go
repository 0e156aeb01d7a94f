package compat

import (
	_ "embed"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var (
	//go:embed testdata/kafka_python.py
	kafkaPythonScript string
	//go:embed testdata/librdkafka_python.py
	librdkafkaPythonScript string
)

// pythonClient is one of the Python scripts and what it needs installed.
type pythonClient struct {
	name, script, packages string
	modules                []string
}

var (
	kafkaPython = pythonClient{
		name: "kafka-python", script: kafkaPythonScript,
		packages: "python3-kafka python3-lz4 python3-snappy python3-zstandard",
		modules:  []string{"kafka", "lz4", "snappy", "zstandard"},
	}
	confluentPython = pythonClient{
		name: "confluent-kafka-python", script: librdkafkaPythonScript,
		packages: "python3-confluent-kafka",
		modules:  []string{"confluent_kafka"},
	}
)

// require skips (in CI fails) the test when the client is not installed.
func (c pythonClient) require(t *testing.T) string {
	t.Helper()
	return requirePython(t, c.packages, c.modules...)
}

// pythonSteps runs kafka-python's steps against b; see clientSteps.
func pythonSteps(t *testing.T, b *broker, steps ...string) map[string]map[string]any {
	t.Helper()
	return clientSteps(t, kafkaPython, b, steps...)
}

// clientSteps writes the client's script to a temporary file, runs its
// steps against b and returns each step's JSON result by name. A step that
// raised is a test failure naming the exception.
func clientSteps(t *testing.T, c pythonClient, b *broker, steps ...string) map[string]map[string]any {
	t.Helper()
	return clientStepsAt(t, c, b.Addr, clientTimeout, nil, steps...)
}

// clientStepsAt is clientSteps against the bootstrap servers addr, within
// timeout, with env added to the client's environment.
func clientStepsAt(t *testing.T, c pythonClient, addr string, timeout time.Duration, env []string, steps ...string) map[string]map[string]any {
	t.Helper()
	py := c.require(t)
	script := filepath.Join(t.TempDir(), "client.py")
	require.NoError(t, os.WriteFile(script, []byte(c.script), 0o644))
	out := runFor(t, timeout, env, "", py, append([]string{script, addr}, steps...)...)
	require.NoError(t, out.err, out)
	assertParsed(t, out)
	results := make(map[string]map[string]any)
	for _, l := range lines(out.stdout) {
		var r map[string]any
		require.NoError(t, json.Unmarshal([]byte(l), &r), "%s output line %q", c.name, l)
		name, _ := r["step"].(string)
		results[name] = r
		if exc, ok := r["exception"]; ok {
			t.Fatalf("%s step %s raised %v\nclient stderr:\n%s", c.name, name, exc, clip(out.stderr))
		}
	}
	for _, s := range steps {
		require.Contains(t, results, s, "%s printed no result for step %s:\n%s", c.name, s, out)
	}
	return results
}

// asJSON re-encodes a decoded value, to compare nested results compactly.
func asJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}

func TestKafkaPythonAdmin(t *testing.T) {
	kafkaPython.require(t)
	b := startBroker(t)
	r := pythonSteps(t, b, "admin")["admin"]
	assert.JSONEq(t, `[["py-admin",0],["py-doomed",0],["py-data",0]]`, asJSON(t, r["create"]))
	assert.Equal(t, "TopicAlreadyExistsError", r["create_again"])
	assert.JSONEq(t, `["py-admin","py-doomed"]`, asJSON(t, r["listed"]))
	assert.Equal(t, "604800000", r["retention_ms"], "retention.ms from log.retention.hours=168")
	assert.JSONEq(t, `[["py-admin",0]]`, asJSON(t, r["create_partitions"]))
	assert.JSONEq(t, `[["py-doomed",0]]`, asJSON(t, r["delete"]))
	assert.JSONEq(t, `["py-admin"]`, asJSON(t, r["listed_after"]))
}

// TestKafkaPythonProduceAndGroup: acks=all sends report the offsets the
// records got; a group member reads part, commits, and the next member of
// the group resumes exactly there.
func TestKafkaPythonProduceAndGroup(t *testing.T) {
	kafkaPython.require(t)
	b := startBroker(t)
	res := pythonSteps(t, b, "admin", "produce", "group", "groups_admin")

	var sent []string
	for i := range 30 {
		sent = append(sent, asJSON(t, []int{i % 3, i / 3}))
	}
	assert.Equal(t, "["+strings.Join(sent, ",")+"]", asJSON(t, res["produce"]["sent"]), "[partition, offset] of each acks=all send")

	g := res["group"]
	first, _ := g["first"].([]any)
	second, _ := g["second"].([]any)
	assert.Len(t, first, 12)
	assert.Len(t, second, 18)
	seen := map[string]int{}
	for _, m := range append(append([]any{}, first...), second...) {
		seen[asJSON(t, m)]++
	}
	for i := range 30 {
		rec := asJSON(t, []any{i % 3, i / 3, "k" + itoa(i), "v" + itoa(i)})
		assert.Equal(t, 1, seen[rec], "record %s read once across the two members", rec)
	}
	assert.JSONEq(t, `{"0":10,"1":10,"2":10}`, asJSON(t, g["committed2"]), "committed offsets after both members")

	ga := res["groups_admin"]
	assert.Contains(t, ga["groups"], "py-group")
	assert.JSONEq(t, `{"py-data-0":10,"py-data-1":10,"py-data-2":10}`, asJSON(t, ga["offsets"]))
	assert.Equal(t, "Empty", ga["state"], "a group with no members left")
}

// TestKafkaPythonGroupRebalance: a second kafka-python member joins a
// running group; the group rebalances, the members split 4 partitions,
// every record is read and the auto commits on close land.
func TestKafkaPythonGroupRebalance(t *testing.T) {
	kafkaPython.require(t)
	b := startBroker(t)
	r := pythonSteps(t, b, "rebalance")["rebalance"]
	assert.EqualValues(t, 40, r["read"], "distinct records read by the two members")
	var assignment struct{ M1, M2 []int }
	require.NoError(t, json.Unmarshal([]byte(asJSON(t, r["assignment"])), &assignment))
	assert.NotEmpty(t, assignment.M1)
	assert.NotEmpty(t, assignment.M2)
	assert.ElementsMatch(t, []int{0, 1, 2, 3}, append(append([]int{}, assignment.M1...), assignment.M2...))
	assert.JSONEq(t, `{"0":10,"1":10,"2":10,"3":10}`, asJSON(t, r["committed"]))
}

// TestKafkaPythonTimestampLimits: with CreateTime, a record more than
// message.timestamp.after.max.ms (default 1 h) ahead of the broker's clock,
// or more than message.timestamp.before.max.ms (default unlimited) behind
// it, is refused with INVALID_TIMESTAMP (KIP-937), as DescribeConfigs
// says the broker does.
func TestKafkaPythonTimestampLimits(t *testing.T) {
	kafkaPython.require(t)
	b := startBroker(t)
	r := pythonSteps(t, b, "timestamps")["timestamps"]
	assert.Equal(t, "offset 0", r["now"])
	assert.Equal(t, "offset 1", r["year_1970"], "before.max.ms defaults to unlimited")
	assert.Equal(t, "InvalidTimestampError", r["two_hours_ahead"], "after.max.ms defaults to one hour")
	assert.Equal(t, "InvalidTimestampError", r["recent_topic_old"], "topic message.timestamp.before.max.ms=60000")
}

// TestKafkaPythonPollAtEnd: polling a partition with nothing new must
// return no records; kafka-python cannot parse a null record set.
func TestKafkaPythonPollAtEnd(t *testing.T) {
	kafkaPython.require(t)
	b := startBroker(t)
	r := pythonSteps(t, b, "empty")["empty"]
	assert.JSONEq(t, `[0,0,0]`, asJSON(t, r["polled"]))
}

// TestKafkaPythonOffsets: seek, offsets_for_times (by a timestamp between
// records, an exact one and one after the last), end and beginning.
func TestKafkaPythonOffsets(t *testing.T) {
	kafkaPython.require(t)
	b := startBroker(t)
	r := pythonSteps(t, b, "offsets")["offsets"]
	assert.JSONEq(t, `[[4,"t4"],[5,"t5"],[6,"t6"]]`, asJSON(t, r["seeked"]))
	assert.JSONEq(t, `[6,1700000006000]`, asJSON(t, r["by_time"]))
	assert.JSONEq(t, `[3,1700000003000]`, asJSON(t, r["exact"]))
	assert.Nil(t, r["future"], "no record at or after the timestamp")
	assert.EqualValues(t, 10, r["end"])
	assert.EqualValues(t, 0, r["beginning"])
}

// TestKafkaPythonCompression: kafka-python compresses with its own codecs
// (not librdkafka's); kcat and franz-go read the batches back.
func TestKafkaPythonCompression(t *testing.T) {
	kafkaPython.require(t)
	b := startBroker(t)
	r := pythonSteps(t, b, "compress")["compress"]
	assert.JSONEq(t, `{"gzip":99,"snappy":99,"lz4":99,"zstd":99}`, asJSON(t, r["last_offsets"]))
	codecs := map[string]uint8{"gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
	for name, codec := range codecs {
		topic := "py-z-" + name
		recs := b.consumeFranz(t, topic, 100)
		stored := map[uint8]int{}
		for i, rec := range recs {
			assert.Equal(t, int64(i), rec.Offset)
			assert.True(t, strings.HasPrefix(string(rec.Value), name+"-"), "%s offset %d: %q", topic, i, rec.Value)
			stored[rec.Attrs.CompressionType()]++
		}
		assert.Equal(t, map[uint8]int{codec: 100}, stored, "%s: records by stored codec", topic)
		if _, err := lookKcat(); err == nil {
			out := b.kcat(t, "", "-C", "-t", topic, "-o", "beginning", "-c", "100", "-f", `%o\n`)
			require.NoError(t, out.err, out)
			assert.Len(t, lines(out.stdout), 100, "kcat reads %s", topic)
		}
	}
}

// TestConfluentPythonAdmin: librdkafka's admin API (CreateTopics with
// configs and validate-only, DescribeConfigs, CreatePartitions,
// DeleteTopics) and the errors it names.
func TestConfluentPythonAdmin(t *testing.T) {
	confluentPython.require(t)
	b := startBroker(t)
	r := clientSteps(t, confluentPython, b, "admin")["admin"]
	assert.JSONEq(t, `{"ck-admin":"ok","ck-doomed":"ok","bad topic!":"TOPIC_EXCEPTION"}`, asJSON(t, r["create"]))
	assert.JSONEq(t, `{"ck-admin":"TOPIC_ALREADY_EXISTS"}`, asJSON(t, r["create_again"]))
	assert.JSONEq(t, `{"ck-never":"ok"}`, asJSON(t, r["validate_only"]))
	assert.JSONEq(t, `["ck-admin","ck-doomed"]`, asJSON(t, r["topics"]), "validate_only creates nothing")
	assert.EqualValues(t, 1, r["controller"])
	assert.Equal(t, "3600000", r["retention_ms"], "the topic config given at creation")
	assert.JSONEq(t, `{"ck-admin":"ok"}`, asJSON(t, r["partitions"]))
	assert.JSONEq(t, `{"ck-doomed":"ok"}`, asJSON(t, r["delete"]))
	assert.JSONEq(t, `{"ck-missing":"UNKNOWN_TOPIC_OR_PART"}`, asJSON(t, r["delete_missing"]))
	assert.JSONEq(t, `["ck-admin"]`, asJSON(t, r["topics_after"]))
	assert.EqualValues(t, 4, r["partitions_after"])
}

// TestConfluentPythonGroupRebalance: an idempotent producer's 40 records
// over 4 partitions; a second member joins a running group, the group
// rebalances, the two members split the partitions and every record is
// read; their commits land.
func TestConfluentPythonGroupRebalance(t *testing.T) {
	confluentPython.require(t)
	// The eager assignors and KIP-429's incremental cooperative one.
	for _, step := range []string{"group", "group_cooperative"} {
		t.Run(step, func(t *testing.T) {
			b := startBroker(t)
			checkGroupRebalance(t, clientSteps(t, confluentPython, b, step)[step])
		})
	}
}

func checkGroupRebalance(t *testing.T, r map[string]any) {
	t.Helper()
	var acked []string
	for p := range 4 {
		for o := range 10 {
			acked = append(acked, asJSON(t, []int{p, o}))
		}
	}
	assert.Equal(t, "["+strings.Join(acked, ",")+"]", asJSON(t, r["acked"]), "[partition, offset] of each delivery report")

	read := map[string]bool{}
	got, _ := r["got"].(map[string]any)
	for _, recs := range got {
		list, _ := recs.([]any)
		for _, rec := range list {
			read[asJSON(t, rec)] = true
		}
	}
	assert.Len(t, read, 40, "distinct records read by the two members")

	var assignment struct{ A1, A2 []int }
	require.NoError(t, json.Unmarshal([]byte(asJSON(t, r["assignment"])), &assignment))
	assert.NotEmpty(t, assignment.A1, "first member's partitions after the rebalance")
	assert.NotEmpty(t, assignment.A2, "second member's partitions after the rebalance")
	assert.ElementsMatch(t, []int{0, 1, 2, 3}, append(append([]int{}, assignment.A1...), assignment.A2...))
	assert.JSONEq(t, `{"0":10,"1":10,"2":10,"3":10}`, asJSON(t, r["committed"]))
}

// TestConfluentPythonTransactions: librdkafka's transactional producer
// (init_transactions, a commit over 3 partitions with a group's offsets
// sent to the transaction, an abort, another commit); a read_committed
// consumer sees exactly the committed records; a second producer with the
// same transactional.id fences the first, whose commit then fails.
func TestConfluentPythonTransactions(t *testing.T) {
	confluentPython.require(t)
	b := startBroker(t)
	r := clientSteps(t, confluentPython, b, "txn")["txn"]
	assert.JSONEq(t, `["c-last","c0","c1","c2","c3","c4","c5","c6","c7","c8"]`, asJSON(t, r["seen"]), "read_committed: the committed records, none aborted")
	assert.EqualValues(t, 7, r["committed_offset"], "offsets sent to the committed transaction")
	assert.Contains(t, []any{"_FENCED", "PRODUCER_FENCED", "INVALID_PRODUCER_EPOCH"}, r["fenced"], "the zombie's commit after the fence")
}
