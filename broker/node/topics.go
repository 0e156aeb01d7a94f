package node

import (
	"fmt"
	"slices"

	"github.com/faultline/faultline/broker/config"
	"github.com/faultline/faultline/broker/controller"
	"github.com/faultline/faultline/broker/metadata"
	"github.com/faultline/faultline/broker/replica"
	"github.com/faultline/faultline/broker/server"
	"github.com/faultline/faultline/broker/storage"
)

// logConfigOf maps a topic's effective configuration onto the storage
// engine's per-log settings.
func logConfigOf(tc config.TopicConfig) storage.LogConfig {
	lc := storage.DefaultLogConfig()
	lc.SegmentBytes = int64(tc.SegmentBytes)
	lc.SegmentMs = tc.SegmentMs
	lc.IndexIntervalBytes = tc.IndexIntervalBytes
	lc.SegmentIndexBytes = tc.SegmentIndexBytes
	lc.FlushIntervalMessages = tc.FlushMessages
	lc.FlushIntervalMs = tc.FlushMs
	lc.RetentionMs, lc.RetentionBytes = -1, -1
	if tc.DeletesByRetention() {
		lc.RetentionMs, lc.RetentionBytes = tc.RetentionMs, tc.RetentionBytes
	}
	lc.MaxMessageBytes = tc.MaxMessageBytes
	lc.MessageTimestampType = tc.MessageTimestampType
	lc.MessageTimestampBeforeMaxMs = tc.MessageTimestampBeforeMaxMs
	lc.MessageTimestampAfterMaxMs = tc.MessageTimestampAfterMaxMs
	lc.CompressionType = tc.CompressionType
	lc.CleanupPolicy = storage.CleanupDelete
	if tc.Compacts() {
		lc.CleanupPolicy = storage.CleanupCompact
		if tc.DeletesByRetention() {
			lc.CleanupPolicy = storage.CleanupCompactDelete
		}
	}
	lc.DeleteRetentionMs = tc.DeleteRetentionMs
	lc.MinCompactionLagMs = tc.MinCompactionLagMs
	lc.MinCleanableDirtyRatio = tc.MinCleanableDirtyRatio
	return lc
}

// defaultLogConfig is the log configuration of a topic without overrides
// (and of the logs the log manager loads before the image names their
// topic's overrides).
func defaultLogConfig(cfg *config.Config) (storage.LogConfig, error) {
	tc, err := cfg.TopicConfig(nil)
	if err != nil {
		return storage.LogConfig{}, fmt.Errorf("topic defaults: %w", err)
	}
	return logConfigOf(tc), nil
}

// topicSettings turns a topic's config overrides into its effective
// settings (the replica manager's TopicSettings).
func topicSettings(cfg *config.Config) func(map[string]string) (replica.Settings, error) {
	return func(overrides map[string]string) (replica.Settings, error) {
		tc, err := cfg.TopicConfig(overrides)
		if err != nil {
			return replica.Settings{}, err
		}
		return replica.Settings{Log: logConfigOf(tc), MinInsyncReplicas: int(tc.MinInsyncReplicas)}, nil
	}
}

// validateTopicConfig is the controller's check of one topic config in
// CreateTopics; its error goes to the client with INVALID_CONFIG. A null
// value (use the default) is fine for any known key.
func validateTopicConfig(name string, value *string) error {
	if value == nil {
		if !slices.Contains(config.TopicConfigNames(), name) {
			return config.ValidateTopicConfig(name, "")
		}
		return nil
	}
	return config.ValidateTopicConfig(name, *value)
}

// validateTopicSettings is the controller's check of a topic's whole set
// of overrides: the settings its brokers will derive from them
// (topicSettings) and the log's own limits (storage.LogConfig.Validate),
// so that a config the controller accepts never fails a broker's
// SetConfig.
func validateTopicSettings(cfg *config.Config) controller.TopicValidator {
	settings := topicSettings(cfg)
	return func(overrides map[string]string) error {
		s, err := settings(overrides)
		if err != nil {
			return err
		}
		return s.Log.Validate()
	}
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

func toConfigEntry(e config.Entry, setSource int8) server.ConfigEntry {
	src := setSource
	if e.IsDefault {
		src = sourceDefaultConfig
	}
	ce := server.ConfigEntry{Name: e.Name, ReadOnly: e.ReadOnly, IsDefault: e.IsDefault, Sensitive: e.Sensitive, Source: src}
	if !e.Sensitive {
		v := e.Value
		ce.Value = &v
	}
	return ce
}

func (c configSource) BrokerConfigs() []server.ConfigEntry {
	entries := c.cfg.Entries()
	out := make([]server.ConfigEntry, 0, len(entries))
	for _, e := range entries {
		out = append(out, toConfigEntry(e, sourceStaticBroker))
	}
	return out
}

func (c configSource) TopicConfigs(topic string) ([]server.ConfigEntry, bool) {
	t := c.md.Image().Topic(topic)
	if t == nil {
		return nil, false
	}
	entries := c.cfg.TopicEntries(t.Configs)
	out := make([]server.ConfigEntry, 0, len(entries))
	for _, e := range entries {
		out = append(out, toConfigEntry(e, sourceTopic))
	}
	return out, true
}
