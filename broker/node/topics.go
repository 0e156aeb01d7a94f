package node

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/faultline/faultline/broker/config"
	"github.com/faultline/faultline/broker/metadata"
	"github.com/faultline/faultline/broker/replica"
	"github.com/faultline/faultline/broker/server"
	"github.com/faultline/faultline/broker/storage"
)

// topicKey is one topic-level config key: how to read the broker's default
// and how to apply an override to a topic's settings.
type topicKey struct {
	name string
	// def renders the broker-wide default (the matching log.* key).
	def func(cfg *config.Config) string
	// apply validates value and sets it on s; nil for keys accepted and
	// reported but not acted on.
	apply func(s *replica.Settings, value string) error
}

func parseInt(value string, lo, hi int64) (int64, error) {
	v, err := strconv.ParseInt(strings.TrimSpace(value), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%q is not a whole number", value)
	}
	if v < lo || v > hi {
		return 0, fmt.Errorf("%d is outside [%d, %d]", v, lo, hi)
	}
	return v, nil
}

func i64(get func(*config.Config) int64) func(*config.Config) string {
	return func(c *config.Config) string { return strconv.FormatInt(get(c), 10) }
}

const maxInt64 = int64(^uint64(0) >> 1)

// topicKeys are the topic configs faultline knows, with Kafka's names.
var topicKeys = []topicKey{
	{"cleanup.policy", func(c *config.Config) string { return strings.Join(c.LogCleanupPolicy, ",") }, func(_ *replica.Settings, v string) error {
		for _, p := range strings.Split(v, ",") {
			if p = strings.TrimSpace(p); p != "delete" && p != "compact" {
				return fmt.Errorf("%q is not delete or compact", p)
			}
		}
		return nil
	}},
	{"compression.type", func(c *config.Config) string { return c.CompressionType }, func(_ *replica.Settings, v string) error {
		switch v {
		case "producer", "uncompressed", "gzip", "snappy", "lz4", "zstd":
			return nil
		}
		return fmt.Errorf("%q is not one of producer, uncompressed, gzip, snappy, lz4, zstd", v)
	}},
	{"flush.messages", i64(func(c *config.Config) int64 { return c.LogFlushIntervalMessages }), func(s *replica.Settings, v string) error {
		n, err := parseInt(v, 1, maxInt64)
		s.Log.FlushIntervalMessages = n
		return err
	}},
	{"flush.ms", i64(func(c *config.Config) int64 { return c.LogFlushIntervalMs }), func(s *replica.Settings, v string) error {
		n, err := parseInt(v, 0, maxInt64)
		s.Log.FlushIntervalMs = n
		return err
	}},
	{"index.interval.bytes", i64(func(c *config.Config) int64 { return int64(c.LogIndexIntervalBytes) }), func(s *replica.Settings, v string) error {
		n, err := parseInt(v, 0, 1<<31-1)
		s.Log.IndexIntervalBytes = int32(n)
		return err
	}},
	{"max.message.bytes", i64(func(c *config.Config) int64 { return int64(c.MessageMaxBytes) }), func(s *replica.Settings, v string) error {
		n, err := parseInt(v, 0, 1<<31-1)
		s.Log.MaxMessageBytes = int32(n)
		return err
	}},
	{"message.timestamp.type", func(c *config.Config) string { return c.LogMessageTimestampType }, func(s *replica.Settings, v string) error {
		if v != storage.TimestampCreateTime && v != storage.TimestampLogAppendTime {
			return fmt.Errorf("%q is not CreateTime or LogAppendTime", v)
		}
		s.Log.MessageTimestampType = v
		return nil
	}},
	{"min.insync.replicas", i64(func(c *config.Config) int64 { return int64(c.MinInsyncReplicas) }), func(s *replica.Settings, v string) error {
		n, err := parseInt(v, 1, 1<<31-1)
		s.MinInsyncReplicas = int(n)
		return err
	}},
	{"retention.bytes", i64(func(c *config.Config) int64 { return c.LogRetentionBytes }), func(s *replica.Settings, v string) error {
		n, err := parseInt(v, -1<<63, maxInt64)
		s.Log.RetentionBytes = n
		return err
	}},
	{"retention.ms", i64(func(c *config.Config) int64 { return c.LogRetentionMs }), func(s *replica.Settings, v string) error {
		n, err := parseInt(v, -1, maxInt64)
		s.Log.RetentionMs = n
		return err
	}},
	{"segment.bytes", i64(func(c *config.Config) int64 { return int64(c.LogSegmentBytes) }), func(s *replica.Settings, v string) error {
		n, err := parseInt(v, 14, 1<<31-1)
		s.Log.SegmentBytes = n
		return err
	}},
	{"segment.index.bytes", i64(func(c *config.Config) int64 { return int64(c.LogIndexSizeMaxBytes) }), func(s *replica.Settings, v string) error {
		n, err := parseInt(v, 4, 1<<31-1)
		s.Log.SegmentIndexBytes = int32(n)
		return err
	}},
	{"segment.ms", i64(func(c *config.Config) int64 { return c.LogRollMs }), func(s *replica.Settings, v string) error {
		n, err := parseInt(v, 1, maxInt64)
		s.Log.SegmentMs = n
		return err
	}},
	{"unclean.leader.election.enable", func(c *config.Config) string { return strconv.FormatBool(c.UncleanLeaderElectionEnable) }, func(_ *replica.Settings, v string) error {
		if v != "true" && v != "false" {
			return fmt.Errorf("%q is not true or false", v)
		}
		return nil
	}},
}

func findTopicKey(name string) *topicKey {
	for i := range topicKeys {
		if topicKeys[i].name == name {
			return &topicKeys[i]
		}
	}
	return nil
}

// brokerSettings are the settings of a topic without overrides.
func brokerSettings(cfg *config.Config) replica.Settings {
	return replica.Settings{Log: defaultLogConfig(cfg), MinInsyncReplicas: int(cfg.MinInsyncReplicas)}
}

// topicSettings turns a topic's config overrides into its effective
// settings (the replica manager's TopicSettings).
func topicSettings(cfg *config.Config) func(map[string]string) (replica.Settings, error) {
	return func(overrides map[string]string) (replica.Settings, error) {
		s := brokerSettings(cfg)
		for name, v := range overrides {
			k := findTopicKey(name)
			if k == nil {
				continue // validated at creation; unknown keys are carried, not applied
			}
			if err := k.apply(&s, v); err != nil {
				return s, fmt.Errorf("topic config %s: %w", name, err)
			}
		}
		if err := s.Log.Validate(); err != nil {
			return s, err
		}
		return s, nil
	}
}

// validateTopicConfig is the controller's check of a topic config in
// CreateTopics; its error goes to the client with INVALID_CONFIG.
func validateTopicConfig(name string, value *string) error {
	k := findTopicKey(name)
	if k == nil {
		return fmt.Errorf("unknown topic config %s", name)
	}
	if value == nil {
		return nil
	}
	var s replica.Settings
	if err := k.apply(&s, *value); err != nil {
		return fmt.Errorf("invalid value for %s: %w", name, err)
	}
	return nil
}

// configSource answers DescribeConfigs from the broker configuration and
// the topic overrides in the metadata image.
type configSource struct {
	cfg *config.Config
	md  metadata.Source
}

var _ server.ConfigSource = configSource{}

// Kafka's DescribeConfigs sources.
const (
	sourceTopic         int8 = 1
	sourceStaticBroker  int8 = 4
	sourceDefaultConfig int8 = 5
)

func (c configSource) BrokerConfigs() []server.ConfigEntry {
	entries := c.cfg.Entries()
	out := make([]server.ConfigEntry, 0, len(entries))
	for _, e := range entries {
		src := sourceStaticBroker
		if e.IsDefault {
			src = sourceDefaultConfig
		}
		ce := server.ConfigEntry{Name: e.Name, ReadOnly: e.ReadOnly, IsDefault: e.IsDefault, Sensitive: e.Sensitive, Source: src}
		if !e.Sensitive {
			v := e.Value
			ce.Value = &v
		}
		out = append(out, ce)
	}
	return out
}

func (c configSource) TopicConfigs(topic string) ([]server.ConfigEntry, bool) {
	t := c.md.Image().Topic(topic)
	if t == nil {
		return nil, false
	}
	out := make([]server.ConfigEntry, 0, len(topicKeys)+len(t.Configs))
	seen := map[string]bool{}
	for _, k := range topicKeys {
		seen[k.name] = true
		if v, ok := t.Configs[k.name]; ok {
			out = append(out, server.ConfigEntry{Name: k.name, Value: &v, Source: sourceTopic})
			continue
		}
		v := k.def(c.cfg)
		out = append(out, server.ConfigEntry{Name: k.name, Value: &v, IsDefault: true, Source: sourceDefaultConfig})
	}
	var extra []string
	for name := range t.Configs {
		if !seen[name] {
			extra = append(extra, name)
		}
	}
	sort.Strings(extra)
	for _, name := range extra {
		v := t.Configs[name]
		out = append(out, server.ConfigEntry{Name: name, Value: &v, Source: sourceTopic})
	}
	return out, true
}
