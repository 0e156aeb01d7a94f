package replica

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/faultline/faultline/broker/metadata"
)

// KafkaISRSender sends AlterPartition (API 56) to the active controller
// over the Kafka protocol.
type KafkaISRSender struct {
	BrokerID int32
	// Image gives the newest metadata image: the epochs of the proposed
	// ISR members come from it.
	Image func() *metadata.Image
	// BrokerEpoch is the epoch this process registered with (-1 until it
	// has): never the image's, which after a restart still names the
	// previous incarnation's, so that a restarted broker acting on a
	// stale image cannot change an ISR before it is registered again (the
	// controller answers STALE_BROKER_EPOCH). Nil: the image's (tests).
	BrokerEpoch func() int64
	// Controller returns a client to the active controller.
	Controller func(ctx context.Context) (BrokerClient, error)
}

// AlterPartition implements ISRSender. Errors of the controller come back
// as kerr errors.
func (s KafkaISRSender) AlterPartition(ctx context.Context, ch ISRChange) (ISRResult, error) {
	if s.Image == nil || s.Controller == nil {
		return ISRResult{}, errors.New("alter partition: sender not configured")
	}
	im := s.Image()
	req := kmsg.NewPtrAlterPartitionRequest()
	req.BrokerID = s.BrokerID
	req.BrokerEpoch = -1
	if s.BrokerEpoch != nil {
		req.BrokerEpoch = s.BrokerEpoch()
	} else if b, ok := im.Brokers[s.BrokerID]; ok {
		req.BrokerEpoch = b.Epoch
	}
	rt := kmsg.NewAlterPartitionRequestTopic()
	rt.Topic, rt.TopicID = ch.TopicPartition.Topic, ch.TopicID
	rp := kmsg.NewAlterPartitionRequestTopicPartition()
	rp.Partition, rp.LeaderEpoch, rp.PartitionEpoch = ch.TopicPartition.Partition, ch.LeaderEpoch, ch.PartitionEpoch
	rp.NewISR = append([]int32(nil), ch.NewISR...)
	for _, r := range ch.NewISR {
		e := kmsg.NewAlterPartitionRequestTopicPartitionNewEpochISR()
		e.BrokerID, e.BrokerEpoch = r, -1
		if b, ok := im.Brokers[r]; ok {
			e.BrokerEpoch = b.Epoch
		}
		rp.NewEpochISR = append(rp.NewEpochISR, e)
	}
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)

	cl, err := s.Controller(ctx)
	if err != nil {
		return ISRResult{}, fmt.Errorf("alter partition %s: %w", ch.TopicPartition, err)
	}
	kresp, err := cl.Request(ctx, req)
	if err != nil {
		return ISRResult{}, fmt.Errorf("alter partition %s: %w", ch.TopicPartition, err)
	}
	resp, ok := kresp.(*kmsg.AlterPartitionResponse)
	if !ok {
		return ISRResult{}, fmt.Errorf("alter partition %s: unexpected response %T", ch.TopicPartition, kresp)
	}
	if resp.ErrorCode != 0 {
		return ISRResult{}, fmt.Errorf("alter partition %s: %w", ch.TopicPartition, kerr.ErrorForCode(resp.ErrorCode))
	}
	for _, t := range resp.Topics {
		if t.Topic != ch.TopicPartition.Topic && metadata.Uuid(t.TopidID) != ch.TopicID {
			continue
		}
		for _, p := range t.Partitions {
			if p.Partition != ch.TopicPartition.Partition {
				continue
			}
			if p.ErrorCode != 0 {
				return ISRResult{}, fmt.Errorf("alter partition %s: %w", ch.TopicPartition, kerr.ErrorForCode(p.ErrorCode))
			}
			return ISRResult{LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch, ISR: p.ISR}, nil
		}
	}
	return ISRResult{}, fmt.Errorf("alter partition %s: the controller's answer does not name the partition", ch.TopicPartition)
}
