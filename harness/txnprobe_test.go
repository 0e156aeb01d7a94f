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
)

// The probe of a transactional id: a coordinator that lets a new producer
// start passes at once; one that answers CONCURRENT_TRANSACTIONS to every
// InitProducerId (a transaction it never finishes) leaves the id stuck
// once the limit passes; with no broker at all the id is not ok but not
// stuck either, since nothing was refused.
func TestProbeTxnID(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.Ports(0))
	require.NoError(t, err)
	defer c.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.RetryTimeout(time.Second))
	require.NoError(t, err)
	defer cl.Close()
	ctx := context.Background()

	p := probeTxnID(ctx, cl, "fine", 2*time.Second)
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
	p = probeTxnID(ctx, cl, "held", 2*time.Second)
	assert.False(t, p.OK)
	assert.True(t, p.Stuck)
	assert.Greater(t, p.Attempts, 1)
	assert.Contains(t, p.Error, "CONCURRENT_TRANSACTIONS")
	assert.GreaterOrEqual(t, p.ElapsedMs, int64(1500))

	gone, err := kgo.NewClient(kgo.SeedBrokers("127.0.0.1:1"), kgo.RetryTimeout(100*time.Millisecond))
	require.NoError(t, err)
	defer gone.Close()
	p = probeTxnID(ctx, gone, "nobody", time.Second)
	assert.False(t, p.OK)
	assert.False(t, p.Stuck, "nothing answered, so nothing refused")
	assert.NotEmpty(t, p.Error)
}
