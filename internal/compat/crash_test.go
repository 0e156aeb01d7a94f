package compat

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
)

// deliveredLine is kcat's delivery report at verbosity 3 (-vv); failedLine
// its report of a message it gave up on.
var (
	deliveredLine = regexp.MustCompile(`Message delivered to partition (\d+) \(offset (-?\d+)\)`)
	failedLine    = regexp.MustCompile(`(?i)delivery failed`)
)

// deliveryReport is one kcat delivery report. On one partition reports
// come in production order, so report i is message i.
type deliveryReport struct {
	ok     bool
	offset int64 // -1 when not delivered
	line   string
}

// producer is a kcat -P process fed through stdin (-E: it keeps going
// while brokers are down), whose delivery reports are collected as they
// arrive.
type producer struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser

	mu        sync.Mutex
	reports   []deliveryReport // in report order, delivered and failed
	errors    []string         // failed deliveries and fatal errors
	exited    chan struct{}
	stderrLog strings.Builder // everything but the successful delivery reports
}

func startProducer(t *testing.T, b *broker, args ...string) *producer {
	t.Helper()
	return startKcatProducer(t, b.Addr, args...)
}

// startKcatProducer runs kcat -P against the bootstrap servers with args.
func startKcatProducer(t *testing.T, bootstrap string, args ...string) *producer {
	t.Helper()
	cmd := exec.Command(requireKcat(t), append([]string{"-b", bootstrap, "-P", "-vv", "-E"}, args...)...)
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	cmd.Stdout = io.Discard
	p := &producer{cmd: cmd, stdin: stdin, exited: make(chan struct{})}
	require.NoError(t, cmd.Start())
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			p.mu.Lock()
			switch m := deliveredLine.FindStringSubmatch(line); {
			case m != nil:
				off, _ := strconv.ParseInt(m[2], 10, 64)
				p.reports = append(p.reports, deliveryReport{ok: true, offset: off, line: line})
			case failedLine.MatchString(line):
				p.reports = append(p.reports, deliveryReport{offset: -1, line: line})
				p.stderrLog.WriteString(line + "\n")
				p.errors = append(p.errors, line)
			default:
				// Disconnects while brokers are down are expected; fatal
				// errors are not.
				p.stderrLog.WriteString(line + "\n")
				if strings.Contains(strings.ToLower(line), "fatal") {
					p.errors = append(p.errors, line)
				}
			}
			p.mu.Unlock()
		}
		_ = cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-p.exited:
		default:
			_ = cmd.Process.Kill()
			<-p.exited
		}
	})
	return p
}

// deliveredOffsets are the offsets of the delivered messages, in report
// order.
func (p *producer) deliveredOffsets() []int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []int64
	for _, r := range p.reports {
		if r.ok {
			out = append(out, r.offset)
		}
	}
	return out
}

// waitStored waits until partition 0 of topic holds at least n records.
// kcat reports deliveries only when its input ends (it polls librdkafka
// for reports after reading stdin to EOF), so progress during the produce
// is watched on the broker.
func waitStored(t *testing.T, b *broker, topic string, n int64, timeout time.Duration) int64 {
	t.Helper()
	cl := b.franz(t)
	defer cl.Close()
	adm := kadm.NewClient(cl)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(timeout)
	var last int64
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		ends, err := adm.ListEndOffsets(ctx, topic)
		cancel()
		if err == nil {
			if o, ok := ends.Lookup(topic, 0); ok && o.Err == nil {
				last = o.Offset
				if last >= n {
					return last
				}
			}
		}
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("%s holds %d of %d records after %s", topic, last, n, timeout)
		}
	}
}

func (p *producer) log() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stderrLog.String()
}

// finish closes stdin and waits for kcat to deliver (or fail) everything
// and exit.
func (p *producer) finish(t *testing.T, timeout time.Duration) {
	t.Helper()
	require.NoError(t, p.stdin.Close())
	select {
	case <-p.exited:
	case <-time.After(timeout):
		t.Fatalf("kcat did not exit within %s of its input's end:\n%s", timeout, clip(p.log()))
	}
}

// crashValue is message i, padded to 100 bytes: kcat reads a pipe in
// chunks of its input buffer (message.max.bytes, set to 64 KiB below) and
// produces a chunk only once it is full, so the input must be large for
// the produce to span the kill.
func crashValue(i int) string { return fmt.Sprintf("crash-%05d-%s", i, strings.Repeat("x", 88)) }

// TestKcatKill9DuringProduce: a kcat producer writes while the broker
// (fsync per message) is SIGKILLed and restarted on the same data. Every
// message kcat reported delivered is back at its reported offset; the
// idempotent producer's messages are stored exactly once.
func TestKcatKill9DuringProduce(t *testing.T) {
	requireKcat(t)
	const flushEach = "log.flush.interval.messages=1"
	cases := []struct {
		name       string
		flush      string
		idempotent bool
		opts       []string
	}{
		{"idempotent", flushEach, true, []string{"-X", "enable.idempotence=true"}},
		// One request in flight keeps reports in production order.
		{"acks-all", flushEach, false, []string{"-X", "acks=all", "-X", "max.in.flight=1", "-X", "topic.produce.offset.report=true"}},
		// Kafka's default flush policy: a killed process (not a lost
		// machine) loses nothing the page cache holds.
		{"idempotent-os-flush", "# flush left to the OS", true, []string{"-X", "enable.idempotence=true"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			kill9DuringProduce(t, startBroker(t, tc.flush), tc.idempotent, tc.opts...)
		})
	}
}

func kill9DuringProduce(t *testing.T, b *broker, idempotent bool, opts ...string) {
	const half = 10000
	p := startProducer(t, b, append([]string{"-t", "crash", "-p", "0",
		"-X", "acks=all", "-X", "batch.num.messages=20", "-X", "linger.ms=1",
		"-X", "message.timeout.ms=60000", "-X", "reconnect.backoff.max.ms=200",
		"-X", "message.max.bytes=65536"}, opts...)...)
	var in strings.Builder
	for i := range half {
		in.WriteString(crashValue(i) + "\n")
	}
	_, err := io.WriteString(p.stdin, in.String())
	require.NoError(t, err)
	stored := waitStored(t, b, "crash", 200, clientTimeout)
	b.kill9(t)
	t.Logf("broker killed with at least %d of %d written messages stored", stored, half)
	b.start(t)

	in.Reset()
	for i := half; i < 2*half; i++ {
		in.WriteString(crashValue(i) + "\n")
	}
	_, err = io.WriteString(p.stdin, in.String())
	require.NoError(t, err, "kcat quit while the broker restarted:\n%s", clip(p.log()))
	p.finish(t, 90*time.Second)

	offsets := p.deliveredOffsets()
	p.mu.Lock()
	failures := append([]string(nil), p.errors...)
	p.mu.Unlock()
	assert.Empty(t, failures, "kcat errors across the restart")
	assert.Len(t, offsets, 2*half, "every message delivered once the broker is back")

	recs := franzRecordsUpTo(t, b, "crash")
	at := make(map[string][]int64)
	for _, r := range recs {
		at[string(r.Value)] = append(at[string(r.Value)], r.Offset)
	}
	// Delivery reports come in production order: the i-th report is
	// message i.
	lost := 0
	for i, off := range offsets {
		if off < 0 || off >= int64(len(recs)) || string(recs[off].Value) != crashValue(i) {
			lost++
			if lost <= 5 {
				t.Errorf("acknowledged message %d at offset %d is not there", i, off)
			}
		}
	}
	assert.Zero(t, lost, "acknowledged messages missing after kill -9 (of %d acknowledged)", len(offsets))
	var dups []string
	for v, offs := range at {
		if len(offs) > 1 {
			dups = append(dups, fmt.Sprintf("%s at %v", v, offs))
		}
	}
	if idempotent {
		assert.Empty(t, dups, "an idempotent producer's messages must be stored once")
	} else if len(dups) > 0 {
		t.Logf("%d messages stored twice (retries without idempotence may do that)", len(dups))
	}
}

// TestKcatTornTail: the broker is killed and the tail of the active
// segment is damaged (torn in its last batch, or followed by zeros or
// garbage). After recovery kcat reads exactly the whole batches, seeks by
// offset and by timestamp through the rebuilt indexes, and produces on from
// the recovered end.
func TestKcatTornTail(t *testing.T) {
	requireKcat(t)
	const n = 50
	cases := []struct {
		name string
		kept int // whole messages left after recovery
		harm func(t *testing.T, seg string)
	}{
		{"torn-last-batch", n - 1, func(t *testing.T, seg string) {
			st, err := os.Stat(seg)
			require.NoError(t, err)
			require.NoError(t, os.Truncate(seg, st.Size()-5))
		}},
		{"zeros-after", n, func(t *testing.T, seg string) { appendTo(t, seg, make([]byte, 4096)) }},
		{"garbage-after", n, func(t *testing.T, seg string) {
			appendTo(t, seg, []byte(strings.Repeat("\xde\xad\xbe\xef not a record batch ", 40)))
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// Index entries every ~100 bytes, so seeks use the rebuilt
			// indexes rather than a scan from the segment start.
			b := startBroker(t, "log.flush.interval.messages=1", "log.index.interval.bytes=100")
			var in strings.Builder
			for i := range n {
				fmt.Fprintf(&in, "torn-%d\n", i)
			}
			// One message per batch, so tearing the tail removes exactly one.
			out := b.kcat(t, in.String(), "-P", "-t", "torn", "-p", "0", "-X", "acks=all", "-X", "batch.num.messages=1", "-X", "max.in.flight=1")
			require.NoError(t, out.err, out)
			out = b.kcat(t, "", "-C", "-t", "torn", "-o", "beginning", "-c", fmt.Sprint(n), "-f", `%o %T\n`)
			require.NoError(t, out.err, out)
			stamps := lines(out.stdout)
			require.Len(t, stamps, n)

			b.kill9(t)
			tc.harm(t, filepath.Join(b.dir, "kraft-combined-logs", "torn-0", "00000000000000000000.log"))
			b.start(t)

			var want []string
			for i := range tc.kept {
				want = append(want, fmt.Sprintf("torn-%d %d", i, i))
			}
			out = b.kcat(t, "", "-C", "-t", "torn", "-o", "beginning", "-c", fmt.Sprint(tc.kept), "-f", `%s %o\n`)
			require.NoError(t, out.err, out)
			assert.Equal(t, want, lines(out.stdout))

			out = b.kcat(t, "", "-C", "-t", "torn", "-o", "27", "-c", "3", "-f", `%s %o\n`)
			require.NoError(t, out.err, out)
			assert.Equal(t, want[27:30], lines(out.stdout), "seek by offset")

			ts := strings.Fields(stamps[33])[1]
			out = b.kcat(t, "", "-Q", "-t", "torn:0:"+ts)
			require.NoError(t, out.err, out)
			first := strings.Fields(stamps[33])[0]
			for i := 32; i >= 0 && strings.Fields(stamps[i])[1] == ts; i-- {
				first = strings.Fields(stamps[i])[0] // earliest record with that timestamp
			}
			assert.Contains(t, out.stdout, "offset "+first, "seek by timestamp %s", ts)

			out = b.kcat(t, "after\n", "-P", "-t", "torn", "-p", "0", "-X", "acks=all")
			require.NoError(t, out.err, out)
			out = b.kcat(t, "", "-C", "-t", "torn", "-o", fmt.Sprint(tc.kept), "-c", "1", "-f", `%s %o\n`)
			require.NoError(t, out.err, out)
			assert.Equal(t, []string{fmt.Sprintf("after %d", tc.kept)}, lines(out.stdout), "the first message after recovery takes the next offset")
		})
	}
}

func appendTo(t *testing.T, path string, data []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	_, err = f.Write(data)
	require.NoError(t, err)
	require.NoError(t, f.Close())
}

// TestKcatGroupOffsetsSurviveRestart: offsets a kcat group member
// committed are still there after a SIGKILL (with fsync per message) and
// after a controlled shutdown (SIGTERM); the next member resumes there.
func TestKcatGroupOffsetsSurviveRestart(t *testing.T) {
	requireKcat(t)
	b := startBroker(t, "log.flush.interval.messages=1")
	input, want := keyed(15, "durable")
	out := b.kcat(t, input, "-P", "-t", "durable", "-K", ":", "-X", "acks=all")
	require.NoError(t, out.err, out)
	consume := func() []string {
		t.Helper()
		out := b.kcat(t, "", "-G", "durable-group", "-X", "auto.offset.reset=earliest", "-c", "5", "-f", `%k %s %o\n`, "durable")
		require.NoError(t, out.err, out)
		return lines(out.stdout)
	}
	assert.Equal(t, want[:5], consume())

	b.kill9(t)
	b.start(t)
	assert.Equal(t, want[5:10], consume(), "after kill -9 the group resumes at its commit")

	require.NoError(t, b.proc.Cmd.Process.Signal(syscall.SIGTERM))
	assert.Equal(t, 0, b.proc.Wait(t, 30*time.Second), "SIGTERM is a controlled shutdown")
	b.start(t)
	assert.Equal(t, want[10:15], consume(), "after SIGTERM the group resumes at its commit")
}
