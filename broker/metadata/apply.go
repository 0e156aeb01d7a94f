package metadata

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
)

// ErrInvalidRecord: a record that cannot be applied to the image (a topic
// that does not exist, a stale broker epoch, ...). The controller checks its
// records against its own image before appending them, so meeting this
// during replay means the log is damaged or was written by a buggy
// controller.
var ErrInvalidRecord = errors.New("metadata record does not apply")

// Apply returns the image with rec applied. im is not modified; the new image
// shares every unchanged part with it. Offset is left unchanged (see
// ApplyBatch).
func (im *Image) Apply(rec Record) (*Image, error) {
	b := newBuilder(im)
	if err := b.apply(rec); err != nil {
		return nil, err
	}
	return b.im, nil
}

// ApplyBatch applies recs in order and sets Offset to lastOffset, the
// metadata-log offset of the last record. The maps of im are copied once per
// batch, not once per record.
func (im *Image) ApplyBatch(lastOffset int64, recs []Record) (*Image, error) {
	b := newBuilder(im)
	for i, rec := range recs {
		if err := b.apply(rec); err != nil {
			return nil, fmt.Errorf("record %d of batch ending at offset %d: %w", i, lastOffset, err)
		}
	}
	b.im.Offset = lastOffset
	return b.im, nil
}

// WithControllerID returns the image with ControllerID set.
func (im *Image) WithControllerID(id int32) *Image {
	cp := *im
	cp.ControllerID = id
	return &cp
}

// builder applies records to a private copy of an image, copying each map
// and topic at most once.
type builder struct {
	im             *Image
	brokersCopied  bool
	topicsCopied   bool
	configsCopied  bool
	ownTopics      map[*Topic]bool
	ownBrokerConfs map[string]bool
}

func newBuilder(im *Image) *builder {
	var cp Image
	if im == nil {
		cp = *NewImage("")
	} else {
		cp = *im
	}
	return &builder{im: &cp, ownTopics: map[*Topic]bool{}, ownBrokerConfs: map[string]bool{}}
}

func (b *builder) brokers() map[int32]Broker {
	if !b.brokersCopied {
		m := make(map[int32]Broker, len(b.im.Brokers)+1)
		for k, v := range b.im.Brokers {
			m[k] = v
		}
		b.im.Brokers = m
		b.brokersCopied = true
	}
	return b.im.Brokers
}

func (b *builder) copyTopicMaps() {
	if b.topicsCopied {
		return
	}
	byName := make(map[string]*Topic, len(b.im.Topics)+1)
	for k, v := range b.im.Topics {
		byName[k] = v
	}
	byID := make(map[Uuid]*Topic, len(b.im.TopicsByID)+1)
	for k, v := range b.im.TopicsByID {
		byID[k] = v
	}
	b.im.Topics, b.im.TopicsByID = byName, byID
	b.topicsCopied = true
}

// topic returns a private, modifiable copy of the topic with this id.
func (b *builder) topic(id Uuid) (*Topic, error) {
	t := b.im.TopicsByID[id]
	if t == nil {
		return nil, fmt.Errorf("%w: unknown topic id %x", ErrInvalidRecord, id)
	}
	if b.ownTopics[t] {
		return t, nil
	}
	b.copyTopicMaps()
	cp := *t
	cp.Partitions = slices.Clone(t.Partitions)
	cp.Configs = cloneConfigs(t.Configs)
	b.ownTopics[&cp] = true
	b.im.Topics[cp.Name] = &cp
	b.im.TopicsByID[cp.ID] = &cp
	return &cp, nil
}

func (b *builder) broker(id int32, epoch int64) (Broker, error) {
	br, ok := b.im.Brokers[id]
	if !ok {
		return Broker{}, fmt.Errorf("%w: unknown broker %d", ErrInvalidRecord, id)
	}
	if br.Epoch != epoch {
		return Broker{}, fmt.Errorf("%w: broker %d has epoch %d, record names epoch %d", ErrInvalidRecord, id, br.Epoch, epoch)
	}
	return br, nil
}

func (b *builder) apply(rec Record) error {
	switch r := rec.(type) {
	case *RegisterBrokerRecord:
		br := Broker{
			ID:                   r.BrokerID,
			IncarnationID:        r.IncarnationID,
			Epoch:                r.BrokerEpoch,
			Fenced:               r.Fenced,
			InControlledShutdown: r.InControlledShutdown,
			Endpoints:            slices.Clone(r.Endpoints),
		}
		if r.Rack != nil {
			br.Rack = *r.Rack
		}
		if len(r.Endpoints) > 0 {
			br.Host = r.Endpoints[0].Host
			br.Port = int32(r.Endpoints[0].Port)
		}
		b.brokers()[r.BrokerID] = br

	case *FenceBrokerRecord:
		br, err := b.broker(r.ID, r.Epoch)
		if err != nil {
			return err
		}
		br.Fenced = true
		b.brokers()[r.ID] = br

	case *UnfenceBrokerRecord:
		br, err := b.broker(r.ID, r.Epoch)
		if err != nil {
			return err
		}
		br.Fenced = false
		b.brokers()[r.ID] = br

	case *BrokerRegistrationChangeRecord:
		br, err := b.broker(r.BrokerID, r.BrokerEpoch)
		if err != nil {
			return err
		}
		switch r.Fenced {
		case FenceFence:
			br.Fenced = true
		case FenceUnfence:
			br.Fenced = false
		case FenceNoChange:
		default:
			return fmt.Errorf("%w: broker %d: fenced value %d", ErrInvalidRecord, r.BrokerID, r.Fenced)
		}
		switch r.InControlledShutdown {
		case 1:
			br.InControlledShutdown = true
		case 0:
		default:
			return fmt.Errorf("%w: broker %d: in-controlled-shutdown value %d", ErrInvalidRecord, r.BrokerID, r.InControlledShutdown)
		}
		b.brokers()[r.BrokerID] = br

	case *TopicRecord:
		if r.Name == "" {
			return fmt.Errorf("%w: topic with empty name", ErrInvalidRecord)
		}
		if b.im.Topics[r.Name] != nil {
			return fmt.Errorf("%w: topic %q already exists", ErrInvalidRecord, r.Name)
		}
		if b.im.TopicsByID[r.TopicID] != nil {
			return fmt.Errorf("%w: topic id %x already exists", ErrInvalidRecord, r.TopicID)
		}
		b.copyTopicMaps()
		t := &Topic{Name: r.Name, ID: r.TopicID, Configs: map[string]string{}}
		b.ownTopics[t] = true
		b.im.Topics[r.Name] = t
		b.im.TopicsByID[r.TopicID] = t

	case *PartitionRecord:
		t, err := b.topic(r.TopicID)
		if err != nil {
			return err
		}
		p := Partition{
			Partition:      r.PartitionID,
			Replicas:       slices.Clone(r.Replicas),
			ISR:            slices.Clone(r.ISR),
			Leader:         r.Leader,
			LeaderEpoch:    r.LeaderEpoch,
			PartitionEpoch: r.PartitionEpoch,
		}
		switch {
		case r.PartitionID >= 0 && int(r.PartitionID) < len(t.Partitions):
			t.Partitions[r.PartitionID] = p
		case int(r.PartitionID) == len(t.Partitions):
			t.Partitions = append(t.Partitions, p)
		default:
			return fmt.Errorf("%w: topic %q: partition %d out of sequence (has %d)", ErrInvalidRecord, t.Name, r.PartitionID, len(t.Partitions))
		}

	case *PartitionChangeRecord:
		t, err := b.topic(r.TopicID)
		if err != nil {
			return err
		}
		if r.PartitionID < 0 || int(r.PartitionID) >= len(t.Partitions) {
			return fmt.Errorf("%w: topic %q has no partition %d", ErrInvalidRecord, t.Name, r.PartitionID)
		}
		p := &t.Partitions[r.PartitionID]
		if r.ISR != nil {
			p.ISR = slices.Clone(r.ISR)
		}
		if r.Replicas != nil {
			p.Replicas = slices.Clone(r.Replicas)
		}
		if r.Leader != LeaderNoChange {
			p.Leader = r.Leader
			p.LeaderEpoch++
		}
		p.PartitionEpoch++

	case *RemoveTopicRecord:
		t := b.im.TopicsByID[r.TopicID]
		if t == nil {
			return fmt.Errorf("%w: remove unknown topic id %x", ErrInvalidRecord, r.TopicID)
		}
		b.copyTopicMaps()
		delete(b.im.Topics, t.Name)
		delete(b.im.TopicsByID, t.ID)

	case *ConfigRecord:
		return b.applyConfig(r)

	case *ProducerIDsRecord:
		if r.NextProducerID <= b.im.NextProducerID {
			return fmt.Errorf("%w: next producer id %d does not exceed %d", ErrInvalidRecord, r.NextProducerID, b.im.NextProducerID)
		}
		b.im.NextProducerID = r.NextProducerID

	case *NoOpRecord:

	default:
		return fmt.Errorf("%w: record type %T", ErrInvalidRecord, rec)
	}
	return nil
}

func (b *builder) applyConfig(r *ConfigRecord) error {
	var m map[string]string
	switch r.ResourceType {
	case ConfigResourceTopic:
		t := b.im.Topics[r.ResourceName]
		if t == nil {
			return fmt.Errorf("%w: config for unknown topic %q", ErrInvalidRecord, r.ResourceName)
		}
		t, err := b.topic(t.ID)
		if err != nil {
			return err
		}
		m = t.Configs
	case ConfigResourceBroker:
		if r.ResourceName != "" {
			if _, err := strconv.ParseInt(r.ResourceName, 10, 32); err != nil {
				return fmt.Errorf("%w: broker config resource %q is not a broker id", ErrInvalidRecord, r.ResourceName)
			}
		}
		if !b.configsCopied {
			cp := make(map[string]map[string]string, len(b.im.BrokerConfigs)+1)
			for k, v := range b.im.BrokerConfigs {
				cp[k] = v
			}
			b.im.BrokerConfigs = cp
			b.configsCopied = true
		}
		if !b.ownBrokerConfs[r.ResourceName] {
			b.im.BrokerConfigs[r.ResourceName] = cloneConfigs(b.im.BrokerConfigs[r.ResourceName])
			b.ownBrokerConfs[r.ResourceName] = true
		}
		m = b.im.BrokerConfigs[r.ResourceName]
	default:
		return fmt.Errorf("%w: config resource type %d", ErrInvalidRecord, r.ResourceType)
	}
	if r.Value == nil {
		delete(m, r.Name)
	} else {
		m[r.Name] = *r.Value
	}
	return nil
}

func cloneConfigs(m map[string]string) map[string]string {
	cp := make(map[string]string, len(m)+1)
	for k, v := range m {
		cp[k] = v
	}
	return cp
}
