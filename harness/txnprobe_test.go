package harness

import (
	"context"
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
// InitProducerId (a transaction it never finishes) leaves the id stuck
// once the limit passes; a coordinator that cannot be found, or no broker
// at all, leaves the id not ok but not stuck, since no transaction was
// seen held.
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

	c.ControlKey(int16(kmsg.InitProducerID), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
		resp.ErrorCode = kerr.ConcurrentTransactions.Code
		resp.ProducerID, resp.ProducerEpoch = -1, -1
		return resp, nil, true
	})
	p = probe(cl, "held")
	assert.False(t, p.OK)
	assert.True(t, p.Stuck)
	assert.Greater(t, p.Attempts, 1)
	assert.Contains(t, p.Error, "CONCURRENT_TRANSACTIONS")
	assert.GreaterOrEqual(t, p.ElapsedMs, int64(1500))

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
