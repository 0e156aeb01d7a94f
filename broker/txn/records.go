package txn

import (
	"encoding/binary"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// StateTopic is the internal topic holding transaction metadata.
const StateTopic = "__transaction_state"

// Record versions written: key v0; value v1 (flexible, with KIP-890's
// tagged PreviousProducerID and ClientTransactionVersion), which Kafka 4.0
// writes too.
const (
	keyVersion   = 0
	valueVersion = 1
)

// EncodeKey is the __transaction_state key of a transactional id.
func EncodeKey(txnID string) []byte {
	k := kmsg.NewTxnMetadataKey()
	k.Version = keyVersion
	k.TransactionalID = txnID
	return k.AppendTo(nil)
}

// EncodeValue is the __transaction_state value of m.
func EncodeValue(m Metadata) []byte {
	v := kmsg.NewTxnMetadataValue()
	v.Version = valueVersion
	v.ProducerID = m.ProducerID
	v.ProducerEpoch = m.ProducerEpoch
	v.TimeoutMillis = m.TimeoutMs
	v.State = kmsg.TransactionState(m.State)
	v.LastUpdateTimestamp = m.UpdateMs
	v.StartTimestamp = m.StartMs
	v.PreviousProducerID = m.PrevProducerID
	v.NextProducerID = -1
	v.NextProducerEpoch = -1
	if m.TV2 {
		v.ClientTransactionVersion = 2
	}
	// m.Partitions is sorted (Metadata.add), so a topic's partitions are
	// consecutive.
	for _, tp := range m.Partitions {
		if n := len(v.Topics); n > 0 && v.Topics[n-1].Topic == tp.Topic {
			v.Topics[n-1].Partitions = append(v.Topics[n-1].Partitions, tp.Partition)
			continue
		}
		vt := kmsg.NewTxnMetadataValueTopic()
		vt.Topic = tp.Topic
		vt.Partitions = []int32{tp.Partition}
		v.Topics = append(v.Topics, vt)
	}
	return v.AppendTo(nil)
}

// DecodeRecord parses a __transaction_state record. A nil value is a
// tombstone: ok is true and m is the zero Metadata with only the id set.
func DecodeRecord(key, value []byte) (m Metadata, tombstone bool, err error) {
	if len(key) < 2 {
		return m, false, fmt.Errorf("key of %d bytes has no version", len(key))
	}
	if v := int16(binary.BigEndian.Uint16(key)); v != 0 {
		return m, false, fmt.Errorf("unknown key version %d", v)
	}
	var k kmsg.TxnMetadataKey
	if err := k.ReadFrom(key); err != nil {
		return m, false, fmt.Errorf("decode key: %w", err)
	}
	m.TransactionalID = k.TransactionalID
	if value == nil {
		return m, true, nil
	}
	if len(value) < 2 {
		return m, false, fmt.Errorf("value of %d bytes has no version", len(value))
	}
	if v := int16(binary.BigEndian.Uint16(value)); v < 0 || v > 1 {
		return m, false, fmt.Errorf("unknown value version %d", v)
	}
	var v kmsg.TxnMetadataValue
	if err := v.ReadFrom(value); err != nil {
		return m, false, fmt.Errorf("decode value of %q: %w", k.TransactionalID, err)
	}
	if v.State < 0 || v.State > kmsg.TransactionState(PrepareEpochFence) {
		return m, false, fmt.Errorf("transaction %q has unknown state %d", k.TransactionalID, v.State)
	}
	m.ProducerID = v.ProducerID
	m.ProducerEpoch = v.ProducerEpoch
	m.LastProducerEpoch = -1
	m.PrevProducerID = -1
	if v.Version >= 1 {
		m.PrevProducerID = v.PreviousProducerID
	}
	m.TimeoutMs = v.TimeoutMillis
	m.State = State(v.State)
	m.UpdateMs = v.LastUpdateTimestamp
	m.StartMs = v.StartTimestamp
	m.TV2 = v.ClientTransactionVersion >= 2
	for _, t := range v.Topics {
		for _, p := range t.Partitions {
			m.add([]TopicPartition{{Topic: t.Topic, Partition: p}})
		}
	}
	return m, false, nil
}
