package metadata

import "sort"

// Uuid is a Kafka UUID (topic ids, directory ids, incarnation ids).
type Uuid [16]byte

// Broker is one registered broker as the metadata log describes it.
type Broker struct {
	ID                   int32
	IncarnationID        Uuid
	Epoch                int64
	Host                 string
	Port                 int32
	Rack                 string
	Fenced               bool
	InControlledShutdown bool
	// Endpoints lists every listener; Host and Port are the first one's.
	Endpoints []Endpoint
}

// Partition is one partition's replica assignment and leadership.
type Partition struct {
	Partition      int32
	Replicas       []int32
	ISR            []int32
	Leader         int32 // -1 when the partition has no leader
	LeaderEpoch    int32
	PartitionEpoch int32
}

// Topic is one topic with its partitions, indexed by partition number.
type Topic struct {
	Name       string
	ID         Uuid
	Partitions []Partition
	Configs    map[string]string
}

// Image is the cluster state obtained by replaying the metadata log up to
// Offset. An Image handed out by a Source is never mutated afterwards: a
// change produces a new Image (copy on write), so readers need no locks.
type Image struct {
	ClusterID    string
	ControllerID int32 // the active controller, -1 when unknown
	Offset       int64 // offset of the last metadata record applied, -1 for none
	Brokers      map[int32]Broker
	Topics       map[string]*Topic
	TopicsByID   map[Uuid]*Topic
	// NextProducerID is the first producer id not yet handed out.
	NextProducerID int64
	// BrokerConfigs holds dynamic broker configs by broker id as a string,
	// "" for cluster-wide defaults.
	BrokerConfigs map[string]map[string]string
}

// NewImage returns the empty image of a cluster: the image before the first
// metadata record.
func NewImage(clusterID string) *Image {
	return &Image{
		ClusterID:     clusterID,
		ControllerID:  -1,
		Offset:        -1,
		Brokers:       map[int32]Broker{},
		Topics:        map[string]*Topic{},
		TopicsByID:    map[Uuid]*Topic{},
		BrokerConfigs: map[string]map[string]string{},
	}
}

// Source hands out the newest Image.
type Source interface {
	Image() *Image
}

// Topic returns the named topic, or nil.
func (im *Image) Topic(name string) *Topic {
	if im == nil {
		return nil
	}
	return im.Topics[name]
}

// TopicNames returns every topic name, sorted.
func (im *Image) TopicNames() []string {
	names := make([]string, 0, len(im.Topics))
	for n := range im.Topics {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Partition returns the topic's partition p, or nil.
func (im *Image) Partition(topic string, p int32) *Partition {
	t := im.Topic(topic)
	if t == nil || p < 0 || int(p) >= len(t.Partitions) {
		return nil
	}
	return &t.Partitions[p]
}

// UnfencedBrokers returns the brokers that may lead and join ISRs, sorted by
// id.
func (im *Image) UnfencedBrokers() []Broker {
	var out []Broker
	for _, b := range im.Brokers {
		if !b.Fenced && !b.InControlledShutdown {
			out = append(out, b)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Live reports whether broker id is registered, unfenced and not shutting
// down.
func (im *Image) Live(id int32) bool {
	b, ok := im.Brokers[id]
	return ok && !b.Fenced && !b.InControlledShutdown
}
