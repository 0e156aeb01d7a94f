package node

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/faultline/faultline/broker/quorum"
	"github.com/faultline/faultline/broker/quorum/raftq"
)

// TestRestartBehindTheCommitKeepsNewTopicLogs: a voter killed right after
// a topic creation restarts with a metadata log whose commit index on disk
// is behind the records it applied (raft writes a commit-only change of
// its hard state lazily). Its image starts without the topic; the
// partition dir it already made is not a stray log, and survives until the
// image caught up with the quorum, which knows the topic.
func TestRestartBehindTheCommitKeepsNewTopicLogs(t *testing.T) {
	nodes := clusterWithTopic(t, "fresh")

	victim := nodes[2]
	dataDir := victim.props["log.dirs"]
	partitionDir := filepath.Join(dataDir, "fresh-0")
	require.Eventually(t, func() bool {
		_, err := os.Stat(partitionDir)
		return err == nil
	}, 30*time.Second, 5*time.Millisecond, "node %d made the partition dir", victim.id)
	victim.node.kill()

	// The commit index the victim had written is behind the topic: as if
	// it died before its next hard state write.
	statePath := filepath.Join(dataDir, quorum.MetadataPartition.String(), raftq.QuorumStateFile)
	state, err := os.ReadFile(statePath)
	require.NoError(t, err)
	behind := regexp.MustCompile(`"commitIndex":\d+`).ReplaceAll(state, []byte(`"commitIndex":0`))
	require.NotEqual(t, string(state), string(behind))
	require.NoError(t, os.WriteFile(statePath, behind, 0o644))

	require.NoError(t, victim.start(t))
	assert.Contains(t, victim.logs.String(), "committed up to offset 0 (index 0)", "the restart began behind the commit")
	require.Eventually(t, func() bool {
		_, ok := partitionState(victim, "fresh", 0)
		return ok
	}, 30*time.Second, 5*time.Millisecond, "the restarted node's image caught up")
	assert.NotContains(t, victim.logs.String(), "Deleting stray log fresh-0")
	_, err = os.Stat(partitionDir)
	assert.NoError(t, err, "the partition dir of a topic the quorum knows survives the restart")
}

// TestRestartedVoterNeverActsOnItsStaleImage: a combined node killed while
// it leads a partition replays, on restart, a metadata log that still
// makes it the leader, though the quorum moved the leadership while it was
// down. Its broker parts follow the image only once the controller says
// it caught up (registration, then RECOVERY), so the restarted node never
// takes the partition's leadership from the stale image: it follows the
// new leader from its first image on.
func TestRestartedVoterNeverActsOnItsStaleImage(t *testing.T) {
	nodes := clusterWithTopic(t, "moved")
	var leader int32 = -1
	require.Eventually(t, func() bool {
		p, ok := partitionState(nodes[0], "moved", 0)
		leader = p.Leader
		return ok && p.Leader >= 0
	}, 30*time.Second, 5*time.Millisecond)
	var victim, survivor *clusterNode
	for _, c := range nodes {
		switch {
		case c.id == leader:
			victim = c
		case survivor == nil:
			survivor = c
		}
	}
	require.NotNil(t, victim)
	require.Eventually(t, func() bool {
		return strings.Contains(victim.logs.String(), "Partition moved-0: leader at epoch")
	}, 30*time.Second, 5*time.Millisecond, "node %d leads the partition", victim.id)
	victim.node.kill()

	var moved int32 = -1
	require.Eventually(t, func() bool {
		p, ok := partitionState(survivor, "moved", 0)
		moved = p.Leader
		return ok && p.Leader >= 0 && p.Leader != victim.id
	}, time.Minute, 10*time.Millisecond, "the quorum moves the leadership off the killed node")

	require.NoError(t, victim.start(t))
	p, ok := partitionState(victim, "moved", 0)
	require.True(t, ok)
	assert.Equal(t, moved, p.Leader, "the restarted node's first served image has the new leader")
	logs := victim.logs.String()
	caughtUp, first := strings.Index(logs, "caught up with the metadata log"), strings.Index(logs, "Partition moved-0:")
	require.GreaterOrEqual(t, caughtUp, 0, "the controller said it caught up")
	require.GreaterOrEqual(t, first, 0, "the replica manager took the partition up")
	assert.Less(t, caughtUp, first, "nothing follows the image before the controller's word:\n%s", logs)
	assert.NotContains(t, logs, "Partition moved-0: leader at epoch", "it never led the partition from its stale image:\n%s", logs)
}

// clusterWithTopic starts three combined nodes and creates topic, one
// partition replicated on all three.
func clusterWithTopic(t *testing.T, topic string) []*clusterNode {
	t.Helper()
	nodes := startCluster(t, 3, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	admin, err := kgo.NewClient(kgo.SeedBrokers(seeds(nodes)...))
	require.NoError(t, err)
	defer admin.Close()
	resp, err := kadm.NewClient(admin).CreateTopic(ctx, 1, 3, nil, topic)
	require.NoError(t, err)
	require.NoError(t, resp.Err)
	return nodes
}
