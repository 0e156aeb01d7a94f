package config

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestTopicDefaultsFollowBrokerKeys(t *testing.T) {
	c, _ := mustFromMap(t, with(combined(), map[string]string{
		"log.segment.bytes": "1048576", "log.roll.hours": "1", "log.retention.minutes": "10", "log.retention.bytes": "5000",
		"min.insync.replicas": "1", "unclean.leader.election.enable": "true", "message.max.bytes": "2000000",
		"log.message.timestamp.type": "LogAppendTime", "log.flush.interval.messages": "1", "log.index.interval.bytes": "100",
		"log.index.size.max.bytes": "4096", "log.cleanup.policy": "compact,delete",
	}))
	d := c.TopicDefaults()
	assert.Len(t, d, len(topicKeys))
	assert.Equal(t, "1048576", d["segment.bytes"])
	assert.Equal(t, "3600000", d["segment.ms"])
	assert.Equal(t, "600000", d["retention.ms"])
	assert.Equal(t, "5000", d["retention.bytes"])
	assert.Equal(t, "1", d["min.insync.replicas"])
	assert.Equal(t, "true", d["unclean.leader.election.enable"])
	assert.Equal(t, "2000000", d["max.message.bytes"])
	assert.Equal(t, "LogAppendTime", d["message.timestamp.type"])
	assert.Equal(t, "1", d["flush.messages"])
	assert.Equal(t, "9223372036854775807", d["flush.ms"])
	assert.Equal(t, "100", d["index.interval.bytes"])
	assert.Equal(t, "4096", d["segment.index.bytes"])
	assert.Equal(t, "compact,delete", d["cleanup.policy"])
	assert.Equal(t, "producer", d["compression.type"])
	assert.Equal(t, "86400000", d["delete.retention.ms"])
}

func TestTopicConfig(t *testing.T) {
	c, _ := mustFromMap(t, combined())
	tc, err := c.TopicConfig(map[string]string{"retention.ms": "1000", "segment.bytes": " 4096 ", "min.insync.replicas": "2", "cleanup.policy": "compact"})
	require.NoError(t, err)
	assert.Equal(t, TopicConfig{
		CleanupPolicy:               []string{"compact"},
		SegmentBytes:                4096,
		SegmentMs:                   604800000,
		SegmentJitterMs:             0,
		SegmentIndexBytes:           10485760,
		IndexIntervalBytes:          4096,
		FlushMessages:               9223372036854775807,
		FlushMs:                     9223372036854775807,
		RetentionMs:                 1000,
		RetentionBytes:              -1,
		MinInsyncReplicas:           2,
		UncleanLeaderElectionEnable: false,
		MaxMessageBytes:             1048588,
		MessageTimestampType:        "CreateTime",
		MessageTimestampBeforeMaxMs: 9223372036854775807,
		MessageTimestampAfterMaxMs:  3600000,
		CompressionType:             "producer",
		Preallocate:                 false,
		FileDeleteDelayMs:           60000,
		DeleteRetentionMs:           86400000,
		MinCompactionLagMs:          0,
		MaxCompactionLagMs:          9223372036854775807,
		MinCleanableDirtyRatio:      0.5,
	}, tc)
	assert.False(t, tc.DeletesByRetention(), "a compact-only topic is not deleted by retention")

	tc, err = c.TopicConfig(nil)
	require.NoError(t, err)
	assert.True(t, tc.DeletesByRetention())
	assert.Equal(t, int64(604800000), tc.RetentionMs)
}

func TestTopicConfigErrors(t *testing.T) {
	c, _ := mustFromMap(t, combined())
	_, err := c.TopicConfig(map[string]string{"segment.bytes": "10", "retention.ms": "-2", "cleanup.policy": "shred", "bogus": "1"})
	require.Error(t, err)
	assert.Equal(t, []string{
		`cleanup.policy: must be a comma-separated list of delete, compact, got "shred"`,
		`segment.bytes: must be an integer >= 14, got "10"`,
		`retention.ms: must be an integer >= -1, got "-2"`,
		"bogus: unknown topic config; known ones are " + joinNames(),
	}, Problems(err))
}

func joinNames() string {
	s := ""
	for i, n := range TopicConfigNames() {
		if i > 0 {
			s += ", "
		}
		s += n
	}
	return s
}

func TestValidateTopicConfig(t *testing.T) {
	tests := []struct {
		name, value, want string
	}{
		{"segment.bytes", "1048576", ""},
		{"segment.bytes", "abc", `segment.bytes: must be an integer >= 14, got "abc"`},
		{"segment.ms", "0", `segment.ms: must be an integer >= 1, got "0"`},
		{"retention.ms", "-1", ""},
		{"retention.bytes", "-1", ""},
		{"min.insync.replicas", "0", `min.insync.replicas: must be an integer >= 1, got "0"`},
		{"unclean.leader.election.enable", "TRUE", ""},
		{"unclean.leader.election.enable", "1", `unclean.leader.election.enable: must be true or false, got "1"`},
		{"max.message.bytes", "-5", `max.message.bytes: must be an integer >= 0, got "-5"`},
		{"message.timestamp.type", "LogAppendTime", ""},
		{"message.timestamp.type", "Now", `message.timestamp.type: must be one of CreateTime, LogAppendTime, got "Now"`},
		{"flush.messages", "0", `flush.messages: must be an integer >= 1, got "0"`},
		{"flush.ms", "0", ""},
		{"index.interval.bytes", "0", ""},
		{"segment.index.bytes", "3", `segment.index.bytes: must be an integer >= 4, got "3"`},
		{"cleanup.policy", "delete", ""},
		{"cleanup.policy", "compact", ""},
		{"cleanup.policy", "compact,delete", ""},
		{"cleanup.policy", "delete,delete", `cleanup.policy: lists delete twice, got "delete,delete"`},
		{"min.cleanable.dirty.ratio", "0.1", ""},
		{"remote.storage.enable", "true", "remote.storage.enable: unknown topic config; known ones are " + joinNames()},
	}
	for _, tt := range tests {
		t.Run(tt.name+"="+tt.value, func(t *testing.T) {
			err := ValidateTopicConfig(tt.name, tt.value)
			if tt.want == "" {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Equal(t, tt.want, err.Error())
		})
	}
}

func TestTopicEntries(t *testing.T) {
	c, _ := mustFromMap(t, combined())
	entries := c.TopicEntries(map[string]string{"retention.ms": "1000", "not.a.topic.key": "x"})
	require.Len(t, entries, len(topicKeys))
	byName := map[string]Entry{}
	for _, e := range entries {
		byName[e.Name] = e
	}
	assert.Equal(t, Entry{Name: "retention.ms", Value: "1000"}, byName["retention.ms"])
	assert.Equal(t, Entry{Name: "segment.bytes", Value: "1073741824", IsDefault: true}, byName["segment.bytes"])
	assert.Equal(t, "cleanup.policy", entries[0].Name, "sorted by name")
}
