package compat

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/faultline/faultline/internal/testutil"
)

const (
	// clientTimeout bounds one foreign client run; a client that hangs
	// longer than this is reported as a hang, with its output.
	clientTimeout = 30 * time.Second
	// startTimeout bounds broker start-up (recovery included).
	startTimeout = 30 * time.Second
)

var readyLine = regexp.MustCompile(`Kafka broker 1 is ready to serve requests`)

// brokerBinary builds cmd/broker once per test binary run, into a temporary
// directory removed by TestMain.
var brokerBinary = struct {
	once sync.Once
	dir  string
	path string
	err  error
}{}

func TestMain(m *testing.M) {
	code := m.Run()
	if brokerBinary.dir != "" {
		_ = os.RemoveAll(brokerBinary.dir)
	}
	os.Exit(code)
}

// brokerEnv names a prebuilt broker binary to test instead of building
// cmd/broker (to check a candidate fix, or another build).
const brokerEnv = "FAULTLINE_COMPAT_BROKER"

func buildBroker(t *testing.T) string {
	t.Helper()
	if p := os.Getenv(brokerEnv); p != "" {
		return p
	}
	b := &brokerBinary
	b.once.Do(func() {
		b.dir, b.err = os.MkdirTemp("", "faultline-compat-")
		if b.err != nil {
			return
		}
		b.path = filepath.Join(b.dir, "broker")
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "go", "build", "-o", b.path, "github.com/faultline/faultline/cmd/broker")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			b.err = fmt.Errorf("go build cmd/broker: %w\n%s", err, out)
		}
	})
	require.NoError(t, b.err)
	return b.path
}

// requireKcat returns the path of kcat; when it is missing the test skips
// (fails in CI) naming the package to install.
func requireKcat(t *testing.T) string {
	t.Helper()
	p, err := lookKcat()
	if err != nil {
		missing(t, "kcat (librdkafka's command line client)", "kcat")
	}
	return p
}

// lookKcat finds kcat under its current or its former name.
func lookKcat() (string, error) {
	p, err := exec.LookPath("kcat")
	if err != nil {
		p, err = exec.LookPath("kafkacat")
	}
	return p, err
}

// requirePython returns a python3 that can import every module in mods.
// Debian's packages install into the system python, which may not be the
// first python3 on PATH (pyenv), so /usr/bin/python3 is tried first.
func requirePython(t *testing.T, pkg string, mods ...string) string {
	t.Helper()
	candidates := []string{"/usr/bin/python3"}
	if p, err := exec.LookPath("python3"); err == nil {
		candidates = append(candidates, p)
	}
	imp := "import " + strings.Join(mods, ", ")
	for _, py := range candidates {
		if err := exec.Command(py, "-c", imp).Run(); err == nil {
			return py
		}
	}
	missing(t, fmt.Sprintf("python3 module(s) %s", strings.Join(mods, ", ")), pkg)
	return ""
}

// missing ends a test whose foreign client is not installed: it skips
// outside CI with the command that installs it, and fails in CI.
func missing(t *testing.T, what, pkg string) {
	t.Helper()
	testutil.Missing(t, fmt.Sprintf("%s not installed: this test checks the broker against a client faultline did not write; install it with `make deps` (or `sudo apt-get install -y %s`)", what, pkg))
}

// freePort returns a loopback TCP port that was free a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := l.Addr().(*net.TCPAddr).Port
	require.NoError(t, l.Close())
	return port
}

// broker is the real binary on a data dir that survives restarts.
type broker struct {
	bin, dir, config string
	// Addr is the client listener, host:port.
	Addr string
	proc *testutil.Process
}

// serverProperties is written by hand, as a user following Kafka's KRaft
// quickstart would: comments, blank lines, both separators, keys the
// broker does not know (they must only warn).
const serverProperties = `# Kafka-style server.properties for a single combined node.
############################# Server Basics #############################
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:%[2]d

############################# Socket Server Settings #############################
listeners=PLAINTEXT://127.0.0.1:%[1]d,CONTROLLER://127.0.0.1:%[2]d
inter.broker.listener.name=PLAINTEXT
advertised.listeners=PLAINTEXT://127.0.0.1:%[1]d
controller.listener.names=CONTROLLER
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL
num.network.threads=3
num.io.threads=8
socket.send.buffer.bytes=102400
socket.receive.buffer.bytes=102400
socket.request.max.bytes=104857600

############################# Log Basics #############################
log.dirs=%[3]s
num.partitions=1
num.recovery.threads.per.data.dir=1

############################# Internal Topic Settings  #############################
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
group.initial.rebalance.delay.ms : 0

############################# Log Retention Policy #############################
log.retention.hours=168
log.segment.bytes=1073741824
log.retention.check.interval.ms=300000

# Not a faultline key: Kafka users carry settings like this one.
confluent.support.metrics.enable=false
faultline.metrics.address=
`

// quickstartProperties is Kafka 4.0's config/server.properties as its
// quickstart uses it (comments shortened): the quorum named by
// controller.quorum.bootstrap.servers, wildcard listeners, clients told
// "localhost", and the node formatted with --standalone.
const quickstartProperties = `############################# Server Basics #############################

# The role of this server. Setting this puts us in KRaft mode
process.roles=broker,controller

# The node id associated with this instance's roles
node.id=1

# List of controller endpoints used connect to the controller cluster
controller.quorum.bootstrap.servers=localhost:%[2]d

############################# Socket Server Settings #############################
listeners=PLAINTEXT://:%[1]d,CONTROLLER://:%[2]d
inter.broker.listener.name=PLAINTEXT
advertised.listeners=PLAINTEXT://localhost:%[1]d,CONTROLLER://localhost:%[2]d
controller.listener.names=CONTROLLER
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL
num.network.threads=3
num.io.threads=8
socket.send.buffer.bytes=102400
socket.receive.buffer.bytes=102400
socket.request.max.bytes=104857600

############################# Log Basics #############################
log.dirs=%[3]s
num.partitions=1
num.recovery.threads.per.data.dir=1

############################# Internal Topic Settings  #############################
offsets.topic.replication.factor=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1

############################# Log Retention Policy #############################
log.retention.hours=168
log.segment.bytes=1073741824
log.retention.check.interval.ms=300000
`

// startBroker formats a data dir, writes serverProperties (extra lines
// appended: later keys win, as in Java properties) and serves.
func startBroker(t *testing.T, extra ...string) *broker {
	t.Helper()
	return startBrokerFrom(t, serverProperties, "127.0.0.1", nil, extra...)
}

// startBrokerFrom is startBroker with a properties template (%[1]d client
// port, %[2]d controller port, %[3]s log dir), the host clients are told,
// and extra arguments for format.
func startBrokerFrom(t *testing.T, template, host string, formatArgs []string, extra ...string) *broker {
	t.Helper()
	b := &broker{bin: buildBroker(t), dir: t.TempDir()}
	port, ctrl := freePort(t), freePort(t)
	b.Addr = net.JoinHostPort(host, strconv.Itoa(port))
	props := fmt.Sprintf(template, port, ctrl, filepath.Join(b.dir, "kraft-combined-logs"))
	if len(extra) > 0 {
		props += "\n# test-specific\n" + strings.Join(extra, "\n") + "\n"
	}
	b.config = filepath.Join(b.dir, "server.properties")
	require.NoError(t, os.WriteFile(b.config, []byte(props), 0o644))
	code, id, stderr := testutil.Run(t, b.bin, "random-uuid")
	require.Equal(t, 0, code, "random-uuid: %s", stderr)
	args := append([]string{"format", "-t", strings.TrimSpace(id), "-c", b.config}, formatArgs...)
	code, _, stderr = testutil.Run(t, b.bin, args...)
	require.Equal(t, 0, code, "format: %s", stderr)
	b.start(t)
	return b
}

func (b *broker) start(t *testing.T) {
	t.Helper()
	b.proc = testutil.StartProcess(t, b.bin, "serve", "-c", b.config)
	b.proc.WaitForLine(t, readyLine, startTimeout)
}

// kill9 SIGKILLs the broker and waits for it to be gone.
func (b *broker) kill9(t *testing.T) {
	t.Helper()
	require.NoError(t, b.proc.Cmd.Process.Kill())
	b.proc.Wait(t, 10*time.Second)
}

// output is the result of one client run.
type output struct {
	stdout, stderr string
	err            error
}

// run runs a client to completion within clientTimeout. A client still
// running at the timeout is killed and reported as a hang.
func run(t *testing.T, stdin string, name string, args ...string) output {
	t.Helper()
	return runFor(t, clientTimeout, nil, stdin, name, args...)
}

// runFor is run with its own timeout and env added to the test's
// environment.
func runFor(t *testing.T, timeout time.Duration, env []string, stdin string, name string, args ...string) output {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if ctx.Err() != nil {
		err = fmt.Errorf("%s hung: killed after %s: %w", filepath.Base(name), timeout, ctx.Err())
	}
	return output{stdout: stdout.String(), stderr: stderr.String(), err: err}
}

// String shows a failed run: the error and (bounded) client stderr.
func (o output) String() string {
	return fmt.Sprintf("error: %v\nclient stderr:\n%s", o.err, clip(o.stderr))
}

// clip keeps the head and the tail of a long client log.
func clip(s string) string {
	const keep = 1500
	if len(s) <= 2*keep {
		return s
	}
	return s[:keep] + fmt.Sprintf("\n[... %d bytes ...]\n", len(s)-2*keep) + s[len(s)-keep:]
}

// kcat runs kcat against b with args.
func (b *broker) kcat(t *testing.T, stdin string, args ...string) output {
	t.Helper()
	out := run(t, stdin, requireKcat(t), append([]string{"-b", b.Addr}, args...)...)
	assertParsed(t, out)
	return out
}

// assertParsed checks that librdkafka understood every broker response:
// it logs PROTOERR lines for a response it cannot parse and then often
// carries on, so a run can succeed while a response was malformed.
func assertParsed(t *testing.T, out output) {
	t.Helper()
	assert.NotContains(t, out.stderr, "Protocol parse failure", "librdkafka could not parse a broker response:\n%s", clip(out.stderr))
}

func itoa(i int) string { return strconv.Itoa(i) }

// lines splits client output into its non-empty lines.
func lines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if l != "" {
			out = append(out, l)
		}
	}
	return out
}

// franz returns a franz-go client on b, closed with the test.
func (b *broker) franz(t *testing.T, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(b.Addr)}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	return cl
}

// consumeFranz reads partition 0 of topic from the start until n records
// arrived.
func (b *broker) consumeFranz(t *testing.T, topic string, n int) []*kgo.Record {
	t.Helper()
	cl := b.franz(t, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
	ctx, cancel := context.WithTimeout(context.Background(), clientTimeout)
	defer cancel()
	var out []*kgo.Record
	for len(out) < n {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			require.NoError(t, err, "franz-go consumed %d of %d records of %s", len(out), n, topic)
		}
		var errs []error
		fs.EachError(func(_ string, _ int32, err error) { errs = append(errs, err) })
		require.NoError(t, errors.Join(errs...), "franz-go fetch of %s", topic)
		out = append(out, fs.Records()...)
	}
	return out
}
