package server

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/faultline/faultline/broker/storage"
)

type fakeLogDirs []storage.DirDescription

func (f fakeLogDirs) DescribeDirs() []storage.DirDescription { return f }

func TestDescribeLogDirsListsPartitionsAndOfflineDirs(t *testing.T) {
	dirs := fakeLogDirs{
		{Dir: "/a", TotalBytes: 100, UsableBytes: 40, Partitions: []storage.PartitionDescription{
			{TopicPartition: storage.TopicPartition{Topic: "t", Partition: 0}, Size: 10},
			{TopicPartition: storage.TopicPartition{Topic: "t", Partition: 1}, Size: 20, OffsetLag: 3},
			{TopicPartition: storage.TopicPartition{Topic: "u", Partition: 0}, Size: 30},
		}},
		{Dir: "/b", Offline: true, TotalBytes: -1, UsableBytes: -1},
	}
	ts := startServer(t, Options{}, func(b *Backend) { b.LogDirs = dirs })
	c := dial(t, ts.addr)
	req := kmsg.NewPtrDescribeLogDirsRequest()
	req.Version = 4
	all := c.roundTrip(req).(*kmsg.DescribeLogDirsResponse)
	require.Len(t, all.Dirs, 2)
	assert.Equal(t, "/a", all.Dirs[0].Dir)
	assert.Equal(t, int64(100), all.Dirs[0].TotalBytes)
	require.Len(t, all.Dirs[0].Topics, 2)
	assert.Equal(t, int64(3), all.Dirs[0].Topics[0].Partitions[1].OffsetLag)
	assert.Equal(t, kerr.KafkaStorageError.Code, all.Dirs[1].ErrorCode, "an offline dir is a storage error")

	rt := kmsg.NewDescribeLogDirsRequestTopic()
	rt.Topic, rt.Partitions = "t", []int32{1}
	req.Topics = []kmsg.DescribeLogDirsRequestTopic{rt}
	one := c.roundTrip(req).(*kmsg.DescribeLogDirsResponse)
	require.Len(t, one.Dirs[0].Topics, 1)
	require.Len(t, one.Dirs[0].Topics[0].Partitions, 1)
	assert.Equal(t, int64(20), one.Dirs[0].Topics[0].Partitions[0].Size)
}

func TestDescribeLogDirsNotAdvertisedWithoutLogDirs(t *testing.T) {
	ts := startServer(t, Options{}, nil)
	c := dial(t, ts.addr)
	resp := c.roundTrip(kmsg.NewPtrApiVersionsRequest()).(*kmsg.ApiVersionsResponse)
	for _, k := range resp.ApiKeys {
		assert.NotEqual(t, int16(35), k.ApiKey)
	}
}
