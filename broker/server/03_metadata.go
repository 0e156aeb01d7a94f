package server

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/faultline/faultline/broker/metadata"
)

// Metadata: v0-v12
//
// Behaviour:
//   - Brokers are the unfenced brokers of the metadata image, or this node's
//     advertised endpoint while the image lists none.
//   - ControllerID names a live broker (kgo sends CreateTopics and friends
//     there): the active controller if clients can reach it, else this
//     node, whose Controller forwards.
//   - Topics: null (v1+) or empty (v0) means all topics; otherwise each
//     requested topic by name, or by id (v10+ with a null name). Internal
//     topics are flagged IsInternal.
//   - A missing topic is auto-created through Controller.CreateTopics with
//     the broker's default partitions and replication factor (-1/-1) when
//     auto.create.topics.enable is on, the request allows it (always before
//     v4) and the name is valid and not internal; if the new topic is in
//     the image at once it is described, otherwise it is answered
//     LEADER_NOT_AVAILABLE so the client asks again. Otherwise a missing
//     topic is UNKNOWN_TOPIC_OR_PARTITION, a missing id UNKNOWN_TOPIC_ID.
//   - Partitions carry leader, leader epoch, replicas, ISR and the replicas
//     whose broker is not live (OfflineReplicas); a leaderless partition is
//     LEADER_NOT_AVAILABLE with leader -1.
//   - Authorized operations (v8+) are not computed (the default, "not
//     requested", is sent). v13's top-level error code is not served.
//
// Version notes: v1 ControllerID, IsInternal, Rack, null topics = all;
// v2 ClusterID; v4 AllowAutoTopicCreation; v5 OfflineReplicas; v7
// LeaderEpoch; v8 authorized operations; v9 flexible; v10 topic ids; v11
// drops cluster authorized operations; v12 null topic name with an id.

func init() {
	register(api{key: 3, min: 0, max: 12, needs: needMetadata, handle: handleMetadata, fail: failMetadata})
}

func handleMetadata(s *Server, r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.MetadataRequest)
	resp := req.ResponseKind().(*kmsg.MetadataResponse)
	img := s.backend.Metadata.Image()

	all := req.Topics == nil || (req.Version == 0 && len(req.Topics) == 0)
	if !all {
		var missing []string
		for _, t := range req.Topics {
			if t.Topic != nil && img.Topic(*t.Topic) == nil && s.mayAutoCreate(req, *t.Topic) {
				missing = append(missing, *t.Topic)
			}
		}
		if len(missing) > 0 {
			s.autoCreate(r, missing)
			img = s.backend.Metadata.Image()
		}
	}

	live := s.liveBrokers(img, false)
	liveSet := make(map[int32]bool, len(live))
	for _, b := range live {
		mb := kmsg.NewMetadataResponseBroker()
		mb.NodeID, mb.Host, mb.Port, mb.Rack = b.ID, b.Host, b.Port, rackPtr(b.Rack)
		resp.Brokers = append(resp.Brokers, mb)
		liveSet[b.ID] = true
	}
	if id := s.clusterID(); id != "" {
		resp.ClusterID = &id
	}
	resp.ControllerID = s.controllerID(img, live)

	if all {
		if img != nil {
			for _, name := range img.TopicNames() {
				resp.Topics = append(resp.Topics, describeTopic(r, img.Topics[name], liveSet))
			}
		}
		return resp, nil
	}
	for _, t := range req.Topics {
		var topic *metadata.Topic
		switch {
		case t.Topic != nil:
			topic = img.Topic(*t.Topic)
		case img != nil:
			topic = img.TopicsByID[t.TopicID]
		}
		if topic != nil {
			resp.Topics = append(resp.Topics, describeTopic(r, topic, liveSet))
			continue
		}
		mt := kmsg.NewMetadataResponseTopic()
		mt.Topic, mt.TopicID = t.Topic, t.TopicID
		switch {
		case t.Topic == nil:
			mt.ErrorCode = kerr.UnknownTopicID.Code
		case !validTopicName(*t.Topic):
			mt.ErrorCode = kerr.InvalidTopicException.Code
		case s.mayAutoCreate(req, *t.Topic):
			mt.ErrorCode = kerr.LeaderNotAvailable.Code
		default:
			mt.ErrorCode = kerr.UnknownTopicOrPartition.Code
		}
		r.noteError(mt.ErrorCode)
		resp.Topics = append(resp.Topics, mt)
	}
	return resp, nil
}

func (s *Server) mayAutoCreate(req *kmsg.MetadataRequest, name string) bool {
	return s.backend.AutoCreateTopics && s.backend.Controller != nil &&
		(req.Version < 4 || req.AllowAutoTopicCreation) &&
		validTopicName(name) && !internalTopic(name)
}

// autoCreate asks the controller for the missing topics with the broker's
// defaults. Failures are logged: the client sees the topic as not yet
// available and asks again.
func (s *Server) autoCreate(r *request, names []string) {
	creq := kmsg.NewPtrCreateTopicsRequest()
	creq.Version = 7
	creq.TimeoutMillis = 30000
	for _, n := range names {
		ct := kmsg.NewCreateTopicsRequestTopic()
		ct.Topic, ct.NumPartitions, ct.ReplicationFactor = n, -1, -1
		creq.Topics = append(creq.Topics, ct)
	}
	cresp := s.backend.Controller.CreateTopics(r.ctx, creq)
	if cresp == nil {
		return
	}
	for _, t := range cresp.Topics {
		if t.ErrorCode != 0 && t.ErrorCode != kerr.TopicAlreadyExists.Code {
			s.log.Warn("auto-creating topic failed", "topic", t.Topic, "error", errorName(t.ErrorCode))
		} else if t.ErrorCode == 0 {
			s.log.Info("Auto-created topic", "topic", t.Topic)
		}
	}
}

func describeTopic(r *request, t *metadata.Topic, live map[int32]bool) kmsg.MetadataResponseTopic {
	mt := kmsg.NewMetadataResponseTopic()
	name := t.Name
	mt.Topic, mt.TopicID, mt.IsInternal = &name, t.ID, internalTopic(t.Name)
	mt.Partitions = make([]kmsg.MetadataResponseTopicPartition, 0, len(t.Partitions))
	for i := range t.Partitions {
		p := &t.Partitions[i]
		mp := kmsg.NewMetadataResponseTopicPartition()
		mp.Partition, mp.Leader, mp.LeaderEpoch = p.Partition, p.Leader, p.LeaderEpoch
		mp.Replicas, mp.ISR = p.Replicas, p.ISR
		if mp.Replicas == nil {
			mp.Replicas = []int32{}
		}
		if mp.ISR == nil {
			mp.ISR = []int32{}
		}
		mp.OfflineReplicas = []int32{}
		for _, id := range p.Replicas {
			if !live[id] {
				mp.OfflineReplicas = append(mp.OfflineReplicas, id)
			}
		}
		if p.Leader < 0 {
			mp.Leader = -1
			mp.ErrorCode = kerr.LeaderNotAvailable.Code
			r.noteError(mp.ErrorCode)
		}
		mt.Partitions = append(mt.Partitions, mp)
	}
	return mt
}

func failMetadata(req kmsg.Request, code int16) kmsg.Response {
	mreq := req.(*kmsg.MetadataRequest)
	resp := mreq.ResponseKind().(*kmsg.MetadataResponse)
	resp.ErrorCode = code
	for _, t := range mreq.Topics {
		mt := kmsg.NewMetadataResponseTopic()
		mt.Topic, mt.TopicID, mt.ErrorCode = t.Topic, t.TopicID, code
		resp.Topics = append(resp.Topics, mt)
	}
	return resp
}
