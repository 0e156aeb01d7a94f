package controller

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/faultline/faultline/broker/metadata"
)

func TestHandleBrokerRegistration(t *testing.T) {
	clk := newClock()
	log := newSharedLog(t, 1)
	c := newClusterController(t, 1, log.view(1), clk.now)
	clusterMode(c, 9*time.Second)
	ctx := context.Background()

	var first, second int64
	steps := []struct {
		name    string
		req     func() *kmsg.BrokerRegistrationRequest
		before  func()
		want    *kerr.Error
		inspect func(epoch int64)
	}{
		{name: "new broker", req: func() *kmsg.BrokerRegistrationRequest { return regReq(1, 1, -1) },
			inspect: func(e int64) { first = e; assert.GreaterOrEqual(t, e, int64(0)) }},
		{name: "same incarnation again keeps its epoch", req: func() *kmsg.BrokerRegistrationRequest { return regReq(1, 1, -1) },
			inspect: func(e int64) { assert.Equal(t, first, e) }},
		{name: "other incarnation while the session is alive", req: func() *kmsg.BrokerRegistrationRequest { return regReq(1, 2, -1) },
			before: func() { clk.advance(8 * time.Second) }, want: kerr.DuplicateBrokerRegistration},
		{name: "other incarnation naming the registered epoch as previous", req: func() *kmsg.BrokerRegistrationRequest { return regReq(1, 2, first) },
			inspect: func(e int64) { second = e; assert.Greater(t, e, first) }},
		{name: "third incarnation while the second's session is alive", req: func() *kmsg.BrokerRegistrationRequest { return regReq(1, 3, -1) },
			want: kerr.DuplicateBrokerRegistration},
		{name: "third incarnation after the session expired", req: func() *kmsg.BrokerRegistrationRequest { return regReq(1, 3, -1) },
			before: func() { clk.advance(9*time.Second + time.Millisecond) }, inspect: func(e int64) { assert.Greater(t, e, second) }},
		{name: "wrong cluster id", req: func() *kmsg.BrokerRegistrationRequest {
			r := regReq(2, 1, -1)
			r.ClusterID = "other"
			return r
		}, want: kerr.InconsistentClusterID},
		{name: "negative broker id", req: func() *kmsg.BrokerRegistrationRequest { return regReq(-1, 1, -1) }, want: kerr.InvalidRegistration},
	}
	for _, s := range steps {
		if s.before != nil {
			s.before()
		}
		resp := c.HandleBrokerRegistration(ctx, s.req())
		if s.want != nil {
			assert.Equal(t, s.want.Code, resp.ErrorCode, "%s: got %v", s.name, kerr.ErrorForCode(resp.ErrorCode))
			assert.Equal(t, int64(-1), resp.BrokerEpoch, s.name)
			continue
		}
		require.Zero(t, resp.ErrorCode, "%s: %v", s.name, kerr.ErrorForCode(resp.ErrorCode))
		s.inspect(resp.BrokerEpoch)
	}
	b := c.Image().Brokers[1]
	assert.Equal(t, metadata.Uuid{3}, b.IncarnationID)
	assert.True(t, b.Fenced, "a new registration starts fenced")
	assert.Equal(t, 3, log.count(func(r metadata.Record) bool { return r.Key() == metadata.KeyRegisterBroker }), "one record per new incarnation")
}
