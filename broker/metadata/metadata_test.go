package metadata

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func sp(s string) *string { return &s }

var (
	idA = Uuid{1}
	idB = Uuid{2}
)

func allRecords() []Record {
	return []Record{
		&RegisterBrokerRecord{BrokerID: 1, IncarnationID: Uuid{9, 9}, BrokerEpoch: 7,
			Endpoints: []Endpoint{{Name: "PLAINTEXT", Host: "localhost", Port: 9092}}, Rack: sp("r1"), Fenced: true},
		&RegisterBrokerRecord{BrokerID: 2, BrokerEpoch: 8},
		&TopicRecord{Name: "orders", TopicID: idA},
		&PartitionRecord{PartitionID: 0, TopicID: idA, Replicas: []int32{1, 2}, ISR: []int32{1, 2}, Leader: 1, LeaderEpoch: 0},
		&ConfigRecord{ResourceType: ConfigResourceTopic, ResourceName: "orders", Name: "retention.ms", Value: sp("1000")},
		&ConfigRecord{ResourceType: ConfigResourceTopic, ResourceName: "orders", Name: "gone", Value: nil},
		&PartitionChangeRecord{PartitionID: 0, TopicID: idA, ISR: []int32{1}, Leader: LeaderNoChange},
		&PartitionChangeRecord{PartitionID: 0, TopicID: idA, Leader: NoLeader},
		&PartitionChangeRecord{PartitionID: 0, TopicID: idA, ISR: []int32{}, Leader: 2, Replicas: []int32{2}},
		&FenceBrokerRecord{ID: 1, Epoch: 7},
		&UnfenceBrokerRecord{ID: 1, Epoch: 7},
		&BrokerRegistrationChangeRecord{BrokerID: 1, BrokerEpoch: 7, Fenced: FenceFence, InControlledShutdown: 1},
		&BrokerRegistrationChangeRecord{BrokerID: 1, BrokerEpoch: 7},
		&RemoveTopicRecord{TopicID: idA},
		&ProducerIDsRecord{BrokerID: 1, BrokerEpoch: 7, NextProducerID: 1000},
		&NoOpRecord{},
	}
}

func TestEncodeDecodeRoundTrip(t *testing.T) {
	for _, rec := range allRecords() {
		b := Encode(rec)
		got, err := Decode(b)
		require.NoError(t, err, "%T", rec)
		assert.Equal(t, rec, got, "%T", rec)
		assert.Equal(t, b, Encode(got), "%T re-encodes to the same bytes", rec)
	}
}

func TestEncodeFrame(t *testing.T) {
	b := Encode(&TopicRecord{Name: "a", TopicID: idA})
	// frameVersion 1, apiKey 2, version 0, compact string "a", uuid, no tags.
	want := append([]byte{1, 2, 0, 2, 'a'}, idA[:]...)
	want = append(want, 0)
	assert.Equal(t, want, b)
}

func TestDecodeRejects(t *testing.T) {
	good := Encode(&FenceBrokerRecord{ID: 1, Epoch: 2})
	cases := map[string][]byte{
		"empty":          nil,
		"frame version":  append([]byte{2}, good[1:]...),
		"unknown key":    {1, 99, 0, 0},
		"bad version":    {1, byte(KeyFenceBroker), 5, 0},
		"truncated body": good[:len(good)-2],
		"trailing":       append(append([]byte{}, good...), 0),
		"huge tag count": {1, byte(KeyNoOp), 0, 0xff, 0xff, 0x03},
		"tag past end":   {1, byte(KeyNoOp), 0, 1, 0, 10, 1},
	}
	for name, b := range cases {
		_, err := Decode(b)
		assert.ErrorIs(t, err, ErrCorruptRecord, name)
	}
}

func TestDecodeSkipsUnknownTags(t *testing.T) {
	b := []byte{1, byte(KeyNoOp), 0, 1, 7, 2, 0xaa, 0xbb}
	rec, err := Decode(b)
	require.NoError(t, err)
	assert.Equal(t, &NoOpRecord{}, rec)
}

func TestApplyReplay(t *testing.T) {
	reg := func(id int32, epoch int64, fenced bool) *RegisterBrokerRecord {
		return &RegisterBrokerRecord{BrokerID: id, BrokerEpoch: epoch, Fenced: fenced,
			Endpoints: []Endpoint{{Name: "PLAINTEXT", Host: "h", Port: uint16(9090 + id)}}}
	}
	tests := []struct {
		name  string
		recs  []Record
		check func(t *testing.T, im *Image)
		err   bool
	}{
		{
			name: "register and unfence",
			recs: []Record{reg(1, 5, true), &UnfenceBrokerRecord{ID: 1, Epoch: 5}},
			check: func(t *testing.T, im *Image) {
				assert.Equal(t, Broker{ID: 1, Epoch: 5, Host: "h", Port: 9091,
					Endpoints: []Endpoint{{Name: "PLAINTEXT", Host: "h", Port: 9091}}}, im.Brokers[1])
				assert.True(t, im.Live(1))
			},
		},
		{
			name: "stale broker epoch",
			recs: []Record{reg(1, 5, true), &UnfenceBrokerRecord{ID: 1, Epoch: 4}},
			err:  true,
		},
		{
			name: "new incarnation replaces registration",
			recs: []Record{reg(1, 5, false), reg(1, 9, true)},
			check: func(t *testing.T, im *Image) {
				assert.Equal(t, int64(9), im.Brokers[1].Epoch)
				assert.True(t, im.Brokers[1].Fenced)
			},
		},
		{
			name: "topic with partitions and config",
			recs: []Record{
				&TopicRecord{Name: "t", TopicID: idA},
				&ConfigRecord{ResourceType: ConfigResourceTopic, ResourceName: "t", Name: "min.insync.replicas", Value: sp("2")},
				&PartitionRecord{PartitionID: 0, TopicID: idA, Replicas: []int32{1, 2}, ISR: []int32{1, 2}, Leader: 1},
				&PartitionRecord{PartitionID: 1, TopicID: idA, Replicas: []int32{2, 1}, ISR: []int32{2, 1}, Leader: 2},
			},
			check: func(t *testing.T, im *Image) {
				tp := im.Topic("t")
				require.NotNil(t, tp)
				assert.Same(t, tp, im.TopicsByID[idA])
				assert.Equal(t, map[string]string{"min.insync.replicas": "2"}, tp.Configs)
				require.Len(t, tp.Partitions, 2)
				assert.Equal(t, int32(2), im.Partition("t", 1).Leader)
				assert.Nil(t, im.Partition("t", 2))
			},
		},
		{
			name: "partition out of sequence",
			recs: []Record{&TopicRecord{Name: "t", TopicID: idA}, &PartitionRecord{PartitionID: 1, TopicID: idA}},
			err:  true,
		},
		{
			name: "duplicate topic name",
			recs: []Record{&TopicRecord{Name: "t", TopicID: idA}, &TopicRecord{Name: "t", TopicID: idB}},
			err:  true,
		},
		{
			name: "partition change bumps epochs",
			recs: []Record{
				&TopicRecord{Name: "t", TopicID: idA},
				&PartitionRecord{PartitionID: 0, TopicID: idA, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}, Leader: 1, LeaderEpoch: 4, PartitionEpoch: 6},
				&PartitionChangeRecord{PartitionID: 0, TopicID: idA, ISR: []int32{2, 3}, Leader: 2},
				&PartitionChangeRecord{PartitionID: 0, TopicID: idA, ISR: []int32{1, 2, 3}, Leader: LeaderNoChange},
			},
			check: func(t *testing.T, im *Image) {
				assert.Equal(t, Partition{Partition: 0, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}, Leader: 2, LeaderEpoch: 5, PartitionEpoch: 8},
					*im.Partition("t", 0))
			},
		},
		{
			name: "leader to none",
			recs: []Record{
				&TopicRecord{Name: "t", TopicID: idA},
				&PartitionRecord{PartitionID: 0, TopicID: idA, Replicas: []int32{1}, ISR: []int32{1}, Leader: 1},
				&PartitionChangeRecord{PartitionID: 0, TopicID: idA, Leader: NoLeader},
			},
			check: func(t *testing.T, im *Image) {
				p := im.Partition("t", 0)
				assert.Equal(t, NoLeader, p.Leader)
				assert.Equal(t, int32(1), p.LeaderEpoch)
				assert.Equal(t, []int32{1}, p.ISR)
			},
		},
		{
			name: "remove topic",
			recs: []Record{&TopicRecord{Name: "t", TopicID: idA}, &RemoveTopicRecord{TopicID: idA}},
			check: func(t *testing.T, im *Image) {
				assert.Nil(t, im.Topic("t"))
				assert.Empty(t, im.TopicsByID)
			},
		},
		{
			name: "remove unknown topic",
			recs: []Record{&RemoveTopicRecord{TopicID: idA}},
			err:  true,
		},
		{
			name: "producer ids only grow",
			recs: []Record{&ProducerIDsRecord{NextProducerID: 1000}, &ProducerIDsRecord{NextProducerID: 1000}},
			err:  true,
		},
		{
			name: "broker configs",
			recs: []Record{
				&ConfigRecord{ResourceType: ConfigResourceBroker, ResourceName: "", Name: "a", Value: sp("1")},
				&ConfigRecord{ResourceType: ConfigResourceBroker, ResourceName: "1", Name: "b", Value: sp("2")},
				&ConfigRecord{ResourceType: ConfigResourceBroker, ResourceName: "", Name: "a", Value: nil},
			},
			check: func(t *testing.T, im *Image) {
				assert.Equal(t, map[string]map[string]string{"": {}, "1": {"b": "2"}}, im.BrokerConfigs)
			},
		},
		{
			name: "controlled shutdown",
			recs: []Record{reg(1, 5, false), &BrokerRegistrationChangeRecord{BrokerID: 1, BrokerEpoch: 5, InControlledShutdown: 1}},
			check: func(t *testing.T, im *Image) {
				assert.False(t, im.Live(1))
				assert.Empty(t, im.UnfencedBrokers())
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			base := NewImage("c")
			im, err := base.ApplyBatch(int64(len(tc.recs)-1), tc.recs)
			if tc.err {
				assert.ErrorIs(t, err, ErrInvalidRecord)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, int64(len(tc.recs)-1), im.Offset)
			tc.check(t, im)
			// Applying one at a time gives the same image.
			one := base
			for _, r := range tc.recs {
				one, err = one.Apply(r)
				require.NoError(t, err)
			}
			one.Offset = im.Offset
			assert.Equal(t, im, one)
			assert.Equal(t, NewImage("c"), base, "the base image is never modified")
		})
	}
}

func TestApplyCopyOnWrite(t *testing.T) {
	im1, err := NewImage("c").ApplyBatch(1, []Record{
		&TopicRecord{Name: "t", TopicID: idA},
		&PartitionRecord{PartitionID: 0, TopicID: idA, Replicas: []int32{1}, ISR: []int32{1}, Leader: 1},
		&TopicRecord{Name: "u", TopicID: idB},
	})
	require.NoError(t, err)
	im2, err := im1.ApplyBatch(2, []Record{
		&PartitionChangeRecord{PartitionID: 0, TopicID: idA, Leader: NoLeader},
		&ConfigRecord{ResourceType: ConfigResourceTopic, ResourceName: "t", Name: "x", Value: sp("y")},
	})
	require.NoError(t, err)
	assert.Equal(t, int32(1), im1.Partition("t", 0).Leader)
	assert.Empty(t, im1.Topic("t").Configs)
	assert.Equal(t, NoLeader, im2.Partition("t", 0).Leader)
	assert.Same(t, im1.Topic("u"), im2.Topic("u"), "unchanged topics are shared")
}

func TestPublisher(t *testing.T) {
	p := NewPublisher(NewImage("c"))
	var seen [][2]int64
	cancel := p.Subscribe(func(old, new *Image) {
		o := int64(-100)
		if old != nil {
			o = old.Offset
		}
		seen = append(seen, [2]int64{o, new.Offset})
	})
	ch := p.Changed()
	require.NoError(t, p.ApplyBatch(0, []Record{&NoOpRecord{}}))
	select {
	case <-ch:
	default:
		t.Fatal("Changed not closed by publish")
	}
	require.Error(t, p.ApplyBatch(1, []Record{&RemoveTopicRecord{TopicID: idA}}))
	assert.Equal(t, int64(0), p.Image().Offset, "a failed batch publishes nothing")
	cancel()
	require.NoError(t, p.ApplyBatch(1, []Record{&NoOpRecord{}}))
	assert.Equal(t, [][2]int64{{-100, -1}, {-1, 0}}, seen)
	var _ Source = p
}

func FuzzDecode(f *testing.F) {
	for _, r := range allRecords() {
		f.Add(Encode(r))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		rec, err := Decode(b)
		if err != nil {
			return
		}
		again, err := Decode(Encode(rec))
		require.NoError(t, err)
		assert.Equal(t, rec, again)
		_, _ = NewImage("c").Apply(rec)
	})
}
