package config

import (
	"fmt"
	"sort"
	"strings"
)

// TopicConfig is the effective configuration of one topic: the broker's
// defaults with the topic's overrides applied. Durations are in ms.
//
// cleanup.policy: "delete", "compact" or both. With "compact" the log
// cleaner keeps the last value of every key (see Compacts); as in Kafka,
// retention by time and size deletes segments only when the policy includes
// "delete" (see DeletesByRetention).
type TopicConfig struct {
	// CleanupPolicy is cleanup.policy (<- log.cleanup.policy, default delete).
	CleanupPolicy []string
	// SegmentBytes is segment.bytes (<- log.segment.bytes).
	SegmentBytes int32
	// SegmentMs is segment.ms (<- log.roll.ms / log.roll.hours).
	SegmentMs int64
	// SegmentJitterMs is segment.jitter.ms (<- log.roll.jitter.ms).
	SegmentJitterMs int64
	// SegmentIndexBytes is segment.index.bytes (<- log.index.size.max.bytes).
	SegmentIndexBytes int32
	// IndexIntervalBytes is index.interval.bytes (<- log.index.interval.bytes).
	IndexIntervalBytes int32
	// FlushMessages is flush.messages (<- log.flush.interval.messages).
	FlushMessages int64
	// FlushMs is flush.ms (<- log.flush.interval.ms).
	FlushMs int64
	// RetentionMs is retention.ms (<- log.retention.*); -1 is unlimited.
	RetentionMs int64
	// RetentionBytes is retention.bytes (<- log.retention.bytes); -1 is unlimited.
	RetentionBytes int64
	// MinInsyncReplicas is min.insync.replicas (<- min.insync.replicas).
	MinInsyncReplicas int32
	// UncleanLeaderElectionEnable is unclean.leader.election.enable (<- same key).
	UncleanLeaderElectionEnable bool
	// MaxMessageBytes is max.message.bytes (<- message.max.bytes).
	MaxMessageBytes int32
	// MessageTimestampType is message.timestamp.type (<- log.message.timestamp.type).
	MessageTimestampType string
	// MessageTimestampBeforeMaxMs is message.timestamp.before.max.ms
	// (<- log.message.timestamp.before.max.ms).
	MessageTimestampBeforeMaxMs int64
	// MessageTimestampAfterMaxMs is message.timestamp.after.max.ms
	// (<- log.message.timestamp.after.max.ms).
	MessageTimestampAfterMaxMs int64
	// CompressionType is compression.type (<- compression.type).
	CompressionType string
	// Preallocate is preallocate (<- log.preallocate).
	Preallocate bool
	// FileDeleteDelayMs is file.delete.delay.ms (<- log.segment.delete.delay.ms).
	FileDeleteDelayMs int64
	// DeleteRetentionMs is delete.retention.ms (<- log.cleaner.delete.retention.ms):
	// how long a tombstone survives after the cleaner first kept it.
	DeleteRetentionMs int64
	// MinCompactionLagMs is min.compaction.lag.ms (<- log.cleaner.min.compaction.lag.ms).
	MinCompactionLagMs int64
	// MaxCompactionLagMs is max.compaction.lag.ms (<- log.cleaner.max.compaction.lag.ms); accepted only.
	MaxCompactionLagMs int64
	// MinCleanableDirtyRatio is min.cleanable.dirty.ratio (<- log.cleaner.min.cleanable.ratio).
	MinCleanableDirtyRatio float64
}

// DeletesByRetention reports whether retention.ms and retention.bytes delete
// old segments of this topic (cleanup.policy includes delete).
func (t TopicConfig) DeletesByRetention() bool { return contains(t.CleanupPolicy, "delete") }

// Compacts reports whether the log cleaner compacts this topic
// (cleanup.policy includes compact).
func (t TopicConfig) Compacts() bool { return contains(t.CleanupPolicy, "compact") }

// topicKey is one topic-level key, the broker key it defaults from, and the
// TopicConfig field it fills.
type topicKey struct {
	keyDef
	brokerKey  string
	topicField func(*TopicConfig) any
}

func tkey(name string, k kind, brokerKey string, field func(*TopicConfig) any) topicKey {
	return topicKey{keyDef: keyDef{name: name, kind: k}, brokerKey: brokerKey, topicField: field}
}

func (t topicKey) atLeast(n int64) topicKey { t.keyDef = t.keyDef.atLeast(n); return t }

func (t topicKey) in(values ...string) topicKey { t.keyDef = t.keyDef.in(values...); return t }

// topicKeys lists the topic-level keys faultline accepts.
var topicKeys = []topicKey{
	tkey("cleanup.policy", kindList, "log.cleanup.policy", func(t *TopicConfig) any { return &t.CleanupPolicy }).in("delete", "compact"),
	tkey("segment.bytes", kindInt, "log.segment.bytes", func(t *TopicConfig) any { return &t.SegmentBytes }).atLeast(14),
	tkey("segment.ms", kindLong, "log.roll.ms", func(t *TopicConfig) any { return &t.SegmentMs }).atLeast(1),
	tkey("segment.jitter.ms", kindLong, "log.roll.jitter.ms", func(t *TopicConfig) any { return &t.SegmentJitterMs }).atLeast(0),
	tkey("segment.index.bytes", kindInt, "log.index.size.max.bytes", func(t *TopicConfig) any { return &t.SegmentIndexBytes }).atLeast(4),
	tkey("index.interval.bytes", kindInt, "log.index.interval.bytes", func(t *TopicConfig) any { return &t.IndexIntervalBytes }).atLeast(0),
	tkey("flush.messages", kindLong, "log.flush.interval.messages", func(t *TopicConfig) any { return &t.FlushMessages }).atLeast(1),
	tkey("flush.ms", kindLong, "log.flush.interval.ms", func(t *TopicConfig) any { return &t.FlushMs }).atLeast(0),
	tkey("retention.ms", kindLong, "log.retention.ms", func(t *TopicConfig) any { return &t.RetentionMs }).atLeast(-1),
	tkey("retention.bytes", kindLong, "log.retention.bytes", func(t *TopicConfig) any { return &t.RetentionBytes }),
	tkey("min.insync.replicas", kindInt, "min.insync.replicas", func(t *TopicConfig) any { return &t.MinInsyncReplicas }).atLeast(1),
	tkey("unclean.leader.election.enable", kindBool, "unclean.leader.election.enable", func(t *TopicConfig) any { return &t.UncleanLeaderElectionEnable }),
	tkey("max.message.bytes", kindInt, "message.max.bytes", func(t *TopicConfig) any { return &t.MaxMessageBytes }).atLeast(0),
	tkey("message.timestamp.type", kindString, "log.message.timestamp.type", func(t *TopicConfig) any { return &t.MessageTimestampType }).in("CreateTime", "LogAppendTime"),
	tkey("message.timestamp.before.max.ms", kindLong, "log.message.timestamp.before.max.ms", func(t *TopicConfig) any { return &t.MessageTimestampBeforeMaxMs }).atLeast(0),
	tkey("message.timestamp.after.max.ms", kindLong, "log.message.timestamp.after.max.ms", func(t *TopicConfig) any { return &t.MessageTimestampAfterMaxMs }).atLeast(0),
	tkey("compression.type", kindString, "compression.type", func(t *TopicConfig) any { return &t.CompressionType }).in(compressionTypes...),
	tkey("preallocate", kindBool, "log.preallocate", func(t *TopicConfig) any { return &t.Preallocate }),
	tkey("file.delete.delay.ms", kindLong, "log.segment.delete.delay.ms", func(t *TopicConfig) any { return &t.FileDeleteDelayMs }).atLeast(0),
	tkey("delete.retention.ms", kindLong, "log.cleaner.delete.retention.ms", func(t *TopicConfig) any { return &t.DeleteRetentionMs }).atLeast(0),
	tkey("min.compaction.lag.ms", kindLong, "log.cleaner.min.compaction.lag.ms", func(t *TopicConfig) any { return &t.MinCompactionLagMs }).atLeast(0),
	tkey("max.compaction.lag.ms", kindLong, "log.cleaner.max.compaction.lag.ms", func(t *TopicConfig) any { return &t.MaxCompactionLagMs }).atLeast(1),
	tkey("min.cleanable.dirty.ratio", kindDouble, "log.cleaner.min.cleanable.ratio", func(t *TopicConfig) any { return &t.MinCleanableDirtyRatio }),
}

var topicKeyIndex = func() map[string]*topicKey {
	m := make(map[string]*topicKey, len(topicKeys))
	for i := range topicKeys {
		m[topicKeys[i].name] = &topicKeys[i]
	}
	return m
}()

// TopicConfigNames lists the topic-level keys faultline accepts, sorted.
func TopicConfigNames() []string {
	names := make([]string, 0, len(topicKeys))
	for i := range topicKeys {
		names = append(names, topicKeys[i].name)
	}
	sort.Strings(names)
	return names
}

// TopicDefaults maps every topic-level key to its effective default on this
// broker, taken from the broker key it defaults from.
func (c *Config) TopicDefaults() map[string]string {
	m := make(map[string]string, len(topicKeys))
	for i := range topicKeys {
		m[topicKeys[i].name] = c.values[topicKeys[i].brokerKey]
	}
	return m
}

// TopicConfigIsList reports whether a topic-level key holds a
// comma-separated list (cleanup.policy), the only kind IncrementalAlterConfigs
// may APPEND to or SUBTRACT from.
func TopicConfigIsList(name string) bool {
	t := topicKeyIndex[name]
	return t != nil && t.kind == kindList
}

// ValidateTopicConfig checks one topic-level key and value, as CreateTopics
// and AlterConfigs must before accepting them. Its error reads
// "key: what is wrong".
func ValidateTopicConfig(name, value string) error {
	_, err := parseTopicValue(name, value)
	return err
}

func parseTopicValue(name, value string) (any, error) {
	t := topicKeyIndex[name]
	if t == nil {
		return nil, fmt.Errorf("%s: unknown topic config; known ones are %s", name, strings.Join(TopicConfigNames(), ", "))
	}
	v, err := t.parseValue(strings.TrimSpace(value))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return v, nil
}

// TopicConfig returns a topic's effective configuration: the broker defaults
// with overrides (topic key -> value) applied. The error, an *Error, lists
// every bad override.
func (c *Config) TopicConfig(overrides map[string]string) (TopicConfig, error) {
	var t TopicConfig
	var problems []string
	defaults := c.TopicDefaults()
	for i := range topicKeys {
		k := &topicKeys[i]
		text, overridden := overrides[k.name]
		if !overridden {
			text = defaults[k.name]
		}
		v, err := parseTopicValue(k.name, text)
		if err != nil {
			problems = append(problems, err.Error())
			continue
		}
		assign(k.topicField(&t), v)
	}
	names := make([]string, 0, len(overrides))
	for name := range overrides {
		if topicKeyIndex[name] == nil {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	for _, name := range names {
		problems = append(problems, ValidateTopicConfig(name, overrides[name]).Error())
	}
	if err := asError(problems); err != nil {
		return TopicConfig{}, err
	}
	return t, nil
}

// TopicEntries returns every topic-level key with its effective value for a
// topic with the given overrides, sorted by name, for DescribeConfigs on a
// topic resource. Overrides that are not topic keys are left out.
func (c *Config) TopicEntries(overrides map[string]string) []Entry {
	defaults := c.TopicDefaults()
	out := make([]Entry, 0, len(topicKeys))
	for _, name := range TopicConfigNames() {
		v, overridden := overrides[name]
		if !overridden {
			v = defaults[name]
		}
		out = append(out, Entry{Name: name, Value: strings.TrimSpace(v), IsDefault: !overridden})
	}
	return out
}
