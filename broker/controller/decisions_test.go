package controller

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/faultline/faultline/broker/metadata"
)

func TestValidateTopicName(t *testing.T) {
	good := []string{"a", "orders", "a.b_c-D9", strings.Repeat("x", 249), "__consumer_offsets", "..."}
	bad := []string{"", ".", "..", strings.Repeat("x", 250), "a b", "a/b", "é", "a\x00"}
	for _, n := range good {
		assert.NoError(t, ValidateTopicName(n), n)
	}
	for _, n := range bad {
		assert.Error(t, ValidateTopicName(n), n)
	}
	assert.True(t, HasCollisionChars("a.b"))
	assert.True(t, HasCollisionChars("a_b"))
	assert.False(t, HasCollisionChars("a-b"))
	assert.Equal(t, CollisionKey("a_b"), CollisionKey("a.b"))
}

func TestPlaceReplicas(t *testing.T) {
	b := func(ids ...int32) []PlacementBroker {
		var out []PlacementBroker
		for _, id := range ids {
			out = append(out, PlacementBroker{ID: id})
		}
		return out
	}
	tests := []struct {
		name string
		pl   Placement
		want [][]int32
		err  bool
	}{
		{"one broker", Placement{Brokers: b(1), NumPartitions: 3, ReplicationFactor: 1}, [][]int32{{1}, {1}, {1}}, false},
		{"round robin leaders", Placement{Brokers: b(3, 1, 2), NumPartitions: 4, ReplicationFactor: 2},
			[][]int32{{1, 2}, {2, 3}, {3, 1}, {1, 3}}, false},
		{"start offset", Placement{Brokers: b(1, 2, 3), NumPartitions: 2, ReplicationFactor: 3, Start: 1},
			[][]int32{{2, 3, 1}, {3, 1, 2}}, false},
		{"first partition continues the pattern", Placement{Brokers: b(1, 2, 3), FirstPartition: 3, NumPartitions: 1, ReplicationFactor: 2},
			[][]int32{{1, 3}}, false},
		{"rf above brokers", Placement{Brokers: b(1, 2), NumPartitions: 1, ReplicationFactor: 3}, nil, true},
		{"rf zero", Placement{Brokers: b(1), NumPartitions: 1, ReplicationFactor: 0}, nil, true},
		{"rack aware", Placement{Brokers: []PlacementBroker{{1, "a"}, {2, "a"}, {3, "b"}, {4, "b"}}, NumPartitions: 4, ReplicationFactor: 2},
			[][]int32{{1, 3}, {3, 2}, {2, 4}, {4, 1}}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := PlaceReplicas(tc.pl)
			if tc.err {
				assert.Error(t, err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestPlaceReplicasInvariants(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		n := 1 + r.IntN(7)
		var brokers []PlacementBroker
		rackAware := r.IntN(2) == 0
		for i := range n {
			br := PlacementBroker{ID: int32(10 + i)}
			if rackAware {
				br.Rack = string(rune('a' + r.IntN(3)))
			}
			brokers = append(brokers, br)
		}
		rf := 1 + r.IntN(n)
		pl := Placement{Brokers: brokers, NumPartitions: int32(1 + r.IntN(20)), ReplicationFactor: int16(rf), Start: r.IntN(n), Shift: r.IntN(n)}
		got, err := PlaceReplicas(pl)
		require.NoError(t, err)
		racks := rackCount(brokers)
		for _, replicas := range got {
			require.Len(t, replicas, rf)
			seen := map[int32]bool{}
			seenRack := map[string]bool{}
			for _, id := range replicas {
				assert.False(t, seen[id], "replica listed twice in %v", replicas)
				seen[id] = true
				seenRack[brokers[id-10].Rack] = true
			}
			if racks > 0 {
				assert.Equal(t, min(rf, racks), len(seenRack), "replicas %v spread over every rack they can", replicas)
			}
		}
	}
}

// cluster returns a state with the given live brokers.
func cluster(t *testing.T, ids ...int32) *ClusterState {
	t.Helper()
	im := metadata.NewImage("c")
	var recs []metadata.Record
	for _, id := range ids {
		recs = append(recs, &metadata.RegisterBrokerRecord{BrokerID: id, BrokerEpoch: int64(id)},
			&metadata.UnfenceBrokerRecord{ID: id, Epoch: int64(id)})
	}
	im, err := im.ApplyBatch(int64(len(recs)-1), recs)
	require.NoError(t, err)
	return &ClusterState{Image: im, Defaults: Defaults{NumPartitions: 2, ReplicationFactor: 1}, Rand: rand.New(rand.NewPCG(7, 7))}
}

func createReq(topics ...kmsg.CreateTopicsRequestTopic) *kmsg.CreateTopicsRequest {
	req := kmsg.NewPtrCreateTopicsRequest()
	req.Topics = topics
	return req
}

func topic(name string, np int32, rf int16) kmsg.CreateTopicsRequestTopic {
	t := kmsg.NewCreateTopicsRequestTopic()
	t.Topic, t.NumPartitions, t.ReplicationFactor = name, np, rf
	return t
}

func sp(s string) *string { return &s }

func TestCreateTopics(t *testing.T) {
	withConfig := topic("conf", 1, 1)
	withConfig.Configs = []kmsg.CreateTopicsRequestTopicConfig{{Name: "bad.key", Value: sp("1")}}
	goodConfig := topic("goodconf", 1, 1)
	goodConfig.Configs = []kmsg.CreateTopicsRequestTopicConfig{{Name: "retention.ms", Value: sp("1000")}}
	assigned := topic("assigned", -1, -1)
	assigned.ReplicaAssignment = []kmsg.CreateTopicsRequestTopicReplicaAssignment{{Partition: 1, Replicas: []int32{2, 1}}, {Partition: 0, Replicas: []int32{1, 2}}}
	badAssigned := topic("badassigned", -1, -1)
	badAssigned.ReplicaAssignment = []kmsg.CreateTopicsRequestTopicReplicaAssignment{{Partition: 0, Replicas: []int32{1, 9}}}
	mixed := topic("mixed", 3, -1)
	mixed.ReplicaAssignment = []kmsg.CreateTopicsRequestTopicReplicaAssignment{{Partition: 0, Replicas: []int32{1}}}

	s := cluster(t, 1, 2)
	s.Image = mustApply(t, s.Image, &metadata.TopicRecord{Name: "exists", TopicID: metadata.Uuid{9}},
		&metadata.TopicRecord{Name: "a_b", TopicID: metadata.Uuid{8}})
	s.ValidateConfig = func(name string, _ *string) error {
		if name == "bad.key" {
			return assert.AnError
		}
		return nil
	}
	resp, res, warnings := s.CreateTopics(createReq(
		topic("defaults", -1, -1), topic("explicit", 4, 2), topic("exists", 1, 1), topic("bad name", 1, 1),
		topic("a.b", 1, 1), topic("rf3", 1, 3), topic("zero", 0, 1), withConfig, goodConfig, assigned, badAssigned, mixed,
		topic("dup", 1, 1), topic("dup", 1, 1), topic("x.y", 1, 1),
	))
	codes := map[string]int16{}
	for _, rt := range resp.Topics {
		codes[rt.Topic] = rt.ErrorCode
		if rt.ErrorCode != 0 {
			require.NotNil(t, rt.ErrorMessage, rt.Topic)
			assert.NotEmpty(t, *rt.ErrorMessage, rt.Topic)
		}
	}
	assert.Equal(t, map[string]int16{
		"defaults": 0, "explicit": 0, "exists": kerr.TopicAlreadyExists.Code, "bad name": kerr.InvalidTopicException.Code,
		"a.b": kerr.InvalidTopicException.Code, "rf3": kerr.InvalidReplicationFactor.Code, "zero": kerr.InvalidPartitions.Code,
		"conf": kerr.InvalidConfig.Code, "goodconf": 0, "assigned": 0, "badassigned": kerr.InvalidReplicaAssignment.Code,
		"mixed": kerr.InvalidRequest.Code, "dup": kerr.InvalidRequest.Code, "x.y": 0,
	}, codes)
	assert.Len(t, warnings, 1, "x.y warns about '.'")

	im := res.Image
	def := im.Topic("defaults")
	require.NotNil(t, def)
	assert.Len(t, def.Partitions, 2, "num.partitions default")
	assert.Len(t, def.Partitions[0].Replicas, 1, "default.replication.factor")
	ex := im.Topic("explicit")
	require.Len(t, ex.Partitions, 4)
	for _, p := range ex.Partitions {
		assert.Len(t, p.Replicas, 2)
		assert.Equal(t, p.Replicas, p.ISR)
		assert.Equal(t, p.Replicas[0], p.Leader)
	}
	assert.Equal(t, []int32{1, 2}, im.Partition("assigned", 0).Replicas)
	assert.Equal(t, []int32{2, 1}, im.Partition("assigned", 1).Replicas)
	assert.Equal(t, map[string]string{"retention.ms": "1000"}, im.Topic("goodconf").Configs)
	for _, rt := range resp.Topics {
		if rt.Topic == "explicit" {
			assert.Equal(t, ex.ID, metadata.Uuid(rt.TopicID))
			assert.Equal(t, int32(4), rt.NumPartitions)
			assert.Equal(t, int16(2), rt.ReplicationFactor)
		}
	}
	// The records replay to the same image.
	replayed, err := s.Image.ApplyBatch(s.Image.Offset, res.Records)
	require.NoError(t, err)
	assert.Equal(t, im, replayed)
}

func TestCreateTopicsValidateOnly(t *testing.T) {
	s := cluster(t, 1)
	req := createReq(topic("t", 1, 1))
	req.ValidateOnly = true
	resp, res, _ := s.CreateTopics(req)
	assert.Equal(t, int16(0), resp.Topics[0].ErrorCode)
	assert.Empty(t, res.Records)
	assert.Nil(t, res.Image.Topic("t"))
}

func mustApply(t *testing.T, im *metadata.Image, recs ...metadata.Record) *metadata.Image {
	t.Helper()
	next, err := im.ApplyBatch(im.Offset+int64(len(recs)), recs)
	require.NoError(t, err)
	return next
}

func TestDeleteTopics(t *testing.T) {
	s := cluster(t, 1)
	_, res, _ := s.CreateTopics(createReq(topic("a", 1, 1), topic("b", 1, 1)))
	s.Image = res.Image
	bID := res.Image.Topic("b").ID
	req := kmsg.NewPtrDeleteTopicsRequest()
	req.TopicNames = []string{"a", "nope"}
	req.Topics = []kmsg.DeleteTopicsRequestTopic{{TopicID: bID}, {TopicID: [16]byte{42}}, {}}
	resp, res2 := s.DeleteTopics(req)
	got := map[string]int16{}
	for _, rt := range resp.Topics {
		name := "<nil>"
		if rt.Topic != nil {
			name = *rt.Topic
		}
		got[name] = rt.ErrorCode
	}
	assert.Equal(t, map[string]int16{"a": 0, "b": 0, "nope": kerr.UnknownTopicOrPartition.Code, "<nil>": kerr.InvalidRequest.Code}, got)
	assert.Len(t, resp.Topics, 5)
	var unknownID bool
	for _, rt := range resp.Topics {
		unknownID = unknownID || rt.ErrorCode == kerr.UnknownTopicID.Code
	}
	assert.True(t, unknownID)
	assert.Empty(t, res2.Image.Topics)
	assert.Len(t, res2.Records, 2)
}

func TestCreatePartitions(t *testing.T) {
	s := cluster(t, 1, 2)
	_, res, _ := s.CreateTopics(createReq(topic("a", 2, 2)))
	s.Image = res.Image
	req := kmsg.NewPtrCreatePartitionsRequest()
	req.Topics = []kmsg.CreatePartitionsRequestTopic{
		{Topic: "a", Count: 4},
		{Topic: "nope", Count: 4},
	}
	resp, res2 := s.CreatePartitions(req)
	assert.Equal(t, int16(0), resp.Topics[0].ErrorCode)
	assert.Equal(t, kerr.UnknownTopicOrPartition.Code, resp.Topics[1].ErrorCode)
	require.Len(t, res2.Image.Topic("a").Partitions, 4)
	assert.Len(t, res2.Image.Partition("a", 3).Replicas, 2)

	s.Image = res2.Image
	req.Topics = []kmsg.CreatePartitionsRequestTopic{
		{Topic: "a", Count: 3},
	}
	resp, _ = s.CreatePartitions(req)
	assert.Equal(t, kerr.InvalidPartitions.Code, resp.Topics[0].ErrorCode)
	req.Topics = []kmsg.CreatePartitionsRequestTopic{{Topic: "a", Count: 5, Assignment: []kmsg.CreatePartitionsRequestTopicAssignment{{Replicas: []int32{1}}}}}
	resp, _ = s.CreatePartitions(req)
	assert.Equal(t, kerr.InvalidReplicaAssignment.Code, resp.Topics[0].ErrorCode, "rf mismatch")
	req.Topics = []kmsg.CreatePartitionsRequestTopic{{Topic: "a", Count: 5, Assignment: []kmsg.CreatePartitionsRequestTopicAssignment{{Replicas: []int32{2, 1}}}}}
	req.ValidateOnly = true
	resp, res3 := s.CreatePartitions(req)
	assert.Equal(t, int16(0), resp.Topics[0].ErrorCode)
	assert.Empty(t, res3.Records)
}

func TestAllocateProducerIDs(t *testing.T) {
	s := cluster(t, 1)
	start, res, err := s.AllocateProducerIDs(1, 1)
	require.NoError(t, err)
	assert.Equal(t, int64(0), start)
	s.Image = res.Image
	start, res, err = s.AllocateProducerIDs(1, 1)
	require.NoError(t, err)
	assert.Equal(t, int64(ProducerIDBlockSize), start)
	assert.Equal(t, int64(2*ProducerIDBlockSize), res.Image.NextProducerID)
}
