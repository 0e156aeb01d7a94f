package controller

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// ControllerStats are the controller's gauges, read from its image.
type ControllerStats struct {
	ActiveControllerCount  int // 1 on the active controller, else 0
	FencedBrokerCount      int
	ActiveBrokerCount      int // registered and unfenced
	GlobalTopicCount       int
	GlobalPartitionCount   int
	OfflinePartitionsCount int // partitions without a leader
}

// Stats computes the gauges now.
func (c *Controller) Stats() ControllerStats {
	var s ControllerStats
	if c.Active() {
		s.ActiveControllerCount = 1
	}
	im := c.Image()
	for _, b := range im.Brokers {
		if b.Fenced {
			s.FencedBrokerCount++
		} else {
			s.ActiveBrokerCount++
		}
	}
	s.GlobalTopicCount = len(im.Topics)
	for _, t := range im.Topics {
		s.GlobalPartitionCount += len(t.Partitions)
		for _, p := range t.Partitions {
			if p.Leader < 0 {
				s.OfflinePartitionsCount++
			}
		}
	}
	return s
}

// RegisterMetrics registers the controller's gauges, named after Kafka's
// kafka.controller:type=KafkaController MBeans, read at scrape time.
func (c *Controller) RegisterMetrics(reg prometheus.Registerer) error {
	gauges := []struct {
		name, help string
		get        func(ControllerStats) int
	}{
		{"activecontrollercount", "1 on the active controller, 0 elsewhere (ActiveControllerCount).", func(s ControllerStats) int { return s.ActiveControllerCount }},
		{"fencedbrokercount", "Registered brokers that are fenced (FencedBrokerCount).", func(s ControllerStats) int { return s.FencedBrokerCount }},
		{"activebrokercount", "Registered brokers that are unfenced (ActiveBrokerCount).", func(s ControllerStats) int { return s.ActiveBrokerCount }},
		{"globaltopiccount", "Topics in the metadata image (GlobalTopicCount).", func(s ControllerStats) int { return s.GlobalTopicCount }},
		{"globalpartitioncount", "Partitions in the metadata image (GlobalPartitionCount).", func(s ControllerStats) int { return s.GlobalPartitionCount }},
		{"offlinepartitionscount", "Partitions without a leader (OfflinePartitionsCount).", func(s ControllerStats) int { return s.OfflinePartitionsCount }},
	}
	for _, g := range gauges {
		get := g.get
		err := reg.Register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "kafka_controller_kafkacontroller_" + g.name,
			Help: g.help,
		}, func() float64 { return float64(get(c.Stats())) }))
		if err != nil {
			return fmt.Errorf("controller metrics: %w", err)
		}
	}
	return nil
}
