package group

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// FuzzReplay feeds arbitrary key/value bytes through the replay path and
// the installation of the groups it yields: nothing may panic, and every
// record is either applied or skipped.
func FuzzReplay(f *testing.F) {
	oc := offsetCommitRecord("g", topicPartition{topic: "t", partition: 1}, committedOffset{offset: 5, leaderEpoch: 2, metadata: "m"})
	f.Add(oc.Key, oc.Value, false)
	v := kmsg.NewGroupMetadataValue()
	v.ProtocolType = "consumer"
	v.Generation = 3
	v.Protocol = ptr("range")
	v.Leader = ptr("m1")
	m := kmsg.NewGroupMetadataValueMember()
	m.MemberID = "m1"
	m.SessionTimeoutMillis = 10000
	v.Members = []kmsg.GroupMetadataValueMember{m}
	gm := groupMetadataRecord("g", &v)
	f.Add(gm.Key, gm.Value, false)
	f.Add(gm.Key, []byte(nil), true)
	f.Add([]byte{0, 9, 0, 1, 'g'}, []byte{1, 2, 3}, false)
	f.Add([]byte{0}, []byte{}, false)
	f.Fuzz(func(t *testing.T, key, value []byte, tombstone bool) {
		if tombstone {
			value = nil
		}
		src := &fakeSource{}
		src.im.Store(testImage(1))
		cfg := DefaultConfig()
		cfg.Clock = newFakeClock()
		cfg.Logger = quietLogger()
		c, err := New(cfg, newMemLog(), src)
		require.NoError(t, err)
		defer c.Close()
		l := newLoadedPartition(c.PartitionFor("g"), quietLogger())
		assert.NoError(t, l.apply(key, value))
		assert.NoError(t, l.apply(gm.Key, gm.Value))
		assert.NoError(t, l.apply(key, value))
		c.mu.Lock()
		defer c.mu.Unlock()
		c.installLocked(l)
		for _, g := range c.groups {
			assert.Equal(t, l.partition, partitionFor(g.id, 50), "group %q", g.id)
			switch g.state {
			case stateStable:
				assert.NotNil(t, g.members[g.leader], "a Stable group has its leader")
			case stateEmpty:
				assert.Empty(t, g.members, "an Empty group has no members")
			default:
				assert.Fail(t, "a loaded group is Stable or Empty", "got %s", g.state)
			}
		}
	})
}
