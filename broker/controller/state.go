package controller

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/faultline/faultline/broker/metadata"
)

// ProducerIDBlockSize is how many producer ids one ProducerIds record
// reserves (Kafka's block size).
const ProducerIDBlockSize = 1000

// Defaults are the broker-level values topic creation falls back on.
type Defaults struct {
	NumPartitions     int32 // num.partitions
	ReplicationFactor int16 // default.replication.factor
	// UncleanLeaderElection mirrors unclean.leader.election.enable; a
	// topic's own config overrides it.
	UncleanLeaderElection bool
	// TopicConfigs are the broker's defaults of the topic-level configs
	// (name -> value), where IncrementalAlterConfigs' APPEND and SUBTRACT
	// start from when the topic has no override.
	TopicConfigs map[string]string
}

// ConfigValidator checks one topic config; the error's text goes to the
// client with INVALID_CONFIG.
type ConfigValidator func(name string, value *string) error

// TopicValidator checks a topic's whole set of config overrides as its
// brokers will apply them; the error's text goes to the client with
// INVALID_CONFIG. It catches what one key alone cannot show, such as a
// value the storage layer refuses, so that no broker is handed a config
// it cannot apply.
type TopicValidator func(overrides map[string]string) error

// ClusterState is the active controller's decision maker: given the
// controller's image it answers requests with the records that carry them
// out. It does no I/O and keeps no state between calls besides the image it
// is given: the caller appends the records and installs the new image. Every
// method checks that its records apply to the image before returning them, so
// an invalid record is never appended.
type ClusterState struct {
	Image          *metadata.Image
	Defaults       Defaults
	ValidateConfig ConfigValidator // nil accepts every config
	ValidateTopic  TopicValidator  // nil accepts every set of overrides
	Rand           *rand.Rand      // topic ids and placement offsets
	// Unsafe are the planted bugs of the decisions (zero: none).
	Unsafe Unsafe
}

// Result is the outcome of a decision: the records to append (possibly none)
// and the image they produce.
type Result struct {
	Records []metadata.Record
	Image   *metadata.Image
}

func errMsg(err *kerr.Error, format string, args ...any) (int16, *string) {
	s := fmt.Sprintf(format, args...)
	return err.Code, &s
}

func (s *ClusterState) newTopicID() metadata.Uuid {
	var id metadata.Uuid
	for id == (metadata.Uuid{}) || s.Image.TopicsByID[id] != nil {
		for i := range id {
			id[i] = byte(s.Rand.Uint32())
		}
	}
	return id
}

// placementBrokers returns the brokers new replicas may go to.
func placementBrokers(im *metadata.Image) []PlacementBroker {
	var out []PlacementBroker
	for _, b := range im.UnfencedBrokers() {
		out = append(out, PlacementBroker{ID: b.ID, Rack: b.Rack})
	}
	return out
}

// newPartition builds the record of a new partition: its ISR is every live
// replica, its leader the first of them.
func newPartition(im *metadata.Image, topicID metadata.Uuid, p int32, replicas []int32) (*metadata.PartitionRecord, error) {
	var isr []int32
	for _, r := range replicas {
		if im.Live(r) {
			isr = append(isr, r)
		}
	}
	if len(isr) == 0 {
		return nil, fmt.Errorf("every broker assigned to partition %d is fenced or shutting down", p)
	}
	return &metadata.PartitionRecord{PartitionID: p, TopicID: topicID, Replicas: slices.Clone(replicas), ISR: isr, Leader: isr[0]}, nil
}

// checkAssignment validates an explicit replica list.
func checkAssignment(im *metadata.Image, replicas []int32) error {
	if len(replicas) == 0 {
		return fmt.Errorf("empty replica list")
	}
	seen := map[int32]bool{}
	for _, r := range replicas {
		if seen[r] {
			return fmt.Errorf("broker %d appears twice", r)
		}
		seen[r] = true
		if _, ok := im.Brokers[r]; !ok {
			return fmt.Errorf("broker %d is not registered", r)
		}
	}
	return nil
}

// CreateTopics answers a CreateTopics request. With ValidateOnly the answer
// is the same but no records are returned.
func (s *ClusterState) CreateTopics(req *kmsg.CreateTopicsRequest) (*kmsg.CreateTopicsResponse, Result, []string) {
	resp := kmsg.NewPtrCreateTopicsResponse()
	im := s.Image
	var recs []metadata.Record
	var warnings []string
	count := map[string]int{}
	for _, t := range req.Topics {
		count[t.Topic]++
	}
	for _, t := range req.Topics {
		rt := kmsg.NewCreateTopicsResponseTopic()
		rt.Topic = t.Topic
		if count[t.Topic] > 1 {
			rt.ErrorCode, rt.ErrorMessage = errMsg(kerr.InvalidRequest, "topic %q appears more than once in the request", t.Topic)
			resp.Topics = append(resp.Topics, rt)
			continue
		}
		topicRecs, id, np, rf, err := s.createTopic(im, t)
		if err != nil {
			rt.ErrorCode, rt.ErrorMessage = err.code, &err.msg
			resp.Topics = append(resp.Topics, rt)
			continue
		}
		next, applyErr := im.ApplyBatch(im.Offset, topicRecs)
		if applyErr != nil {
			rt.ErrorCode, rt.ErrorMessage = errMsg(kerr.UnknownServerError, "%v", applyErr)
			resp.Topics = append(resp.Topics, rt)
			continue
		}
		if HasCollisionChars(t.Topic) && !strings.HasPrefix(t.Topic, "__") {
			warnings = append(warnings, fmt.Sprintf("topic %q contains '.' or '_': metric names do not tell these apart and may collide", t.Topic))
		}
		if !req.ValidateOnly {
			im = next
			recs = append(recs, topicRecs...)
		}
		rt.TopicID = id
		rt.NumPartitions = np
		rt.ReplicationFactor = rf
		for _, c := range t.Configs {
			rc := kmsg.NewCreateTopicsResponseTopicConfig()
			rc.Name = c.Name
			rc.Value = c.Value
			rc.Source = 1 // DYNAMIC_TOPIC_CONFIG
			rt.Configs = append(rt.Configs, rc)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, Result{Records: recs, Image: im}, warnings
}

type codedError struct {
	code int16
	msg  string
}

func coded(err *kerr.Error, format string, args ...any) *codedError {
	return &codedError{code: err.Code, msg: fmt.Sprintf(format, args...)}
}

func (s *ClusterState) createTopic(im *metadata.Image, t kmsg.CreateTopicsRequestTopic) ([]metadata.Record, metadata.Uuid, int32, int16, *codedError) {
	var id metadata.Uuid
	if err := ValidateTopicName(t.Topic); err != nil {
		return nil, id, 0, 0, coded(kerr.InvalidTopicException, "%v", err)
	}
	if im.Topic(t.Topic) != nil {
		return nil, id, 0, 0, coded(kerr.TopicAlreadyExists, "topic %q already exists", t.Topic)
	}
	key := CollisionKey(t.Topic)
	for _, name := range im.TopicNames() {
		if CollisionKey(name) == key {
			return nil, id, 0, 0, coded(kerr.InvalidTopicException, "topic %q collides with existing topic %q ('.' and '_' look the same in metric names)", t.Topic, name)
		}
	}
	seenConfig := map[string]bool{}
	for _, c := range t.Configs {
		if seenConfig[c.Name] {
			return nil, id, 0, 0, coded(kerr.InvalidRequest, "config %q appears more than once", c.Name)
		}
		seenConfig[c.Name] = true
		if c.Value == nil {
			return nil, id, 0, 0, coded(kerr.InvalidConfig, "config %q has a null value", c.Name)
		}
		if s.ValidateConfig != nil {
			if err := s.ValidateConfig(c.Name, c.Value); err != nil {
				return nil, id, 0, 0, coded(kerr.InvalidConfig, "%v", err)
			}
		}
	}
	if s.ValidateTopic != nil && len(t.Configs) > 0 {
		overrides := make(map[string]string, len(t.Configs))
		for _, c := range t.Configs {
			overrides[c.Name] = *c.Value
		}
		if err := s.ValidateTopic(overrides); err != nil {
			return nil, id, 0, 0, coded(kerr.InvalidConfig, "%v", err)
		}
	}

	var assignment [][]int32
	if len(t.ReplicaAssignment) > 0 {
		if t.NumPartitions != -1 || t.ReplicationFactor != -1 {
			return nil, id, 0, 0, coded(kerr.InvalidRequest, "both a replica assignment and a partition count or replication factor were given")
		}
		assignment = make([][]int32, len(t.ReplicaAssignment))
		for _, a := range t.ReplicaAssignment {
			if a.Partition < 0 || int(a.Partition) >= len(assignment) || assignment[a.Partition] != nil {
				return nil, id, 0, 0, coded(kerr.InvalidReplicaAssignment, "partitions of the assignment must be 0 to %d, each once", len(assignment)-1)
			}
			if err := checkAssignment(im, a.Replicas); err != nil {
				return nil, id, 0, 0, coded(kerr.InvalidReplicaAssignment, "partition %d: %v", a.Partition, err)
			}
			if len(a.Replicas) != len(t.ReplicaAssignment[0].Replicas) {
				return nil, id, 0, 0, coded(kerr.InvalidReplicaAssignment, "every partition of the assignment must have the same number of replicas")
			}
			assignment[a.Partition] = a.Replicas
		}
	} else {
		np, rf := t.NumPartitions, t.ReplicationFactor
		if np == -1 {
			np = s.Defaults.NumPartitions
		}
		if rf == -1 {
			rf = s.Defaults.ReplicationFactor
		}
		if np <= 0 {
			return nil, id, 0, 0, coded(kerr.InvalidPartitions, "number of partitions %d: must be at least 1", np)
		}
		if rf <= 0 {
			return nil, id, 0, 0, coded(kerr.InvalidReplicationFactor, "replication factor %d: must be at least 1", rf)
		}
		brokers := placementBrokers(im)
		var err error
		assignment, err = PlaceReplicas(Placement{Brokers: brokers, NumPartitions: np, ReplicationFactor: rf,
			Start: s.Rand.IntN(max(len(brokers), 1)), Shift: s.Rand.IntN(max(len(brokers), 1))})
		if err != nil {
			return nil, id, 0, 0, coded(kerr.InvalidReplicationFactor, "cannot place %d replicas: only %d broker(s) are registered and unfenced", rf, len(brokers))
		}
	}

	id = s.newTopicID()
	recs := []metadata.Record{&metadata.TopicRecord{Name: t.Topic, TopicID: id}}
	for _, c := range t.Configs {
		recs = append(recs, &metadata.ConfigRecord{ResourceType: metadata.ConfigResourceTopic, ResourceName: t.Topic, Name: c.Name, Value: c.Value})
	}
	for p, replicas := range assignment {
		pr, err := newPartition(im, id, int32(p), replicas)
		if err != nil {
			return nil, id, 0, 0, coded(kerr.InvalidReplicaAssignment, "%v", err)
		}
		recs = append(recs, pr)
	}
	return recs, id, int32(len(assignment)), int16(len(assignment[0])), nil
}

// DeleteTopics answers a DeleteTopics request, by name (v0-v5 TopicNames, or
// v6+ entries with a name) or by topic id.
func (s *ClusterState) DeleteTopics(req *kmsg.DeleteTopicsRequest) (*kmsg.DeleteTopicsResponse, Result) {
	resp := kmsg.NewPtrDeleteTopicsResponse()
	im := s.Image
	var recs []metadata.Record
	entries := req.Topics
	for _, name := range req.TopicNames {
		e := kmsg.NewDeleteTopicsRequestTopic()
		e.Topic = &name
		entries = append(entries, e)
	}
	done := map[metadata.Uuid]bool{}
	for _, e := range entries {
		rt := kmsg.NewDeleteTopicsResponseTopic()
		rt.Topic, rt.TopicID = e.Topic, e.TopicID
		var t *metadata.Topic
		switch {
		case e.Topic != nil && *e.Topic != "" && e.TopicID != [16]byte{}:
			rt.ErrorCode, rt.ErrorMessage = errMsg(kerr.InvalidRequest, "give a topic name or a topic id, not both")
		case e.Topic != nil && *e.Topic != "":
			if t = im.Topic(*e.Topic); t == nil {
				rt.ErrorCode, rt.ErrorMessage = errMsg(kerr.UnknownTopicOrPartition, "topic %q does not exist", *e.Topic)
			}
		case e.TopicID != [16]byte{}:
			if t = im.TopicsByID[e.TopicID]; t == nil {
				rt.ErrorCode, rt.ErrorMessage = errMsg(kerr.UnknownTopicID, "no topic has id %x", e.TopicID)
			}
		default:
			rt.ErrorCode, rt.ErrorMessage = errMsg(kerr.InvalidRequest, "neither a topic name nor a topic id")
		}
		if t != nil {
			name := t.Name
			rt.Topic, rt.TopicID = &name, t.ID
			if done[t.ID] {
				rt.ErrorCode, rt.ErrorMessage = errMsg(kerr.InvalidRequest, "topic %q appears more than once in the request", name)
				t = nil
			}
		}
		if t != nil {
			done[t.ID] = true
			rec := &metadata.RemoveTopicRecord{TopicID: t.ID}
			next, err := im.Apply(rec)
			if err != nil {
				rt.ErrorCode, rt.ErrorMessage = errMsg(kerr.UnknownServerError, "%v", err)
			} else {
				im = next
				recs = append(recs, rec)
			}
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, Result{Records: recs, Image: im}
}

// CreatePartitions answers a CreatePartitions request.
func (s *ClusterState) CreatePartitions(req *kmsg.CreatePartitionsRequest) (*kmsg.CreatePartitionsResponse, Result) {
	resp := kmsg.NewPtrCreatePartitionsResponse()
	im := s.Image
	var recs []metadata.Record
	count := map[string]int{}
	for _, t := range req.Topics {
		count[t.Topic]++
	}
	for _, t := range req.Topics {
		rt := kmsg.NewCreatePartitionsResponseTopic()
		rt.Topic = t.Topic
		var topicRecs []metadata.Record
		var cerr *codedError
		if count[t.Topic] > 1 {
			cerr = coded(kerr.InvalidRequest, "topic %q appears more than once in the request", t.Topic)
		} else {
			topicRecs, cerr = s.createPartitions(im, t)
		}
		if cerr == nil {
			next, err := im.ApplyBatch(im.Offset, topicRecs)
			if err != nil {
				cerr = coded(kerr.UnknownServerError, "%v", err)
			} else if !req.ValidateOnly {
				im = next
				recs = append(recs, topicRecs...)
			}
		}
		if cerr != nil {
			rt.ErrorCode, rt.ErrorMessage = cerr.code, &cerr.msg
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, Result{Records: recs, Image: im}
}

func (s *ClusterState) createPartitions(im *metadata.Image, t kmsg.CreatePartitionsRequestTopic) ([]metadata.Record, *codedError) {
	topic := im.Topic(t.Topic)
	if topic == nil {
		return nil, coded(kerr.UnknownTopicOrPartition, "topic %q does not exist", t.Topic)
	}
	have := int32(len(topic.Partitions))
	switch {
	case t.Count < have:
		return nil, coded(kerr.InvalidPartitions, "topic %q has %d partitions, more than the %d asked for; partitions cannot be removed", t.Topic, have, t.Count)
	case t.Count == have:
		return nil, coded(kerr.InvalidPartitions, "topic %q already has %d partitions", t.Topic, have)
	}
	add := t.Count - have
	rf := int16(1)
	if have > 0 {
		rf = int16(len(topic.Partitions[0].Replicas))
	}
	var assignment [][]int32
	if t.Assignment != nil {
		if int32(len(t.Assignment)) != add {
			return nil, coded(kerr.InvalidReplicaAssignment, "the assignment lists %d partitions, %d are being added", len(t.Assignment), add)
		}
		for i, a := range t.Assignment {
			if err := checkAssignment(im, a.Replicas); err != nil {
				return nil, coded(kerr.InvalidReplicaAssignment, "new partition %d: %v", have+int32(i), err)
			}
			if len(a.Replicas) != int(rf) {
				return nil, coded(kerr.InvalidReplicaAssignment, "new partition %d has %d replicas, the topic's replication factor is %d", have+int32(i), len(a.Replicas), rf)
			}
			assignment = append(assignment, a.Replicas)
		}
	} else {
		brokers := placementBrokers(im)
		var err error
		assignment, err = PlaceReplicas(Placement{Brokers: brokers, FirstPartition: have, NumPartitions: add, ReplicationFactor: rf,
			Start: s.Rand.IntN(max(len(brokers), 1)), Shift: s.Rand.IntN(max(len(brokers), 1))})
		if err != nil {
			return nil, coded(kerr.InvalidReplicationFactor, "cannot place %d replicas: only %d broker(s) are registered and unfenced", rf, len(brokers))
		}
	}
	var recs []metadata.Record
	for i, replicas := range assignment {
		pr, err := newPartition(im, topic.ID, have+int32(i), replicas)
		if err != nil {
			return nil, coded(kerr.InvalidReplicaAssignment, "%v", err)
		}
		recs = append(recs, pr)
	}
	return recs, nil
}

// AllocateProducerIDs reserves the next block of ProducerIDBlockSize ids for
// a broker and returns the first id of the block.
func (s *ClusterState) AllocateProducerIDs(brokerID int32, brokerEpoch int64) (int64, Result, error) {
	start := s.Image.NextProducerID
	rec := &metadata.ProducerIDsRecord{BrokerID: brokerID, BrokerEpoch: brokerEpoch, NextProducerID: start + ProducerIDBlockSize}
	next, err := s.Image.Apply(rec)
	if err != nil {
		return 0, Result{}, fmt.Errorf("allocate producer ids: %w", err)
	}
	return start, Result{Records: []metadata.Record{rec}, Image: next}, nil
}
