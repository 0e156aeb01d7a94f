package controller

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/faultline/faultline/broker/lifecycle"
)

// BenchmarkHandleBrokerHeartbeat: one steady-state heartbeat (no record to
// write) on the active controller, in process.
func BenchmarkHandleBrokerHeartbeat(b *testing.B) {
	log := newSharedLog(b, 1)
	c := newClusterController(b, 1, log.view(1), nil)
	ctx := context.Background()
	r := c.HandleBrokerRegistration(ctx, regReq(1, 1, -1))
	req := hbReq(1, r.BrokerEpoch, 1<<40, false, false)
	require.Zero(b, c.HandleBrokerHeartbeat(ctx, req).ErrorCode)
	b.ReportAllocs()
	for b.Loop() {
		if c.HandleBrokerHeartbeat(ctx, req).ErrorCode != 0 {
			b.Fatal("heartbeat failed")
		}
	}
}

// BenchmarkForwardedInitProducerID: InitProducerId forwarded by a standby's
// lifecycle.Forwarder to the active controller over loopback TCP (kgo), the round
// trip a broker-only node adds to every admin request.
func BenchmarkForwardedInitProducerID(b *testing.B) {
	log := newSharedLog(b, 1)
	c1 := newClusterController(b, 1, log.view(1), nil)
	c2 := newClusterController(b, 2, log.view(2), nil)
	tr, err := lifecycle.NewKgoTransport(lifecycle.KgoTransportConfig{Voters: map[int32]string{1: serveKafka(b, dispatch(c1, nil))}, DialTimeout: time.Second})
	require.NoError(b, err)
	defer tr.Close()
	joinBroker(b, c1, 1)
	fwd := &lifecycle.Forwarder{Local: c2, Transport: tr}
	ctx := context.Background()
	req := kmsg.NewPtrInitProducerIDRequest()
	require.Zero(b, fwd.InitProducerID(ctx, req).ErrorCode)
	b.ReportAllocs()
	for b.Loop() {
		if fwd.InitProducerID(ctx, req).ErrorCode != 0 {
			b.Fatal("InitProducerId failed")
		}
	}
}
