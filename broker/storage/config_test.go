package storage

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faultline/faultline/broker/config"
)

// TestDefaultsAreTheBrokerConfigDefaults compares what storage applies when
// given nothing with what broker/config parses for a server.properties that
// sets none of the storage keys.
func TestDefaultsAreTheBrokerConfigDefaults(t *testing.T) {
	cfg, _, err := config.FromMap(map[string]string{
		"process.roles": "broker,controller", "node.id": "1", "controller.quorum.voters": "1@localhost:9093",
		"listeners": "PLAINTEXT://localhost:9092,CONTROLLER://localhost:9093", "controller.listener.names": "CONTROLLER",
	})
	require.NoError(t, err)
	tc, err := cfg.TopicConfig(nil)
	require.NoError(t, err)
	require.Len(t, tc.CleanupPolicy, 1)
	assert.Equal(t, LogConfig{
		SegmentBytes:                int64(tc.SegmentBytes),
		SegmentMs:                   tc.SegmentMs,
		IndexIntervalBytes:          tc.IndexIntervalBytes,
		SegmentIndexBytes:           tc.SegmentIndexBytes,
		FlushIntervalMessages:       tc.FlushMessages,
		FlushIntervalMs:             tc.FlushMs,
		RetentionMs:                 tc.RetentionMs,
		RetentionBytes:              tc.RetentionBytes,
		MaxMessageBytes:             tc.MaxMessageBytes,
		MessageTimestampType:        tc.MessageTimestampType,
		MessageTimestampBeforeMaxMs: tc.MessageTimestampBeforeMaxMs,
		MessageTimestampAfterMaxMs:  tc.MessageTimestampAfterMaxMs,
		CompressionType:             tc.CompressionType,
		CleanupPolicy:               tc.CleanupPolicy[0],
		DeleteRetentionMs:           tc.DeleteRetentionMs,
		MinCompactionLagMs:          tc.MinCompactionLagMs,
		MinCleanableDirtyRatio:      tc.MinCleanableDirtyRatio,
	}, DefaultLogConfig())

	m, err := NewLogManager(OS, []string{t.TempDir()}, ManagerOptions{})
	require.NoError(t, err)
	assert.Equal(t, int(cfg.NumRecoveryThreadsPerDataDir), m.opts.RecoveryThreadsPerDataDir)
	assert.Equal(t, DefaultLogConfig(), m.opts.DefaultLogConfig)
	assert.Equal(t, cfg.ReplicaHighWatermarkCheckpointIntervalMs, m.opts.HighWatermarkCheckpointIntervalMs)
	assert.Equal(t, cfg.LogFlushOffsetCheckpointIntervalMs, m.opts.RecoveryPointCheckpointIntervalMs)
	assert.Equal(t, cfg.LogFlushStartOffsetCheckpointIntervalMs, m.opts.RecoveryPointCheckpointIntervalMs)
	assert.Equal(t, cfg.LogRetentionCheckIntervalMs, m.opts.RetentionCheckIntervalMs)
	assert.Equal(t, cfg.ProducerIDExpirationMs, m.opts.ProducerIDExpirationMs)
	assert.Equal(t, cfg.LogCleanerEnable, !m.opts.Cleaner.Disabled)
	assert.Equal(t, int(cfg.LogCleanerThreads), m.opts.Cleaner.Threads)
	assert.Equal(t, cfg.LogCleanerBackoffMs, m.opts.Cleaner.BackoffMs)
	assert.Equal(t, cfg.LogCleanerDedupeBufferSize, m.opts.Cleaner.DedupeBufferSize)
}
