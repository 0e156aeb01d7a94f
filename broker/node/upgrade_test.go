package node

import (
	"context"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/faultline/faultline/broker/controller"
	"github.com/faultline/faultline/broker/metadata"
	"github.com/faultline/faultline/broker/quorum/quorumtest"
	"github.com/faultline/faultline/broker/storage"
)

// TestStartsOnAMetadataLogWrittenWithoutRaft: a data dir whose
// __cluster_metadata-0 was written by a single-voter quorum without raft
// (quorumtest.Local, one batch per commit with its epoch as the leader epoch,
// no quorum-state) starts as the only voter of the raft quorum: its
// batches become raft entries, all committed once the voter elected
// itself, and the node serves the topics they created.
func TestStartsOnAMetadataLogWrittenWithoutRaft(t *testing.T) {
	dir := t.TempDir()
	props := nodeProps(t, map[string]string{"log.dirs": filepath.Join(dir, "data")})
	cfg := testConfig(t, props)
	_, err := Format(cfg, FormatOptions{ClusterID: testClusterID})
	require.NoError(t, err)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for run := range 2 { // two runs: two epochs in the log
		lm, err := storage.NewLogManager(storage.OS, cfg.LogDirs, storage.ManagerOptions{})
		require.NoError(t, err)
		_, err = lm.Load()
		require.NoError(t, err)
		q, err := quorumtest.OpenLocal(quorumtest.LocalConfig{NodeID: 1, Logs: lm})
		require.NoError(t, err)
		c, err := controller.New(controller.Config{NodeID: 1, ClusterID: testClusterID,
			Defaults: controller.Defaults{NumPartitions: 1, ReplicationFactor: 1}, Rand: rand.New(rand.NewPCG(1, 2))}, q)
		require.NoError(t, err)
		epoch, err := c.RegisterBroker(ctx, controller.BrokerRegistration{BrokerID: 1, IncarnationID: metadata.Uuid{byte(run + 1)},
			Endpoints: []metadata.Endpoint{{Name: "PLAINTEXT", Host: "127.0.0.1", Port: 9092}}})
		require.NoError(t, err)
		reply, err := c.Heartbeat(ctx, controller.Heartbeat{BrokerID: 1, BrokerEpoch: epoch, MetadataOffset: c.Image().Offset})
		require.NoError(t, err)
		require.False(t, reply.IsFenced)
		req := kmsg.NewPtrCreateTopicsRequest()
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "old-"+string(rune('a'+run)), 2, 1
		req.Topics = append(req.Topics, rt)
		require.Zero(t, c.CreateTopics(ctx, req).Topics[0].ErrorCode)
		c.Close()
		require.NoError(t, q.Close())
		require.NoError(t, lm.Shutdown(epoch))
	}

	n, logs := startNodeLogs(t, props)
	assert.Contains(t, logs.String(), "Completed transition to Leader(localId=1")
	im := n.publisher.Image()
	for _, topic := range []string{"old-a", "old-b"} {
		require.NotNil(t, im.Topic(topic), "topic %s from the old log", topic)
		for p := range int32(2) {
			assert.Equal(t, int32(1), im.Partition(topic, p).Leader, "%s-%d led by the restarted broker", topic, p)
		}
	}
	produceSync(t, client(t, n), "old-b", values(10, "v"))
	assert.Len(t, consumeN(t, n, "old-b", 10), 10)
	stopNode(t, n)

	// Restarted, the raft voter reads the log it now writes too.
	n = startNode(t, props)
	assert.NotNil(t, n.publisher.Image().Topic("old-a"))
	assert.Len(t, consumeN(t, n, "old-b", 10), 10)
}
