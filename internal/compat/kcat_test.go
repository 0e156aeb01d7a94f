package compat

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// keyed returns n "key:value" input lines for kcat -K: and the lines kcat
// -f '%k %s %o\n' must print for them when they are stored from offset 0.
func keyed(n int, tag string) (input string, want []string) {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "key-%d:%s-value-%d\n", i, tag, i)
		want = append(want, fmt.Sprintf("key-%d %s-value-%d %d", i, tag, i, i))
	}
	return b.String(), want
}

// kcatMetadata is the part of `kcat -L -J` the tests read.
type kcatMetadata struct {
	ControllerID int32 `json:"controllerid"`
	Brokers      []struct {
		ID   int32  `json:"id"`
		Name string `json:"name"`
	} `json:"brokers"`
	Topics []struct {
		Topic      string `json:"topic"`
		Error      string `json:"error"`
		Partitions []struct {
			Partition int32  `json:"partition"`
			Leader    int32  `json:"leader"`
			Error     string `json:"error"`
		} `json:"partitions"`
	} `json:"topics"`
}

func TestKcatMetadataAndAutoCreate(t *testing.T) {
	requireKcat(t)
	b := startBroker(t, "num.partitions=3", "auto.create.topics.enable=true")

	out := b.kcat(t, "", "-L")
	require.NoError(t, out.err, out)
	assert.Contains(t, out.stdout, fmt.Sprintf("broker 1 at %s (controller)", b.Addr))

	// A producer's metadata request creates the topic with num.partitions.
	out = b.kcat(t, "a\nb\nc\n", "-P", "-t", "auto-created", "-p", "0")
	require.NoError(t, out.err, out)

	out = b.kcat(t, "", "-L", "-J", "-t", "auto-created")
	require.NoError(t, out.err, out)
	var md kcatMetadata
	require.NoError(t, json.Unmarshal([]byte(out.stdout), &md), out.stdout)
	assert.Equal(t, int32(1), md.ControllerID)
	require.Len(t, md.Brokers, 1)
	assert.Equal(t, b.Addr, md.Brokers[0].Name)
	require.Len(t, md.Topics, 1)
	assert.Equal(t, "auto-created", md.Topics[0].Topic)
	assert.Empty(t, md.Topics[0].Error)
	require.Len(t, md.Topics[0].Partitions, 3)
	for _, p := range md.Topics[0].Partitions {
		assert.Equal(t, int32(1), p.Leader, "partition %d", p.Partition)
		assert.Empty(t, p.Error, "partition %d", p.Partition)
	}
}

// TestKcatKafkaQuickstart: Kafka 4.0's quickstart, verbatim but for the
// ports: `kafka-storage format --standalone` on its server.properties, then
// kcat against localhost.
func TestKcatKafkaQuickstart(t *testing.T) {
	requireKcat(t)
	b := startBrokerFrom(t, quickstartProperties, "localhost", []string{"--standalone"})
	out := b.kcat(t, "", "-L")
	require.NoError(t, out.err, out)
	assert.Contains(t, out.stdout, fmt.Sprintf("broker 1 at %s (controller)", b.Addr))

	input, want := keyed(10, "quickstart")
	out = b.kcat(t, input, "-P", "-t", "quickstart-events", "-K", ":")
	require.NoError(t, out.err, out)
	out = b.kcat(t, "", "-C", "-t", "quickstart-events", "-o", "beginning", "-e", "-f", `%k %s %o\n`)
	require.NoError(t, out.err, out)
	assert.Equal(t, want, lines(out.stdout))
}

func TestKcatAutoCreateDisabled(t *testing.T) {
	requireKcat(t)
	b := startBroker(t, "auto.create.topics.enable=false")
	// librdkafka fails the message once the topic has been reported
	// missing for topic.metadata.propagation.max.ms.
	out := b.kcat(t, "x\n", "-P", "-t", "never-created", "-X", "topic.metadata.propagation.max.ms=500", "-X", "message.timeout.ms=20000")
	require.Error(t, out.err, "produce to a missing topic with auto creation off must fail")
	assert.Contains(t, out.stderr, "Unknown topic")

	out = b.kcat(t, "", "-L", "-J", "-t", "never-created")
	require.NoError(t, out.err, out)
	var md kcatMetadata
	require.NoError(t, json.Unmarshal([]byte(out.stdout), &md), out.stdout)
	require.Len(t, md.Topics, 1)
	assert.Equal(t, "Broker: Unknown topic or partition", md.Topics[0].Error)
}

// TestKcatProduceConsume produces keyed messages with each acks mode and
// idempotence and reads them back with kcat: exact keys, values and
// offsets, in order.
func TestKcatProduceConsume(t *testing.T) {
	requireKcat(t)
	b := startBroker(t)
	const n = 300
	cases := []struct {
		name string
		opts []string
	}{
		{"acks-all", []string{"-X", "acks=all"}},
		{"acks-1", []string{"-X", "acks=1"}},
		// No response: the broker must not answer, or librdkafka's
		// correlation ids go out of step.
		{"acks-0", []string{"-X", "acks=0", "-X", "enable.idempotence=false"}},
		{"idempotent", []string{"-X", "enable.idempotence=true"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			topic := "produce-" + tc.name
			input, want := keyed(n, tc.name)
			args := append([]string{"-P", "-t", topic, "-K", ":"}, tc.opts...)
			out := b.kcat(t, input, args...)
			require.NoError(t, out.err, out)
			assert.NotContains(t, out.stderr, "ERROR")

			out = b.kcat(t, "", "-C", "-t", topic, "-o", "beginning", "-c", fmt.Sprint(n), "-f", `%k %s %o\n`)
			require.NoError(t, out.err, out)
			assert.Equal(t, want, lines(out.stdout))
		})
	}
}

// TestKcatConsumeToEnd is kcat's most common use: read a topic from the
// beginning and exit at its end (-e). librdkafka must see an empty record
// set, not a null one, when it fetches at the log end offset.
func TestKcatConsumeToEnd(t *testing.T) {
	requireKcat(t)
	b := startBroker(t)
	input, want := keyed(20, "eof")
	out := b.kcat(t, input, "-P", "-t", "to-end", "-K", ":", "-X", "acks=all")
	require.NoError(t, out.err, out)

	out = b.kcat(t, "", "-C", "-t", "to-end", "-e", "-o", "beginning", "-f", `%k %s %o\n`)
	require.NoError(t, out.err, out)
	assert.Equal(t, want, lines(out.stdout))
	assert.NotContains(t, out.stderr, "Protocol parse failure")
}

// TestKcatConsumeEmptyTopic: -e on an empty topic must end at once.
func TestKcatConsumeEmptyTopic(t *testing.T) {
	requireKcat(t)
	b := startBroker(t)
	cl := b.franz(t)
	_, err := kadm.NewClient(cl).CreateTopic(context.Background(), 1, 1, nil, "empty")
	require.NoError(t, err)
	out := b.kcat(t, "", "-C", "-t", "empty", "-e", "-o", "beginning")
	require.NoError(t, out.err, out)
	assert.Empty(t, out.stdout)
	assert.NotContains(t, out.stderr, "Protocol parse failure")
}

// TestKcatConsumerGroup: a kcat group consumer commits what it read when it
// closes, and the next member of the group resumes after it.
func TestKcatConsumerGroup(t *testing.T) {
	requireKcat(t)
	b := startBroker(t)
	input, want := keyed(15, "grp")
	out := b.kcat(t, input, "-P", "-t", "grouped", "-K", ":", "-X", "acks=all")
	require.NoError(t, out.err, out)

	consume := func(n int) []string {
		t.Helper()
		out := b.kcat(t, "", "-G", "kcat-group", "-X", "auto.offset.reset=earliest", "-c", fmt.Sprint(n), "-f", `%k %s %o\n`, "grouped")
		require.NoError(t, out.err, out)
		return lines(out.stdout)
	}
	assert.Equal(t, want[:5], consume(5), "first member reads from the start")
	assert.Equal(t, want[5:10], consume(5), "second member resumes at the first one's commit")
	assert.Equal(t, want[10:15], consume(5), "third member resumes at the second one's commit")

	offsets, err := kadm.NewClient(b.franz(t)).FetchOffsets(context.Background(), "kcat-group")
	require.NoError(t, err)
	o, ok := offsets.Lookup("grouped", 0)
	require.True(t, ok, "committed offsets: %v", offsets)
	require.NoError(t, o.Err)
	assert.Equal(t, int64(15), o.At)
}

// TestKcatGroupMemberID: Kafka names a member "<client.id>-<uuid>" from the
// request header's client id; librdkafka's default client.id is "rdkafka".
func TestKcatGroupMemberID(t *testing.T) {
	requireKcat(t)
	b := startBroker(t)
	out := b.kcat(t, "x\n", "-P", "-t", "members")
	require.NoError(t, out.err, out)
	out = b.kcat(t, "", "-G", "member-group", "-X", "client.id=compat-client", "-X", "auto.offset.reset=earliest", "-c", "1", "members")
	require.NoError(t, out.err, out)
	assert.Contains(t, out.stderr, "(memberid compat-client-", "kcat prints the member id the coordinator assigned")
}

// TestKcatCompression: librdkafka compresses with each codec; kcat and
// franz-go read the same records back, still compressed as produced
// (compression.type=producer).
func TestKcatCompression(t *testing.T) {
	requireKcat(t)
	b := startBroker(t)
	codecs := []struct {
		name  string
		codec uint8
	}{{"gzip", 1}, {"snappy", 2}, {"lz4", 3}, {"zstd", 4}}
	const n = 200
	for _, c := range codecs {
		t.Run(c.name, func(t *testing.T) {
			topic := "z-" + c.name
			var in strings.Builder
			var want []string
			for i := range n {
				// Repetitive values, so every codec really compresses.
				v := fmt.Sprintf("%s-%04d-%s", c.name, i, strings.Repeat("abc", 40))
				in.WriteString(v + "\n")
				want = append(want, fmt.Sprintf("%s %d", v, i))
			}
			out := b.kcat(t, in.String(), "-P", "-t", topic, "-z", c.name, "-X", "acks=all", "-X", "linger.ms=50")
			require.NoError(t, out.err, out)

			out = b.kcat(t, "", "-C", "-t", topic, "-o", "beginning", "-c", fmt.Sprint(n), "-f", `%s %o\n`)
			require.NoError(t, out.err, out)
			assert.Equal(t, want, lines(out.stdout))

			recs := b.consumeFranz(t, topic, n)
			require.Len(t, recs, n)
			stored := map[uint8]int{}
			for i, r := range recs {
				assert.Equal(t, int64(i), r.Offset)
				assert.Equal(t, strings.Fields(want[i])[0], string(r.Value))
				stored[r.Attrs.CompressionType()]++
			}
			// Codec 0 here means librdkafka decided the broker cannot take
			// compressed batches and sent them uncompressed.
			assert.Equal(t, map[uint8]int{c.codec: n}, stored, "records by codec of their stored batch (0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd)")
		})
	}
}

// TestKcatMessageSize: a message just under message.max.bytes is stored; one
// over it is refused with MESSAGE_TOO_LARGE and nothing else is lost.
func TestKcatMessageSize(t *testing.T) {
	requireKcat(t)
	const maxBytes = 100_000
	b := startBroker(t, fmt.Sprintf("message.max.bytes=%d", maxBytes))
	// A batch of one record adds 61 bytes of batch header and under 20 of
	// record framing to the value.
	near := strings.Repeat("n", maxBytes-200)
	over := strings.Repeat("o", maxBytes+1000)

	out := b.kcat(t, near+"\n", "-P", "-t", "sizes", "-X", "acks=all")
	require.NoError(t, out.err, out)
	assert.NotContains(t, out.stderr, "ERROR")

	out = b.kcat(t, over+"\n", "-P", "-t", "sizes", "-X", "acks=all", "-X", "message.timeout.ms=10000")
	assert.Contains(t, out.stderr, "Message size too large", "kcat must report the broker's MESSAGE_TOO_LARGE: %s", out)

	out = b.kcat(t, "small\n", "-P", "-t", "sizes", "-X", "acks=all")
	require.NoError(t, out.err, out)

	out = b.kcat(t, "", "-C", "-t", "sizes", "-o", "beginning", "-c", "2", "-f", `%S %o\n`)
	require.NoError(t, out.err, out)
	assert.Equal(t, []string{fmt.Sprintf("%d 0", len(near)), "5 1"}, lines(out.stdout))

	recs := b.consumeFranz(t, "sizes", 2)
	require.Len(t, recs, 2)
	assert.Equal(t, near, string(recs[0].Value))
	assert.Equal(t, "small", string(recs[1].Value))
}

// franzRecordsUpTo reads partition 0 of topic up to its end offset.
func franzRecordsUpTo(t *testing.T, b *broker, topic string) []*kgo.Record {
	t.Helper()
	ends, err := kadm.NewClient(b.franz(t)).ListEndOffsets(context.Background(), topic)
	require.NoError(t, err)
	end, ok := ends.Lookup(topic, 0)
	require.True(t, ok)
	require.NoError(t, end.Err)
	if end.Offset == 0 {
		return nil
	}
	return b.consumeFranz(t, topic, int(end.Offset))
}

// TestKcatTopicCompressionType: a topic whose compression.type names a
// codec stores its batches in that codec whatever the producer sent, as
// Kafka's broker recompresses them; DescribeConfigs reports the setting.
func TestKcatTopicCompressionType(t *testing.T) {
	requireKcat(t)
	b := startBroker(t)
	gz := "gzip"
	_, err := kadm.NewClient(b.franz(t)).CreateTopic(context.Background(), 1, 1, map[string]*string{"compression.type": &gz}, "topic-gzip")
	require.NoError(t, err)
	var in strings.Builder
	for i := range 20 {
		fmt.Fprintf(&in, "plain-%d-%s\n", i, strings.Repeat("z", 50))
	}
	out := b.kcat(t, in.String(), "-P", "-t", "topic-gzip", "-X", "acks=all", "-z", "none")
	require.NoError(t, out.err, out)
	recs := b.consumeFranz(t, "topic-gzip", 20)
	stored := map[uint8]int{}
	for _, r := range recs {
		stored[r.Attrs.CompressionType()]++
	}
	assert.Equal(t, map[uint8]int{1: 20}, stored, "records by codec of their stored batch (0 none, 1 gzip)")
}

// TestKcatMinInsyncReplicas: acks=all to a topic whose
// min.insync.replicas exceeds its ISR is refused with
// NOT_ENOUGH_REPLICAS and stores nothing; acks=1 still writes.
func TestKcatMinInsyncReplicas(t *testing.T) {
	requireKcat(t)
	b := startBroker(t)
	two := "2"
	_, err := kadm.NewClient(b.franz(t)).CreateTopic(context.Background(), 1, 1, map[string]*string{"min.insync.replicas": &two}, "min-isr")
	require.NoError(t, err)
	out := b.kcat(t, "refused\n", "-P", "-t", "min-isr", "-X", "acks=all", "-X", "retries=0", "-X", "enable.idempotence=false")
	assert.Contains(t, out.stderr, "Not enough in-sync replicas", out)
	out = b.kcat(t, "written\n", "-P", "-t", "min-isr", "-X", "acks=1")
	require.NoError(t, out.err, out)
	out = b.kcat(t, "", "-C", "-t", "min-isr", "-o", "beginning", "-c", "1", "-f", `%s %o\n`)
	require.NoError(t, out.err, out)
	assert.Equal(t, []string{"written 0"}, lines(out.stdout))
}
