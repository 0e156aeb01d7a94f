package raftq

import (
	"bytes"
	"context"
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/faultline/faultline/broker/metadata"
)

func TestEntryOffsets(t *testing.T) {
	var m entryOffsets
	m.reset(0, 0)
	assert.Equal(t, uint64(0), m.lastIndex())
	end, ok := m.endOffset(0)
	assert.True(t, ok)
	assert.Equal(t, int64(0), end)
	require.NoError(t, m.add(3)) // index 1: [0,3)
	require.NoError(t, m.add(4)) // index 2: [3,4)
	require.NoError(t, m.add(9)) // index 3: [4,9)
	assert.Error(t, m.add(9), "an entry holds at least one offset")
	assert.Equal(t, uint64(3), m.lastIndex())
	assert.Equal(t, int64(9), m.logEndOffset())
	end, _ = m.endOffset(2)
	assert.Equal(t, int64(4), end)
	_, ok = m.endOffset(4)
	assert.False(t, ok)

	m.truncateFrom(3)
	assert.Equal(t, uint64(2), m.lastIndex())
	assert.Equal(t, int64(4), m.logEndOffset())
	require.NoError(t, m.add(6))

	m.compactTo(2)
	assert.Equal(t, uint64(3), m.first)
	end, ok = m.endOffset(2)
	assert.True(t, ok, "the compacted entry's end is the start")
	assert.Equal(t, int64(4), end)
	_, ok = m.endOffset(1)
	assert.False(t, ok)
	end, _ = m.endOffset(3)
	assert.Equal(t, int64(6), end)

	m.reset(10, 100)
	assert.Equal(t, uint64(10), m.lastIndex())
	assert.Equal(t, int64(100), m.logEndOffset())
}

func TestQuorumStateRoundTrip(t *testing.T) {
	hs := hardState{Term: 7, Vote: RaftID(2), Commit: 41}
	b := encodeQuorumState(hs, "c1", []int32{1, 2, 3})
	assert.JSONEq(t, `{"clusterId":"c1","leaderEpoch":7,"votedId":2,"commitIndex":41,"currentVoters":[{"voterId":1},{"voterId":2},{"voterId":3}],"data_version":0}`, string(b))
	got, err := decodeQuorumState(b)
	require.NoError(t, err)
	assert.Equal(t, hs, got)

	got, err = decodeQuorumState(encodeQuorumState(hardState{Term: 3}, "", nil))
	require.NoError(t, err)
	assert.Equal(t, hardState{Term: 3}, got, "votedId -1 is no vote")

	for _, bad := range []string{``, `{`, `{"data_version":1}`, `{"votedId":-2}`, `{"leaderEpoch":0,"votedId":1}`, `[]`} {
		_, err := decodeQuorumState([]byte(bad))
		assert.Error(t, err, "%q", bad)
	}

	dir := t.TempDir()
	_, found, err := readQuorumState(osFS(), dir)
	require.NoError(t, err)
	assert.False(t, found)
	require.NoError(t, writeQuorumState(osFS(), dir, hs, "c1", []int32{3, 1, 2}))
	got, found, err = readQuorumState(osFS(), dir)
	require.NoError(t, err)
	assert.True(t, found)
	assert.Equal(t, hs, got)
}

func FuzzDecodeQuorumState(f *testing.F) {
	f.Add(encodeQuorumState(hardState{Term: 7, Vote: 3, Commit: 41}, "c", []int32{1, 2}))
	f.Add([]byte(`{"votedId":-1}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		hs, err := decodeQuorumState(b)
		if err != nil {
			return
		}
		again, err := decodeQuorumState(encodeQuorumState(hs, "", nil))
		require.NoError(t, err)
		assert.Equal(t, hs, again)
	})
}

func sampleRecords() []metadata.Record {
	rack := "r1"
	v := "1"
	return []metadata.Record{
		&metadata.RegisterBrokerRecord{BrokerID: 1, BrokerEpoch: 5, Endpoints: []metadata.Endpoint{{Name: "PLAINTEXT", Host: "h", Port: 9092}}, Rack: &rack, Fenced: true},
		&metadata.TopicRecord{Name: "a", TopicID: metadata.Uuid{1}},
		&metadata.PartitionRecord{PartitionID: 0, TopicID: metadata.Uuid{1}, Replicas: []int32{1}, ISR: []int32{1}, Leader: 1, LeaderEpoch: 3, PartitionEpoch: 4},
		&metadata.ConfigRecord{ResourceType: metadata.ConfigResourceTopic, ResourceName: "a", Name: "retention.ms", Value: &v},
		&metadata.ProducerIDsRecord{BrokerID: -1, BrokerEpoch: -1, NextProducerID: 2000},
	}
}

func TestSnapshotRoundTripAndDamage(t *testing.T) {
	h := SnapshotHeader{Version: snapshotVersion, RaftIndex: 12, RaftTerm: 3, EndOffset: 40, Voters: []int32{1, 2, 3}, LastContainedLogTimestampMs: 99}
	recs := sampleRecords()
	for range snapshotRecordsPerBatch {
		recs = append(recs, &metadata.NoOpRecord{})
	}
	b := EncodeSnapshot(h, recs, 1000)
	gh, grecs, err := DecodeSnapshot(b)
	require.NoError(t, err)
	assert.Equal(t, h, gh)
	assert.Equal(t, recs, grecs)

	_, _, err = DecodeSnapshot(b[:len(b)-1])
	assert.ErrorIs(t, err, ErrBadSnapshot, "torn")
	_, _, err = DecodeSnapshot(b[:len(b)-80])
	assert.ErrorIs(t, err, ErrBadSnapshot, "without the footer")
	flipped := bytes.Clone(b)
	flipped[len(flipped)/2] ^= 0x40
	_, _, err = DecodeSnapshot(flipped)
	assert.ErrorIs(t, err, ErrBadSnapshot, "bit flip")
	_, _, err = DecodeSnapshot(nil)
	assert.ErrorIs(t, err, ErrBadSnapshot)

	assert.Equal(t, "00000000000000000040-0000000003.checkpoint", SnapshotFileName(40, 3))
	off, ep, ok := parseSnapshotName("00000000000000000040-0000000003.checkpoint", snapshotSuffix)
	assert.True(t, ok)
	assert.Equal(t, int64(40), off)
	assert.Equal(t, int32(3), ep)
	for _, bad := range []string{"40-3.checkpoint", "00000000000000000040-0000000003.log", "0000000000000000004x-0000000003.checkpoint", "00000000000000000040_0000000003.checkpoint"} {
		_, _, ok := parseSnapshotName(bad, snapshotSuffix)
		assert.False(t, ok, bad)
	}
}

func FuzzDecodeSnapshot(f *testing.F) {
	f.Add(EncodeSnapshot(SnapshotHeader{RaftIndex: 1, RaftTerm: 1, EndOffset: 2}, sampleRecords(), 5))
	f.Add(EncodeSnapshot(SnapshotHeader{}, nil, 0))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, recs, err := DecodeSnapshot(b)
		if err != nil {
			return
		}
		h2, recs2, err := DecodeSnapshot(EncodeSnapshot(h, recs, 0))
		require.NoError(t, err)
		assert.Equal(t, h, h2)
		assert.Equal(t, len(recs), len(recs2))
	})
}

// randomImage applies random valid records to an image.
func randomImage(t *testing.T, rng *rand.Rand, im *metadata.Image, n int) *metadata.Image {
	t.Helper()
	for range n {
		var rec metadata.Record
		switch rng.IntN(8) {
		case 0:
			id := rng.Int32N(5)
			rack := []string{"", "r1"}[rng.IntN(2)]
			r := &metadata.RegisterBrokerRecord{BrokerID: id, BrokerEpoch: rng.Int64N(100), Fenced: rng.IntN(2) == 0,
				Endpoints: []metadata.Endpoint{{Name: "PLAINTEXT", Host: "h", Port: uint16(9000 + id)}}}
			if rack != "" {
				r.Rack = &rack
			}
			rec = r
		case 1:
			id := metadata.Uuid{byte(rng.IntN(6) + 1)}
			if im.TopicsByID[id] != nil {
				rec = &metadata.RemoveTopicRecord{TopicID: id}
			} else if name := string(rune('a' + rng.IntN(6))); im.Topics[name] == nil {
				rec = &metadata.TopicRecord{Name: name, TopicID: id}
			}
		case 2, 3:
			for _, tp := range im.Topics {
				p := int32(rng.IntN(len(tp.Partitions) + 1))
				rec = &metadata.PartitionRecord{PartitionID: p, TopicID: tp.ID, Replicas: []int32{1, 2}, ISR: []int32{1}, Leader: 1, LeaderEpoch: rng.Int32N(9), PartitionEpoch: rng.Int32N(9)}
				break
			}
		case 4:
			for _, tp := range im.Topics {
				if len(tp.Partitions) > 0 {
					rec = &metadata.PartitionChangeRecord{TopicID: tp.ID, ISR: []int32{2}, Leader: 2}
				}
				break
			}
		case 5:
			for _, tp := range im.Topics {
				v := "x"
				var val *string
				if rng.IntN(3) > 0 {
					val = &v
				}
				rec = &metadata.ConfigRecord{ResourceType: metadata.ConfigResourceTopic, ResourceName: tp.Name, Name: []string{"a", "b"}[rng.IntN(2)], Value: val}
				break
			}
		case 6:
			v := "y"
			var val *string
			if rng.IntN(3) > 0 {
				val = &v
			}
			rec = &metadata.ConfigRecord{ResourceType: metadata.ConfigResourceBroker, ResourceName: []string{"", "1"}[rng.IntN(2)], Name: "k", Value: val}
		case 7:
			rec = &metadata.ProducerIDsRecord{NextProducerID: im.NextProducerID + 1 + rng.Int64N(10)}
		}
		if rec == nil {
			continue
		}
		next, err := im.Apply(rec)
		require.NoError(t, err, "%#v", rec)
		im = next
	}
	return im
}

// withoutEmptyConfigs drops broker config resources without keys:
// deleting a config that was never set leaves one, and it means nothing.
func withoutEmptyConfigs(im *metadata.Image) *metadata.Image {
	cp := *im
	cp.BrokerConfigs = map[string]map[string]string{}
	for r, m := range im.BrokerConfigs {
		if len(m) > 0 {
			cp.BrokerConfigs[r] = m
		}
	}
	return &cp
}

func TestImageDeltaRebuildsAnyImage(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 300 {
		from := randomImage(t, rng, metadata.NewImage("c"), rng.IntN(30))
		to := randomImage(t, rng, from, rng.IntN(30))
		from.Offset, to.Offset = 0, 0
		for _, base := range []*metadata.Image{metadata.NewImage("c"), from} {
			got, err := base.ApplyBatch(0, imageDelta(base, to))
			require.NoError(t, err, "case %d", i)
			require.Equal(t, withoutEmptyConfigs(to), withoutEmptyConfigs(got), "case %d", i)
		}
	}
	assert.Empty(t, imageDelta(metadata.NewImage("c"), metadata.NewImage("c")))
}

func TestFramesRoundTrip(t *testing.T) {
	msgs := []*raftpb.Message{
		{Type: raftpb.MsgHeartbeat.Enum(), To: new(uint64(2)), From: new(uint64(1)), Term: new(uint64(4)), Commit: new(uint64(9))},
		{Type: raftpb.MsgApp.Enum(), To: new(uint64(2)), From: new(uint64(1)), Entries: []*raftpb.Entry{{Index: new(uint64(10)), Term: new(uint64(4)), Data: []byte("batch")}}},
	}
	var b []byte
	b = append(b, Magic...)
	b = append(b, 0, 0, 0, 7)
	for _, m := range msgs {
		var err error
		b, err = appendFrame(b, m, 1<<20)
		require.NoError(t, err)
	}
	r := bytes.NewReader(b)
	from, err := readHandshake(r)
	require.NoError(t, err)
	assert.Equal(t, int32(7), from)
	var hdr [4]byte
	for _, want := range msgs {
		got, err := readFrame(r, 1<<20, &hdr)
		require.NoError(t, err)
		assert.True(t, proto.Equal(want, got))
	}
	_, err = readFrame(r, 1<<20, &hdr)
	assert.ErrorIs(t, err, io.EOF)

	_, err = appendFrame(nil, msgs[1], 8)
	assert.ErrorIs(t, err, ErrBadFrame, "a frame above the bound is not sent")
	_, err = readFrame(bytes.NewReader([]byte{0xff, 0xff, 0xff, 0xff}), 1<<20, &hdr)
	assert.ErrorIs(t, err, ErrBadFrame, "a length above the bound fails before allocating")
	_, err = readFrame(bytes.NewReader([]byte{0, 0, 0, 3, 0xff, 0xff, 0xff}), 1<<20, &hdr)
	assert.ErrorIs(t, err, ErrBadFrame, "not a protobuf message")
	_, err = readFrame(bytes.NewReader([]byte{0, 0, 0, 9, 1}), 1<<20, &hdr)
	assert.ErrorIs(t, err, ErrBadFrame, "torn frame")
	_, err = readHandshake(bytes.NewReader([]byte("GET / HTTP/1.1\r\n")))
	assert.ErrorIs(t, err, ErrBadFrame)
}

func FuzzReadFrames(f *testing.F) {
	seed := append([]byte(Magic), 0, 0, 0, 1)
	seed, _ = appendFrame(seed, &raftpb.Message{Type: raftpb.MsgVote.Enum(), To: new(uint64(2)), From: new(uint64(2)), Term: new(uint64(3))}, 1<<20)
	f.Add(seed)
	f.Add([]byte(Magic + "\x00\x00\x00\x01\x00\x00\x00\x02\x08\x01"))
	f.Fuzz(func(t *testing.T, b []byte) {
		r := bytes.NewReader(b)
		if _, err := readHandshake(r); err != nil {
			return
		}
		var hdr [4]byte
		for range 1000 {
			m, err := readFrame(r, 1<<16, &hdr)
			if err != nil {
				return
			}
			// What decodes re-encodes into a frame that decodes the same.
			fb, err := appendFrame(nil, m, 1<<20)
			require.NoError(t, err)
			again, err := readFrame(bytes.NewReader(fb), 1<<20, &hdr)
			require.NoError(t, err)
			assert.True(t, proto.Equal(m, again))
		}
	})
}

// chanReceiver records what a transport delivers.
type chanReceiver struct {
	msgs  chan *raftpb.Message
	mu    sync.Mutex
	snaps []bool
}

func (r *chanReceiver) Receive(m *raftpb.Message) { r.msgs <- m }
func (r *chanReceiver) ReportUnreachable(uint64)  {}
func (r *chanReceiver) ReportSnapshot(_ uint64, failed bool) {
	r.mu.Lock()
	r.snaps = append(r.snaps, failed)
	r.mu.Unlock()
}

func TestServeConnTakesHandedOverConnections(t *testing.T) {
	tr, err := NewTCPTransport(TCPConfig{NodeID: 1, Voters: map[int32]string{1: "127.0.0.1:1", 2: "127.0.0.1:2"}})
	require.NoError(t, err)
	rcv := &chanReceiver{msgs: make(chan *raftpb.Message, 4)}
	require.NoError(t, tr.Start(rcv))
	defer tr.Close()

	// A listener shared with another protocol sniffed the magic and hands
	// the connection over with those bytes still to be read.
	server, client := net.Pipe()
	served := make(chan error, 1)
	go func() { served <- tr.ServeConn(server) }()
	m := &raftpb.Message{Type: raftpb.MsgHeartbeat.Enum(), To: new(RaftID(1)), From: new(RaftID(2)), Term: new(uint64(3))}
	wrongTo := &raftpb.Message{Type: raftpb.MsgHeartbeat.Enum(), To: new(RaftID(5)), From: new(RaftID(2))}
	b := append([]byte(Magic), 0, 0, 0, 2)
	b, _ = appendFrame(b, wrongTo, 1<<20)
	b, _ = appendFrame(b, m, 1<<20)
	go func() { _, _ = client.Write(b) }()
	select {
	case got := <-rcv.msgs:
		assert.True(t, proto.Equal(m, got), "the message for another node was dropped")
	case <-time.After(waitFor):
		t.Fatal("no message delivered")
	}
	require.NoError(t, client.Close())
	assert.Error(t, <-served)

	// A second connection from the same peer replaces the first.
	first, firstClient := net.Pipe()
	firstDone := make(chan error, 1)
	go func() { firstDone <- tr.ServeConn(first) }()
	go func() { _, _ = firstClient.Write(append([]byte(Magic), 0, 0, 0, 2)) }()
	require.Eventually(t, func() bool {
		tr.mu.Lock()
		defer tr.mu.Unlock()
		return tr.inboundFrom[2] == first
	}, waitFor, pollEvery)
	second, secondClient := net.Pipe()
	go func() { _ = tr.ServeConn(second) }()
	hb, _ := appendFrame(append([]byte(Magic), 0, 0, 0, 2), m, 1<<20)
	go func() { _, _ = secondClient.Write(hb) }()
	select {
	case <-rcv.msgs:
	case <-time.After(waitFor):
		t.Fatal("no message on the second connection")
	}
	select {
	case err := <-firstDone:
		assert.Error(t, err, "the first connection was closed")
	case <-time.After(waitFor):
		t.Fatal("the stale connection from the same peer stayed open")
	}
	_ = firstClient.Close()
	_ = secondClient.Close()

	// A stranger is turned away.
	server, client = net.Pipe()
	go func() { served <- tr.ServeConn(server) }()
	go func() { _, _ = client.Write(append([]byte(Magic), 0, 0, 0, 9)) }()
	err = <-served
	assert.ErrorIs(t, err, ErrBadFrame)
	_ = client.Close()
}

func TestTCPTransportDeliversAndReportsSnapshots(t *testing.T) {
	ln1, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ln2, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	voters := map[int32]string{1: ln1.Addr().String(), 2: ln2.Addr().String()}
	require.NoError(t, ln1.Close())
	require.NoError(t, ln2.Close())
	var (
		rcv [2]*chanReceiver
		trs [2]*TCPTransport
	)
	for i := range rcv {
		id := int32(i + 1)
		tr, err := NewTCPTransport(TCPConfig{NodeID: id, Voters: voters, ListenAddr: voters[id], BackoffMin: time.Millisecond, BackoffMax: 10 * time.Millisecond})
		require.NoError(t, err)
		rcv[i] = &chanReceiver{msgs: make(chan *raftpb.Message, 16)}
		require.NoError(t, tr.Start(rcv[i]))
		t.Cleanup(func() { _ = tr.Close() })
		trs[i] = tr
	}
	snap := &raftpb.Message{Type: raftpb.MsgSnap.Enum(), To: new(RaftID(2)), From: new(RaftID(1)),
		Snapshot: &raftpb.Snapshot{Data: []byte("s"), Metadata: &raftpb.SnapshotMetadata{Index: new(uint64(3)), Term: new(uint64(1))}}}
	// Resend until the connection is up: the transport drops while it
	// dials, as raft expects.
	require.Eventually(t, func() bool {
		trs[0].Send([]*raftpb.Message{snap})
		select {
		case got := <-rcv[1].msgs:
			return proto.Equal(snap, got)
		case <-time.After(20 * time.Millisecond):
			return false
		}
	}, waitFor, pollEvery)
	require.Eventually(t, func() bool {
		rcv[0].mu.Lock()
		defer rcv[0].mu.Unlock()
		return len(rcv[0].snaps) > 0 && !rcv[0].snaps[len(rcv[0].snaps)-1]
	}, waitFor, pollEvery, "a sent snapshot is reported finished")

	// The peer goes away: what is sent meanwhile is dropped and reported.
	require.NoError(t, trs[1].Close())
	require.Eventually(t, func() bool {
		trs[0].Send([]*raftpb.Message{snap})
		rcv[0].mu.Lock()
		defer rcv[0].mu.Unlock()
		return rcv[0].snaps[len(rcv[0].snaps)-1]
	}, waitFor, pollEvery, "a snapshot to a dead peer is reported failed")
}

// TestControllerListenerRoutesEachConnectionOnce: on one listener a raft
// connection reaches the transport, a snapshot request gets the quorum's
// answer, and a Kafka request reaches Accept with its bytes intact.
func TestControllerListenerRoutesEachConnectionOnce(t *testing.T) {
	tr, err := NewTCPTransport(TCPConfig{NodeID: 1, Voters: map[int32]string{1: "127.0.0.1:1", 2: "127.0.0.1:2"}})
	require.NoError(t, err)
	rcv := &chanReceiver{msgs: make(chan *raftpb.Message, 4)}
	require.NoError(t, tr.Start(rcv))
	defer tr.Close()
	q := &Quorum{} // no snapshot yet: the answer is an empty one
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	cl := NewControllerListener(ln, tr, q, nil)
	defer cl.Close()
	addr := ln.Addr().String()

	raftConn, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer raftConn.Close()
	b := append([]byte(Magic), 0, 0, 0, 2)
	m := &raftpb.Message{Type: raftpb.MsgHeartbeat.Enum(), To: new(RaftID(1)), From: new(RaftID(2))}
	b, _ = appendFrame(b, m, 1<<20)
	_, err = raftConn.Write(b)
	require.NoError(t, err)
	select {
	case got := <-rcv.msgs:
		assert.True(t, proto.Equal(m, got), "the peeked bytes were replayed to the transport")
	case <-time.After(waitFor):
		t.Fatal("no message delivered")
	}

	data, err := fetchSnapshot(context.Background(), nil, addr)
	require.NoError(t, err)
	assert.Nil(t, data, "no snapshot yet")

	kafkaConn, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer kafkaConn.Close()
	kafka := []byte{0, 0, 0, 20, 0, 18, 0, 3, 0, 0, 0, 1, 0, 4, 't', 'e', 's', 't', 0, 0, 0, 0, 0, 0}
	_, err = kafkaConn.Write(kafka)
	require.NoError(t, err)
	accepted, err := cl.Accept()
	require.NoError(t, err)
	defer accepted.Close()
	got := make([]byte, len(kafka))
	_, err = io.ReadFull(accepted, got)
	require.NoError(t, err)
	assert.Equal(t, kafka, got)
}

func FuzzDecodeBatches(f *testing.F) {
	f.Add(leaderChangeBatch(1, []int32{1, 2, 3}, 5))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		batches, err := DecodeBatches(b)
		if err != nil {
			return
		}
		for _, bt := range batches {
			assert.LessOrEqual(t, bt.BaseOffset, bt.LastOffset)
		}
	})
}
