package node

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestDeleteGroupsThroughAdmin: kadm deletes one offset of an empty group
// (OffsetDelete) but not of a topic a member consumes; it finds each
// group's coordinator and deletes the empty group with its offsets; a group with a member is
// NON_EMPTY_GROUP and keeps its offsets; the deleted group stays deleted
// across a restart (its tombstones replay).
func TestDeleteGroupsThroughAdmin(t *testing.T) {
	dirs := map[string]string{"log.dirs": t.TempDir()}
	n := startNode(t, dirs)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.Addr().String()))
	require.NoError(t, err)
	defer cl.Close()
	adm := kadm.NewClient(cl)
	_, err = adm.CreateTopic(ctx, 2, 1, nil, "events")
	require.NoError(t, err)
	offsets := kadm.Offsets{}
	offsets.AddOffset("events", 0, 7, -1)
	offsets.AddOffset("events", 1, 9, -1)
	for _, g := range []string{"idle", "busy"} {
		res, err := adm.CommitOffsets(ctx, g, offsets)
		require.NoError(t, err)
		require.NoError(t, res.Error())
	}
	member, err := kgo.NewClient(kgo.SeedBrokers(n.Addr().String()), kgo.ConsumerGroup("busy"), kgo.ConsumeTopics("events"))
	require.NoError(t, err)
	defer member.Close()
	require.Eventually(t, func() bool {
		d, err := adm.DescribeGroups(ctx, "busy")
		return err == nil && len(d["busy"].Members) == 1
	}, 30*time.Second, 20*time.Millisecond, "the member joined")

	deleted, err := adm.DeleteOffsets(ctx, "busy", kadm.TopicsSet{"events": {0: {}}})
	require.NoError(t, err)
	perr, ok := deleted.Lookup("events", 0)
	require.True(t, ok)
	assert.ErrorIs(t, perr, kerr.GroupSubscribedToTopic, "the member consumes events")
	deleted, err = adm.DeleteOffsets(ctx, "idle", kadm.TopicsSet{"events": {0: {}}})
	require.NoError(t, err)
	require.NoError(t, deleted.Error())
	fetched, err := adm.FetchOffsets(ctx, "idle")
	require.NoError(t, err)
	assert.Len(t, fetched.Offsets()["events"], 1, "OffsetDelete took partition 0 of an empty group")

	res, err := adm.DeleteGroups(ctx, "idle", "busy", "nobody")
	require.NoError(t, err)
	assert.NoError(t, res["idle"].Err)
	assert.ErrorIs(t, res["busy"].Err, kerr.NonEmptyGroup)
	assert.ErrorIs(t, res["nobody"].Err, kerr.GroupIDNotFound)

	fetched, err = adm.FetchOffsets(ctx, "idle")
	require.NoError(t, err)
	assert.Empty(t, fetched.Offsets(), "the deleted group has no offsets")
	fetched, err = adm.FetchOffsets(ctx, "busy")
	require.NoError(t, err)
	assert.Len(t, fetched.Offsets()["events"], 2, "the group with a member keeps its offsets")

	member.Close()
	cl.Close()
	stopNode(t, n)
	n = startNode(t, dirs)
	cl2, err := kgo.NewClient(kgo.SeedBrokers(n.Addr().String()))
	require.NoError(t, err)
	defer cl2.Close()
	require.Eventually(t, func() bool {
		fetched, err := kadm.NewClient(cl2).FetchOffsets(ctx, "idle")
		return err == nil && len(fetched.Offsets()) == 0
	}, 30*time.Second, 50*time.Millisecond, "still deleted after a restart")
	listed, err := kadm.NewClient(cl2).ListGroups(ctx)
	require.NoError(t, err)
	assert.NotContains(t, listed.Groups(), "idle")
}
