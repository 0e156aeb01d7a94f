package group

import (
	"context"
	"sort"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/faultline/faultline/broker/metadata"
)

// OffsetCommit (key 8, v0-v10) stores committed offsets. Members of a
// managed group must name their member id and current generation; a
// commit with generation -1 and no member id is a "simple" commit, allowed
// for a group without members (and creating the group if needed). The
// offsets are appended to __consumer_offsets and acknowledged only once the
// append is committed. Errors are per partition: unknown topics get
// UNKNOWN_TOPIC_OR_PARTITION (v10+ names topics by id: UNKNOWN_TOPIC_ID),
// oversized metadata OFFSET_METADATA_TOO_LARGE. v1's per-partition commit
// timestamp and v2-v4's retention time are ignored: offsets never expire.
func (c *Coordinator) OffsetCommit(_ context.Context, req *kmsg.OffsetCommitRequest) *kmsg.OffsetCommitResponse {
	resp := kmsg.NewPtrOffsetCommitResponse()
	resp.Version = req.Version
	for _, t := range req.Topics {
		rt := kmsg.NewOffsetCommitResponseTopic()
		rt.Topic = t.Topic
		rt.TopicID = t.TopicID
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetCommitResponseTopicPartition()
			rp.Partition = p.Partition
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	c.commit(req, resp)
	return resp
}

// commitSlot points at one partition of the request and its answer.
type commitSlot struct {
	tp     topicPartition
	offset committedOffset
	code   *int16
}

func (c *Coordinator) commit(req *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse) {
	setAll := func(code int16) {
		for i := range resp.Topics {
			for j := range resp.Topics[i].Partitions {
				resp.Topics[i].Partitions[j].ErrorCode = code
			}
		}
	}
	if req.Group == "" {
		setAll(codeInvalidGroupID)
		return
	}
	p, unlock, code := c.lockOwner(req.Group)
	if code != codeNone {
		setAll(code)
		return
	}
	defer unlock()
	token := c.partitions[p].token
	if code := c.validateCommitLocked(req); code != codeNone {
		c.mu.Unlock()
		setAll(code)
		return
	}
	now := c.clock.Now().UnixMilli()
	im := c.md.Image()
	var slots []commitSlot
	var records []Record
	for i, t := range req.Topics {
		name, code := topicName(im, req.Version, t.Topic, t.TopicID)
		for j, tp := range t.Partitions {
			rc := &resp.Topics[i].Partitions[j].ErrorCode
			switch {
			case code != codeNone:
				*rc = code
				continue
			case im.Partition(name, tp.Partition) == nil:
				*rc = codeUnknownTopicOrPartition
				continue
			case tp.Metadata != nil && len(*tp.Metadata) > int(c.cfg.OffsetMetadataMaxBytes):
				*rc = codeOffsetMetadataTooLarge
				continue
			}
			o := committedOffset{offset: tp.Offset, leaderEpoch: -1, commitTimestamp: now}
			if req.Version >= 6 {
				o.leaderEpoch = tp.LeaderEpoch
			}
			if tp.Metadata != nil {
				o.metadata = *tp.Metadata
			}
			key := topicPartition{topic: name, partition: tp.Partition}
			slots = append(slots, commitSlot{tp: key, offset: o, code: rc})
			records = append(records, offsetCommitRecord(req.Group, key, o))
		}
	}
	c.mu.Unlock()
	if len(records) == 0 {
		return
	}

	err := c.appendRecords(p, records)

	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		code := appendErrorCode(err)
		for _, s := range slots {
			*s.code = code
		}
		return
	}
	st := c.partitions[p]
	if st == nil || st.token != token {
		// Leadership moved while we appended; the records are in the log
		// and whoever loads the partition next replays them.
		return
	}
	g := c.groups[req.Group]
	if g == nil {
		g = newGroup(req.Group, p, c.clock.Now())
		c.groups[req.Group] = g
	}
	for _, s := range slots {
		g.offsets[s.tp] = s.offset
	}
}

// validateCommitLocked decides whether the committer may commit for the
// group, as Kafka's classic group does.
func (c *Coordinator) validateCommitLocked(req *kmsg.OffsetCommitRequest) int16 {
	g := c.groups[req.Group]
	if g == nil {
		if req.Generation < 0 {
			return codeNone
		}
		return codeIllegalGeneration
	}
	if g.state == stateDead {
		return codeCoordinatorNotAvailable
	}
	if req.Generation >= 0 || req.MemberID != "" || req.InstanceID != nil {
		if _, code := g.checkMember(req.MemberID, req.InstanceID); code != codeNone {
			return code
		}
		if req.Generation != g.generation {
			return codeIllegalGeneration
		}
		if g.state == stateCompletingRebalance {
			// The member knows the new generation but has no assignment
			// yet; it must finish the rebalance first.
			return codeRebalanceInProgress
		}
		return codeNone
	}
	if g.state != stateEmpty {
		return codeUnknownMemberID
	}
	return codeNone
}

// topicName resolves a request's topic: by name before v10, by id from v10.
func topicName(im *metadata.Image, version int16, name string, id [16]byte) (string, int16) {
	if version < 10 {
		return name, codeNone
	}
	if im == nil {
		return "", codeUnknownTopicID
	}
	t := im.TopicsByID[metadata.Uuid(id)]
	if t == nil {
		return "", codeUnknownTopicID
	}
	return t.Name, codeNone
}

// OffsetFetch (key 9, v0-v10) returns committed offsets: of the listed
// partitions (offset -1, metadata "" for none), or of every committed
// partition when topics are null (v2+). v8+ asks for several groups at once.
// Group-level errors (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS) go in
// the top-level error code from v2 and in every partition before. With
// RequireStable (v7+), a partition the group has offsets for in a
// transaction still open (TxnOffsetCommit, no marker yet) answers
// UNSTABLE_OFFSET_COMMIT, which clients retry, instead of an offset the
// transaction may yet replace.
func (c *Coordinator) OffsetFetch(_ context.Context, req *kmsg.OffsetFetchRequest) *kmsg.OffsetFetchResponse {
	resp := kmsg.NewPtrOffsetFetchResponse()
	resp.Version = req.Version
	im := c.md.Image()
	if req.Version >= 8 {
		for _, rg := range req.Groups {
			q := fetchQuery{all: rg.Topics == nil, stable: req.RequireStable}
			for _, t := range rg.Topics {
				q.topics = append(q.topics, fetchTopic{name: t.Topic, id: t.TopicID, partitions: t.Partitions})
			}
			topics, code := c.fetchOffsets(im, req.Version, rg.Group, q)
			g := kmsg.NewOffsetFetchResponseGroup()
			g.Group = rg.Group
			g.ErrorCode = code
			for _, t := range topics {
				gt := kmsg.NewOffsetFetchResponseGroupTopic()
				gt.Topic = t.name
				gt.TopicID = t.id
				for _, p := range t.partitions {
					gp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
					gp.Partition, gp.Offset, gp.LeaderEpoch, gp.Metadata, gp.ErrorCode = p.partition, p.offset, p.leaderEpoch, p.metadata, p.code
					gt.Partitions = append(gt.Partitions, gp)
				}
				g.Topics = append(g.Topics, gt)
			}
			resp.Groups = append(resp.Groups, g)
		}
		return resp
	}
	q := fetchQuery{all: req.Topics == nil && req.Version >= 2, stable: req.Version >= 7 && req.RequireStable}
	for _, t := range req.Topics {
		q.topics = append(q.topics, fetchTopic{name: t.Topic, partitions: t.Partitions})
	}
	topics, code := c.fetchOffsets(im, req.Version, req.Group, q)
	if req.Version >= 2 {
		resp.ErrorCode = code
	}
	for _, t := range topics {
		rt := kmsg.NewOffsetFetchResponseTopic()
		rt.Topic = t.name
		for _, p := range t.partitions {
			rp := kmsg.NewOffsetFetchResponseTopicPartition()
			rp.Partition, rp.Offset, rp.LeaderEpoch, rp.Metadata, rp.ErrorCode = p.partition, p.offset, p.leaderEpoch, p.metadata, p.code
			if req.Version < 2 && code != codeNone {
				rp.ErrorCode = code
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

type fetchQuery struct {
	all bool
	// stable refuses the offsets of partitions with transactional offsets
	// pending (RequireStable).
	stable bool
	topics []fetchTopic
}

type fetchTopic struct {
	name       string
	id         [16]byte
	partitions []int32
}

type fetchedTopic struct {
	name       string
	id         [16]byte
	partitions []fetchedPartition
}

type fetchedPartition struct {
	partition   int32
	offset      int64
	leaderEpoch int32
	metadata    *string
	code        int16
}

func noOffset(p int32, code int16) fetchedPartition {
	empty := ""
	return fetchedPartition{partition: p, offset: -1, leaderEpoch: -1, metadata: &empty, code: code}
}

func (c *Coordinator) fetchOffsets(im *metadata.Image, version int16, groupID string, q fetchQuery) ([]fetchedTopic, int16) {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, code := c.ownerLocked(groupID)
	if code != codeNone && version >= 2 {
		return nil, code
	}
	var offs map[topicPartition]committedOffset
	if g := c.groups[groupID]; g != nil && code == codeNone {
		offs = g.offsets
	}
	var out []fetchedTopic
	if q.all {
		byTopic := map[string][]fetchedPartition{}
		for tp, o := range offs {
			if q.stable && c.txnOffsetPendingLocked(groupID, tp) {
				byTopic[tp.topic] = append(byTopic[tp.topic], noOffset(tp.partition, codeUnstableOffsetCommit))
				continue
			}
			md := o.metadata
			byTopic[tp.topic] = append(byTopic[tp.topic], fetchedPartition{partition: tp.partition, offset: o.offset, leaderEpoch: o.leaderEpoch, metadata: &md})
		}
		for name, ps := range byTopic {
			sort.Slice(ps, func(i, j int) bool { return ps[i].partition < ps[j].partition })
			ft := fetchedTopic{name: name, partitions: ps}
			if version >= 10 {
				t := im.Topic(name)
				if t == nil {
					// Committed for a topic that no longer exists: v10
					// cannot name it.
					continue
				}
				ft.id = t.ID
			}
			out = append(out, ft)
		}
		sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
		return out, code
	}
	for _, t := range q.topics {
		name, tcode := topicName(im, version, t.name, t.id)
		ft := fetchedTopic{name: t.name, id: t.id}
		for _, p := range t.partitions {
			if tcode != codeNone {
				ft.partitions = append(ft.partitions, noOffset(p, tcode))
				continue
			}
			tp := topicPartition{topic: name, partition: p}
			if q.stable && c.txnOffsetPendingLocked(groupID, tp) {
				ft.partitions = append(ft.partitions, noOffset(p, codeUnstableOffsetCommit))
				continue
			}
			o, ok := offs[tp]
			if !ok {
				ft.partitions = append(ft.partitions, noOffset(p, codeNone))
				continue
			}
			md := o.metadata
			ft.partitions = append(ft.partitions, fetchedPartition{partition: p, offset: o.offset, leaderEpoch: o.leaderEpoch, metadata: &md})
		}
		out = append(out, ft)
	}
	return out, code
}
