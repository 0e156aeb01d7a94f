package controller

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestControllerMetrics(t *testing.T) {
	log := newSharedLog(t, 1)
	clk := newClock()
	c1 := newClusterController(t, 1, log.view(1), clk.now)
	c2 := newClusterController(t, 2, log.view(2), clk.now)
	clusterMode(c1, time.Second)
	ctx := context.Background()
	for id := int32(1); id <= 3; id++ {
		joinBroker(t, c1, id)
	}
	require.Zero(t, c1.CreateTopics(ctx, createReq(topic("orders", 2, 1))).Topics[0].ErrorCode)
	clk.advance(2 * time.Second)
	for {
		id, err := c1.FenceExpiredBrokers(ctx, time.Second.Milliseconds())
		require.NoError(t, err)
		if id < 0 {
			break
		}
	}
	reg := prometheus.NewRegistry()
	require.NoError(t, c1.RegisterMetrics(reg))
	families, err := reg.Gather()
	require.NoError(t, err)
	got := map[string]float64{}
	for _, f := range families {
		got[strings.TrimPrefix(f.GetName(), "kafka_controller_kafkacontroller_")] = f.GetMetric()[0].GetGauge().GetValue()
	}
	assert.Equal(t, map[string]float64{"activecontrollercount": 1, "fencedbrokercount": 3, "activebrokercount": 0,
		"globaltopiccount": 1, "globalpartitioncount": 2, "offlinepartitionscount": 2}, got)
	s := c2.Stats()
	assert.Equal(t, ControllerStats{FencedBrokerCount: 3, GlobalTopicCount: 1, GlobalPartitionCount: 2, OfflinePartitionsCount: 2}, s,
		"a standby reports the same image and no active controller")
}
