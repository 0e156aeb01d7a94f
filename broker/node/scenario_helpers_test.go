package node

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/faultline/faultline/broker/metadata"
	"github.com/faultline/faultline/broker/storage"
	"github.com/faultline/faultline/internal/faultnet"
)

// seedCluster is the topology of seed 003's scenarios inside one test
// process: three controller-only voters (ids 1, 2, 3) and three
// broker-only nodes (ids 4, 5, 6) on fixed loopback ports, every link
// between two nodes through a fault switch. Clients reach every broker
// directly, as Jepsen's clients do; only the links between nodes fail.
type seedCluster struct {
	t     *testing.T
	sw    *faultnet.Switch
	nodes []*clusterNode // nodes[id-1]
	addrs map[int32]string
}

// Ids of the seed cluster's nodes.
var (
	seedControllers = []int32{1, 2, 3}
	seedBrokers     = []int32{4, 5, 6}
)

// startSeedCluster starts the seed topology with extra broker settings
// (for every node).
func startSeedCluster(t *testing.T, extra map[string]string) *seedCluster {
	t.Helper()
	props := clusterProps(t, 3, extra)
	for _, p := range props {
		p["process.roles"] = "controller"
		p["listeners"] = strings.Split(p["listeners"], ",")[1]
	}
	all := withBrokers(t, props, 3)
	ports := freePorts(t, 3)
	s := &seedCluster{t: t, sw: faultnet.New(), addrs: map[int32]string{}}
	for i, p := range all {
		id := int32(i + 1)
		if p["process.roles"] == "broker" {
			addr := fmt.Sprintf("127.0.0.1:%d", ports[i-3])
			p["listeners"] = "PLAINTEXT://" + addr
			s.addrs[id] = addr
			s.sw.Register(id, addr)
		}
	}
	// The controllers' addresses are registered as each node is launched:
	// a start tried again on fresh ports (startClusterDial) moves them.
	registerVoters := func() {
		for _, v := range strings.Split(all[0]["controller.quorum.voters"], ",") {
			idStr, addr, _ := strings.Cut(v, "@")
			id, err := strconv.Atoi(idStr)
			require.NoError(t, err)
			s.sw.Register(int32(id), addr)
		}
	}
	s.nodes = startClusterDial(t, all, func(id int32) DialFunc {
		registerVoters()
		return s.sw.Dialer(id)
	})
	return s
}

func (s *seedCluster) node(id int32) *clusterNode { return s.nodes[id-1] }

// brokerAddrs are the listeners of every broker, running or not (their
// ports are fixed, so a restarted broker answers on the same address).
func (s *seedCluster) brokerAddrs(ids ...int32) []string {
	if len(ids) == 0 {
		ids = seedBrokers
	}
	var out []string
	for _, id := range ids {
		out = append(out, s.addrs[id])
	}
	return out
}

// client is a franz-go client seeded with every broker, retrying fast.
func (s *seedCluster) client(opts ...kgo.Opt) *kgo.Client {
	s.t.Helper()
	base := []kgo.Opt{
		kgo.SeedBrokers(s.brokerAddrs()...),
		kgo.MetadataMinAge(50 * time.Millisecond),
		kgo.RetryBackoffFn(func(int) time.Duration { return 20 * time.Millisecond }),
	}
	cl, err := kgo.NewClient(append(base, opts...)...)
	require.NoError(s.t, err)
	s.t.Cleanup(cl.Close)
	return cl
}

// createTopic creates a one-partition topic with RF 3 (so on brokers 4, 5
// and 6) and waits until every running node sees it with a full ISR.
func (s *seedCluster) createTopic(name string, configs map[string]*string) metadata.Partition {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := kadm.NewClient(s.client()).CreateTopic(ctx, 1, 3, configs, name)
	require.NoError(s.t, err)
	require.NoError(s.t, resp.Err)
	return s.waitPartition(name, "a full ISR on every node", func(p metadata.Partition) bool {
		return p.Leader >= 0 && len(p.ISR) == 3
	}, 30*time.Second)
}

// activeController is the controller that is active now, nil when none is.
func (s *seedCluster) activeController() *clusterNode {
	for _, id := range seedControllers {
		c := s.node(id)
		if c.node != nil && c.node.State() == StateRunning && c.node.controller != nil && c.node.controller.Active() {
			return c
		}
	}
	return nil
}

// partition is topic's partition 0 as the active controller's image has it
// (the committed state); false when no controller is active.
func (s *seedCluster) partition(topic string) (metadata.Partition, bool) {
	c := s.activeController()
	if c == nil {
		return metadata.Partition{}, false
	}
	return partitionState(c, topic, 0)
}

// waitPartition waits until the committed partition satisfies cond and
// returns it.
func (s *seedCluster) waitPartition(topic, what string, cond func(metadata.Partition) bool, within time.Duration) metadata.Partition {
	s.t.Helper()
	deadline := time.Now().Add(within)
	var last metadata.Partition
	for {
		p, ok := s.partition(topic)
		if ok {
			last = p
			if cond(p) {
				return p
			}
		}
		if time.Now().After(deadline) {
			require.FailNowf(s.t, "partition state not reached", "%s-0: %s within %s (last seen leader %d epoch %d ISR %v)", topic, what, within, last.Leader, last.LeaderEpoch, last.ISR)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// kill crashes node id: no controlled shutdown, no clean marker.
func (s *seedCluster) kill(id int32) {
	s.t.Helper()
	c := s.node(id)
	require.NotNil(s.t, c.node, "node %d is running", id)
	c.node.kill()
	c.node = nil
}

// restart starts node id again on its data.
func (s *seedCluster) restart(id int32) {
	s.t.Helper()
	require.NoError(s.t, s.node(id).start(s.t))
}

// produceAll writes values to topic through cl with every record in
// flight at once (franz-go keeps their order within the partition) and
// returns the error of each, nil when acknowledged.
func produceAll(ctx context.Context, cl *kgo.Client, topic string, values []string) []error {
	errs := make([]error, len(values))
	var wg sync.WaitGroup
	for i, v := range values {
		wg.Add(1)
		cl.Produce(ctx, &kgo.Record{Topic: topic, Value: []byte(v)}, func(_ *kgo.Record, err error) {
			errs[i] = err
			wg.Done()
		})
	}
	wg.Wait()
	return errs
}

// requireAcked fails the test unless every write was acknowledged.
func requireAcked(t *testing.T, errs []error, what string) {
	t.Helper()
	for i, err := range errs {
		require.NoError(t, err, "%s: write %d", what, i)
	}
}

// without is ids without the given ones, in their order.
func without(ids []int32, drop ...int32) []int32 {
	return slices.DeleteFunc(slices.Clone(ids), func(r int32) bool { return slices.Contains(drop, r) })
}

// valueRange is "prefix-0000" .. up to (not including) to.
func valueRange(prefix string, from, to int) []string {
	var out []string
	for i := from; i < to; i++ {
		out = append(out, fmt.Sprintf("%s-%04d", prefix, i))
	}
	return out
}

// rawProduce sends one Produce request with one record straight to broker
// id (no client retries, no redirection) and returns the partition's error
// code and base offset: what a client sees from that broker.
func (s *seedCluster) rawProduce(id int32, topic string, acks int16, value string, timeout time.Duration) (int16, int64, error) {
	s.t.Helper()
	// franz-go sends a raw ProduceRequest with its client's RequiredAcks,
	// whatever the request says: the client is configured with acks.
	opts := []kgo.Opt{kgo.SeedBrokers(s.addrs[id])}
	switch acks {
	case 0:
		opts = append(opts, kgo.RequiredAcks(kgo.NoAck()), kgo.DisableIdempotentWrite())
	case 1:
		opts = append(opts, kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
	default:
		opts = append(opts, kgo.RequiredAcks(kgo.AllISRAcks()))
	}
	cl, err := kgo.NewClient(opts...)
	require.NoError(s.t, err)
	defer cl.Close()
	batch := storage.BuildBatch([]storage.Record{{TimestampMs: time.Now().UnixMilli(), Value: []byte(value)}}, storage.BatchOptions{})
	req := kmsg.NewPtrProduceRequest()
	req.Acks = acks
	req.TimeoutMillis = int32(timeout / time.Millisecond)
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = batch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	ctx, cancel := context.WithTimeout(context.Background(), timeout+10*time.Second)
	defer cancel()
	resp, err := cl.SeedBrokers()[0].Request(ctx, req)
	if err != nil {
		return 0, 0, err
	}
	pr := resp.(*kmsg.ProduceResponse)
	if len(pr.Topics) != 1 || len(pr.Topics[0].Partitions) != 1 {
		return 0, 0, fmt.Errorf("produce response with %d topics", len(pr.Topics))
	}
	p := pr.Topics[0].Partitions[0]
	return p.ErrorCode, p.BaseOffset, nil
}

// metadataOf asks broker id for topic's metadata and returns partition 0's
// error code and leader as that broker answers.
func (s *seedCluster) metadataOf(id int32, topic string) (int16, int32, error) {
	s.t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.addrs[id]))
	require.NoError(s.t, err)
	defer cl.Close()
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := cl.SeedBrokers()[0].Request(ctx, req)
	if err != nil {
		return 0, 0, err
	}
	mr := resp.(*kmsg.MetadataResponse)
	if len(mr.Topics) != 1 {
		return 0, 0, fmt.Errorf("metadata response with %d topics", len(mr.Topics))
	}
	if mr.Topics[0].ErrorCode != 0 || len(mr.Topics[0].Partitions) == 0 {
		return mr.Topics[0].ErrorCode, -1, nil
	}
	p := mr.Topics[0].Partitions[0]
	return p.ErrorCode, p.Leader, nil
}

// replicaLog reads partition 0 of topic straight from node id's own log
// (not through the leader): every record's value by offset, up to its log
// end offset, and its high watermark.
func (s *seedCluster) replicaLog(id int32, topic string) (values []string, hw int64) {
	s.t.Helper()
	c := s.node(id)
	require.NotNil(s.t, c.node, "node %d is running", id)
	l, ok := c.node.logs.GetLog(storage.TopicPartition{Topic: topic, Partition: 0})
	require.True(s.t, ok, "node %d has %s-0", id, topic)
	next := l.LogStartOffset()
	for next < l.LogEndOffset() {
		data, err := l.Read(next, 1<<20, l.LogEndOffset(), true)
		require.NoError(s.t, err)
		if len(data) == 0 {
			break
		}
		require.NoError(s.t, storage.ForEachBatch(data, func(_ storage.BatchHeader, batch []byte) error {
			recs, err := storage.DecodeRecords(batch)
			if err != nil {
				return err
			}
			for _, r := range recs {
				values = append(values, string(r.Value))
				next = r.Offset + 1
			}
			return nil
		}))
	}
	return values, l.HighWatermark()
}

// waitReplicaValues waits until node id's own log holds exactly want, in
// order (a follower catching up, or truncating), and returns its HW.
func (s *seedCluster) waitReplicaValues(id int32, topic string, want []string, within time.Duration) {
	s.t.Helper()
	var got []string
	require.Eventually(s.t, func() bool {
		got, _ = s.replicaLog(id, topic)
		return slices.Equal(got, want)
	}, within, 20*time.Millisecond, "replica %d's log of %s-0", id, topic)
}
