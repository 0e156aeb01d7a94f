package quorumtest

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faultline/faultline/broker/metadata"
	"github.com/faultline/faultline/broker/quorum"
	"github.com/faultline/faultline/broker/storage"
)

func openManager(t *testing.T, dir string) *storage.LogManager {
	t.Helper()
	lm, err := storage.NewLogManager(storage.OS, []string{dir}, storage.ManagerOptions{})
	require.NoError(t, err)
	_, err = lm.Load()
	require.NoError(t, err)
	return lm
}

func TestLocalAppendReplayRestart(t *testing.T) {
	dir := t.TempDir()
	lm := openManager(t, dir)
	q, err := OpenLocal(LocalConfig{NodeID: 1, Logs: lm})
	require.NoError(t, err)
	assert.Equal(t, quorum.LeaderAndEpoch{LeaderID: 1, Epoch: 1}, q.Leader())

	var live []quorum.Batch
	cancel, err := q.Subscribe(func(b quorum.Batch) error { live = append(live, b); return nil })
	require.NoError(t, err)
	assert.Empty(t, live, "nothing to replay in a new log")

	ctx := context.Background()
	last, err := q.Append(ctx, []metadata.Record{&metadata.TopicRecord{Name: "a", TopicID: metadata.Uuid{1}}, &metadata.NoOpRecord{}})
	require.NoError(t, err)
	assert.Equal(t, int64(1), last)
	last, err = q.Append(ctx, []metadata.Record{&metadata.ProducerIDsRecord{NextProducerID: 1000}})
	require.NoError(t, err)
	assert.Equal(t, int64(2), last)
	require.Len(t, live, 2)
	assert.Equal(t, quorum.Batch{BaseOffset: 0, LastOffset: 1, Epoch: 1, AppendTimeMs: live[0].AppendTimeMs,
		Records: []metadata.Record{&metadata.TopicRecord{Name: "a", TopicID: metadata.Uuid{1}}, &metadata.NoOpRecord{}}}, live[0])
	d := q.Describe()
	assert.Equal(t, int64(3), d.HighWatermark)
	assert.Equal(t, []int32{1}, []int32{d.Voters[0].ReplicaID})

	cancel()
	_, err = q.Append(ctx, []metadata.Record{&metadata.NoOpRecord{}})
	require.NoError(t, err)
	assert.Len(t, live, 2, "a cancelled subscriber gets nothing more")

	// A second subscriber replays everything from disk.
	var replayed []quorum.Batch
	_, err = q.Subscribe(func(b quorum.Batch) error { replayed = append(replayed, b); return nil })
	require.NoError(t, err)
	require.Len(t, replayed, 1, "replay merges consecutive batches")
	var liveRecs []metadata.Record
	for _, b := range live {
		liveRecs = append(liveRecs, b.Records...)
	}
	assert.Equal(t, int64(0), replayed[0].BaseOffset)
	assert.Equal(t, int64(3), replayed[0].LastOffset)
	assert.Equal(t, append(liveRecs, &metadata.NoOpRecord{}), replayed[0].Records)

	require.NoError(t, q.Close())
	_, err = q.Append(ctx, []metadata.Record{&metadata.NoOpRecord{}})
	assert.ErrorIs(t, err, quorum.ErrClosed)
	require.NoError(t, lm.Shutdown(0))

	// Restart: same records, next epoch.
	lm = openManager(t, dir)
	q, err = OpenLocal(LocalConfig{NodeID: 1, Logs: lm})
	require.NoError(t, err)
	assert.Equal(t, int32(2), q.Leader().Epoch)
	pub := metadata.NewPublisher(metadata.NewImage("c"))
	_, err = quorum.FeedPublisher(q, pub)
	require.NoError(t, err)
	im := pub.Image()
	assert.Equal(t, int64(3), im.Offset)
	assert.NotNil(t, im.Topic("a"))
	assert.Equal(t, int64(1000), im.NextProducerID)
	last, err = q.Append(ctx, []metadata.Record{&metadata.RemoveTopicRecord{TopicID: metadata.Uuid{1}}})
	require.NoError(t, err)
	assert.Equal(t, int64(4), last)
	assert.Nil(t, pub.Image().Topic("a"))
	require.NoError(t, lm.Shutdown(0))
}

func TestLocalReplayFailsOnBadRecord(t *testing.T) {
	lm := openManager(t, t.TempDir())
	q, err := OpenLocal(LocalConfig{NodeID: 1, Logs: lm})
	require.NoError(t, err)
	_, err = q.Append(context.Background(), []metadata.Record{&metadata.RemoveTopicRecord{TopicID: metadata.Uuid{1}}})
	require.NoError(t, err, "the quorum does not interpret records")
	pub := metadata.NewPublisher(metadata.NewImage("c"))
	_, err = quorum.FeedPublisher(q, pub)
	assert.ErrorIs(t, err, metadata.ErrInvalidRecord)
}
