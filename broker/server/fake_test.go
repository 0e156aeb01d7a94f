package server

import (
	"context"
	"encoding/binary"
	"sync"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/faultline/faultline/broker/metadata"
	"github.com/faultline/faultline/broker/replica"
)

// fakeCluster is an in-memory Backend: a metadata image, partition logs as
// lists of record batches, topic administration and a trivial group
// coordinator that only finds itself. It is the test double for every
// component the server talks to.
type fakeCluster struct {
	nodeID int32
	host   string
	port   int32

	image atomic.Pointer[metadata.Image]

	mu      sync.Mutex
	logs    map[tp]*fakeLog
	changed chan struct{}
	nextPID int64
	// listOffsetHook and produceHook, when set, run at the start of
	// ListOffset and Produce.
	listOffsetHook func(topic string)
	produceHook    func(topic string)
	changedCalls   atomic.Int64
}

// fakePartitionsMax bounds a topic's partitions, as a real controller
// would, so fuzzed counts cannot exhaust memory.
const fakePartitionsMax = 1000

type tp struct {
	topic     string
	partition int32
}

type fakeLog struct {
	batches [][]byte
	next    int64
}

func newFakeCluster(nodeID int32, host string, port int32) *fakeCluster {
	f := &fakeCluster{nodeID: nodeID, host: host, port: port, logs: map[tp]*fakeLog{}, changed: make(chan struct{})}
	f.image.Store(&metadata.Image{
		ClusterID:    "fake-cluster",
		ControllerID: nodeID,
		Brokers:      map[int32]metadata.Broker{nodeID: {ID: nodeID, Host: host, Port: port}},
		Topics:       map[string]*metadata.Topic{},
		TopicsByID:   map[metadata.Uuid]*metadata.Topic{},
	})
	return f
}

func (f *fakeCluster) backend() Backend {
	return Backend{
		NodeID:         f.nodeID,
		ClusterID:      "fake-cluster",
		Metadata:       f,
		Controller:     f,
		Replicas:       f,
		Groups:         fakeGroups{f},
		Configs:        f,
		AdvertisedHost: f.host,
		AdvertisedPort: f.port,
	}
}

func (f *fakeCluster) Image() *metadata.Image { return f.image.Load() }

// update applies fn to a copy of the image (copy on write).
func (f *fakeCluster) update(fn func(im *metadata.Image)) {
	old := f.image.Load()
	im := *old
	im.Brokers = map[int32]metadata.Broker{}
	for k, v := range old.Brokers {
		im.Brokers[k] = v
	}
	im.Topics = map[string]*metadata.Topic{}
	im.TopicsByID = map[metadata.Uuid]*metadata.Topic{}
	for k, v := range old.Topics {
		im.Topics[k] = v
		im.TopicsByID[v.ID] = v
	}
	fn(&im)
	for name, t := range im.Topics {
		if t == nil {
			panic("fake: nil topic " + name)
		}
	}
	im.Offset++
	f.image.Store(&im)
}

// addTopic creates a topic led by this node; false if it exists.
func (f *fakeCluster) addTopic(name string, partitions int32) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.Image().Topic(name) != nil {
		return false
	}
	f.update(func(im *metadata.Image) {
		t := &metadata.Topic{Name: name}
		t.ID[0], t.ID[1] = byte(len(im.Topics)+1), 0xAB
		copy(t.ID[2:], name)
		for p := range partitions {
			t.Partitions = append(t.Partitions, metadata.Partition{Partition: p, Replicas: []int32{f.nodeID}, ISR: []int32{f.nodeID}, Leader: f.nodeID})
			f.logs[tp{name, p}] = &fakeLog{}
		}
		im.Topics[name] = t
		im.TopicsByID[t.ID] = t
	})
	return true
}

// Controller.

func (f *fakeCluster) CreateTopics(_ context.Context, req *kmsg.CreateTopicsRequest) *kmsg.CreateTopicsResponse {
	resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)
	for _, t := range req.Topics {
		rt := kmsg.NewCreateTopicsResponseTopic()
		rt.Topic = t.Topic
		n := t.NumPartitions
		if n == -1 {
			n = 3
		}
		rt.NumPartitions, rt.ReplicationFactor = n, 1
		switch {
		case n <= 0 || n > fakePartitionsMax:
			rt.ErrorCode = kerr.InvalidPartitions.Code
		case req.ValidateOnly:
		case !f.addTopic(t.Topic, n):
			rt.ErrorCode = kerr.TopicAlreadyExists.Code
		default:
			rt.TopicID = f.Image().Topic(t.Topic).ID
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

func (f *fakeCluster) DeleteTopics(_ context.Context, req *kmsg.DeleteTopicsRequest) *kmsg.DeleteTopicsResponse {
	resp := req.ResponseKind().(*kmsg.DeleteTopicsResponse)
	f.mu.Lock()
	defer f.mu.Unlock()
	topics := req.Topics
	for _, n := range req.TopicNames {
		topics = append(topics, kmsg.DeleteTopicsRequestTopic{Topic: &n})
	}
	for _, t := range topics {
		rt := kmsg.NewDeleteTopicsResponseTopic()
		rt.Topic, rt.TopicID = t.Topic, t.TopicID
		if t.Topic == nil {
			if byID := f.Image().TopicsByID[t.TopicID]; byID != nil {
				name := byID.Name
				t.Topic = &name
			}
		}
		if t.Topic == nil || f.Image().Topic(*t.Topic) == nil {
			rt.ErrorCode = kerr.UnknownTopicOrPartition.Code
		} else {
			name := *t.Topic
			f.update(func(im *metadata.Image) {
				delete(im.TopicsByID, im.Topics[name].ID)
				delete(im.Topics, name)
			})
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// IncrementalAlterConfigs and AlterConfigs: every resource succeeds.
func (f *fakeCluster) IncrementalAlterConfigs(_ context.Context, req *kmsg.IncrementalAlterConfigsRequest) *kmsg.IncrementalAlterConfigsResponse {
	return failIncrementalAlterConfigs(req, 0).(*kmsg.IncrementalAlterConfigsResponse)
}

func (f *fakeCluster) AlterConfigs(_ context.Context, req *kmsg.AlterConfigsRequest) *kmsg.AlterConfigsResponse {
	return failAlterConfigs(req, 0).(*kmsg.AlterConfigsResponse)
}

// ElectLeaders: every partition of the fake's one broker is led by its
// preferred replica already.
func (f *fakeCluster) ElectLeaders(_ context.Context, req *kmsg.ElectLeadersRequest) *kmsg.ElectLeadersResponse {
	resp := req.ResponseKind().(*kmsg.ElectLeadersResponse)
	for _, t := range req.Topics {
		rt := kmsg.NewElectLeadersResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewElectLeadersResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p, kerr.ElectionNotNeeded.Code
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

func (f *fakeCluster) CreatePartitions(_ context.Context, req *kmsg.CreatePartitionsRequest) *kmsg.CreatePartitionsResponse {
	resp := req.ResponseKind().(*kmsg.CreatePartitionsResponse)
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, t := range req.Topics {
		rt := kmsg.NewCreatePartitionsResponseTopic()
		rt.Topic = t.Topic
		old := f.Image().Topic(t.Topic)
		switch {
		case old == nil:
			rt.ErrorCode = kerr.UnknownTopicOrPartition.Code
		case int(t.Count) <= len(old.Partitions) || t.Count > fakePartitionsMax:
			rt.ErrorCode = kerr.InvalidPartitions.Code
		case !req.ValidateOnly:
			f.update(func(im *metadata.Image) {
				nt := *old
				nt.Partitions = append([]metadata.Partition(nil), old.Partitions...)
				for p := int32(len(old.Partitions)); p < t.Count; p++ {
					nt.Partitions = append(nt.Partitions, metadata.Partition{Partition: p, Replicas: []int32{f.nodeID}, ISR: []int32{f.nodeID}, Leader: f.nodeID})
					f.logs[tp{t.Topic, p}] = &fakeLog{}
				}
				im.Topics[t.Topic], im.TopicsByID[nt.ID] = &nt, &nt
			})
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

func (f *fakeCluster) InitProducerID(_ context.Context, req *kmsg.InitProducerIDRequest) *kmsg.InitProducerIDResponse {
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	f.mu.Lock()
	f.nextPID++
	resp.ProducerID = f.nextPID
	f.mu.Unlock()
	return resp
}

// Replicas.

func (f *fakeCluster) Produce(_ context.Context, topic string, partition int32, records []byte, _ int16) replica.ProduceResult {
	if f.produceHook != nil {
		f.produceHook(topic)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	l := f.logs[tp{topic, partition}]
	if l == nil {
		return replica.ProduceResult{ErrorCode: kerr.NotLeaderForPartition.Code}
	}
	base := l.next
	for len(records) > 0 {
		if len(records) < 61 || records[16] != 2 {
			return replica.ProduceResult{ErrorCode: kerr.CorruptMessage.Code}
		}
		size := 12 + int(int32(binary.BigEndian.Uint32(records[8:])))
		if size < 61 || size > len(records) {
			return replica.ProduceResult{ErrorCode: kerr.CorruptMessage.Code}
		}
		b := append([]byte(nil), records[:size]...)
		binary.BigEndian.PutUint64(b, uint64(l.next))
		l.next += int64(int32(binary.BigEndian.Uint32(b[23:]))) + 1
		l.batches = append(l.batches, b)
		records = records[size:]
	}
	close(f.changed)
	f.changed = make(chan struct{})
	return replica.ProduceResult{BaseOffset: base, LogAppendTime: -1}
}

func (f *fakeCluster) Fetch(_ context.Context, topic string, partition int32, req replica.FetchPartition) replica.FetchResult {
	f.mu.Lock()
	defer f.mu.Unlock()
	l := f.logs[tp{topic, partition}]
	if l == nil {
		return replica.FetchResult{ErrorCode: kerr.NotLeaderForPartition.Code}
	}
	res := replica.FetchResult{HighWatermark: l.next, LastStableOffset: l.next, PreferredReplica: -1}
	if req.FetchOffset > l.next || req.FetchOffset < 0 {
		res.ErrorCode = kerr.OffsetOutOfRange.Code
		return res
	}
	for _, b := range l.batches {
		last := int64(binary.BigEndian.Uint64(b)) + int64(int32(binary.BigEndian.Uint32(b[23:])))
		if last < req.FetchOffset {
			continue
		}
		if len(res.Records) > 0 && len(res.Records)+len(b) > int(req.MaxBytes) {
			break
		}
		res.Records = append(res.Records, b...)
	}
	return res
}

func (f *fakeCluster) Changed() <-chan struct{} {
	f.changedCalls.Add(1)
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.changed
}

// DeleteRecords: the fake keeps every record; it answers as if the log
// started at offset.
func (f *fakeCluster) DeleteRecords(_ context.Context, topic string, partition int32, offset int64) (int64, int16, string) {
	if f.Image().Partition(topic, partition) == nil {
		return -1, kerr.UnknownTopicOrPartition.Code, ""
	}
	return offset, 0, ""
}

func (f *fakeCluster) ListOffset(_ context.Context, topic string, partition int32, _ int32, timestamp int64, _ int8) (int64, int64, int32, int16) {
	if f.listOffsetHook != nil {
		f.listOffsetHook(topic)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	l := f.logs[tp{topic, partition}]
	if l == nil {
		return -1, -1, -1, kerr.NotLeaderForPartition.Code
	}
	if timestamp == -2 {
		return 0, -1, 0, 0
	}
	return l.next, -1, 0, 0
}

func (f *fakeCluster) OffsetForLeaderEpoch(_ context.Context, topic string, partition int32, _, _ int32) (int32, int64, int16) {
	f.mu.Lock()
	defer f.mu.Unlock()
	l := f.logs[tp{topic, partition}]
	if l == nil {
		return -1, -1, kerr.NotLeaderForPartition.Code
	}
	return 0, l.next, 0
}

// ConfigSource.

func (f *fakeCluster) BrokerConfigs() []ConfigEntry {
	v := "3"
	return []ConfigEntry{{Name: "num.partitions", Value: &v, IsDefault: true, Source: 5}}
}

func (f *fakeCluster) TopicConfigs(topic string) ([]ConfigEntry, bool) {
	if f.Image().Topic(topic) == nil {
		return nil, false
	}
	v := "delete"
	return []ConfigEntry{{Name: "cleanup.policy", Value: &v, IsDefault: true, Source: 5}}, true
}

// fakeGroups finds itself as every coordinator and refuses the rest with
// NOT_COORDINATOR; group semantics are broker/group's.
type fakeGroups struct{ f *fakeCluster }

func (g fakeGroups) FindCoordinator(_ context.Context, req *kmsg.FindCoordinatorRequest) *kmsg.FindCoordinatorResponse {
	resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
	for _, k := range req.CoordinatorKeys {
		c := kmsg.NewFindCoordinatorResponseCoordinator()
		c.Key, c.NodeID, c.Host, c.Port = k, g.f.nodeID, g.f.host, g.f.port
		resp.Coordinators = append(resp.Coordinators, c)
	}
	return resp
}

func (g fakeGroups) JoinGroup(_ context.Context, req *kmsg.JoinGroupRequest) *kmsg.JoinGroupResponse {
	resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
	resp.ErrorCode = kerr.NotCoordinator.Code
	return resp
}

func (g fakeGroups) SyncGroup(_ context.Context, req *kmsg.SyncGroupRequest) *kmsg.SyncGroupResponse {
	resp := req.ResponseKind().(*kmsg.SyncGroupResponse)
	resp.ErrorCode = kerr.NotCoordinator.Code
	return resp
}

func (g fakeGroups) Heartbeat(_ context.Context, req *kmsg.HeartbeatRequest) *kmsg.HeartbeatResponse {
	resp := req.ResponseKind().(*kmsg.HeartbeatResponse)
	resp.ErrorCode = kerr.NotCoordinator.Code
	return resp
}

func (g fakeGroups) LeaveGroup(_ context.Context, req *kmsg.LeaveGroupRequest) *kmsg.LeaveGroupResponse {
	resp := req.ResponseKind().(*kmsg.LeaveGroupResponse)
	resp.ErrorCode = kerr.NotCoordinator.Code
	return resp
}

func (g fakeGroups) OffsetCommit(_ context.Context, req *kmsg.OffsetCommitRequest) *kmsg.OffsetCommitResponse {
	return failOffsetCommit(req, kerr.NotCoordinator.Code).(*kmsg.OffsetCommitResponse)
}

// OffsetFetch answers in the batched (v8) form only, so tests see the
// server copy it back for older versions.
func (g fakeGroups) OffsetFetch(_ context.Context, req *kmsg.OffsetFetchRequest) *kmsg.OffsetFetchResponse {
	resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
	for _, rg := range req.Groups {
		g := kmsg.NewOffsetFetchResponseGroup()
		g.Group = rg.Group
		for _, t := range rg.Topics {
			gt := kmsg.NewOffsetFetchResponseGroupTopic()
			gt.Topic = t.Topic
			for _, p := range t.Partitions {
				gp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
				gp.Partition, gp.Offset, gp.LeaderEpoch = p, 42, -1
				gt.Partitions = append(gt.Partitions, gp)
			}
			g.Topics = append(g.Topics, gt)
		}
		resp.Groups = append(resp.Groups, g)
	}
	return resp
}

func (g fakeGroups) DescribeGroups(_ context.Context, req *kmsg.DescribeGroupsRequest) *kmsg.DescribeGroupsResponse {
	return failDescribeGroups(req, kerr.NotCoordinator.Code).(*kmsg.DescribeGroupsResponse)
}

func (g fakeGroups) DeleteGroups(_ context.Context, req *kmsg.DeleteGroupsRequest) *kmsg.DeleteGroupsResponse {
	resp := req.ResponseKind().(*kmsg.DeleteGroupsResponse)
	for _, id := range req.Groups {
		rg := kmsg.NewDeleteGroupsResponseGroup()
		rg.Group, rg.ErrorCode = id, kerr.GroupIDNotFound.Code
		resp.Groups = append(resp.Groups, rg)
	}
	return resp
}

func (g fakeGroups) OffsetDelete(_ context.Context, req *kmsg.OffsetDeleteRequest) *kmsg.OffsetDeleteResponse {
	resp := req.ResponseKind().(*kmsg.OffsetDeleteResponse)
	resp.ErrorCode = kerr.GroupIDNotFound.Code
	return resp
}

func (g fakeGroups) ListGroups(_ context.Context, req *kmsg.ListGroupsRequest) *kmsg.ListGroupsResponse {
	return req.ResponseKind().(*kmsg.ListGroupsResponse)
}

type (
	metadataImage  = metadata.Image
	metadataBroker = metadata.Broker
)
