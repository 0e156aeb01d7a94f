package config

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// combined is a valid single-node broker+controller configuration.
func combined() map[string]string {
	return map[string]string{
		"process.roles":             "broker,controller",
		"node.id":                   "1",
		"controller.quorum.voters":  "1@localhost:9093",
		"listeners":                 "PLAINTEXT://:9092,CONTROLLER://:9093",
		"advertised.listeners":      "PLAINTEXT://localhost:9092",
		"controller.listener.names": "CONTROLLER",
		"log.dirs":                  "/tmp/faultline-test",
	}
}

func brokerOnly() map[string]string {
	return map[string]string{
		"process.roles":             "broker",
		"node.id":                   "4",
		"controller.quorum.voters":  "1@c1:9093,2@c2:9093,3@c3:9093",
		"listeners":                 "PLAINTEXT://b4:9092",
		"controller.listener.names": "CONTROLLER",
		"log.dirs":                  "/tmp/faultline-test",
	}
}

func controllerOnly() map[string]string {
	return map[string]string{
		"process.roles":             "controller",
		"node.id":                   "1",
		"controller.quorum.voters":  "1@c1:9093,2@c2:9093,3@c3:9093",
		"listeners":                 "CONTROLLER://c1:9093",
		"controller.listener.names": "CONTROLLER",
		"log.dirs":                  "/tmp/faultline-test",
	}
}

// with returns base with the changes applied; an empty change value of "-"
// deletes the key.
func with(base map[string]string, changes map[string]string) map[string]string {
	for k, v := range changes {
		if v == "-" {
			delete(base, k)
		} else {
			base[k] = v
		}
	}
	return base
}

func mustFromMap(t *testing.T, m map[string]string) (*Config, []string) {
	t.Helper()
	c, warnings, err := FromMap(m)
	require.NoError(t, err)
	require.NotNil(t, c)
	return c, warnings
}

func TestLoadTestdataCombined(t *testing.T) {
	c, warnings, err := Load("testdata/server.properties")
	require.NoError(t, err)
	assert.Empty(t, warnings)
	assert.Equal(t, int32(1), c.NodeID)
	assert.True(t, c.IsBroker())
	assert.True(t, c.IsController())
	assert.Equal(t, []Listener{{Name: "PLAINTEXT", Port: 9092}, {Name: "CONTROLLER", Port: 9093}}, c.Listeners)
	assert.Equal(t, []Listener{{Name: "PLAINTEXT", Host: "localhost", Port: 9092}}, c.AdvertisedListeners)
	assert.Equal(t, []Listener{{Name: "CONTROLLER", Port: 9093}}, c.AdvertisedControllerListeners)
	assert.Equal(t, []Listener{{Name: "PLAINTEXT", Port: 9092}}, c.BrokerListeners())
	assert.Equal(t, []Listener{{Name: "CONTROLLER", Port: 9093}}, c.ControllerListeners())
	assert.Equal(t, []Voter{{ID: 1, Host: "localhost", Port: 9093}}, c.ControllerQuorumVoters)
	assert.Equal(t, "PLAINTEXT", c.InterBrokerListenerName)
	assert.Equal(t, map[string]string{"CONTROLLER": "PLAINTEXT", "PLAINTEXT": "PLAINTEXT"}, c.ListenerSecurityProtocolMap)
	assert.Equal(t, []string{"/tmp/faultline-combined-logs"}, c.LogDirs)
	assert.Equal(t, "/tmp/faultline-combined-logs", c.MetadataLogDir)
	assert.Equal(t, int16(1), c.OffsetsTopicReplicationFactor)
	assert.Equal(t, int16(1), c.TransactionStateLogReplicationFactor)
	assert.Equal(t, int32(1), c.TransactionStateLogMinIsr)
	assert.Equal(t, int64(168*3600_000), c.LogRetentionMs)
	assert.Equal(t, ":9404", c.MetricsAddress)
	assert.Empty(t, c.Unsafe)
}

func TestLoadTestdataCluster(t *testing.T) {
	voters := []Voter{{1, "localhost", 19093}, {2, "localhost", 29093}, {3, "localhost", 39093}}
	for i := 1; i <= 3; i++ {
		path := filepath.Join("testdata", "cluster", "controller-"+string(rune('0'+i))+".properties")
		c, warnings, err := Load(path)
		require.NoError(t, err, path)
		assert.Empty(t, warnings, path)
		assert.Equal(t, int32(i), c.NodeID)
		assert.False(t, c.IsBroker())
		assert.True(t, c.IsController())
		assert.Equal(t, voters, c.ControllerQuorumVoters)
		assert.Empty(t, c.AdvertisedListeners)
		assert.Equal(t, []Listener{{Name: "CONTROLLER", Host: "localhost", Port: int32(i*10000 + 9093)}}, c.AdvertisedControllerListeners)
	}
	for i := 4; i <= 6; i++ {
		path := filepath.Join("testdata", "cluster", "broker-"+string(rune('0'+i))+".properties")
		c, warnings, err := Load(path)
		require.NoError(t, err, path)
		assert.Empty(t, warnings, path)
		assert.Equal(t, int32(i), c.NodeID)
		assert.True(t, c.IsBroker())
		assert.False(t, c.IsController())
		assert.Equal(t, voters, c.ControllerQuorumVoters)
		assert.Equal(t, []Listener{{Name: "PLAINTEXT", Host: "localhost", Port: int32((i-3)*10000 + 9092)}}, c.AdvertisedListeners)
		assert.Empty(t, c.AdvertisedControllerListeners)
		assert.Equal(t, int32(2), c.MinInsyncReplicas)
		assert.Equal(t, int32(3), c.DefaultReplicationFactor)
		assert.False(t, c.UncleanLeaderElectionEnable)
	}
}

func TestDefaults(t *testing.T) {
	c, warnings := mustFromMap(t, with(combined(), map[string]string{"log.dirs": "-", "advertised.listeners": "-", "listeners": "PLAINTEXT://localhost:9092,CONTROLLER://localhost:9093"}))
	assert.Empty(t, warnings)
	assert.Equal(t, []string{"/tmp/kafka-logs"}, c.LogDirs)
	assert.Equal(t, "/tmp/kafka-logs", c.MetadataLogDir)
	assert.Equal(t, []Listener{{Name: "PLAINTEXT", Host: "localhost", Port: 9092}}, c.AdvertisedListeners)
	assert.Equal(t, map[string]string{"PLAINTEXT": "PLAINTEXT", "SSL": "SSL", "SASL_PLAINTEXT": "SASL_PLAINTEXT", "SASL_SSL": "SASL_SSL", "CONTROLLER": "PLAINTEXT"},
		c.ListenerSecurityProtocolMap)
	assert.Equal(t, "PLAINTEXT", c.InterBrokerListenerName)

	assert.Equal(t, int32(2), c.NumRecoveryThreadsPerDataDir)
	assert.Equal(t, int32(1<<30), c.LogSegmentBytes)
	assert.Equal(t, int64(168*3600_000), c.LogRollMs)
	assert.Equal(t, int64(0), c.LogRollJitterMs)
	assert.Equal(t, int32(4096), c.LogIndexIntervalBytes)
	assert.Equal(t, int32(10<<20), c.LogIndexSizeMaxBytes)
	assert.Equal(t, int64(math.MaxInt64), c.LogFlushIntervalMessages)
	assert.Equal(t, int64(math.MaxInt64), c.LogFlushIntervalMs)
	assert.Equal(t, int64(math.MaxInt64), c.LogFlushSchedulerIntervalMs)
	assert.Equal(t, int64(60000), c.LogFlushOffsetCheckpointIntervalMs)
	assert.Equal(t, int64(168*3600_000), c.LogRetentionMs)
	assert.Equal(t, int64(-1), c.LogRetentionBytes)
	assert.Equal(t, int64(300000), c.LogRetentionCheckIntervalMs)
	assert.Equal(t, []string{"delete"}, c.LogCleanupPolicy)
	assert.Equal(t, "CreateTime", c.LogMessageTimestampType)
	assert.Equal(t, int32(1048588), c.MessageMaxBytes)
	assert.Equal(t, "producer", c.CompressionType)

	assert.Equal(t, int32(1), c.NumPartitions)
	assert.Equal(t, int32(1), c.DefaultReplicationFactor)
	assert.Equal(t, int32(1), c.MinInsyncReplicas)
	assert.False(t, c.UncleanLeaderElectionEnable)
	assert.True(t, c.AutoCreateTopicsEnable)
	assert.Equal(t, int64(30000), c.ReplicaLagTimeMaxMs)
	assert.Equal(t, int32(1<<20), c.ReplicaFetchMaxBytes)
	assert.Equal(t, int64(500), c.ReplicaFetchWaitMaxMs)
	assert.Equal(t, int64(5000), c.ReplicaHighWatermarkCheckpointIntervalMs)
	assert.Equal(t, int64(2000), c.BrokerHeartbeatIntervalMs)
	assert.Equal(t, int64(9000), c.BrokerSessionTimeoutMs)
	assert.True(t, c.ControlledShutdownEnable)
	assert.Equal(t, int32(3), c.ControlledShutdownMaxRetries)
	assert.Equal(t, int64(5000), c.ControlledShutdownRetryBackoffMs)
	assert.Equal(t, int32(100<<20), c.SocketRequestMaxBytes)
	assert.Equal(t, int32(3), c.NumNetworkThreads)
	assert.Equal(t, int32(8), c.NumIoThreads)

	assert.Equal(t, int16(3), c.OffsetsTopicReplicationFactor)
	assert.Equal(t, int32(50), c.OffsetsTopicNumPartitions)
	assert.Equal(t, int64(10080*60_000), c.OffsetsRetentionMs)
	assert.Equal(t, int64(3000), c.GroupInitialRebalanceDelayMs)
	assert.Equal(t, int64(6000), c.GroupMinSessionTimeoutMs)
	assert.Equal(t, int64(1800000), c.GroupMaxSessionTimeoutMs)
	assert.Equal(t, int64(500), c.MetadataMaxIdleIntervalMs)
	assert.Equal(t, int16(3), c.TransactionStateLogReplicationFactor)
	assert.Equal(t, int32(2), c.TransactionStateLogMinIsr)
	assert.Equal(t, int64(900000), c.TransactionMaxTimeoutMs)
	assert.Equal(t, int64(300_000), c.LeaderImbalanceCheckIntervalMs)

	assert.Equal(t, "", c.MetricsAddress)
	assert.NotNil(t, c.Unsafe)
	assert.Empty(t, c.Unsafe)
}

func TestEveryKeyHasAValidDefaultAndField(t *testing.T) {
	m := combined()
	for i := range brokerKeys {
		d := &brokerKeys[i]
		if d.hasDef {
			_, err := d.parseValue(d.def)
			assert.NoError(t, err, "default of %s", d.name)
		}
	}
	// Set every key without a default to a valid value, so each bound field
	// is assigned at least once (assign panics on a field type it cannot fill).
	with(m, map[string]string{
		"broker.id": "1", "broker.rack": "r1", "inter.broker.listener.name": "PLAINTEXT",
		"metadata.log.dir": "/tmp/meta", "log.roll.ms": "1000", "log.roll.jitter.ms": "10",
		"log.flush.interval.ms": "100", "log.retention.ms": "5000", "log.retention.minutes": "5",
	})
	c, _ := mustFromMap(t, m)
	assert.Equal(t, "r1", c.BrokerRack)
	assert.Equal(t, "/tmp/meta", c.MetadataLogDir)
	assert.Equal(t, int64(10), c.LogRollJitterMs)
}

func TestEffectiveDurations(t *testing.T) {
	tests := []struct {
		name  string
		set   map[string]string
		field func(*Config) int64
		want  int64
	}{
		{"retention hours", map[string]string{"log.retention.hours": "1"}, func(c *Config) int64 { return c.LogRetentionMs }, 3600_000},
		{"retention minutes beat hours", map[string]string{"log.retention.minutes": "2", "log.retention.hours": "1"}, func(c *Config) int64 { return c.LogRetentionMs }, 120_000},
		{"retention ms beats minutes", map[string]string{"log.retention.ms": "5", "log.retention.minutes": "2"}, func(c *Config) int64 { return c.LogRetentionMs }, 5},
		{"retention -1 is unlimited", map[string]string{"log.retention.ms": "-1"}, func(c *Config) int64 { return c.LogRetentionMs }, -1},
		{"negative hours are unlimited", map[string]string{"log.retention.hours": "-1"}, func(c *Config) int64 { return c.LogRetentionMs }, -1},
		{"retention 0 deletes at once", map[string]string{"log.retention.ms": "0"}, func(c *Config) int64 { return c.LogRetentionMs }, 0},
		{"roll hours", map[string]string{"log.roll.hours": "2"}, func(c *Config) int64 { return c.LogRollMs }, 7200_000},
		{"roll ms beats hours", map[string]string{"log.roll.ms": "10", "log.roll.hours": "2"}, func(c *Config) int64 { return c.LogRollMs }, 10},
		{"jitter hours", map[string]string{"log.roll.jitter.hours": "1"}, func(c *Config) int64 { return c.LogRollJitterMs }, 3600_000},
		{"flush ms defaults to scheduler interval", map[string]string{"log.flush.scheduler.interval.ms": "1000"}, func(c *Config) int64 { return c.LogFlushIntervalMs }, 1000},
		{"flush ms", map[string]string{"log.flush.interval.ms": "5", "log.flush.scheduler.interval.ms": "1000"}, func(c *Config) int64 { return c.LogFlushIntervalMs }, 5},
		{"offsets retention minutes", map[string]string{"offsets.retention.minutes": "1"}, func(c *Config) int64 { return c.OffsetsRetentionMs }, 60_000},
		{"seconds saturate instead of overflowing", map[string]string{"leader.imbalance.check.interval.seconds": "9223372036854775807"}, func(c *Config) int64 { return c.LeaderImbalanceCheckIntervalMs }, math.MaxInt64},
		{"largest hours fit", map[string]string{"log.retention.hours": "2147483647"}, func(c *Config) int64 { return c.LogRetentionMs }, 2147483647 * 3600_000},
		{"int ms key stored as int64", map[string]string{"group.initial.rebalance.delay.ms": "0"}, func(c *Config) int64 { return c.GroupInitialRebalanceDelayMs }, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, _ := mustFromMap(t, with(combined(), tt.set))
			assert.Equal(t, tt.want, tt.field(c))
		})
	}
}

func TestAliases(t *testing.T) {
	t.Run("broker.id alone sets the node id", func(t *testing.T) {
		c, _ := mustFromMap(t, with(combined(), map[string]string{"node.id": "-", "broker.id": "1"}))
		assert.Equal(t, int32(1), c.NodeID)
	})
	t.Run("equal node.id and broker.id", func(t *testing.T) {
		c, _ := mustFromMap(t, with(combined(), map[string]string{"broker.id": "1"}))
		assert.Equal(t, int32(1), c.NodeID)
	})
	t.Run("log.dir when log.dirs is not set", func(t *testing.T) {
		c, _ := mustFromMap(t, with(combined(), map[string]string{"log.dirs": "-", "log.dir": "/data/a"}))
		assert.Equal(t, []string{"/data/a"}, c.LogDirs)
	})
	t.Run("log.dirs beats log.dir", func(t *testing.T) {
		c, _ := mustFromMap(t, with(combined(), map[string]string{"log.dirs": "/data/b, /data/c", "log.dir": "/data/a"}))
		assert.Equal(t, []string{"/data/b", "/data/c"}, c.LogDirs)
		assert.Equal(t, "/data/b", c.MetadataLogDir)
	})
	t.Run("listener names are upper-cased", func(t *testing.T) {
		c, _ := mustFromMap(t, with(combined(), map[string]string{
			"listeners": "plaintext://:9092,controller://:9093", "controller.listener.names": "controller",
			"advertised.listeners": "plaintext://localhost:9092", "inter.broker.listener.name": "plaintext",
		}))
		assert.Equal(t, "CONTROLLER", c.ControllerListeners()[0].Name)
		assert.Equal(t, "PLAINTEXT", c.InterBrokerListenerName)
	})
	t.Run("values are trimmed", func(t *testing.T) {
		c, _ := mustFromMap(t, with(combined(), map[string]string{"num.partitions": " 3 ", "auto.create.topics.enable": "FALSE "}))
		assert.Equal(t, int32(3), c.NumPartitions)
		assert.False(t, c.AutoCreateTopicsEnable)
	})
}

func TestBootstrapServersInsteadOfVoters(t *testing.T) {
	c, warnings := mustFromMap(t, with(combined(), map[string]string{
		"controller.quorum.voters": "-", "controller.quorum.bootstrap.servers": "localhost:9093, [::1]:9094",
	}))
	assert.Empty(t, warnings)
	assert.Empty(t, c.ControllerQuorumVoters)
	assert.Equal(t, []HostPort{{"localhost", 9093}, {"::1", 9094}}, c.ControllerQuorumBootstrapServers)
	assert.Equal(t, "localhost:9093,[::1]:9094", c.ControllerQuorumBootstrapServers[0].String()+","+c.ControllerQuorumBootstrapServers[1].String())
}

func TestUnsafeKeys(t *testing.T) {
	c, warnings := mustFromMap(t, with(combined(), map[string]string{"unsafe.enable": "true", "unsafe.ack.before.isr": "true", "unsafe.ack.before.fsync": "False"}))
	assert.Empty(t, warnings, "unsafe keys are never warned about")
	assert.True(t, c.UnsafeEnable)
	assert.Equal(t, map[string]bool{"unsafe.ack.before.isr": true, "unsafe.ack.before.fsync": false}, c.Unsafe)
	assert.Equal(t, []string{"unsafe.ack.before.isr"}, c.EnabledUnsafe())
	require.Len(t, c.UnsafeWarnings(), 1)
	assert.Contains(t, c.UnsafeWarnings()[0], "unsafe.ack.before.isr=true")
}

func TestUnsafeSwitchesNeedUnsafeEnable(t *testing.T) {
	for _, k := range UnsafeSwitches() {
		_, _, err := FromMap(with(combined(), map[string]string{k: "true"}))
		require.Error(t, err, k)
		problems := Problems(err)
		require.Len(t, problems, 1, "one line naming the key")
		assert.True(t, strings.HasPrefix(problems[0], k+": refused"), problems[0])
		assert.Contains(t, problems[0], "unsafe.enable=true")

		c, _ := mustFromMap(t, with(combined(), map[string]string{k: "false"}))
		assert.Empty(t, c.EnabledUnsafe(), "%s=false needs no unsafe.enable", k)
		assert.NotEmpty(t, UnsafeBug(k))
	}
	assert.Len(t, UnsafeSwitches(), 21)
	c, _ := mustFromMap(t, combined())
	assert.False(t, c.UnsafeEnable)
	assert.Empty(t, c.EnabledUnsafe(), "no switch is on by default")
}

func TestWarnings(t *testing.T) {
	tests := []struct {
		name string
		base func() map[string]string
		set  map[string]string
		want []string
	}{
		{"unknown key", combined, map[string]string{"foo.bar": "1"}, []string{"foo.bar: unknown key, ignored"}},
		{"typo", combined, map[string]string{"log.segmnt.bytes": "1"}, []string{"log.segmnt.bytes: unknown key, ignored; did you mean log.segment.bytes?"}},
		{"zookeeper", combined, map[string]string{"zookeeper.connect": "zk:2181"}, []string{"zookeeper.connect: ignored (ZooKeeper mode is gone; faultline runs KRaft only: set process.roles and controller.quorum.voters instead)"}},
		{"ssl", combined, map[string]string{"ssl.keystore.location": "/x"}, []string{"ssl.keystore.location: ignored (faultline serves PLAINTEXT only)"}},
		{"typo in a family", combined, map[string]string{"log.cleaner.enabel": "true"}, []string{"log.cleaner.enabel: unknown key, ignored; did you mean log.cleaner.enable?"}},
		{"unimplemented family", combined, map[string]string{"log.cleaner.io.max.bytes.per.second": "1"}, []string{"log.cleaner.io.max.bytes.per.second: ignored (faultline's cleaner has no I/O throttle or buffer tuning beyond log.cleaner.dedupe.buffer.size)"}},
		{"sorted", combined, map[string]string{"zz": "1", "aa": "2"}, []string{"aa: unknown key, ignored", "zz: unknown key, ignored"}},
		{"empty key", combined, map[string]string{"": "x"}, []string{`a line sets an empty key (value "x"); ignored`}},
		{"min.insync.replicas above replication factor", combined, map[string]string{"min.insync.replicas": "2"}, []string{
			"min.insync.replicas: 2 is greater than default.replication.factor 1, so acks=all produce to topics created with the default replication factor fails with NOT_ENOUGH_REPLICAS; lower min.insync.replicas or raise default.replication.factor",
		}},
		{"session timeout not above heartbeat", combined, map[string]string{"broker.session.timeout.ms": "2000"}, []string{
			"broker.session.timeout.ms: 2000 is not greater than broker.heartbeat.interval.ms 2000, so brokers will be fenced between heartbeats; raise it (Kafka's default is 9000 with 2000)",
		}},
		{"voters and bootstrap servers", combined, map[string]string{"controller.quorum.bootstrap.servers": "localhost:9093"}, []string{
			"controller.quorum.bootstrap.servers: ignored because controller.quorum.voters is set (a static quorum)",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, warnings := mustFromMap(t, with(tt.base(), tt.set))
			assert.Equal(t, tt.want, warnings)
		})
	}
}

func TestLoadWarnsAboutDuplicateKeys(t *testing.T) {
	path := filepath.Join(t.TempDir(), "server.properties")
	var b strings.Builder
	for _, k := range []string{"process.roles", "node.id", "controller.quorum.voters", "listeners", "advertised.listeners", "controller.listener.names"} {
		b.WriteString(k + "=" + escapeProperty(combined()[k], false) + "\n")
	}
	b.WriteString("num.partitions=1\nnum.partitions=3\n")
	require.NoError(t, os.WriteFile(path, []byte(b.String()), 0o644))
	c, warnings, err := Load(path)
	require.NoError(t, err)
	assert.Equal(t, []string{"num.partitions: set on line 7 and again on line 8; the last value wins"}, warnings)
	assert.Equal(t, int32(3), c.NumPartitions)
}

func TestLoadErrors(t *testing.T) {
	_, _, err := Load(filepath.Join(t.TempDir(), "missing.properties"))
	require.Error(t, err)
	assert.True(t, os.IsNotExist(errorsUnwrapAll(err)))
	assert.Contains(t, err.Error(), "read config: open ")

	path := filepath.Join(t.TempDir(), "bad.properties")
	require.NoError(t, os.WriteFile(path, []byte("a=\\u00"), 0o644))
	_, _, err = Load(path)
	require.Error(t, err)
	assert.Equal(t, "read config "+path+`: properties line 1: value of "a": malformed \uXXXX escape "\\u00": need 4 hex digits`, err.Error())

	path = filepath.Join(t.TempDir(), "invalid.properties")
	require.NoError(t, os.WriteFile(path, []byte("node.id=x\nprocess.roles=broker\n"), 0o644))
	c, _, err := Load(path)
	require.Error(t, err)
	assert.Nil(t, c)
	assert.Equal(t, []string{
		`node.id: must be an integer >= 0, got "x"`,
		"listeners: required for the broker role; set e.g. listeners=PLAINTEXT://:9092",
		"controller.quorum.voters: required (or controller.quorum.bootstrap.servers); list the controllers, e.g. controller.quorum.voters=1@localhost:9093",
	}, Problems(err))
}

func errorsUnwrapAll(err error) error {
	for {
		u, ok := err.(interface{ Unwrap() error })
		if !ok || u.Unwrap() == nil {
			return err
		}
		err = u.Unwrap()
	}
}

func TestProblems(t *testing.T) {
	tests := []struct {
		name string
		base func() map[string]string
		set  map[string]string
		want []string
	}{
		// Types and ranges.
		{"not an integer", combined, map[string]string{"log.segment.bytes": "abc"}, []string{`log.segment.bytes: must be an integer >= 14, got "abc"`}},
		{"below minimum", combined, map[string]string{"log.segment.bytes": "13"}, []string{`log.segment.bytes: must be an integer >= 14, got "13"`}},
		{"beyond int32", combined, map[string]string{"log.segment.bytes": "99999999999"}, []string{`log.segment.bytes: must be an integer from 14 to 2147483647, got "99999999999"`}},
		{"beyond int64", combined, map[string]string{"log.retention.bytes": "99999999999999999999"}, []string{`log.retention.bytes: must be an integer from -9223372036854775808 to 9223372036854775807, got "99999999999999999999"`}},
		{"beyond int16", combined, map[string]string{"offsets.topic.replication.factor": "40000"}, []string{`offsets.topic.replication.factor: must be an integer from 1 to 32767, got "40000"`}},
		{"bounded range", combined, map[string]string{"default.replication.factor": "0"}, []string{`default.replication.factor: must be an integer from 1 to 32767, got "0"`}},
		{"empty integer", combined, map[string]string{"num.partitions": ""}, []string{`num.partitions: must be an integer >= 1, got ""`}},
		{"negative node id", combined, map[string]string{"node.id": "-1"}, []string{`node.id: must be an integer >= 0, got "-1"`}},
		{"not a boolean", combined, map[string]string{"unclean.leader.election.enable": "yes"}, []string{`unclean.leader.election.enable: must be true or false, got "yes"`}},
		{"not an enum value", combined, map[string]string{"log.message.timestamp.type": "createtime"}, []string{`log.message.timestamp.type: must be one of CreateTime, LogAppendTime, got "createtime"`}},
		{"bad compression", combined, map[string]string{"compression.type": "brotli"}, []string{`compression.type: must be one of uncompressed, zstd, lz4, snappy, gzip, producer, got "brotli"`}},
		{"unknown role", combined, map[string]string{"process.roles": "broker,zookeeper"}, []string{`process.roles: must be a comma-separated list of broker, controller, got "broker,zookeeper"`}},
		{"duplicate role", combined, map[string]string{"process.roles": "broker, broker"}, []string{`process.roles: lists broker twice, got "broker, broker"`}},
		{"bad cleanup policy", combined, map[string]string{"log.cleanup.policy": "delete,shred"}, []string{`log.cleanup.policy: must be a comma-separated list of delete, compact, got "delete,shred"`}},
		{"unsafe not boolean", combined, map[string]string{"unsafe.enable": "true", "unsafe.ack.before.fsync": "1"}, []string{`unsafe.ack.before.fsync: must be true or false, got "1"`}},
		{"unsafe.enable not boolean", combined, map[string]string{"unsafe.enable": "yes"}, []string{`unsafe.enable: must be true or false, got "yes"`}},
		{"unknown unsafe switch", combined, map[string]string{"unsafe.enable": "true", "unsafe.skip-fsync": "true"}, []string{"unsafe.skip-fsync: unknown unsafe switch; the switches are " + strings.Join(UnsafeSwitches(), ", ")}},
		{"bad metrics address", combined, map[string]string{"faultline.metrics.address": "9404"}, []string{`faultline.metrics.address: must be host:port (e.g. :9404 or 127.0.0.1:9404), or empty to disable, got "9404"`}},
		{"bad double", combined, map[string]string{"log.cleaner.min.cleanable.ratio": "half"}, []string{`log.cleaner.min.cleanable.ratio: must be a number, got "half"`}},

		// Required keys.
		{"missing node.id", combined, map[string]string{"node.id": "-"}, []string{"node.id: required; set node.id to this node's unique id, e.g. node.id=1"}},
		{"missing process.roles", combined, map[string]string{"process.roles": "-"}, []string{"process.roles: required; set process.roles=broker,controller (one process does both), broker, or controller"}},
		{"empty process.roles", combined, map[string]string{"process.roles": " , "}, []string{"process.roles: required; set process.roles=broker,controller (one process does both), broker, or controller"}},
		{"missing listeners, broker", brokerOnly, map[string]string{"listeners": "-"}, []string{"listeners: required for the broker role; set e.g. listeners=PLAINTEXT://:9092"}},
		{"only controller listeners, combined", combined, map[string]string{"listeners": "CONTROLLER://:9093", "advertised.listeners": "-"}, []string{
			"listeners: has no broker listener (all are in controller.listener.names); add one for clients, e.g. listeners=PLAINTEXT://:9092,CONTROLLER://:9093",
		}},
		{"missing controller.listener.names", controllerOnly, map[string]string{"controller.listener.names": "-"}, []string{
			"controller.listener.names: required for the controller role; name the listener the quorum uses, e.g. controller.listener.names=CONTROLLER",
			"listeners: CONTROLLER://c1:9093 is not in controller.listener.names, and a controller-only node (process.roles=controller) serves only controller listeners; remove it, or add the broker role",
		}},
		{"missing quorum", brokerOnly, map[string]string{"controller.quorum.voters": "-"}, []string{
			"controller.quorum.voters: required (or controller.quorum.bootstrap.servers); list the controllers, e.g. controller.quorum.voters=1@localhost:9093",
		}},
		{"empty log.dirs", combined, map[string]string{"log.dirs": " "}, []string{"log.dirs: empty; set log.dirs to one or more data directories, e.g. log.dirs=/var/lib/faultline/data"}},

		// Conflicts.
		{"node.id and broker.id differ", combined, map[string]string{"broker.id": "2"}, []string{
			"broker.id: conflicts with node.id (broker.id=2, node.id=1); set only node.id, or set both to the same value",
		}},
		{"controller listener not in listeners", combined, map[string]string{"controller.listener.names": "QUORUM"}, []string{
			"controller.listener.names: none of QUORUM is in listeners; add a listener for it, e.g. listeners=QUORUM://:9093",
			"listener.security.protocol.map: no entry for listener CONTROLLER; add CONTROLLER:PLAINTEXT",
		}},
		{"broker-only serves the controller listener", brokerOnly, map[string]string{"listeners": "PLAINTEXT://b4:9092,CONTROLLER://b4:9093"}, []string{
			"listeners: CONTROLLER://b4:9093 is a controller listener (controller.listener.names), but a broker-only node (process.roles=broker) must not serve it; remove it from listeners",
		}},
		{"controller-only serves a broker listener", controllerOnly, map[string]string{"listeners": "CONTROLLER://c1:9093,PLAINTEXT://c1:9092"}, []string{
			"listeners: PLAINTEXT://c1:9092 is not in controller.listener.names, and a controller-only node (process.roles=controller) serves only controller listeners; remove it, or add the broker role",
		}},
		{"controller not a voter", controllerOnly, map[string]string{"node.id": "4"}, []string{
			"controller.quorum.voters: this node (node.id=4) has the controller role but is not among the voters [1, 2, 3]; add 4@<host>:<port> or fix node.id",
		}},
		{"broker-only is a voter", brokerOnly, map[string]string{"node.id": "2"}, []string{
			"controller.quorum.voters: node.id=2 is a voter, but this node is broker-only (process.roles=broker); give it a node.id that is not a voter, or add the controller role",
		}},
		{"duplicate listener names", combined, map[string]string{"listeners": "PLAINTEXT://:9092,PLAINTEXT://:9094,CONTROLLER://:9093"}, []string{
			"listeners: listener name PLAINTEXT appears twice; give each listener its own name",
		}},
		{"duplicate ports", combined, map[string]string{"listeners": "PLAINTEXT://:9092,CONTROLLER://:9092"}, []string{
			"listeners: port 9092 is used by both PLAINTEXT and CONTROLLER; give each listener its own port",
		}},
		{"port 0 may repeat", combined, map[string]string{"listeners": "PLAINTEXT://:0,CONTROLLER://:0"}, nil},
		{"advertised 0.0.0.0", combined, map[string]string{"advertised.listeners": "PLAINTEXT://0.0.0.0:9092"}, []string{
			"advertised.listeners: PLAINTEXT://0.0.0.0:9092 advertises 0.0.0.0, which clients cannot connect to; use a host name or IP address they can reach",
		}},
		{"advertised ::", combined, map[string]string{"advertised.listeners": "PLAINTEXT://[::]:9092"}, []string{
			"advertised.listeners: PLAINTEXT://[::]:9092 advertises ::, which clients cannot connect to; use a host name or IP address they can reach",
		}},
		{"listeners 0.0.0.0 without advertised.listeners", combined, map[string]string{"listeners": "PLAINTEXT://0.0.0.0:9092,CONTROLLER://0.0.0.0:9093", "advertised.listeners": "-"}, []string{
			"advertised.listeners: not set, so PLAINTEXT://0.0.0.0:9092 from listeners would be advertised, and clients cannot connect to 0.0.0.0; set advertised.listeners=PLAINTEXT://<host clients reach>:9092",
		}},
		{"advertised listener without listener", combined, map[string]string{"advertised.listeners": "PLAINTEXT://localhost:9092,EXTERNAL://example.com:9092"}, []string{
			"advertised.listeners: EXTERNAL://example.com:9092 names no listener in listeners; advertise only listeners that exist",
		}},
		{"advertised port 0", combined, map[string]string{"advertised.listeners": "PLAINTEXT://localhost:0"}, []string{
			"advertised.listeners: PLAINTEXT://localhost:0 advertises port 0; give the port clients should connect to",
		}},
		{"advertised twice", combined, map[string]string{"advertised.listeners": "PLAINTEXT://a:9092,PLAINTEXT://b:9092"}, []string{
			"advertised.listeners: listener name PLAINTEXT appears twice; advertise each listener once",
		}},
		{"SSL listener", combined, map[string]string{"listeners": "PLAINTEXT://:9092,SSL://:9094,CONTROLLER://:9093"}, []string{
			"listeners: SSL://:9094 uses security protocol SSL, but faultline serves PLAINTEXT only; map SSL:PLAINTEXT in listener.security.protocol.map or remove the listener",
		}},
		{"listener missing from explicit map", combined, map[string]string{"listener.security.protocol.map": "PLAINTEXT:PLAINTEXT"}, []string{
			"listener.security.protocol.map: no entry for listener CONTROLLER; add CONTROLLER:PLAINTEXT",
		}},
		{"malformed protocol map", combined, map[string]string{"listener.security.protocol.map": "PLAINTEXT"}, []string{
			`listener.security.protocol.map: "PLAINTEXT" is not LISTENER_NAME:PROTOCOL (e.g. CONTROLLER:PLAINTEXT)`,
		}},
		{"unknown protocol", combined, map[string]string{"listener.security.protocol.map": "PLAINTEXT:TLS"}, []string{
			`listener.security.protocol.map: "PLAINTEXT:TLS": protocol must be one of PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL`,
		}},
		{"protocol mapped twice", combined, map[string]string{"listener.security.protocol.map": "A:PLAINTEXT,a:SSL"}, []string{
			"listener.security.protocol.map: listener A is mapped twice; map each listener once",
		}},
		{"inter-broker listener not advertised", combined, map[string]string{"inter.broker.listener.name": "REPLICATION"}, []string{
			"inter.broker.listener.name: REPLICATION is not an advertised broker listener; set inter.broker.listener.name to one of [PLAINTEXT]",
		}},
		{"default inter-broker listener missing", brokerOnly, map[string]string{"listeners": "CLIENT://b4:9092", "listener.security.protocol.map": "CLIENT:PLAINTEXT"}, []string{
			"inter.broker.listener.name: PLAINTEXT (the default, from security.inter.broker.protocol) is not an advertised broker listener; set inter.broker.listener.name to one of [CLIENT]",
		}},
		{"inter-broker listener is the controller listener", combined, map[string]string{"inter.broker.listener.name": "CONTROLLER"}, []string{
			"inter.broker.listener.name: CONTROLLER is a controller listener; brokers replicate over a broker listener, set inter.broker.listener.name to one of [PLAINTEXT]",
		}},
		{"inter-broker name and protocol both set", combined, map[string]string{"inter.broker.listener.name": "PLAINTEXT", "security.inter.broker.protocol": "PLAINTEXT"}, []string{
			"inter.broker.listener.name: set together with security.inter.broker.protocol; set only inter.broker.listener.name",
		}},
		{"listener syntax", combined, map[string]string{"listeners": "PLAINTEXT:/:9092"}, []string{
			`listeners: "PLAINTEXT:/:9092" is not NAME://host:port (e.g. PLAINTEXT://:9092)`,
		}},
		{"listener port", combined, map[string]string{"listeners": "PLAINTEXT://:99999,CONTROLLER://:9093"}, []string{
			`listeners: "PLAINTEXT://:99999" is not NAME://host:port (e.g. PLAINTEXT://:9092): port "99999" must be a number from 0 to 65535`,
		}},
		{"listener host with a blank", combined, map[string]string{"listeners": "PLAINTEXT://my host:9092,CONTROLLER://:9093"}, []string{
			`listeners: "PLAINTEXT://my host:9092" is not NAME://host:port (e.g. PLAINTEXT://:9092): host "my host" is not a host name or IP address`,
		}},
		{"listener without port", combined, map[string]string{"listeners": "PLAINTEXT://localhost"}, []string{
			`listeners: "PLAINTEXT://localhost" is not NAME://host:port (e.g. PLAINTEXT://:9092): not host:port`,
		}},
		{"voter syntax", combined, map[string]string{"controller.quorum.voters": "localhost:9093"}, []string{
			`controller.quorum.voters: "localhost:9093" is not id@host:port with a node id >= 0 (e.g. 1@localhost:9093)`,
		}},
		{"voter without port", combined, map[string]string{"controller.quorum.voters": "1@localhost"}, []string{
			`controller.quorum.voters: "1@localhost" is not id@host:port (e.g. 1@localhost:9093): not host:port`,
		}},
		{"voter without host", combined, map[string]string{"controller.quorum.voters": "1@:9093"}, []string{
			`controller.quorum.voters: "1@:9093" needs a host and a non-zero port (e.g. 1@localhost:9093)`,
		}},
		{"voter twice", combined, map[string]string{"controller.quorum.voters": "1@a:9093,1@b:9093"}, []string{
			"controller.quorum.voters: voter id 1 is listed twice; each voter needs its own node id",
		}},
		{"bootstrap server syntax", combined, map[string]string{"controller.quorum.voters": "-", "controller.quorum.bootstrap.servers": "localhost"}, []string{
			`controller.quorum.bootstrap.servers: "localhost" is not host:port (e.g. localhost:9093): not host:port`,
		}},
		{"bootstrap server without host", combined, map[string]string{"controller.quorum.voters": "-", "controller.quorum.bootstrap.servers": ":9093"}, []string{
			`controller.quorum.bootstrap.servers: ":9093" is not host:port (e.g. localhost:9093): needs a host and a non-zero port`,
		}},
		{"duplicate data dir", combined, map[string]string{"log.dirs": "/d1,/d2,/d1"}, []string{"log.dirs: lists /d1 twice; list each data directory once"}},
		{"fetch wait above lag time", combined, map[string]string{"replica.fetch.wait.max.ms": "40000"}, []string{
			"replica.fetch.wait.max.ms: 40000 is greater than replica.lag.time.max.ms 30000, so idle followers would drop out of the ISR; lower it",
			"replica.socket.timeout.ms: 30000 is less than replica.fetch.wait.max.ms 40000, so follower fetches would time out; raise it",
		}},
		{"group session bounds", combined, map[string]string{"group.max.session.timeout.ms": "5000"}, []string{
			"group.max.session.timeout.ms: 5000 is less than group.min.session.timeout.ms 6000; raise it or lower the minimum",
		}},

		// Many problems are all reported, in a stable order.
		{"several at once", combined, map[string]string{
			"node.id": "x", "log.segment.bytes": "abc", "listeners": "PLAINTEXT://:9092,SSL://:9092,CONTROLLER://:9093", "num.io.threads": "0",
		}, []string{
			`node.id: must be an integer >= 0, got "x"`,
			`log.segment.bytes: must be an integer >= 14, got "abc"`,
			`num.io.threads: must be an integer >= 1, got "0"`,
			"listeners: port 9092 is used by both PLAINTEXT and SSL; give each listener its own port",
			"listeners: SSL://:9092 uses security protocol SSL, but faultline serves PLAINTEXT only; map SSL:PLAINTEXT in listener.security.protocol.map or remove the listener",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, _, err := FromMap(with(tt.base(), tt.set))
			if tt.want == nil {
				require.NoError(t, err)
				assert.NotNil(t, c)
				return
			}
			require.Error(t, err)
			assert.Nil(t, c)
			assert.Equal(t, tt.want, Problems(err))
			assert.Equal(t, strings.Join(tt.want, "\n"), err.Error())
		})
	}
}

func TestEntries(t *testing.T) {
	c, _ := mustFromMap(t, with(combined(), map[string]string{"log.retention.hours": "1", "unsafe.enable": "true", "unsafe.ack.before.fsync": "true"}))
	entries := c.Entries()
	byName := map[string]Entry{}
	for _, e := range entries {
		_, dup := byName[e.Name]
		require.False(t, dup, "entry %s listed twice", e.Name)
		byName[e.Name] = e
		assert.True(t, e.ReadOnly, e.Name)
	}
	for i := range brokerKeys {
		assert.Contains(t, byName, brokerKeys[i].name)
	}
	assert.Equal(t, Entry{Name: "node.id", Value: "1", ReadOnly: true}, byName["node.id"])
	assert.Equal(t, Entry{Name: "broker.id", Value: "1", IsDefault: true, ReadOnly: true}, byName["broker.id"])
	assert.Equal(t, Entry{Name: "log.retention.hours", Value: "1", ReadOnly: true}, byName["log.retention.hours"])
	assert.Equal(t, Entry{Name: "log.retention.ms", Value: "3600000", IsDefault: true, ReadOnly: true}, byName["log.retention.ms"])
	assert.Equal(t, Entry{Name: "log.segment.bytes", Value: "1073741824", IsDefault: true, ReadOnly: true}, byName["log.segment.bytes"])
	assert.Equal(t, Entry{Name: "listeners", Value: "PLAINTEXT://:9092,CONTROLLER://:9093", ReadOnly: true}, byName["listeners"])
	assert.Equal(t, Entry{Name: "advertised.listeners", Value: "PLAINTEXT://localhost:9092,CONTROLLER://:9093", ReadOnly: true}, byName["advertised.listeners"])
	assert.Equal(t, Entry{Name: "controller.quorum.voters", Value: "1@localhost:9093", ReadOnly: true}, byName["controller.quorum.voters"])
	assert.Equal(t, Entry{Name: "listener.security.protocol.map", Value: "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL,SSL:SSL", IsDefault: true, ReadOnly: true},
		byName["listener.security.protocol.map"])
	assert.Equal(t, Entry{Name: "log.flush.interval.ms", Value: "9223372036854775807", IsDefault: true, ReadOnly: true}, byName["log.flush.interval.ms"])
	assert.Equal(t, Entry{Name: "broker.rack", Value: "", IsDefault: true, ReadOnly: true}, byName["broker.rack"])
	assert.Equal(t, Entry{Name: "unsafe.ack.before.fsync", Value: "true", ReadOnly: true}, entries[len(entries)-1])
}

func TestDocListsEveryKey(t *testing.T) {
	doc, err := os.ReadFile("doc.go")
	require.NoError(t, err)
	text := string(doc)
	for i := range brokerKeys {
		name := brokerKeys[i].name
		if strings.HasPrefix(name, "log.retention.") && name != "log.retention.bytes" && name != "log.retention.check.interval.ms" {
			continue // listed together as log.retention.ms, .minutes, .hours
		}
		assert.Contains(t, text, "//\t"+name+" ", "doc.go lists %s in a key table", name)
	}
	for i := range topicKeys {
		assert.Contains(t, text, topicKeys[i].name, "doc.go names topic key %s", topicKeys[i].name)
	}
}

// TestDocStatesEachDefault keeps doc.go's key tables at the defaults the
// key table parses.
func TestDocStatesEachDefault(t *testing.T) {
	doc, err := os.ReadFile("doc.go")
	require.NoError(t, err)
	for i := range brokerKeys {
		d := &brokerKeys[i]
		if !d.hasDef || d.def == "" {
			continue
		}
		line := regexp.MustCompile(`(?m)^//\t` + regexp.QuoteMeta(d.name) + ` +(\S+)`).FindSubmatch(doc)
		if line == nil {
			continue // TestDocListsEveryKey names the keys doc.go leaves out
		}
		assert.Equal(t, d.def, strings.TrimRight(string(line[1]), ";,"), "doc.go's default of %s", d.name)
	}
}

func TestLoadWithOverrides(t *testing.T) {
	c, warnings, err := LoadWithOverrides("testdata/server.properties", map[string]string{"num.partitions": "6", "unsafe.enable": "true", "unsafe.idempotence.off": "true"})
	require.NoError(t, err)
	assert.Empty(t, warnings)
	assert.Equal(t, int32(6), c.NumPartitions)
	assert.Equal(t, []string{"unsafe.idempotence.off"}, c.EnabledUnsafe())

	_, _, err = LoadWithOverrides("testdata/server.properties", map[string]string{"node.id": "7"})
	assert.Equal(t, []string{
		"controller.quorum.voters: this node (node.id=7) has the controller role but is not among the voters [1]; add 7@<host>:<port> or fix node.id",
	}, Problems(err))
}

func TestProblemsOfOtherErrors(t *testing.T) {
	assert.Nil(t, Problems(nil))
	assert.Equal(t, []string{"read config: boom"}, Problems(errors.New("read config: boom")))
	wrapped := fmt.Errorf("start: %w", &Error{Problems: []string{"a: x", "b: y"}})
	assert.Equal(t, []string{"a: x", "b: y"}, Problems(wrapped))
}

func BenchmarkLoad(b *testing.B) {
	for b.Loop() {
		if _, _, err := Load("testdata/server.properties"); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkFromMap(b *testing.B) {
	m := combined()
	for b.Loop() {
		if _, _, err := FromMap(m); err != nil {
			b.Fatal(err)
		}
	}
}

// A file in the shape of Kafka 4's own combined-mode example (dynamic quorum
// through bootstrap servers, every protocol in the map) loads cleanly.
func TestKafkaStyleFile(t *testing.T) {
	text := `
process.roles=broker,controller
node.id=1
controller.quorum.bootstrap.servers=localhost:9093
listeners=PLAINTEXT://:9092,CONTROLLER://:9093
inter.broker.listener.name=PLAINTEXT
advertised.listeners=PLAINTEXT://localhost:9092,CONTROLLER://localhost:9093
controller.listener.names=CONTROLLER
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL
num.network.threads=3
num.io.threads=8
socket.send.buffer.bytes=102400
socket.receive.buffer.bytes=102400
socket.request.max.bytes=104857600
log.dirs=/tmp/kraft-combined-logs
num.partitions=1
num.recovery.threads.per.data.dir=1
offsets.topic.replication.factor=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
log.retention.hours=168
log.segment.bytes=1073741824
log.retention.check.interval.ms=300000
`
	m, err := ParseProperties(strings.NewReader(text))
	require.NoError(t, err)
	c, warnings := mustFromMap(t, m)
	assert.Empty(t, warnings)
	assert.Equal(t, []HostPort{{"localhost", 9093}}, c.ControllerQuorumBootstrapServers)
	assert.Equal(t, []Listener{{Name: "CONTROLLER", Host: "localhost", Port: 9093}}, c.AdvertisedControllerListeners)
	assert.Equal(t, int32(1), c.NumRecoveryThreadsPerDataDir)
}

// An old ZooKeeper-mode file fails with the keys KRaft needs, and its
// ZooKeeper keys are explained.
func TestZooKeeperStyleFile(t *testing.T) {
	m := map[string]string{
		"broker.id": "0", "listeners": "PLAINTEXT://:9092", "log.dirs": "/var/kafka/data",
		"zookeeper.connect": "localhost:2181", "zookeeper.connection.timeout.ms": "18000",
	}
	_, warnings, err := FromMap(m)
	assert.Equal(t, []string{
		"process.roles: required; set process.roles=broker,controller (one process does both), broker, or controller",
		"controller.quorum.voters: required (or controller.quorum.bootstrap.servers); list the controllers, e.g. controller.quorum.voters=1@localhost:9093",
	}, Problems(err))
	assert.Equal(t, []string{
		"zookeeper.connect: ignored (ZooKeeper mode is gone; faultline runs KRaft only: set process.roles and controller.quorum.voters instead)",
		"zookeeper.connection.timeout.ms: ignored (ZooKeeper mode is gone; faultline runs KRaft only: set process.roles and controller.quorum.voters instead)",
	}, warnings)
}
