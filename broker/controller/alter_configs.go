package controller

import (
	"maps"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/faultline/faultline/broker/config"
	"github.com/faultline/faultline/broker/metadata"
)

// Operations of IncrementalAlterConfigs (KIP-339).
const (
	configSet      int8 = 0
	configDelete   int8 = 1
	configAppend   int8 = 2
	configSubtract int8 = 3
)

// configAlteration is one resource of an AlterConfigs or
// IncrementalAlterConfigs request, in one form for both.
type configAlteration struct {
	typ     kmsg.ConfigResourceType
	name    string
	changes []configChange
	// replace is AlterConfigs' (the legacy request's) meaning: changes
	// are every override the resource keeps, and the others are deleted.
	replace bool
}

// configChange is one config of a configAlteration; op is configSet for
// AlterConfigs.
type configChange struct {
	name  string
	op    int8
	value *string
}

// configOutcome is one resource's answer.
type configOutcome struct {
	code int16
	msg  *string
}

// IncrementalAlterConfigs answers an IncrementalAlterConfigs request
// (KIP-339) and returns the records that carry it out (none when
// ValidateOnly). See alterConfigs for what is accepted.
func (s *ClusterState) IncrementalAlterConfigs(req *kmsg.IncrementalAlterConfigsRequest) (*kmsg.IncrementalAlterConfigsResponse, Result) {
	outs, res := s.alterConfigs(incrementalAlterations(req), req.ValidateOnly)
	return incrementalAlterAnswer(req, outs), res
}

// AlterConfigs answers the legacy AlterConfigs request: each resource's
// configs become its whole set of overrides.
func (s *ClusterState) AlterConfigs(req *kmsg.AlterConfigsRequest) (*kmsg.AlterConfigsResponse, Result) {
	outs, res := s.alterConfigs(legacyAlterations(req), req.ValidateOnly)
	return legacyAlterAnswer(req, outs), res
}

func incrementalAlterations(req *kmsg.IncrementalAlterConfigsRequest) []configAlteration {
	alts := make([]configAlteration, 0, len(req.Resources))
	for _, r := range req.Resources {
		a := configAlteration{typ: r.ResourceType, name: r.ResourceName}
		for _, c := range r.Configs {
			a.changes = append(a.changes, configChange{name: c.Name, op: int8(c.Op), value: c.Value})
		}
		alts = append(alts, a)
	}
	return alts
}

func incrementalAlterAnswer(req *kmsg.IncrementalAlterConfigsRequest, outs []configOutcome) *kmsg.IncrementalAlterConfigsResponse {
	resp := kmsg.NewPtrIncrementalAlterConfigsResponse()
	for i, r := range req.Resources {
		rr := kmsg.NewIncrementalAlterConfigsResponseResource()
		rr.ResourceType, rr.ResourceName = r.ResourceType, r.ResourceName
		rr.ErrorCode, rr.ErrorMessage = outs[i].code, outs[i].msg
		resp.Resources = append(resp.Resources, rr)
	}
	return resp
}

func legacyAlterations(req *kmsg.AlterConfigsRequest) []configAlteration {
	alts := make([]configAlteration, 0, len(req.Resources))
	for _, r := range req.Resources {
		a := configAlteration{typ: r.ResourceType, name: r.ResourceName, replace: true}
		for _, c := range r.Configs {
			a.changes = append(a.changes, configChange{name: c.Name, op: configSet, value: c.Value})
		}
		alts = append(alts, a)
	}
	return alts
}

func legacyAlterAnswer(req *kmsg.AlterConfigsRequest, outs []configOutcome) *kmsg.AlterConfigsResponse {
	resp := kmsg.NewPtrAlterConfigsResponse()
	for i, r := range req.Resources {
		rr := kmsg.NewAlterConfigsResponseResource()
		rr.ResourceType, rr.ResourceName = r.ResourceType, r.ResourceName
		rr.ErrorCode, rr.ErrorMessage = outs[i].code, outs[i].msg
		resp.Resources = append(resp.Resources, rr)
	}
	return resp
}

// alterConfigs decides every resource on its own, as Kafka's controller
// does: one resource's error leaves the others to succeed.
//   - Topics: the topic must exist (UNKNOWN_TOPIC_OR_PARTITION); each name
//     once (INVALID_REQUEST); SET and the legacy request need a value
//     (INVALID_REQUEST); APPEND and SUBTRACT only on list configs
//     (cleanup.policy), starting from the override or else the broker
//     default (INVALID_CONFIG otherwise); every value the topic ends with
//     passes ValidateConfig, and unknown names do not (INVALID_CONFIG); so
//     does the whole set of overrides the topic ends with (ValidateTopic:
//     what its brokers can apply). DELETE of a config the topic does not
//     set changes nothing and succeeds, as in Kafka. Only what changes is
//     written: a ConfigRecord per config set or deleted.
//   - A topic whose unclean.leader.election.enable turns true has its
//     leaderless partitions elected at once (Kafka's KRaft controller does
//     it at its next periodic unclean-election check, every 5 minutes by
//     default; its ZooKeeper controller did it at once).
//   - Broker and broker-logger resources are INVALID_REQUEST: faultline
//     reads broker configs from server.properties only.
//   - A resource named twice in one request is INVALID_REQUEST, both times.
func (s *ClusterState) alterConfigs(alts []configAlteration, validateOnly bool) ([]configOutcome, Result) {
	im := s.Image
	var recs []metadata.Record
	type resourceKey struct {
		typ  kmsg.ConfigResourceType
		name string
	}
	count := map[resourceKey]int{}
	for _, a := range alts {
		count[resourceKey{a.typ, a.name}]++
	}
	outs := make([]configOutcome, len(alts))
	var turnedUnclean []*metadata.Topic
	for i, a := range alts {
		var resRecs []metadata.Record
		var cerr *codedError
		if count[resourceKey{a.typ, a.name}] > 1 {
			cerr = coded(kerr.InvalidRequest, "resource %s %q appears more than once in the request", a.typ, a.name)
		} else {
			resRecs, cerr = s.alterResource(im, a)
		}
		if cerr == nil && len(resRecs) > 0 {
			next, err := im.ApplyBatch(im.Offset, resRecs)
			switch {
			case err != nil:
				cerr = coded(kerr.UnknownServerError, "%v", err)
			case !validateOnly:
				if t := next.Topic(a.name); t != nil && !s.uncleanAllowed(im.Topic(a.name)) && s.uncleanAllowed(t) {
					turnedUnclean = append(turnedUnclean, t)
				}
				im = next
				recs = append(recs, resRecs...)
			}
		}
		if cerr != nil {
			outs[i] = configOutcome{code: cerr.code, msg: &cerr.msg}
		}
	}
	if len(turnedUnclean) > 0 {
		// Each topic is altered by one resource at most, so the topics
		// kept above are already as the final image has them.
		if elected := s.electLeaderlessIn(im, turnedUnclean); len(elected) > 0 {
			next, err := im.ApplyBatch(im.Offset, elected)
			if err == nil {
				im = next
				recs = append(recs, elected...)
			}
		}
	}
	return outs, Result{Records: recs, Image: im}
}

// alterResource decides one resource against im: the records that carry
// it out, or why not.
func (s *ClusterState) alterResource(im *metadata.Image, a configAlteration) ([]metadata.Record, *codedError) {
	names := make([]string, 0, len(a.changes))
	for _, c := range a.changes {
		if slices.Contains(names, c.name) {
			return nil, coded(kerr.InvalidRequest, "config %q appears more than once for %s %q", c.name, a.typ, a.name)
		}
		names = append(names, c.name)
	}
	switch a.typ {
	case kmsg.ConfigResourceTypeTopic:
	case kmsg.ConfigResourceTypeBroker, kmsg.ConfigResourceTypeBrokerLogger:
		return nil, coded(kerr.InvalidRequest, "cannot update these configs dynamically: [%s]: faultline reads broker configs from server.properties only; set them there and restart the broker", strings.Join(names, ", "))
	default:
		return nil, coded(kerr.InvalidRequest, "unexpected resource type %s: only topic configs can be altered", a.typ)
	}
	t := im.Topic(a.name)
	if t == nil {
		return nil, coded(kerr.UnknownTopicOrPartition, "topic %q does not exist", a.name)
	}
	want := map[string]string{}
	if !a.replace {
		for k, v := range t.Configs {
			want[k] = v
		}
	}
	for _, c := range a.changes {
		if c.op != configDelete && c.value == nil {
			return nil, coded(kerr.InvalidRequest, "config %q has a null value (use DELETE to return it to the default)", c.name)
		}
		switch c.op {
		case configSet:
			want[c.name] = *c.value
		case configDelete:
			// Nothing to check: deleting what is not set (even an
			// unknown name) changes nothing, as in Kafka.
			delete(want, c.name)
		case configAppend, configSubtract:
			if !config.TopicConfigIsList(c.name) {
				return nil, coded(kerr.InvalidConfig, "cannot %s config %q: its type is not LIST", opName(c.op), c.name)
			}
			cur, ok := t.Configs[c.name]
			if !ok {
				cur = s.Defaults.TopicConfigs[c.name]
			}
			want[c.name] = strings.Join(editList(config.SplitList(cur), config.SplitList(*c.value), c.op == configAppend), ",")
		default:
			return nil, coded(kerr.InvalidRequest, "unknown operation %d on config %q", c.op, c.name)
		}
	}
	if s.ValidateTopic != nil {
		if err := s.ValidateTopic(want); err != nil {
			return nil, coded(kerr.InvalidConfig, "%v", err)
		}
	}
	var recs []metadata.Record
	for _, name := range slices.Sorted(maps.Keys(want)) {
		v := want[name]
		if old, ok := t.Configs[name]; ok && old == v {
			continue
		}
		if s.ValidateConfig != nil {
			if err := s.ValidateConfig(name, &v); err != nil {
				return nil, coded(kerr.InvalidConfig, "%v", err)
			}
		}
		recs = append(recs, &metadata.ConfigRecord{ResourceType: metadata.ConfigResourceTopic, ResourceName: t.Name, Name: name, Value: &v})
	}
	for _, name := range slices.Sorted(maps.Keys(t.Configs)) {
		if _, ok := want[name]; !ok {
			recs = append(recs, &metadata.ConfigRecord{ResourceType: metadata.ConfigResourceTopic, ResourceName: t.Name, Name: name})
		}
	}
	return recs, nil
}

func opName(op int8) string {
	if op == configAppend {
		return "APPEND to"
	}
	return "SUBTRACT from"
}

// editList appends the items of edit that list lacks, or removes every
// item of edit from it.
func editList(list, edit []string, add bool) []string {
	if add {
		for _, e := range edit {
			if !slices.Contains(list, e) {
				list = append(list, e)
			}
		}
		return list
	}
	return slices.DeleteFunc(list, func(p string) bool { return slices.Contains(edit, p) })
}
