package server

import (
	"bytes"
	"context"
	"encoding/binary"
	"log/slog"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// bugCatcher is a slog handler that remembers error records, so a fuzz
// run fails on a panic the server recovered (and logged as a bug) instead
// of hiding it.
type bugCatcher struct {
	mu   sync.Mutex
	msgs []string
}

func (b *bugCatcher) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelError }
func (b *bugCatcher) Handle(_ context.Context, r slog.Record) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "panic" || a.Key == "stack" {
			b.msgs = append(b.msgs, a.Value.String())
		}
		return true
	})
	return nil
}
func (b *bugCatcher) WithAttrs([]slog.Attr) slog.Handler { return b }
func (b *bugCatcher) WithGroup(string) slog.Handler      { return b }

func (b *bugCatcher) take() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	m := b.msgs
	b.msgs = nil
	return m
}

// seedFrames returns one valid frame (without its size prefix) per served
// key at its lowest and highest version, the shapes the fuzzer mutates.
func seedFrames(srv *Server) [][]byte {
	var out [][]byte
	f := kmsg.NewRequestFormatter(kmsg.FormatterClientID("seed"))
	for _, k := range sortedKeys(srv.apis) {
		a := srv.apis[k]
		for _, v := range []int16{a.min, a.max} {
			req := kmsg.RequestForKey(k)
			req.SetVersion(v)
			switch r := req.(type) {
			case *kmsg.ProduceRequest:
				r.Acks = -1
				r.Topics = []kmsg.ProduceRequestTopic{{Topic: "t", Partitions: []kmsg.ProduceRequestTopicPartition{{Records: recordBatch(2, 8)}}}}
			case *kmsg.FetchRequest:
				r.MinBytes, r.MaxWaitMillis, r.MaxBytes = 1, 100, 1<<20
				r.Topics = []kmsg.FetchRequestTopic{{Topic: "t", Partitions: []kmsg.FetchRequestTopicPartition{{PartitionMaxBytes: 1 << 20}}}}
			case *kmsg.MetadataRequest:
				name := "new"
				r.AllowAutoTopicCreation = true
				r.Topics = []kmsg.MetadataRequestTopic{{Topic: &name}}
			}
			out = append(out, f.AppendRequest(nil, req, 1)[4:])
		}
	}
	return out
}

func newFuzzServer(t testing.TB, catcher *bugCatcher) *Server {
	fake := newFakeCluster(1, "127.0.0.1", 9092)
	fake.addTopic("t", 2)
	fake.Produce(context.Background(), "t", 0, recordBatch(3, 8), 1)
	b := fake.backend()
	b.AutoCreateTopics = true
	srv, err := New(Options{}, b, slog.New(catcher), nil)
	require.NoError(t, err)
	return srv
}

// FuzzDispatch feeds arbitrary frames to the decoder and the handlers: no
// input may panic (recovered panics count as failures) and every answer
// must encode to a well-formed frame.
func FuzzDispatch(f *testing.F) {
	catcher := &bugCatcher{}
	srv := newFuzzServer(f, catcher)
	for _, s := range seedFrames(srv) {
		f.Add(s)
	}
	f.Add([]byte{0, 18, 0, 99, 0, 0, 0, 1, 255, 255})
	f.Add([]byte{0x27, 0x0f, 0, 0, 0, 0, 0, 1, 255, 255})
	done, cancel := context.WithCancel(context.Background())
	cancel()
	f.Fuzz(func(t *testing.T, frame []byte) {
		r, err := srv.decodeRequest(frame)
		if err != nil {
			return
		}
		r.ctx = done // long polls and timeouts end at once
		resp, err := srv.serveRequest(r)
		require.Empty(t, catcher.take(), "recovered panic")
		if err != nil || resp == nil {
			return
		}
		out := appendResponse(nil, r.header.correlationID, resp)
		require.Equal(t, len(out)-4, int(binary.BigEndian.Uint32(out)))
	})
}

// FuzzReadFrame reads a byte stream as frames the way a connection does:
// no input may panic, allocate beyond the limit, or yield a frame whose
// size differs from its prefix.
func FuzzReadFrame(f *testing.F) {
	f.Add([]byte{0, 0, 0, 10, 0, 18, 0, 3, 0, 0, 0, 1, 255, 255})
	f.Add([]byte{0x7f, 0xff, 0xff, 0xff})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 1, 2})
	f.Fuzz(func(t *testing.T, stream []byte) {
		const maxBytes = 1 << 12
		r := bytes.NewReader(stream)
		var sizeBuf [4]byte
		for {
			frame, size, err := readFrame(r, &sizeBuf, maxBytes)
			if err != nil {
				return
			}
			require.Equal(t, int(size), len(frame))
			require.LessOrEqual(t, len(frame), maxBytes)
			if _, _, err := parseRequestHeader(frame); err != nil {
				return
			}
		}
	})
}
