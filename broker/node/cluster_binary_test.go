package node

import (
	"context"
	"fmt"
	"regexp"
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

// binaryCluster is a cluster of real broker processes.
type binaryCluster struct {
	bin     string
	configs []string
	procs   []*testutil.Process
	addrs   []string
}

// newBinaryCluster formats size combined nodes and starts them.
func newBinaryCluster(t *testing.T, size int, extra map[string]string) *binaryCluster {
	t.Helper()
	bc := &binaryCluster{bin: testutil.BuildBroker(t)}
	for _, props := range clusterProps(t, size, extra) {
		delete(props, "faultline.metrics.address")
		dir := t.TempDir()
		cfg := testutil.WriteProperties(t, dir, props)
		code, _, stderr := testutil.Run(t, bc.bin, "format", "-t", testClusterID, "-c", cfg)
		require.Equal(t, 0, code, stderr)
		bc.configs = append(bc.configs, cfg)
	}
	bc.procs = make([]*testutil.Process, size)
	bc.addrs = make([]string, size)
	for i := range size {
		bc.procs[i] = testutil.StartProcess(t, bc.bin, "serve", "-c", bc.configs[i])
	}
	for i := range size {
		bc.addrs[i] = bc.procs[i].WaitForLine(t, acceptingLine, time.Minute)[1]
		bc.procs[i].WaitForLine(t, regexp.MustCompile(fmt.Sprintf(`Kafka broker %d is ready to serve requests`, i+1)), time.Minute)
	}
	return bc
}

// TestClusterBinaryKill9Leader runs three broker processes, produces with
// acks=all to a topic with RF=3 and min.insync.replicas=2, SIGKILLs the
// partition leader in the middle of the load, and reads back every
// acknowledged record from the two survivors.
func TestClusterBinaryKill9Leader(t *testing.T) {
	bc := newBinaryCluster(t, 3, nil)
	code, out, stderr := testutil.Run(t, bc.bin, "quorum", "describe", "--status", "-c", bc.configs[1])
	require.Equal(t, 0, code, stderr)
	assert.Regexp(t, `(?m)^LeaderId: +[123]$`, out)
	assert.Regexp(t, `(?m)^LeaderEpoch: +[1-9]\d*$`, out)
	assert.Regexp(t, `(?m)^HighWatermark: +[1-9]\d*$`, out)
	assert.Regexp(t, `(?m)^MaxFollowerLag: +\d+$`, out)
	assert.Regexp(t, `(?m)^CurrentVoters: +\[1,2,3\]$`, out)
	assert.Regexp(t, `(?m)^CurrentObservers: +\[\]$`, out)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(bc.addrs...), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DefaultProduceTopic("orders"),
		kgo.RecordRetries(1000), kgo.MetadataMinAge(50*time.Millisecond), kgo.RetryBackoffFn(func(int) time.Duration { return 20 * time.Millisecond }))
	require.NoError(t, err)
	defer cl.Close()
	adm := kadm.NewClient(cl)
	resp, err := adm.CreateTopic(ctx, 1, 3, map[string]*string{"min.insync.replicas": new("2")}, "orders")
	require.NoError(t, err)
	require.NoError(t, resp.Err)

	var mu sync.Mutex
	acked := map[string]bool{}
	var killedAt, firstAfter time.Time
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				v := fmt.Sprintf("w%d-%06d", w, i)
				start := time.Now()
				r := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(v)})
				if r.FirstErr() != nil {
					continue // not acknowledged: may or may not survive
				}
				mu.Lock()
				acked[v] = true
				if !killedAt.IsZero() && start.After(killedAt) && firstAfter.IsZero() {
					firstAfter = time.Now()
				}
				mu.Unlock()
			}
		})
	}
	count := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(acked)
	}
	require.Eventually(t, func() bool { return count() >= 300 }, time.Minute, 5*time.Millisecond)

	md, err := adm.Metadata(ctx, "orders")
	require.NoError(t, err)
	leader := md.Topics["orders"].Partitions[0].Leader
	require.GreaterOrEqual(t, leader, int32(1))
	mu.Lock()
	killedAt = time.Now()
	mu.Unlock()
	require.NoError(t, bc.procs[leader-1].Cmd.Process.Signal(syscall.SIGKILL))
	atKill := count()
	require.Eventually(t, func() bool { return count() >= atKill+300 }, time.Minute, 5*time.Millisecond, "writes go on after the leader's death")
	close(stop)
	wg.Wait()
	mu.Lock()
	t.Logf("leader %d SIGKILLed; first acks=all write produced after the kill acknowledged %v later; %d acknowledged", leader, firstAfter.Sub(killedAt), len(acked))
	mu.Unlock()

	var survivors []string
	for i, a := range bc.addrs {
		if int32(i+1) != leader {
			survivors = append(survivors, a)
		}
	}
	got := readAllFrom(t, survivors, "orders")
	lost := 0
	for v := range acked {
		if !got[v] {
			lost++
		}
	}
	assert.Zero(t, lost, "acknowledged records lost after a SIGKILL of the leader")
}
