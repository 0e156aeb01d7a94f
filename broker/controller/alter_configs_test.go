package controller

import (
	"errors"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/faultline/faultline/broker/config"
	"github.com/faultline/faultline/broker/metadata"
)

// alterTestState is a three-broker cluster with topic t (one partition,
// retention.ms=1000 and segment.bytes=2048 set) and the validator and
// defaults the node gives its controller.
func alterTestState(t *testing.T) *ClusterState {
	t.Helper()
	s := cluster(t, 1, 2, 3)
	s.ValidateConfig = func(name string, value *string) error {
		if value == nil {
			value = new(string)
			for _, n := range config.TopicConfigNames() {
				if n == name {
					return nil
				}
			}
		}
		return config.ValidateTopicConfig(name, *value)
	}
	s.Defaults.TopicConfigs = map[string]string{"cleanup.policy": "delete", "retention.ms": "604800000"}
	// A stand-in for the node's validator (validateTopicSettings): the
	// storage layer refuses index files of fewer than 4 entries.
	s.ValidateTopic = func(overrides map[string]string) error {
		if n, err := strconv.Atoi(overrides["segment.index.bytes"]); err == nil && n < 32 {
			return errors.New("segment.index.bytes: must be at least 32")
		}
		return nil
	}
	id := metadata.Uuid{7}
	s.Image = mustApply(t, s.Image, &metadata.TopicRecord{Name: "t", TopicID: id},
		&metadata.ConfigRecord{ResourceType: metadata.ConfigResourceTopic, ResourceName: "t", Name: "retention.ms", Value: ptr("1000")},
		&metadata.ConfigRecord{ResourceType: metadata.ConfigResourceTopic, ResourceName: "t", Name: "segment.bytes", Value: ptr("2048")},
		&metadata.PartitionRecord{TopicID: id, PartitionID: 0, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}, Leader: 1})
	return s
}

func ptr(s string) *string { return &s }

func incremental(resource kmsg.ConfigResourceType, name string, ops ...kmsg.IncrementalAlterConfigsRequestResourceConfig) kmsg.IncrementalAlterConfigsRequestResource {
	r := kmsg.NewIncrementalAlterConfigsRequestResource()
	r.ResourceType, r.ResourceName, r.Configs = resource, name, ops
	return r
}

func op(name string, o kmsg.IncrementalAlterConfigOp, value *string) kmsg.IncrementalAlterConfigsRequestResourceConfig {
	c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	c.Name, c.Op, c.Value = name, o, value
	return c
}

func TestIncrementalAlterConfigs(t *testing.T) {
	s := alterTestState(t)
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	req.Resources = append(req.Resources,
		incremental(kmsg.ConfigResourceTypeTopic, "t",
			op("retention.ms", kmsg.IncrementalAlterConfigOpSet, ptr("5000")),
			op("segment.bytes", kmsg.IncrementalAlterConfigOpDelete, nil),
			op("cleanup.policy", kmsg.IncrementalAlterConfigOpAppend, ptr("compact"))))
	resp, res := s.IncrementalAlterConfigs(req)
	require.Len(t, resp.Resources, 1)
	assert.Zero(t, resp.Resources[0].ErrorCode, "%v", resp.Resources[0].ErrorMessage)
	assert.Equal(t, map[string]string{"retention.ms": "5000", "cleanup.policy": "delete,compact"}, res.Image.Topic("t").Configs,
		"APPEND starts from the broker default when the topic has no override")
	assert.Len(t, res.Records, 3, "one record per config that changes")

	// SUBTRACT from the override; a SET to the value it has writes nothing.
	s.Image = res.Image
	req.Resources = []kmsg.IncrementalAlterConfigsRequestResource{incremental(kmsg.ConfigResourceTypeTopic, "t",
		op("cleanup.policy", kmsg.IncrementalAlterConfigOpSubtract, ptr("delete")),
		op("retention.ms", kmsg.IncrementalAlterConfigOpSet, ptr("5000")))}
	resp, res = s.IncrementalAlterConfigs(req)
	assert.Zero(t, resp.Resources[0].ErrorCode)
	assert.Equal(t, "compact", res.Image.Topic("t").Configs["cleanup.policy"])
	assert.Len(t, res.Records, 1)

	// DELETE of what the topic does not set, even an unknown name, changes
	// nothing and succeeds, as in Kafka.
	req.Resources = []kmsg.IncrementalAlterConfigsRequestResource{incremental(kmsg.ConfigResourceTypeTopic, "t",
		op("no.such.config", kmsg.IncrementalAlterConfigOpDelete, nil),
		op("flush.ms", kmsg.IncrementalAlterConfigOpDelete, nil))}
	resp, res = s.IncrementalAlterConfigs(req)
	assert.Zero(t, resp.Resources[0].ErrorCode)
	assert.Empty(t, res.Records)

	// ValidateOnly decides and writes nothing.
	req.ValidateOnly = true
	req.Resources = []kmsg.IncrementalAlterConfigsRequestResource{incremental(kmsg.ConfigResourceTypeTopic, "t",
		op("retention.ms", kmsg.IncrementalAlterConfigOpSet, ptr("9")))}
	resp, res = s.IncrementalAlterConfigs(req)
	assert.Zero(t, resp.Resources[0].ErrorCode)
	assert.Empty(t, res.Records)
}

func TestIncrementalAlterConfigsErrors(t *testing.T) {
	s := alterTestState(t)
	for _, tc := range []struct {
		what     string
		resource kmsg.IncrementalAlterConfigsRequestResource
		code     int16
	}{
		{"missing topic", incremental(kmsg.ConfigResourceTypeTopic, "gone", op("retention.ms", kmsg.IncrementalAlterConfigOpSet, ptr("1"))), kerr.UnknownTopicOrPartition.Code},
		{"bad value", incremental(kmsg.ConfigResourceTypeTopic, "t", op("retention.ms", kmsg.IncrementalAlterConfigOpSet, ptr("soon"))), kerr.InvalidConfig.Code},
		{"unknown name", incremental(kmsg.ConfigResourceTypeTopic, "t", op("no.such.config", kmsg.IncrementalAlterConfigOpSet, ptr("1"))), kerr.InvalidConfig.Code},
		{"storage refuses the set", incremental(kmsg.ConfigResourceTypeTopic, "t", op("segment.index.bytes", kmsg.IncrementalAlterConfigOpSet, ptr("16"))), kerr.InvalidConfig.Code},
		{"append to a non-list", incremental(kmsg.ConfigResourceTypeTopic, "t", op("retention.ms", kmsg.IncrementalAlterConfigOpAppend, ptr("1"))), kerr.InvalidConfig.Code},
		{"append an unknown policy", incremental(kmsg.ConfigResourceTypeTopic, "t", op("cleanup.policy", kmsg.IncrementalAlterConfigOpAppend, ptr("forever"))), kerr.InvalidConfig.Code},
		{"null value", incremental(kmsg.ConfigResourceTypeTopic, "t", op("retention.ms", kmsg.IncrementalAlterConfigOpSet, nil)), kerr.InvalidRequest.Code},
		{"name twice", incremental(kmsg.ConfigResourceTypeTopic, "t", op("retention.ms", kmsg.IncrementalAlterConfigOpSet, ptr("1")), op("retention.ms", kmsg.IncrementalAlterConfigOpDelete, nil)), kerr.InvalidRequest.Code},
		{"unknown op", incremental(kmsg.ConfigResourceTypeTopic, "t", op("retention.ms", 9, ptr("1"))), kerr.InvalidRequest.Code},
		{"broker config", incremental(kmsg.ConfigResourceTypeBroker, "1", op("log.retention.ms", kmsg.IncrementalAlterConfigOpSet, ptr("1"))), kerr.InvalidRequest.Code},
		{"group resource", incremental(kmsg.ConfigResourceType(32), "g", op("x", kmsg.IncrementalAlterConfigOpSet, ptr("1"))), kerr.InvalidRequest.Code},
	} {
		t.Run(tc.what, func(t *testing.T) {
			if tc.resource.ResourceType == kmsg.ConfigResourceTypeTopic && tc.resource.ResourceName == "t" {
				// A good change in the bad resource must not be applied
				// either: each resource succeeds or fails whole.
				tc.resource.Configs = append([]kmsg.IncrementalAlterConfigsRequestResourceConfig{
					op("delete.retention.ms", kmsg.IncrementalAlterConfigOpSet, ptr("5"))}, tc.resource.Configs...)
			}
			req := kmsg.NewPtrIncrementalAlterConfigsRequest()
			// A good resource next to the bad one still succeeds.
			req.Resources = append(req.Resources, tc.resource, incremental(kmsg.ConfigResourceTypeTopic, "t", op("flush.ms", kmsg.IncrementalAlterConfigOpSet, ptr("10"))))
			if tc.resource.ResourceName == "t" && tc.resource.ResourceType == kmsg.ConfigResourceTypeTopic {
				req.Resources = req.Resources[:1]
			}
			resp, res := s.IncrementalAlterConfigs(req)
			assert.Equal(t, tc.code, resp.Resources[0].ErrorCode)
			require.NotNil(t, resp.Resources[0].ErrorMessage)
			assert.NotEmpty(t, *resp.Resources[0].ErrorMessage)
			assert.Equal(t, "1000", res.Image.Topic("t").Configs["retention.ms"], "a failed resource changes nothing")
			assert.NotContains(t, res.Image.Topic("t").Configs, "delete.retention.ms", "a failed resource changes nothing")
			if len(req.Resources) == 2 {
				assert.Zero(t, resp.Resources[1].ErrorCode)
				assert.Equal(t, "10", res.Image.Topic("t").Configs["flush.ms"])
			}
		})
	}

	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	r := incremental(kmsg.ConfigResourceTypeTopic, "t", op("flush.ms", kmsg.IncrementalAlterConfigOpSet, ptr("10")))
	req.Resources = append(req.Resources, r, r)
	resp, res := s.IncrementalAlterConfigs(req)
	assert.Equal(t, kerr.InvalidRequest.Code, resp.Resources[0].ErrorCode)
	assert.Equal(t, kerr.InvalidRequest.Code, resp.Resources[1].ErrorCode)
	assert.Empty(t, res.Records)
}

func TestAlterConfigsReplacesTheOverrides(t *testing.T) {
	s := alterTestState(t)
	req := kmsg.NewPtrAlterConfigsRequest()
	r := kmsg.NewAlterConfigsRequestResource()
	r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeTopic, "t"
	c := kmsg.NewAlterConfigsRequestResourceConfig()
	c.Name, c.Value = "min.insync.replicas", ptr("2")
	r.Configs = append(r.Configs, c)
	req.Resources = append(req.Resources, r)
	resp, res := s.AlterConfigs(req)
	assert.Zero(t, resp.Resources[0].ErrorCode)
	assert.Equal(t, map[string]string{"min.insync.replicas": "2"}, res.Image.Topic("t").Configs,
		"the overrides the request leaves out return to the defaults")

	r.Configs[0].Value = nil
	req.Resources[0] = r
	resp, _ = s.AlterConfigs(req)
	assert.Equal(t, kerr.InvalidRequest.Code, resp.Resources[0].ErrorCode)
}

func TestUncleanConfigElectsLeaderless(t *testing.T) {
	s := alterTestState(t)
	id := metadata.Uuid{8}
	// u-0's only ISR member, 3, is fenced: the partition has no leader.
	s.Image = mustApply(t, s.Image, &metadata.TopicRecord{Name: "u", TopicID: id},
		&metadata.PartitionRecord{TopicID: id, PartitionID: 0, Replicas: []int32{3, 2, 1}, ISR: []int32{3}, Leader: 3})
	fenced, err := s.FenceBroker(3)
	require.NoError(t, err)
	s.Image = fenced.Image
	require.Equal(t, metadata.NoLeader, s.Image.Partition("u", 0).Leader)

	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	req.Resources = append(req.Resources, incremental(kmsg.ConfigResourceTypeTopic, "u",
		op("unclean.leader.election.enable", kmsg.IncrementalAlterConfigOpSet, ptr("true"))))
	resp, res := s.IncrementalAlterConfigs(req)
	assert.Zero(t, resp.Resources[0].ErrorCode)
	p := res.Image.Partition("u", 0)
	assert.Equal(t, int32(2), p.Leader, "the first live replica leads")
	assert.Equal(t, []int32{2}, p.ISR)
	assert.Equal(t, metadata.NoLeader, s.Image.Partition("u", 0).Leader, "decisions do not change the state's image")

	req.ValidateOnly = true
	_, res = s.IncrementalAlterConfigs(req)
	assert.Empty(t, res.Records, "ValidateOnly elects nobody")
}
