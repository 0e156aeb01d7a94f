package harness

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/faultline/faultline/checker"
)

// The probe of a transactional id: a coordinator that lets a new producer
// start passes at once; one that answers CONCURRENT_TRANSACTIONS to every
// InitProducerId for the stuck window (a transaction it never finishes)
// leaves the id stuck, even after a slow start; refusals broken by other
// answers, a coordinator that cannot be found, or no broker at all leave
// the id not ok but not stuck, since no transaction was seen held.
func TestProbeTxnID(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.Ports(0))
	require.NoError(t, err)
	defer c.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.RetryTimeout(time.Second))
	require.NoError(t, err)
	defer cl.Close()
	ctx := context.Background()

	probe := func(cl *kgo.Client, id string) checker.TxnIDProbe {
		return probeTxnID(ctx, cl, id, 20*time.Second, 2*time.Second, time.Second)
	}
	p := probe(cl, "fine")
	assert.True(t, p.OK)
	assert.False(t, p.Stuck)
	assert.Equal(t, 1, p.Attempts)

	// The coordinator answers InitProducerId with answer(time since the
	// case began); 0 lets the cluster handle it.
	var answer atomic.Pointer[func(time.Duration) int16]
	var began time.Time
	c.ControlKey(int16(kmsg.InitProducerID), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		code := (*answer.Load())(time.Since(began))
		if code == 0 {
			return nil, nil, false
		}
		resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
		resp.ErrorCode, resp.ProducerID, resp.ProducerEpoch = code, -1, -1
		return resp, nil, true
	})
	answering := func(cl *kgo.Client, id string, fn func(time.Duration) int16) checker.TxnIDProbe {
		answer.Store(&fn)
		began = time.Now()
		return probe(cl, id)
	}
	concurrent, loading := kerr.ConcurrentTransactions.Code, kerr.CoordinatorLoadInProgress.Code

	// Held for ever: stuck once refused for the stuck window (1 s).
	p = answering(cl, "held", func(time.Duration) int16 { return concurrent })
	assert.False(t, p.OK)
	assert.True(t, p.Stuck)
	assert.Greater(t, p.Refused, 1)
	assert.GreaterOrEqual(t, p.RefusedMs, int64(1000))
	assert.Less(t, p.ElapsedMs, int64(2000), "stuck is known once the window passes")
	assert.Contains(t, p.Error, "CONCURRENT_TRANSACTIONS")

	// A coordinator that loads for 1.5 s and then refuses: the refusals
	// still get their whole window, past the 2 s limit.
	p = answering(cl, "slow", func(d time.Duration) int16 {
		if d < 1500*time.Millisecond {
			return loading
		}
		return concurrent
	})
	assert.True(t, p.Stuck, "%+v", p)
	assert.GreaterOrEqual(t, p.ElapsedMs, int64(2500))

	// Refusals broken by a coordinator that loads again: never a whole
	// window of them, so not stuck. (The client retries a loading
	// coordinator for its retry time before it answers, so the breaks
	// show only past that time: a client of 100 ms here.)
	quick, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.RetryTimeout(100*time.Millisecond))
	require.NoError(t, err)
	defer quick.Close()
	p = answering(quick, "broken", func(d time.Duration) int16 {
		if d%(800*time.Millisecond) < 500*time.Millisecond {
			return concurrent
		}
		return loading
	})
	assert.False(t, p.OK)
	assert.False(t, p.Stuck, "%+v", p)

	// Refused, then let through: a transaction that ended late.
	p = answering(cl, "late", func(d time.Duration) int16 {
		if d < 500*time.Millisecond {
			return concurrent
		}
		return 0
	})
	assert.True(t, p.OK, "%+v", p)
	assert.False(t, p.Stuck)

	c.ControlKey(int16(kmsg.FindCoordinator), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
		for _, k := range req.(*kmsg.FindCoordinatorRequest).CoordinatorKeys {
			rc := kmsg.NewFindCoordinatorResponseCoordinator()
			rc.Key, rc.NodeID, rc.ErrorCode = k, -1, kerr.CoordinatorNotAvailable.Code
			resp.Coordinators = append(resp.Coordinators, rc)
		}
		resp.ErrorCode, resp.NodeID = kerr.CoordinatorNotAvailable.Code, -1
		return resp, nil, true
	})
	p = probe(cl, "unavailable")
	assert.False(t, p.OK)
	assert.False(t, p.Stuck, "a coordinator that cannot be found holds no transaction")
	assert.Contains(t, p.Error, "COORDINATOR_NOT_AVAILABLE")

	gone, err := kgo.NewClient(kgo.SeedBrokers("127.0.0.1:1"), kgo.RetryTimeout(100*time.Millisecond))
	require.NoError(t, err)
	defer gone.Close()
	p = probeTxnID(ctx, gone, "nobody", 20*time.Second, time.Second, time.Second/2)
	assert.False(t, p.OK)
	assert.False(t, p.Stuck, "nothing answered, so nothing refused")
	assert.NotEmpty(t, p.Error)
}
