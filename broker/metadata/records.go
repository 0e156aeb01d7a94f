package metadata

// API keys of the metadata records, as Kafka numbers them.
const (
	KeyRegisterBroker           int16 = 0
	KeyTopic                    int16 = 2
	KeyPartition                int16 = 3
	KeyConfig                   int16 = 4
	KeyPartitionChange          int16 = 5
	KeyFenceBroker              int16 = 7
	KeyUnfenceBroker            int16 = 8
	KeyRemoveTopic              int16 = 9
	KeyProducerIDs              int16 = 15
	KeyBrokerRegistrationChange int16 = 17
	KeyNoOp                     int16 = 20
)

// Sentinel values of PartitionChangeRecord.Leader and of partition leaders.
const (
	// LeaderNoChange in a PartitionChangeRecord leaves the leader as it is.
	LeaderNoChange int32 = -2
	// NoLeader: the partition has no leader.
	NoLeader int32 = -1
)

// Config resource types (Kafka's ConfigResource.Type).
const (
	ConfigResourceTopic  int8 = 2
	ConfigResourceBroker int8 = 4
)

// Record is one metadata record.
type Record interface {
	// Key is the record's API key (KeyTopic, ...).
	Key() int16
	// Version is the schema version this package writes.
	Version() int16
	appendBody(dst []byte) []byte
	readBody(r *reader)
}

// Endpoint is one listener of a broker.
type Endpoint struct {
	Name             string
	Host             string
	Port             uint16
	SecurityProtocol int16 // 0 PLAINTEXT
}

// RegisterBrokerRecord registers a broker incarnation. A new incarnation
// replaces the previous registration of the same broker id.
type RegisterBrokerRecord struct {
	BrokerID             int32
	IncarnationID        Uuid
	BrokerEpoch          int64
	Endpoints            []Endpoint
	Rack                 *string
	Fenced               bool
	InControlledShutdown bool
}

// TopicRecord creates a topic.
type TopicRecord struct {
	Name    string
	TopicID Uuid
}

// PartitionRecord creates a partition (or replaces it wholesale).
type PartitionRecord struct {
	PartitionID    int32
	TopicID        Uuid
	Replicas       []int32
	ISR            []int32
	Leader         int32
	LeaderEpoch    int32
	PartitionEpoch int32
}

// ConfigRecord sets (Value non-nil) or deletes (Value nil) one config of a
// topic or broker. A broker config with an empty ResourceName is
// cluster-wide.
type ConfigRecord struct {
	ResourceType int8
	ResourceName string
	Name         string
	Value        *string
}

// PartitionChangeRecord changes a partition. A nil ISR or Replicas and a
// Leader of LeaderNoChange leave that field unchanged. Applying it bumps the
// partition epoch, and the leader epoch whenever Leader is not
// LeaderNoChange, even when it names the current leader again: that is how
// the controller forces a new leader epoch (a leader that restarted).
type PartitionChangeRecord struct {
	PartitionID int32
	TopicID     Uuid
	ISR         []int32
	Leader      int32
	Replicas    []int32
}

// FenceBrokerRecord fences a broker: it may not lead or join ISRs.
type FenceBrokerRecord struct {
	ID    int32
	Epoch int64
}

// UnfenceBrokerRecord unfences a broker.
type UnfenceBrokerRecord struct {
	ID    int32
	Epoch int64
}

// RemoveTopicRecord deletes a topic.
type RemoveTopicRecord struct {
	TopicID Uuid
}

// ProducerIDsRecord records that producer ids below NextProducerID have been
// handed out, so that a restart never hands them out again.
type ProducerIDsRecord struct {
	BrokerID       int32
	BrokerEpoch    int64
	NextProducerID int64
}

// Values of BrokerRegistrationChangeRecord.Fenced.
const (
	FenceNoChange int8 = 0
	FenceFence    int8 = 1
	FenceUnfence  int8 = -1
)

// BrokerRegistrationChangeRecord changes a broker's fencing or controlled
// shutdown state (tags 0 and 1; 0 means no change).
type BrokerRegistrationChangeRecord struct {
	BrokerID             int32
	BrokerEpoch          int64
	Fenced               int8
	InControlledShutdown int8
}

// NoOpRecord advances the log without changing the image (written by a new
// controller leader to commit its term, as Kafka does).
type NoOpRecord struct{}

func (*RegisterBrokerRecord) Key() int16           { return KeyRegisterBroker }
func (*TopicRecord) Key() int16                    { return KeyTopic }
func (*PartitionRecord) Key() int16                { return KeyPartition }
func (*ConfigRecord) Key() int16                   { return KeyConfig }
func (*PartitionChangeRecord) Key() int16          { return KeyPartitionChange }
func (*FenceBrokerRecord) Key() int16              { return KeyFenceBroker }
func (*UnfenceBrokerRecord) Key() int16            { return KeyUnfenceBroker }
func (*RemoveTopicRecord) Key() int16              { return KeyRemoveTopic }
func (*ProducerIDsRecord) Key() int16              { return KeyProducerIDs }
func (*BrokerRegistrationChangeRecord) Key() int16 { return KeyBrokerRegistrationChange }
func (*NoOpRecord) Key() int16                     { return KeyNoOp }

func (*RegisterBrokerRecord) Version() int16           { return 1 }
func (*TopicRecord) Version() int16                    { return 0 }
func (*PartitionRecord) Version() int16                { return 0 }
func (*ConfigRecord) Version() int16                   { return 0 }
func (*PartitionChangeRecord) Version() int16          { return 0 }
func (*FenceBrokerRecord) Version() int16              { return 0 }
func (*UnfenceBrokerRecord) Version() int16            { return 0 }
func (*RemoveTopicRecord) Version() int16              { return 0 }
func (*ProducerIDsRecord) Version() int16              { return 0 }
func (*BrokerRegistrationChangeRecord) Version() int16 { return 0 }
func (*NoOpRecord) Version() int16                     { return 0 }

// newRecord returns an empty record for an API key, or nil.
func newRecord(key int16) Record {
	switch key {
	case KeyRegisterBroker:
		return new(RegisterBrokerRecord)
	case KeyTopic:
		return new(TopicRecord)
	case KeyPartition:
		return new(PartitionRecord)
	case KeyConfig:
		return new(ConfigRecord)
	case KeyPartitionChange:
		return &PartitionChangeRecord{Leader: LeaderNoChange}
	case KeyFenceBroker:
		return new(FenceBrokerRecord)
	case KeyUnfenceBroker:
		return new(UnfenceBrokerRecord)
	case KeyRemoveTopic:
		return new(RemoveTopicRecord)
	case KeyProducerIDs:
		return new(ProducerIDsRecord)
	case KeyBrokerRegistrationChange:
		return new(BrokerRegistrationChangeRecord)
	case KeyNoOp:
		return new(NoOpRecord)
	}
	return nil
}
