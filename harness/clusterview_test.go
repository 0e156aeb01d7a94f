package harness

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/faultline/faultline/checker"
	"github.com/faultline/faultline/workloads"
)

func TestLeaderChangesRecordsOnlyWhatChanged(t *testing.T) {
	names := map[int32]string{1: "n1", 2: "n2", 4: "n4"}
	name := func(id int32) string { return names[id] }
	owns := func(topic string) bool { return topic != "__consumer_offsets" }
	md := func(parts ...kmsg.MetadataResponseTopicPartition) *kmsg.MetadataResponse {
		t0, other := "t0", "__consumer_offsets"
		return &kmsg.MetadataResponse{Topics: []kmsg.MetadataResponseTopic{
			{Topic: &other, Partitions: []kmsg.MetadataResponseTopicPartition{{Partition: 0, Leader: 1, LeaderEpoch: 1}}},
			{Topic: &t0, Partitions: parts},
		}}
	}
	part := func(p, leader, epoch int32) kmsg.MetadataResponseTopicPartition {
		return kmsg.MetadataResponseTopicPartition{Partition: p, Leader: leader, LeaderEpoch: epoch}
	}
	known := map[topicPartition]checker.Leadership{}
	first := leaderChanges(known, md(part(1, 2, 3), part(0, 1, 5)), owns, name)
	assert.Equal(t, []checker.Leadership{
		{Topic: "t0", Partition: 0, Leader: "n1", Epoch: 5},
		{Topic: "t0", Partition: 1, Leader: "n2", Epoch: 3},
	}, first, "every owned partition at first, sorted")
	assert.Empty(t, leaderChanges(known, md(part(0, 1, 5), part(1, 2, 3)), owns, name), "nothing changed")
	assert.Equal(t, []checker.Leadership{{Topic: "t0", Partition: 1, Leader: "n4", Epoch: 4}},
		leaderChanges(known, md(part(0, 1, 5), part(1, 4, 4)), owns, name))
	leaderless := part(0, -1, 6)
	leaderless.ErrorCode = kerr.LeaderNotAvailable.Code
	assert.Equal(t, []checker.Leadership{{Topic: "t0", Partition: 0, Leader: "", Epoch: 6}},
		leaderChanges(known, md(leaderless, part(1, 4, 4)), owns, name), "a partition without a leader is recorded")
	broken := part(1, 2, 9)
	broken.ErrorCode = kerr.UnknownServerError.Code
	assert.Empty(t, leaderChanges(known, md(leaderless, broken), owns, name), "an answer with an error says nothing")
	assert.Empty(t, leaderChanges(known, md(part(0, 2, 5), part(1, 2, 3)), owns, name), "older epochs are a stale node's answer")
}

// coordinatorAnswer answers FindCoordinator with resp.
type coordinatorAnswer struct {
	resp *kmsg.FindCoordinatorResponse
	got  []*kmsg.FindCoordinatorRequest
}

func (c *coordinatorAnswer) Request(_ context.Context, req kmsg.Request) (kmsg.Response, error) {
	c.got = append(c.got, req.(*kmsg.FindCoordinatorRequest))
	return c.resp, nil
}

// TestFindCoordinators: the nodes FindCoordinator names, v4+ (per key)
// and older (one answer), and its errors.
func TestFindCoordinators(t *testing.T) {
	name := func(id int32) string {
		if id >= 1 && id <= 5 {
			return fmt.Sprintf("n%d", id)
		}
		return ""
	}
	v4 := &coordinatorAnswer{resp: &kmsg.FindCoordinatorResponse{Version: 4, Coordinators: []kmsg.FindCoordinatorResponseCoordinator{{Key: "g", NodeID: 3}}}}
	got, err := findCoordinators(context.Background(), v4, []string{"g"}, name)
	require.NoError(t, err)
	assert.Equal(t, []string{"n3"}, got)
	require.Len(t, v4.got, 1)
	assert.Equal(t, []string{"g"}, v4.got[0].CoordinatorKeys)
	assert.Equal(t, "g", v4.got[0].CoordinatorKey)
	assert.Equal(t, int8(0), v4.got[0].CoordinatorType, "a consumer group")

	old := &coordinatorAnswer{resp: &kmsg.FindCoordinatorResponse{NodeID: 2}}
	got, err = findCoordinators(context.Background(), old, []string{"g", "h"}, name)
	require.NoError(t, err)
	assert.Equal(t, []string{"n2"}, got, "one node however many groups it coordinates")

	busy := &coordinatorAnswer{resp: &kmsg.FindCoordinatorResponse{NodeID: -1, ErrorCode: kerr.CoordinatorNotAvailable.Code}}
	_, err = findCoordinators(context.Background(), busy, []string{"g"}, name)
	assert.ErrorIs(t, err, kerr.CoordinatorNotAvailable)
	stranger := &coordinatorAnswer{resp: &kmsg.FindCoordinatorResponse{NodeID: 9}}
	_, err = findCoordinators(context.Background(), stranger, []string{"g"}, name)
	assert.ErrorContains(t, err, "not a known node")
}

// keyWorkload maps key k onto t<k/4>-<k%4>.
type keyWorkload struct{ workloads.Workload }

func (keyWorkload) TopicPartition(k int) (string, int32) {
	return fmt.Sprintf("t%d", k/4), int32(k % 4)
}

// TestActivePartitionsAreThoseJustWritten: acknowledged sends mark their
// partition as being written; failed sends, polls, and sends older than
// the window do not.
func TestActivePartitionsAreThoseJustWritten(t *testing.T) {
	r := &run{workload: keyWorkload{}}
	c := &clusterView{r: r}
	send := func(typ checker.OpType, keys ...int) checker.Op {
		op := checker.Op{Type: typ, F: checker.FSend}
		for _, k := range keys {
			op.Mops = append(op.Mops, checker.MicroOp{F: checker.FSend, Key: k})
		}
		return op
	}
	r.noteWrites(send(checker.OK, 1, 6))
	r.noteWrites(send(checker.Info, 9))
	r.noteWrites(checker.Op{Type: checker.OK, F: checker.FPoll, Mops: []checker.MicroOp{{F: checker.FPoll, Key: 12}}})
	r.mu.Lock()
	r.written[13] = time.Now().Add(-2 * activeWindow)
	r.mu.Unlock()
	got, err := c.ActivePartitions(context.Background())
	require.NoError(t, err)
	assert.Equal(t, map[string]bool{"t0-1": true, "t1-2": true}, got)

	_, err = (&clusterView{r: &run{}}).ActivePartitions(context.Background())
	assert.Error(t, err, "a workload without a key map cannot tell")
}

// retiringWorkload retires a key after 4 sends.
type retiringWorkload struct{ keyWorkload }

func (retiringWorkload) WritesPerKey() int { return 4 }

// TestActivePartitionsPassOverKeysAboutToRetire: a key with three quarters
// of its sends acknowledged goes quiet soon, so its partition counts as
// being written only while no younger key is.
func TestActivePartitionsPassOverKeysAboutToRetire(t *testing.T) {
	r := &run{workload: retiringWorkload{}}
	c := &clusterView{r: r}
	for range 3 {
		r.noteWrites(checker.Op{Type: checker.OK, F: checker.FSend, Mops: []checker.MicroOp{{F: checker.FSend, Key: 1}}})
	}
	got, err := c.ActivePartitions(context.Background())
	require.NoError(t, err)
	assert.Equal(t, map[string]bool{"t0-1": true}, got, "the only key written, old or not")

	r.noteWrites(checker.Op{Type: checker.OK, F: checker.FSend, Mops: []checker.MicroOp{{F: checker.FSend, Key: 6}}})
	got, err = c.ActivePartitions(context.Background())
	require.NoError(t, err)
	assert.Equal(t, map[string]bool{"t1-2": true}, got)
}

// TestLearnIDsMapsNodesToTheBrokerIDsTheClusterReports: a broker that
// numbers itself (kfake's one broker is 0) is found by its advertised
// address, or as the one broker of a one-node run; nodes whose node.id the
// cluster lists keep it.
func TestLearnIDsMapsNodesToTheBrokerIDsTheClusterReports(t *testing.T) {
	broker := func(id int32, host string, port int32) kmsg.MetadataResponseBroker {
		b := kmsg.NewMetadataResponseBroker()
		b.NodeID, b.Host, b.Port = id, host, port
		return b
	}
	md := func(brokers ...kmsg.MetadataResponseBroker) *kmsg.MetadataResponse {
		m := kmsg.NewPtrMetadataResponse()
		m.Brokers = brokers
		return m
	}

	one := &run{nodes: []Node{{Name: "n1", ID: 1, Addr: "10.0.0.1:9092", Broker: true}}}
	one.learnIDs(md(broker(0, "kfake.local", 9092)))
	assert.Equal(t, int32(0), one.brokerID(one.nodes[0]), "the one broker of a one-node run")
	assert.Equal(t, "n1", (&clusterView{r: one}).name(0))
	assert.Empty(t, (&clusterView{r: one}).name(1))

	three := &run{nodes: []Node{
		{Name: "n1", ID: 1, Addr: "10.0.0.1:9092", Broker: true},
		{Name: "n2", ID: 2, Addr: "10.0.0.2:9092", Broker: true},
		{Name: "n3", ID: 3, Addr: "10.0.0.3:9092", Broker: true},
	}}
	three.learnIDs(md(broker(7, "10.0.0.2", 9092), broker(3, "10.0.0.3", 9092), broker(5, "10.0.0.1", 9092)))
	assert.Equal(t, int32(5), three.brokerID(three.nodes[0]), "by advertised address")
	assert.Equal(t, int32(7), three.brokerID(three.nodes[1]))
	assert.Equal(t, int32(3), three.brokerID(three.nodes[2]), "its node.id is listed")

	// Ids that overlap the node.ids in another order: the address decides,
	// and no two nodes share an id.
	swapped := &run{nodes: []Node{
		{Name: "n1", ID: 1, Addr: "10.0.0.1:9092", Broker: true},
		{Name: "n2", ID: 2, Addr: "10.0.0.2:9092", Broker: true},
	}}
	swapped.learnIDs(md(broker(2, "10.0.0.1", 9092), broker(5, "10.0.0.2", 9092)))
	assert.Equal(t, int32(2), swapped.brokerID(swapped.nodes[0]))
	assert.Equal(t, int32(5), swapped.brokerID(swapped.nodes[1]))
	assert.Equal(t, "n1", (&clusterView{r: swapped}).name(2))
	assert.Equal(t, "n2", (&clusterView{r: swapped}).name(5))
	// A later answer that lists n2's node.id at its address undoes what
	// the earlier one taught, and n1, which it does not place, loses the
	// id it had learnt, now n2's.
	swapped.learnIDs(md(broker(2, "10.0.0.2", 9092), broker(7, "10.0.0.9", 9092)))
	assert.Equal(t, int32(2), swapped.brokerID(swapped.nodes[1]))
	assert.Equal(t, int32(1), swapped.brokerID(swapped.nodes[0]))
	assert.Equal(t, "n2", (&clusterView{r: swapped}).name(2))
	// One that does not list n1 at all leaves what n1 learnt alone.
	kept := &run{nodes: swapped.nodes}
	kept.learnIDs(md(broker(4, "10.0.0.1", 9092), broker(2, "10.0.0.2", 9092)))
	kept.learnIDs(md(broker(2, "10.0.0.2", 9092)))
	assert.Equal(t, int32(4), kept.brokerID(kept.nodes[0]))

	same := &run{nodes: []Node{{Name: "n1", ID: 1, Addr: "10.0.0.1:9092", Broker: true}}}
	same.learnIDs(md(broker(1, "elsewhere", 1)))
	assert.Equal(t, int32(1), same.brokerID(same.nodes[0]))
	assert.Nil(t, same.ids)
}
