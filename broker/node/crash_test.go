package node

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/faultline/faultline/internal/testutil"
)

// binaryNode is the real broker binary run on a data dir that survives
// restarts.
type binaryNode struct {
	bin, dir, config string
}

var (
	readyLine     = regexp.MustCompile(`Kafka broker 1 is ready to serve requests`)
	acceptingLine = regexp.MustCompile(`Accepting connections on listener PLAINTEXT://(\S+)`)
)

func newBinaryNode(t *testing.T, extra map[string]string) *binaryNode {
	t.Helper()
	bn := &binaryNode{bin: testutil.BuildBroker(t), dir: t.TempDir()}
	props := testProps(bn.dir)
	delete(props, "faultline.metrics.address")
	for k, v := range extra {
		props[k] = v
	}
	bn.config = testutil.WriteProperties(t, bn.dir, props)
	code, _, stderr := testutil.Run(t, bn.bin, "format", "-t", testClusterID, "-c", bn.config)
	require.Equal(t, 0, code, stderr)
	return bn
}

// start runs `broker serve` and waits until it is ready; it returns the
// process and its client address.
func (bn *binaryNode) start(t *testing.T) (*testutil.Process, string) {
	t.Helper()
	p := testutil.StartProcess(t, bn.bin, "serve", "-c", bn.config)
	addr := p.WaitForLine(t, acceptingLine, time.Minute)[1]
	p.WaitForLine(t, readyLine, time.Minute)
	return p, addr
}

func (bn *binaryNode) segment(topic string, partition int) string {
	return filepath.Join(bn.dir, "data", fmt.Sprintf("%s-%d", topic, partition), "00000000000000000000.log")
}

// readAll consumes topic partition 0 from the start up to its end offset.
func readAll(t *testing.T, addr, topic string) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	require.NoError(t, err)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	require.NoError(t, err)
	end, ok := ends.Lookup(topic, 0)
	require.True(t, ok)
	require.NoError(t, end.Err)
	cl.AddConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}})
	var out []*kgo.Record
	for int64(len(out)) < end.Offset {
		fs := cl.PollFetches(ctx)
		require.NoError(t, fs.Err0(), "after %d of %d records", len(out), end.Offset)
		out = append(out, fs.Records()...)
	}
	return out
}

func createTopicAt(t *testing.T, addr, topic string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	require.NoError(t, err)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, nil, topic)
	require.NoError(t, err)
	require.NoError(t, resp.Err)
}

// TestKill9DuringProduceKeepsAckedRecords runs the real binary, SIGKILLs it
// while producers are busy, and checks after a restart that every
// acknowledged record is there, at the offset it was acknowledged with:
// with log.flush.interval.messages=1 (every append fsynced before its ack),
// and with Kafka's default of leaving flushes to the OS (a process crash
// keeps what was written to the page cache).
func TestKill9DuringProduceKeepsAckedRecords(t *testing.T) {
	for _, tc := range []struct {
		name  string
		props map[string]string
	}{
		{"flush-every-message", map[string]string{"log.flush.interval.messages": "1"}},
		{"os-flush", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bn := newBinaryNode(t, tc.props)
			p2 := stopDuringProduce(t, bn, syscall.SIGKILL)
			p2.WaitForLine(t, regexp.MustCompile(`Found unclean shutdown file marker`), time.Second)
		})
	}
}

// TestSigtermDuringProduceIsClean sends SIGTERM while producers are busy:
// the broker finishes what it accepted, exits 0 with the clean-shutdown
// marker, and every acknowledged record is there after a restart that does
// not recover.
func TestSigtermDuringProduceIsClean(t *testing.T) {
	bn := newBinaryNode(t, nil)
	p2 := stopDuringProduce(t, bn, syscall.SIGTERM)
	assert.NotContains(t, p2.Output(), "Found unclean shutdown file marker")
}

// stopDuringProduce starts bn, has four producers write with acks=all until
// 2000 records are acknowledged, stops the broker with sig, restarts it and
// checks that every acknowledged record is in the log, once, at the offset
// it was acknowledged with. It returns the restarted process.
func stopDuringProduce(t *testing.T, bn *binaryNode, sig syscall.Signal) *testutil.Process {
	t.Helper()
	p, addr := bn.start(t)
	createTopicAt(t, addr, "crash")

	cl, err := kgo.NewClient(
		kgo.SeedBrokers(addr),
		kgo.DefaultProduceTopic("crash"),
		kgo.RequiredAcks(kgo.AllISRAcks()),
	)
	require.NoError(t, err)

	var mu sync.Mutex
	acked := map[string]int64{}
	enough := make(chan struct{})
	var enoughOnce sync.Once
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ctx.Err() == nil; i++ {
				v := "w" + strconv.Itoa(w) + "-" + strconv.Itoa(i)
				r := &kgo.Record{Value: []byte(v)}
				if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
					return // the broker is gone
				}
				mu.Lock()
				acked[v] = r.Offset
				if len(acked) >= 2000 {
					enoughOnce.Do(func() { close(enough) })
				}
				mu.Unlock()
			}
		}()
	}
	select {
	case <-enough:
	case <-ctx.Done():
		t.Fatal("producers did not get 2000 acknowledgements")
	}
	require.NoError(t, p.Cmd.Process.Signal(sig))
	code := p.Wait(t, 30*time.Second)
	// Closing the client fails the records still in flight, which the
	// producers count as not acknowledged.
	cl.Close()
	wg.Wait()
	_, err = os.Stat(filepath.Join(bn.dir, "data", ".kafka_cleanshutdown"))
	if sig == syscall.SIGKILL {
		require.True(t, errors.Is(err, os.ErrNotExist), "SIGKILL must leave no clean shutdown marker")
	} else {
		assert.Equal(t, 0, code, "exit code after %s", sig)
		require.NoError(t, err, "clean shutdown marker after %s", sig)
	}

	p2, addr2 := bn.start(t)
	got := readAll(t, addr2, "crash")
	byValue := map[string]int64{}
	for i, r := range got {
		require.Equal(t, int64(i), r.Offset, "offsets are consecutive")
		_, dup := byValue[string(r.Value)]
		assert.False(t, dup, "value %s twice", r.Value)
		byValue[string(r.Value)] = r.Offset
	}
	mu.Lock()
	defer mu.Unlock()
	lost := 0
	for v, off := range acked {
		at, ok := byValue[v]
		if !ok {
			lost++
			continue
		}
		assert.Equal(t, off, at, "value %s acknowledged at %d, found at %d", v, off, at)
	}
	assert.Zero(t, lost, "%d of %d acknowledged records lost after %s", lost, len(acked), sig)
	t.Logf("%d records acknowledged before %s, %d in the log after the restart", len(acked), sig, len(got))
	return p2
}

// TestTornSegmentTailIsTruncatedToLastWholeBatch kills the broker, then
// tears the last batch of the active segment (as a crash in the middle of a
// write would) or appends garbage after it, and checks that recovery keeps
// exactly the whole batches before the damage.
func TestTornSegmentTailIsTruncatedToLastWholeBatch(t *testing.T) {
	for _, tc := range []struct {
		name    string
		damage  func(t *testing.T, path string)
		survive int // of 50 single-record batches
	}{
		{"truncate-tail", func(t *testing.T, path string) {
			fi, err := os.Stat(path)
			require.NoError(t, err)
			require.NoError(t, os.Truncate(path, fi.Size()-7))
		}, 49},
		{"garbage-tail", func(t *testing.T, path string) {
			f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
			require.NoError(t, err)
			_, err = f.Write([]byte("\x00\x00\x00\x00\x00\x00\x00\x32\x00\x00\x00\x40garbage after the last batch"))
			require.NoError(t, err)
			require.NoError(t, f.Close())
		}, 50},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bn := newBinaryNode(t, map[string]string{"log.flush.interval.messages": "1"})
			p, addr := bn.start(t)
			createTopicAt(t, addr, "torn")
			cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic("torn"), kgo.RequiredAcks(kgo.AllISRAcks()))
			require.NoError(t, err)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			for i := range 50 {
				require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Value: []byte("t" + strconv.Itoa(i))}).FirstErr())
			}
			cl.Close()
			require.NoError(t, p.Cmd.Process.Signal(syscall.SIGKILL))
			p.Wait(t, 30*time.Second)

			tc.damage(t, bn.segment("torn", 0))

			p2, addr2 := bn.start(t)
			p2.WaitForLine(t, regexp.MustCompile(`Found unclean shutdown file marker`), time.Second)
			p2.WaitForLine(t, regexp.MustCompile(`Completed recovery of torn-0\. New Log End Offset is `+strconv.Itoa(tc.survive)), time.Second)
			got := readAll(t, addr2, "torn")
			require.Len(t, got, tc.survive)
			for i, r := range got {
				assert.Equal(t, "t"+strconv.Itoa(i), string(r.Value))
			}
			// The recovered log takes appends at the new end.
			cl2, err := kgo.NewClient(kgo.SeedBrokers(addr2), kgo.DefaultProduceTopic("torn"), kgo.RequiredAcks(kgo.AllISRAcks()))
			require.NoError(t, err)
			defer cl2.Close()
			r := &kgo.Record{Value: []byte("after")}
			require.NoError(t, cl2.ProduceSync(ctx, r).FirstErr())
			assert.Equal(t, int64(tc.survive), r.Offset)
		})
	}
}

// TestSigtermIsControlledShutdown checks that SIGTERM exits 0 after writing
// the clean shutdown marker, even when it arrives twice (as from a
// supervisor and `timeout`), and that the next start skips recovery.
func TestSigtermIsControlledShutdown(t *testing.T) {
	bn := newBinaryNode(t, nil)
	p, addr := bn.start(t)
	createTopicAt(t, addr, "calm")
	require.NoError(t, p.Cmd.Process.Signal(syscall.SIGTERM))
	p.WaitForLine(t, regexp.MustCompile(`Received terminated, starting controlled shutdown`), 10*time.Second)
	_ = p.Cmd.Process.Signal(syscall.SIGTERM) // may race with the exit
	assert.Equal(t, 0, p.Wait(t, time.Minute))
	p.WaitForLine(t, regexp.MustCompile(`shut down completed`), time.Second)
	_, err := os.Stat(filepath.Join(bn.dir, "data", ".kafka_cleanshutdown"))
	require.NoError(t, err, "clean shutdown marker")

	p2, _ := bn.start(t)
	assert.NotContains(t, p2.Output(), "Found unclean shutdown file marker")
	require.NoError(t, p2.Cmd.Process.Signal(syscall.SIGINT))
	assert.Equal(t, 0, p2.Wait(t, time.Minute))
}
