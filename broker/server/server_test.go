package server

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/faultline/faultline/broker/replica"
)

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestProduceConsumeRoundTrip(t *testing.T) {
	ts := startServer(t, Options{}, nil)
	require.True(t, ts.fake.addTopic("orders", 3))
	ctx := testCtx(t)

	const n = 2000
	prod := ts.client(t, kgo.DefaultProduceTopic("orders"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		prod.Produce(ctx, &kgo.Record{Partition: int32(i % 3), Value: fmt.Appendf(nil, "v%05d", i)}, func(_ *kgo.Record, err error) {
			defer wg.Done()
			if err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}

	cons := ts.client(t, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{
		"orders": {0: kgo.NewOffset().AtStart(), 1: kgo.NewOffset().AtStart(), 2: kgo.NewOffset().AtStart()},
	}), kgo.FetchMaxBytes(4096), kgo.FetchMaxPartitionBytes(1024))
	next := map[int32]int{0: 0, 1: 1, 2: 2}
	got := 0
	for got < n {
		fs := cons.PollFetches(ctx)
		require.NoError(t, ctx.Err())
		fs.EachError(func(topic string, p int32, err error) { require.NoError(t, err, "%s/%d", topic, p) })
		fs.EachRecord(func(r *kgo.Record) {
			assert.Equal(t, fmt.Sprintf("v%05d", next[r.Partition]), string(r.Value), "partition %d offset %d", r.Partition, r.Offset)
			assert.Equal(t, int64(next[r.Partition]/3), r.Offset)
			next[r.Partition] += 3
			got++
		})
	}
	assert.Equal(t, n, got)
}

func TestIdempotentProducerUsesInitProducerID(t *testing.T) {
	ts := startServer(t, Options{}, nil)
	require.True(t, ts.fake.addTopic("t", 1))
	cl := ts.client(t, kgo.DefaultProduceTopic("t"))
	require.NoError(t, cl.ProduceSync(testCtx(t), &kgo.Record{Value: []byte("x")}).FirstErr())
	ts.fake.mu.Lock()
	defer ts.fake.mu.Unlock()
	assert.Equal(t, int64(1), ts.fake.nextPID, "kgo asked for a producer id")
}

func TestAcksZeroGetsNoResponse(t *testing.T) {
	ts := startServer(t, Options{}, nil)
	require.True(t, ts.fake.addTopic("t", 1))
	c := dial(t, ts.addr)
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks, req.TimeoutMillis = 9, 0, 1000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "t"
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = recordBatch(3, 10)
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	c.send(req)

	// The next response on the connection must be the ApiVersions one.
	av := kmsg.NewPtrApiVersionsRequest()
	av.Version = 3
	resp := c.roundTrip(av).(*kmsg.ApiVersionsResponse)
	assert.Zero(t, resp.ErrorCode)
	res := ts.fake.Fetch(context.Background(), "t", 0, replica.FetchPartition{MaxBytes: 1 << 20})
	assert.Equal(t, int64(3), res.HighWatermark)

	// acks=0 to an unknown topic closes the connection, as Kafka does.
	req.Topics[0].Topic = "missing"
	c.send(req)
	c.expectClosed()
}

func TestInvalidAcks(t *testing.T) {
	ts := startServer(t, Options{}, nil)
	require.True(t, ts.fake.addTopic("t", 1))
	c := dial(t, ts.addr)
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks = 11, 2
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "t"
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = recordBatch(1, 10)
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp := c.roundTrip(req).(*kmsg.ProduceResponse)
	require.Len(t, resp.Topics, 1)
	assert.Equal(t, kerr.InvalidRequiredAcks.Code, resp.Topics[0].Partitions[0].ErrorCode)
}

func TestProduceUnknownTopicIsNotAutoCreated(t *testing.T) {
	ts := startServer(t, Options{}, func(b *Backend) { b.AutoCreateTopics = true })
	c := dial(t, ts.addr)
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks = 11, -1
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "nope"
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = recordBatch(1, 10)
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp := c.roundTrip(req).(*kmsg.ProduceResponse)
	assert.Equal(t, kerr.UnknownTopicOrPartition.Code, resp.Topics[0].Partitions[0].ErrorCode)
	assert.Nil(t, ts.fake.Image().Topic("nope"))
}

func TestMetadata(t *testing.T) {
	ts := startServer(t, Options{}, nil)
	require.True(t, ts.fake.addTopic("a", 2))
	adm := kadm.NewClient(ts.client(t))
	md, err := adm.Metadata(testCtx(t))
	require.NoError(t, err)
	assert.Equal(t, "fake-cluster", md.Cluster)
	assert.Equal(t, int32(1), md.Controller)
	require.Len(t, md.Brokers, 1)
	assert.Equal(t, int32(1), md.Brokers[0].NodeID)
	td, ok := md.Topics["a"]
	require.True(t, ok)
	require.NoError(t, td.Err)
	assert.Equal(t, kadm.TopicID(ts.fake.Image().Topic("a").ID), td.ID)
	require.Len(t, td.Partitions, 2)
	assert.Equal(t, int32(1), td.Partitions[1].Leader)
	assert.Equal(t, []int32{1}, td.Partitions[1].Replicas)
	assert.Equal(t, []int32{1}, td.Partitions[1].ISR)
}

func TestMetadataVersions(t *testing.T) {
	ts := startServer(t, Options{}, nil)
	require.True(t, ts.fake.addTopic("a", 1))
	c := dial(t, ts.addr)
	for v := int16(0); v <= 12; v++ {
		req := kmsg.NewPtrMetadataRequest()
		req.Version = v
		if v == 0 {
			req.Topics = []kmsg.MetadataRequestTopic{} // v0: empty means all
		}
		resp := c.roundTrip(req).(*kmsg.MetadataResponse)
		require.Len(t, resp.Topics, 1, "v%d", v)
		assert.Equal(t, "a", *resp.Topics[0].Topic, "v%d", v)
		assert.Len(t, resp.Brokers, 1, "v%d", v)
	}
	// v1+: an empty list means no topics (brokers only).
	empty := kmsg.NewPtrMetadataRequest()
	empty.Version, empty.Topics = 12, []kmsg.MetadataRequestTopic{}
	assert.Empty(t, c.roundTrip(empty).(*kmsg.MetadataResponse).Topics)
	// By topic id (v12).
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 12
	mt := kmsg.NewMetadataRequestTopic()
	mt.TopicID = ts.fake.Image().Topic("a").ID
	req.Topics = append(req.Topics, mt)
	resp := c.roundTrip(req).(*kmsg.MetadataResponse)
	require.Len(t, resp.Topics, 1)
	assert.Equal(t, "a", *resp.Topics[0].Topic)
	assert.Zero(t, resp.Topics[0].ErrorCode)
}

func TestMetadataFallsBackToAdvertisedEndpoint(t *testing.T) {
	ts := startServer(t, Options{}, nil)
	ts.fake.update(func(im *metadataImage) { im.Brokers = nil; im.ControllerID = -1 })
	c := dial(t, ts.addr)
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 12
	resp := c.roundTrip(req).(*kmsg.MetadataResponse)
	require.Len(t, resp.Brokers, 1)
	assert.Equal(t, int32(1), resp.Brokers[0].NodeID)
	assert.Equal(t, ts.fake.port, resp.Brokers[0].Port)
	assert.Equal(t, int32(1), resp.ControllerID, "controller id names a live broker")
}

func TestMetadataLeaderless(t *testing.T) {
	ts := startServer(t, Options{}, nil)
	require.True(t, ts.fake.addTopic("a", 1))
	ts.fake.update(func(im *metadataImage) {
		nt := *im.Topics["a"]
		nt.Partitions = append(nt.Partitions[:0:0], nt.Partitions...)
		nt.Partitions[0].Leader = -1
		nt.Partitions[0].Replicas = []int32{1, 2}
		im.Topics["a"] = &nt
	})
	c := dial(t, ts.addr)
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 12
	resp := c.roundTrip(req).(*kmsg.MetadataResponse)
	require.Len(t, resp.Topics, 1)
	p := resp.Topics[0].Partitions[0]
	assert.Equal(t, kerr.LeaderNotAvailable.Code, p.ErrorCode)
	assert.Equal(t, int32(-1), p.Leader)
	assert.Equal(t, []int32{2}, p.OfflineReplicas)
}

func TestMetadataAutoCreate(t *testing.T) {
	for _, tc := range []struct {
		name      string
		enabled   bool
		allow     bool
		wantErr   int16
		wantExist bool
	}{
		{"enabled and allowed", true, true, 0, true},
		{"enabled, request forbids", true, false, kerr.UnknownTopicOrPartition.Code, false},
		{"disabled", false, true, kerr.UnknownTopicOrPartition.Code, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts := startServer(t, Options{}, func(b *Backend) { b.AutoCreateTopics = tc.enabled })
			c := dial(t, ts.addr)
			req := kmsg.NewPtrMetadataRequest()
			req.Version, req.AllowAutoTopicCreation = 12, tc.allow
			name := "auto"
			mt := kmsg.NewMetadataRequestTopic()
			mt.Topic = &name
			req.Topics = append(req.Topics, mt)
			resp := c.roundTrip(req).(*kmsg.MetadataResponse)
			require.Len(t, resp.Topics, 1)
			assert.Equal(t, tc.wantErr, resp.Topics[0].ErrorCode)
			assert.Equal(t, tc.wantExist, ts.fake.Image().Topic("auto") != nil)
			if tc.wantExist {
				assert.Len(t, resp.Topics[0].Partitions, 3, "created with the broker default")
			}
		})
	}
}

func TestKgoProducesToAutoCreatedTopic(t *testing.T) {
	ts := startServer(t, Options{}, func(b *Backend) { b.AutoCreateTopics = true })
	cl := ts.client(t, kgo.AllowAutoTopicCreation())
	r, err := cl.ProduceSync(testCtx(t), &kgo.Record{Topic: "fresh", Value: []byte("v")}).First()
	require.NoError(t, err)
	assert.Equal(t, int64(0), r.Offset)
	require.NotNil(t, ts.fake.Image().Topic("fresh"))
}

func TestAdminTopics(t *testing.T) {
	ts := startServer(t, Options{}, nil)
	adm := kadm.NewClient(ts.client(t))
	ctx := testCtx(t)

	created, err := adm.CreateTopics(ctx, -1, -1, nil, "x", "y")
	require.NoError(t, err)
	for _, r := range created {
		require.NoError(t, r.Err, r.Topic)
		assert.Equal(t, int32(3), r.NumPartitions)
	}
	_, err = adm.CreateTopic(ctx, 1, 1, nil, "x")
	assert.ErrorIs(t, err, kerr.TopicAlreadyExists)

	grown, err := adm.CreatePartitions(ctx, 2, "x")
	require.NoError(t, err)
	require.NoError(t, grown["x"].Err)
	assert.Len(t, ts.fake.Image().Topic("x").Partitions, 5)

	deleted, err := adm.DeleteTopics(ctx, "y")
	require.NoError(t, err)
	require.NoError(t, deleted["y"].Err)
	assert.Nil(t, ts.fake.Image().Topic("y"))

	topics, err := adm.ListTopics(ctx)
	require.NoError(t, err)
	assert.Equal(t, []string{"x"}, topics.Names())

	rc, err := adm.DescribeTopicConfigs(ctx, "x")
	require.NoError(t, err)
	cfg, err := rc.On("x", nil)
	require.NoError(t, err)
	require.NoError(t, cfg.Err)
	require.Len(t, cfg.Configs, 1)
	assert.Equal(t, "cleanup.policy", cfg.Configs[0].Key)

	bc, err := adm.DescribeBrokerConfigs(ctx)
	require.NoError(t, err)
	require.Len(t, bc, 1)
	require.NoError(t, bc[0].Err)
	assert.Equal(t, "num.partitions", bc[0].Configs[0].Key)
}

func TestDeleteTopicByID(t *testing.T) {
	ts := startServer(t, Options{}, nil)
	require.True(t, ts.fake.addTopic("gone", 1))
	c := dial(t, ts.addr)
	req := kmsg.NewPtrDeleteTopicsRequest()
	req.Version = 6
	dt := kmsg.NewDeleteTopicsRequestTopic()
	dt.TopicID = ts.fake.Image().Topic("gone").ID
	req.Topics = append(req.Topics, dt)
	resp := c.roundTrip(req).(*kmsg.DeleteTopicsResponse)
	require.Len(t, resp.Topics, 1)
	assert.Zero(t, resp.Topics[0].ErrorCode)
	assert.Nil(t, ts.fake.Image().Topic("gone"))
}

func TestLongPollFetchWakesOnNewData(t *testing.T) {
	ts := startServer(t, Options{}, nil)
	require.True(t, ts.fake.addTopic("t", 1))
	c := dial(t, ts.addr)

	req := kmsg.NewPtrFetchRequest()
	req.Version, req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes, req.SessionEpoch = 12, -1, 600000, 1, 1<<20, -1
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = "t"
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.PartitionMaxBytes = 1 << 20
	ft.Partitions = append(ft.Partitions, fp)
	req.Topics = append(req.Topics, ft)
	corr := c.send(req)

	// Once the fetch is waiting (it took the Changed channel), produce.
	require.Eventually(t, func() bool { return ts.fake.changedCalls.Load() > 0 }, 10*time.Second, time.Millisecond)
	res := ts.fake.Produce(context.Background(), "t", 0, recordBatch(2, 5), 1)
	require.Zero(t, res.ErrorCode)

	resp := kmsg.NewPtrFetchResponse()
	resp.Version = 12
	got, err := c.readResponse(resp)
	require.NoError(t, err, "a fetch waiting up to 10 minutes must wake on new data")
	assert.Equal(t, corr, got)
	require.Len(t, resp.Topics, 1)
	p := resp.Topics[0].Partitions[0]
	assert.Zero(t, p.ErrorCode)
	assert.Equal(t, int64(2), p.HighWatermark)
	assert.NotEmpty(t, p.RecordBatches)
	assert.Zero(t, resp.SessionID, "fetch sessions are declined")
}

func TestFetchByTopicID(t *testing.T) {
	ts := startServer(t, Options{}, nil)
	require.True(t, ts.fake.addTopic("t", 1))
	ts.fake.Produce(context.Background(), "t", 0, recordBatch(1, 5), 1)
	c := dial(t, ts.addr)
	req := kmsg.NewPtrFetchRequest()
	req.Version, req.MaxBytes, req.SessionEpoch = 16, 1<<20, -1
	req.ReplicaState.ID = -1
	for _, id := range [][16]byte{ts.fake.Image().Topic("t").ID, {9, 9, 9}} {
		ft := kmsg.NewFetchRequestTopic()
		ft.TopicID = id
		fp := kmsg.NewFetchRequestTopicPartition()
		fp.PartitionMaxBytes = 1 << 20
		ft.Partitions = append(ft.Partitions, fp)
		req.Topics = append(req.Topics, ft)
	}
	resp := c.roundTrip(req).(*kmsg.FetchResponse)
	require.Len(t, resp.Topics, 2)
	assert.Zero(t, resp.Topics[0].Partitions[0].ErrorCode)
	assert.Equal(t, int64(1), resp.Topics[0].Partitions[0].HighWatermark)
	assert.Equal(t, kerr.UnknownTopicID.Code, resp.Topics[1].Partitions[0].ErrorCode)
}

func TestFetchSessionsDeclined(t *testing.T) {
	ts := startServer(t, Options{}, nil)
	c := dial(t, ts.addr)
	req := kmsg.NewPtrFetchRequest()
	req.Version, req.SessionID, req.SessionEpoch = 12, 77, 3
	resp := c.roundTrip(req).(*kmsg.FetchResponse)
	assert.Equal(t, kerr.FetchSessionIDNotFound.Code, resp.ErrorCode)
	assert.Zero(t, resp.SessionID)
}

func TestFetchByteLimits(t *testing.T) {
	ts := startServer(t, Options{}, nil)
	require.True(t, ts.fake.addTopic("t", 2))
	big := recordBatch(1, 3000)
	small := recordBatch(1, 10)
	ts.fake.Produce(context.Background(), "t", 0, big, 1)
	ts.fake.Produce(context.Background(), "t", 0, small, 1)
	ts.fake.Produce(context.Background(), "t", 1, small, 1)
	c := dial(t, ts.addr)
	req := kmsg.NewPtrFetchRequest()
	req.Version, req.MaxBytes, req.SessionEpoch = 12, 1000, -1
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = "t"
	for p := range int32(2) {
		fp := kmsg.NewFetchRequestTopicPartition()
		fp.Partition, fp.PartitionMaxBytes = p, 500
		ft.Partitions = append(ft.Partitions, fp)
	}
	req.Topics = append(req.Topics, ft)
	resp := c.roundTrip(req).(*kmsg.FetchResponse)
	ps := resp.Topics[0].Partitions
	assert.Len(t, ps[0].RecordBatches, len(big), "the first batch comes whole even above the limits")
	assert.Empty(t, ps[1].RecordBatches, "the response budget is spent")
}

func TestListOffsetsAndOffsetForLeaderEpoch(t *testing.T) {
	ts := startServer(t, Options{}, nil)
	require.True(t, ts.fake.addTopic("t", 1))
	ts.fake.Produce(context.Background(), "t", 0, recordBatch(4, 5), 1)
	adm := kadm.NewClient(ts.client(t))
	ctx := testCtx(t)
	end, err := adm.ListEndOffsets(ctx, "t")
	require.NoError(t, err)
	o, ok := end.Lookup("t", 0)
	require.True(t, ok)
	require.NoError(t, o.Err)
	assert.Equal(t, int64(4), o.Offset)
	start, err := adm.ListStartOffsets(ctx, "t", "missing")
	require.NoError(t, err)
	o, _ = start.Lookup("t", 0)
	assert.Equal(t, int64(0), o.Offset)

	c := dial(t, ts.addr)
	for _, tc := range []struct {
		version   int16
		timestamp int64
		offset    int64
		code      int16
	}{
		{8, -4, 0, 0}, // earliest local is the log start without tiered storage
		{8, -1, 4, 0},
		{6, -3, -1, kerr.UnsupportedVersion.Code},
	} {
		lreq := kmsg.NewPtrListOffsetsRequest()
		lreq.Version = tc.version
		lt := kmsg.NewListOffsetsRequestTopic()
		lt.Topic = "t"
		lp := kmsg.NewListOffsetsRequestTopicPartition()
		lp.Timestamp = tc.timestamp
		lt.Partitions = append(lt.Partitions, lp)
		lreq.Topics = append(lreq.Topics, lt)
		lresp := c.roundTrip(lreq).(*kmsg.ListOffsetsResponse)
		assert.Equal(t, tc.code, lresp.Topics[0].Partitions[0].ErrorCode, "v%d ts %d", tc.version, tc.timestamp)
		assert.Equal(t, tc.offset, lresp.Topics[0].Partitions[0].Offset, "v%d ts %d", tc.version, tc.timestamp)
	}
	req := kmsg.NewPtrOffsetForLeaderEpochRequest()
	req.Version, req.ReplicaID = 4, -1
	rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
	rt.Topic = "t"
	rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
	rp.CurrentLeaderEpoch, rp.LeaderEpoch = 0, 0
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp := c.roundTrip(req).(*kmsg.OffsetForLeaderEpochResponse)
	assert.Equal(t, int64(4), resp.Topics[0].Partitions[0].EndOffset)
}

func TestFindCoordinatorAndOffsetFetchShapes(t *testing.T) {
	ts := startServer(t, Options{}, nil)
	c := dial(t, ts.addr)
	for _, v := range []int16{0, 3, 4} {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.Version = v
		req.CoordinatorKey = "g"
		req.CoordinatorKeys = []string{"g", "h"}
		resp := c.roundTrip(req).(*kmsg.FindCoordinatorResponse)
		if v < 4 {
			assert.Equal(t, int32(1), resp.NodeID, "v%d", v)
			assert.Equal(t, ts.fake.host, resp.Host, "v%d", v)
		} else {
			require.Len(t, resp.Coordinators, 2)
			assert.Equal(t, "h", resp.Coordinators[1].Key)
		}
	}
	for _, v := range []int16{1, 7, 8} {
		req := kmsg.NewPtrOffsetFetchRequest()
		req.Version = v
		if v < 8 {
			req.Group = "g"
			req.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: "t", Partitions: []int32{0}}}
		} else {
			req.Groups = []kmsg.OffsetFetchRequestGroup{{Group: "g", Topics: []kmsg.OffsetFetchRequestGroupTopic{{Topic: "t", Partitions: []int32{0}}}}}
		}
		resp := c.roundTrip(req).(*kmsg.OffsetFetchResponse)
		if v < 8 {
			require.Len(t, resp.Topics, 1, "v%d", v)
			assert.Equal(t, int64(42), resp.Topics[0].Partitions[0].Offset)
		} else {
			require.Len(t, resp.Groups, 1)
			assert.Equal(t, int64(42), resp.Groups[0].Topics[0].Partitions[0].Offset)
		}
	}
}

func TestDescribeCluster(t *testing.T) {
	ts := startServer(t, Options{}, nil)
	ts.fake.update(func(im *metadataImage) {
		im.Brokers[2] = metadataBroker{ID: 2, Host: "h2", Port: 2, Fenced: true}
	})
	c := dial(t, ts.addr)
	req := kmsg.NewPtrDescribeClusterRequest()
	req.Version, req.EndpointType = 2, 1
	resp := c.roundTrip(req).(*kmsg.DescribeClusterResponse)
	assert.Zero(t, resp.ErrorCode)
	assert.Equal(t, "fake-cluster", resp.ClusterID)
	assert.Len(t, resp.Brokers, 1, "fenced brokers are left out")
	req.IncludeFencedBrokers = true
	resp = c.roundTrip(req).(*kmsg.DescribeClusterResponse)
	require.Len(t, resp.Brokers, 2)
	assert.True(t, resp.Brokers[1].IsFenced)
	req.EndpointType = 2
	resp = c.roundTrip(req).(*kmsg.DescribeClusterResponse)
	assert.Equal(t, kerr.UnsupportedEndpointType.Code, resp.ErrorCode)
}

func TestPipelinedResponsesKeepRequestOrder(t *testing.T) {
	ts := startServer(t, Options{}, nil)
	require.True(t, ts.fake.addTopic("slow", 1))
	require.True(t, ts.fake.addTopic("fast", 1))
	release := make(chan struct{})
	var order []string
	var mu sync.Mutex
	ts.fake.listOffsetHook = func(topic string) {
		if topic == "slow" {
			<-release
		} else {
			close(release) // the slow request can only finish after this one
		}
		mu.Lock()
		order = append(order, topic)
		mu.Unlock()
	}
	c := dial(t, ts.addr)
	listOffsets := func(topic string) *kmsg.ListOffsetsRequest {
		req := kmsg.NewPtrListOffsetsRequest()
		req.Version = 6
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = topic
		rt.Partitions = append(rt.Partitions, kmsg.NewListOffsetsRequestTopicPartition())
		req.Topics = append(req.Topics, rt)
		return req
	}
	first := c.send(listOffsets("slow"))
	second := c.send(listOffsets("fast"))
	av := kmsg.NewPtrApiVersionsRequest()
	av.Version = 4
	third := c.send(av)

	for _, want := range []struct {
		corr int32
		resp kmsg.Response
	}{{first, &kmsg.ListOffsetsResponse{Version: 6}}, {second, &kmsg.ListOffsetsResponse{Version: 6}}, {third, &kmsg.ApiVersionsResponse{Version: 4}}} {
		got, err := c.readResponse(want.resp)
		require.NoError(t, err)
		assert.Equal(t, want.corr, got)
	}
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, []string{"fast", "slow"}, order, "handled out of order, answered in order")
}

func TestProduceRequestsOfAConnectionRunInOrder(t *testing.T) {
	ts := startServer(t, Options{}, nil)
	require.True(t, ts.fake.addTopic("first", 1))
	require.True(t, ts.fake.addTopic("second", 1))
	secondStarted := make(chan struct{})
	var events []string
	var mu sync.Mutex
	ts.fake.produceHook = func(topic string) {
		if topic == "second" {
			close(secondStarted)
			return
		}
		// The second produce must not start while the first runs; that
		// cannot be awaited, so give it a moment to do it wrongly.
		select {
		case <-secondStarted:
			mu.Lock()
			events = append(events, "second started during first")
			mu.Unlock()
		case <-time.After(200 * time.Millisecond):
		}
	}
	c := dial(t, ts.addr)
	produce := func(topic string) *kmsg.ProduceRequest {
		req := kmsg.NewPtrProduceRequest()
		req.Version, req.Acks, req.TimeoutMillis = 11, 1, 5000
		req.Topics = []kmsg.ProduceRequestTopic{{Topic: topic, Partitions: []kmsg.ProduceRequestTopicPartition{{Records: recordBatch(1, 10)}}}}
		return req
	}
	first, second := c.send(produce("first")), c.send(produce("second"))
	for _, want := range []int32{first, second} {
		resp := &kmsg.ProduceResponse{Version: 11}
		got, err := c.readResponse(resp)
		require.NoError(t, err)
		assert.Equal(t, want, got)
		assert.Zero(t, resp.Topics[0].Partitions[0].ErrorCode)
	}
	mu.Lock()
	defer mu.Unlock()
	assert.Empty(t, events)
}

func TestOversizedFrameClosesConnection(t *testing.T) {
	ts := startServer(t, Options{MaxRequestBytes: 1024}, nil)
	c := dial(t, ts.addr)
	_, err := c.Write([]byte{0, 0, 8, 0}) // 2048 bytes announced, none sent
	require.NoError(t, err)
	c.expectClosed()
	assert.Equal(t, 1.0, metricValue(t, ts, "kafka_network_connections_closed_total", "frame_too_large"))

	// Other connections are unaffected.
	av := kmsg.NewPtrApiVersionsRequest()
	av.Version = 4
	assert.Zero(t, dial(t, ts.addr).roundTrip(av).(*kmsg.ApiVersionsResponse).ErrorCode)
}

func TestLargeFrameIsRead(t *testing.T) {
	ts := startServer(t, Options{}, nil)
	require.True(t, ts.fake.addTopic("t", 1))
	c := dial(t, ts.addr)
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks, req.TimeoutMillis = 11, 1, 5000
	req.Topics = []kmsg.ProduceRequestTopic{{Topic: "t", Partitions: []kmsg.ProduceRequestTopicPartition{{Records: recordBatch(3, 1<<20)}}}}
	resp := c.roundTrip(req).(*kmsg.ProduceResponse)
	assert.Zero(t, resp.Topics[0].Partitions[0].ErrorCode, "a 3 MiB frame is read whole")
	assert.Equal(t, int64(3), ts.fake.Fetch(context.Background(), "t", 0, replica.FetchPartition{MaxBytes: 1}).HighWatermark)
}

func TestUnknownApiKeyClosesOnlyThatConnection(t *testing.T) {
	ts := startServer(t, Options{}, nil)
	require.True(t, ts.fake.addTopic("t", 1))
	cl := ts.client(t, kgo.DefaultProduceTopic("t"))
	ctx := testCtx(t)
	require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Value: []byte("before")}).FirstErr())

	c := dial(t, ts.addr)
	// An earlier request on the same connection is still answered.
	av := kmsg.NewPtrApiVersionsRequest()
	av.Version = 4
	corr := c.send(av)
	_, err := c.Write(frame(9999, 0, corr+1, nil))
	require.NoError(t, err)
	got, err := c.readResponse(&kmsg.ApiVersionsResponse{Version: 4})
	require.NoError(t, err)
	assert.Equal(t, corr, got)
	c.expectClosed()

	// SASL handshake is a key kmsg knows but we do not serve.
	c2 := dial(t, ts.addr)
	_, err = c2.Write(frame(17, 1, 1, []byte{0, 5, 'P', 'L', 'A', 'I', 'N'}))
	require.NoError(t, err)
	c2.expectClosed()

	require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Value: []byte("after")}).FirstErr())
}

func TestUnsupportedVersions(t *testing.T) {
	ts := startServer(t, Options{}, nil)
	c := dial(t, ts.addr)

	// ApiVersions beyond what we serve: v0 format, error 35, our ranges.
	_, err := c.Write(frame(18, 99, 7, nil))
	require.NoError(t, err)
	resp := &kmsg.ApiVersionsResponse{Version: 0}
	corr, err := c.readResponse(resp)
	require.NoError(t, err)
	assert.Equal(t, int32(7), corr)
	assert.Equal(t, kerr.UnsupportedVersion.Code, resp.ErrorCode)
	keys := map[int16]int16{}
	for _, k := range resp.ApiKeys {
		keys[k.ApiKey] = k.MaxVersion
	}
	assert.Equal(t, int16(5), keys[18])
	assert.Equal(t, int16(12), keys[0])

	// Metadata v13 is decodable but not served: its shape with error 35.
	md := kmsg.NewPtrMetadataRequest()
	md.Version = 13
	mresp := c.roundTrip(md).(*kmsg.MetadataResponse)
	assert.Equal(t, kerr.UnsupportedVersion.Code, mresp.ErrorCode)

	// Produce v2 (message sets) likewise.
	p := kmsg.NewPtrProduceRequest()
	p.Version, p.Acks = 2, 1
	p.Topics = []kmsg.ProduceRequestTopic{{Topic: "t", Partitions: []kmsg.ProduceRequestTopicPartition{{Records: []byte{1}}}}}
	presp := c.roundTrip(p).(*kmsg.ProduceResponse)
	assert.Equal(t, kerr.UnsupportedVersion.Code, presp.Topics[0].Partitions[0].ErrorCode)

	// A version beyond kmsg's cannot be decoded: the connection closes.
	_, err = c.Write(frame(3, 99, 1, nil))
	require.NoError(t, err)
	c.expectClosed()
}

func TestApiVersionsV5ChecksClusterAndNode(t *testing.T) {
	ts := startServer(t, Options{}, nil)
	c := dial(t, ts.addr)
	for _, tc := range []struct {
		cluster *string
		node    int32
		want    int16
	}{
		{nil, -1, 0},
		{kmsg.StringPtr("fake-cluster"), 1, 0},
		{kmsg.StringPtr("other"), 1, kerr.RebootstrapRequired.Code},
		{kmsg.StringPtr("fake-cluster"), 2, kerr.RebootstrapRequired.Code},
		{kmsg.StringPtr("fake-cluster"), -1, kerr.InvalidRequest.Code},
	} {
		req := kmsg.NewPtrApiVersionsRequest()
		req.Version, req.ClusterID, req.NodeID = 5, tc.cluster, tc.node
		req.ClientSoftwareName, req.ClientSoftwareVersion = "raw", "1"
		resp := c.roundTrip(req).(*kmsg.ApiVersionsResponse)
		assert.Equal(t, tc.want, resp.ErrorCode)
		assert.NotEmpty(t, resp.ApiKeys)
	}
}

func TestApiVersionsLeavesOutUnwiredComponents(t *testing.T) {
	ts := startServer(t, Options{}, func(b *Backend) { b.Groups, b.Controller, b.Configs = nil, nil, nil })
	c := dial(t, ts.addr)
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 4
	resp := c.roundTrip(req).(*kmsg.ApiVersionsResponse)
	var keys []int16
	for _, k := range resp.ApiKeys {
		keys = append(keys, k.ApiKey)
	}
	assert.Equal(t, []int16{0, 1, 2, 3, 18, 21, 23, 60}, keys)
}

func TestGarbageDoesNotCrash(t *testing.T) {
	ts := startServer(t, Options{MaxRequestBytes: 1 << 16}, nil)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 200 {
		c := dial(t, ts.addr)
		var b []byte
		if i%2 == 0 {
			b = make([]byte, rng.IntN(300))
			for j := range b {
				b[j] = byte(rng.UintN(256))
			}
		} else {
			// A well-sized frame with a real key and a random body.
			body := make([]byte, rng.IntN(200))
			for j := range body {
				body[j] = byte(rng.UintN(256))
			}
			keys := sortedKeys(ts.srv.apis)
			k := keys[rng.IntN(len(keys))]
			a := ts.srv.apis[k]
			b = frame(k, a.min+int16(rng.IntN(int(a.max-a.min)+1)), int32(i), body)
		}
		_, err := c.Write(b)
		require.NoError(t, err)
		_ = c.Close()
	}
	av := kmsg.NewPtrApiVersionsRequest()
	av.Version = 4
	assert.Zero(t, dial(t, ts.addr).roundTrip(av).(*kmsg.ApiVersionsResponse).ErrorCode)
}

func TestShutdownFinishesInFlightRequests(t *testing.T) {
	ts := startServer(t, Options{}, nil)
	require.True(t, ts.fake.addTopic("t", 1))
	c := dial(t, ts.addr)
	req := kmsg.NewPtrFetchRequest()
	req.Version, req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes, req.SessionEpoch = 12, -1, 600000, 1, 1<<20, -1
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = "t"
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.PartitionMaxBytes = 1 << 20
	ft.Partitions = append(ft.Partitions, fp)
	req.Topics = append(req.Topics, ft)
	corr := c.send(req)
	require.Eventually(t, func() bool { return ts.fake.changedCalls.Load() > 0 }, 10*time.Second, time.Millisecond)

	require.NoError(t, ts.srv.Shutdown(testCtx(t)))
	resp := kmsg.NewPtrFetchResponse()
	resp.Version = 12
	got, err := c.readResponse(resp)
	require.NoError(t, err, "the waiting fetch is answered before the connection closes")
	assert.Equal(t, corr, got)
	c.expectClosed()

	_, err = net.DialTimeout("tcp", ts.addr, time.Second)
	assert.Error(t, err, "no longer accepting")
}

func TestClientDisconnectEndsLongPoll(t *testing.T) {
	ts := startServer(t, Options{}, nil)
	require.True(t, ts.fake.addTopic("t", 1))
	c := dial(t, ts.addr)
	req := kmsg.NewPtrFetchRequest()
	req.Version, req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes, req.SessionEpoch = 12, -1, 600000, 1, 1<<20, -1
	req.Topics = []kmsg.FetchRequestTopic{{Topic: "t", Partitions: []kmsg.FetchRequestTopicPartition{{PartitionMaxBytes: 1 << 20}}}}
	c.send(req)
	require.Eventually(t, func() bool { return ts.fake.changedCalls.Load() > 0 }, 10*time.Second, time.Millisecond)
	require.Equal(t, 1.0, metricValue(t, ts, "kafka_network_connections"))
	require.NoError(t, c.Close())
	assert.Eventually(t, func() bool { return openConns(ts.srv) == 0 }, 10*time.Second, time.Millisecond,
		"the connection goes away without waiting out the 10-minute poll")
}

func TestMetricsCountRequests(t *testing.T) {
	ts := startServer(t, Options{}, nil)
	c := dial(t, ts.addr)
	md := kmsg.NewPtrMetadataRequest()
	md.Version = 12
	c.roundTrip(md)
	c.roundTrip(md)
	assert.Equal(t, 2.0, metricValue(t, ts, "kafka_network_requests_total", "Metadata"))
	assert.Equal(t, 1.0, metricValue(t, ts, "kafka_network_connections"))
	assert.Positive(t, metricValue(t, ts, "kafka_network_bytes_in_total"))
	assert.Positive(t, metricValue(t, ts, "kafka_network_bytes_out_total"))

	name := "missing"
	md.Topics = []kmsg.MetadataRequestTopic{{Topic: &name}}
	c.roundTrip(md)
	assert.Equal(t, 1.0, metricValue(t, ts, "kafka_network_request_errors_total", "Metadata", "UNKNOWN_TOPIC_OR_PARTITION"))
	assert.Equal(t, 3.0, metricValue(t, ts, "kafka_network_request_latency_seconds", "Metadata"), "one observation per request")
	assert.True(t, strings.HasPrefix(errorName(9999), "ERROR_"))
}

func TestIdleConnectionsAreClosed(t *testing.T) {
	ts := startServer(t, Options{IdleTimeout: 50 * time.Millisecond}, nil)
	c := dial(t, ts.addr)
	c.expectClosed()
	assert.Equal(t, 1.0, metricValue(t, ts, "kafka_network_connections_closed_total", "idle"))
}

func TestShutdownDeadlineClosesStuckConnections(t *testing.T) {
	ts := startServer(t, Options{}, nil)
	require.True(t, ts.fake.addTopic("t", 1))
	entered, release := make(chan struct{}), make(chan struct{})
	defer close(release)
	ts.fake.produceHook = func(string) {
		close(entered)
		<-release
	}
	c := dial(t, ts.addr)
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks, req.TimeoutMillis = 11, 1, 60000
	req.Topics = []kmsg.ProduceRequestTopic{{Topic: "t", Partitions: []kmsg.ProduceRequestTopicPartition{{Records: recordBatch(1, 10)}}}}
	c.send(req)
	<-entered

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := ts.srv.Shutdown(ctx)
	assert.ErrorIs(t, err, context.Canceled)
	c.expectClosed()
}

func TestBackendPanicClosesOnlyItsConnection(t *testing.T) {
	ts := startServer(t, Options{}, nil)
	require.True(t, ts.fake.addTopic("boom", 1))
	ts.fake.listOffsetHook = func(topic string) {
		if topic == "boom" {
			panic("backend bug")
		}
	}
	c := dial(t, ts.addr)
	req := kmsg.NewPtrListOffsetsRequest()
	req.Version = 6
	req.Topics = []kmsg.ListOffsetsRequestTopic{{Topic: "boom", Partitions: []kmsg.ListOffsetsRequestTopicPartition{{Timestamp: -1}}}}
	c.send(req)
	c.expectClosed()
	assert.Equal(t, 1.0, metricValue(t, ts, "kafka_network_connections_closed_total", "handler"))

	av := kmsg.NewPtrApiVersionsRequest()
	av.Version = 4
	assert.Zero(t, dial(t, ts.addr).roundTrip(av).(*kmsg.ApiVersionsResponse).ErrorCode)
}

// divergingReplicas answers every fetch with a diverging epoch, as a leader
// does for a follower whose log went past the end of its last epoch.
type divergingReplicas struct{ Replicas }

func (d divergingReplicas) Fetch(context.Context, string, int32, replica.FetchPartition) replica.FetchResult {
	return replica.FetchResult{HighWatermark: 1009, LastStableOffset: 1009, PreferredReplica: -1,
		DivergingEpoch: &replica.DivergingEpoch{Epoch: 1, EndOffset: 1009}}
}

func TestDivergingEpochIsAnsweredWithoutLongPolling(t *testing.T) {
	ts := startServer(t, Options{}, func(b *Backend) { b.Replicas = divergingReplicas{b.Replicas} })
	require.True(t, ts.fake.addTopic("t", 1))
	c := dial(t, ts.addr)
	req := kmsg.NewPtrFetchRequest()
	req.Version, req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes, req.SessionEpoch = 12, 2, 600000, 1, 1<<20, -1
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = "t"
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.FetchOffset, fp.LastFetchedEpoch, fp.PartitionMaxBytes = 1050, 1, 1<<20
	ft.Partitions = append(ft.Partitions, fp)
	req.Topics = append(req.Topics, ft)
	corr := c.send(req)

	resp := kmsg.NewPtrFetchResponse()
	resp.Version = 12
	got, err := c.readResponse(resp) // the connection's deadline is far below the 10-minute MaxWait
	require.NoError(t, err, "a diverging epoch must not wait for MaxWait")
	assert.Equal(t, corr, got)
	p := resp.Topics[0].Partitions[0]
	assert.Equal(t, int32(1), p.DivergingEpoch.Epoch)
	assert.Equal(t, int64(1009), p.DivergingEpoch.EndOffset)
	assert.Empty(t, p.RecordBatches)
}

// fakeControllerAPIs answers the KRaft RPCs with fixed values.
type fakeControllerAPIs struct{}

func (fakeControllerAPIs) HandleBrokerRegistration(_ context.Context, req *kmsg.BrokerRegistrationRequest) *kmsg.BrokerRegistrationResponse {
	resp := req.ResponseKind().(*kmsg.BrokerRegistrationResponse)
	resp.BrokerEpoch = 42 + int64(req.BrokerID)
	return resp
}

func (fakeControllerAPIs) HandleBrokerHeartbeat(_ context.Context, req *kmsg.BrokerHeartbeatRequest) *kmsg.BrokerHeartbeatResponse {
	resp := req.ResponseKind().(*kmsg.BrokerHeartbeatResponse)
	resp.IsCaughtUp, resp.IsFenced = true, req.WantFence
	return resp
}

func (fakeControllerAPIs) HandleAlterPartition(_ context.Context, req *kmsg.AlterPartitionRequest) *kmsg.AlterPartitionResponse {
	resp := req.ResponseKind().(*kmsg.AlterPartitionResponse)
	resp.ErrorCode = kerr.InvalidRequest.Code // not retriable: the client hands it back at once
	return resp
}

func (fakeControllerAPIs) HandleDescribeQuorum(_ context.Context, req *kmsg.DescribeQuorumRequest) *kmsg.DescribeQuorumResponse {
	resp := req.ResponseKind().(*kmsg.DescribeQuorumResponse)
	return resp
}

func TestControllerAPIsAreServedOnlyWhenWired(t *testing.T) {
	plain := startServer(t, Options{}, nil)
	versions, err := kmsg.NewPtrApiVersionsRequest().RequestWith(context.Background(), plain.client(t))
	require.NoError(t, err)
	for _, k := range versions.ApiKeys {
		assert.NotContains(t, []int16{55, 56, 62, 63}, k.ApiKey, "a broker listener without ControllerAPIs must not advertise key %d", k.ApiKey)
	}

	ctl := startServer(t, Options{}, func(b *Backend) { b.ControllerAPIs = fakeControllerAPIs{} })
	cl := ctl.client(t)
	versions, err = kmsg.NewPtrApiVersionsRequest().RequestWith(context.Background(), cl)
	require.NoError(t, err)
	advertised := map[int16]bool{}
	for _, k := range versions.ApiKeys {
		advertised[k.ApiKey] = true
	}
	for _, k := range []int16{55, 56, 62, 63} {
		assert.True(t, advertised[k], "key %d", k)
	}
	reg := kmsg.NewPtrBrokerRegistrationRequest()
	reg.BrokerID = 3
	regResp, err := reg.RequestWith(context.Background(), cl)
	require.NoError(t, err)
	assert.Equal(t, int64(45), regResp.BrokerEpoch)
	hb := kmsg.NewPtrBrokerHeartbeatRequest()
	hb.WantFence = true
	hbResp, err := hb.RequestWith(context.Background(), cl)
	require.NoError(t, err)
	assert.True(t, hbResp.IsCaughtUp)
	assert.True(t, hbResp.IsFenced)
	ap, err := kmsg.NewPtrAlterPartitionRequest().RequestWith(context.Background(), cl)
	require.NoError(t, err)
	assert.Equal(t, kerr.InvalidRequest.Code, ap.ErrorCode)
}

// TestEmptyPartitionHasEmptyNotNullRecords: before v12 the records field is
// nullable; librdkafka and kafka-python reject a null one.
func TestEmptyPartitionHasEmptyNotNullRecords(t *testing.T) {
	ts := startServer(t, Options{}, nil)
	require.True(t, ts.fake.addTopic("t", 1))
	c := dial(t, ts.addr)
	req := kmsg.NewPtrFetchRequest()
	req.Version, req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes = 4, -1, 0, 0, 1<<20
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = "t"
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.PartitionMaxBytes = 1 << 20
	ft.Partitions = append(ft.Partitions, fp)
	req.Topics = append(req.Topics, ft)
	c.send(req)
	resp := kmsg.NewPtrFetchResponse()
	resp.Version = 4
	_, err := c.readResponse(resp)
	require.NoError(t, err)
	p := resp.Topics[0].Partitions[0]
	assert.Zero(t, p.ErrorCode)
	assert.NotNil(t, p.RecordBatches, "an empty partition's records must be encoded as empty, not null")
	assert.Empty(t, p.RecordBatches)
}

// TestProduceAdvertisedFromV0: librdkafka only compresses with gzip, snappy
// and lz4 when Produce is advertised from v0; a v0 request is still refused.
func TestProduceAdvertisedFromV0(t *testing.T) {
	ts := startServer(t, Options{}, nil)
	versions, err := kmsg.NewPtrApiVersionsRequest().RequestWith(context.Background(), ts.client(t))
	require.NoError(t, err)
	var produce *kmsg.ApiVersionsResponseApiKey
	for i, k := range versions.ApiKeys {
		if k.ApiKey == 0 {
			produce = &versions.ApiKeys[i]
		}
	}
	require.NotNil(t, produce)
	assert.Equal(t, int16(0), produce.MinVersion)

	c := dial(t, ts.addr)
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks, req.TimeoutMillis = 2, 1, 1000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "t"
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = recordBatch(0, 1)
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	c.send(req)
	resp := kmsg.NewPtrProduceResponse()
	resp.Version = 2
	_, err = c.readResponse(resp)
	require.NoError(t, err)
	require.Len(t, resp.Topics, 1)
	require.Len(t, resp.Topics[0].Partitions, 1)
	assert.Equal(t, kerr.UnsupportedVersion.Code, resp.Topics[0].Partitions[0].ErrorCode, "v0-v2 are advertised but not served")
}
