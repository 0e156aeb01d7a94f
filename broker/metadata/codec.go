package metadata

import (
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kbin"
)

// frameVersion is the version of the frame around every record.
const frameVersion = 1

// ErrCorruptRecord: bytes that do not decode as a metadata record.
var ErrCorruptRecord = errors.New("corrupt metadata record")

// Encode frames and encodes one record.
func Encode(rec Record) []byte {
	return AppendRecord(nil, rec)
}

// AppendRecord appends the framed encoding of rec to dst.
func AppendRecord(dst []byte, rec Record) []byte {
	dst = kbin.AppendUvarint(dst, frameVersion)
	dst = kbin.AppendUvarint(dst, uint32(rec.Key()))
	dst = kbin.AppendUvarint(dst, uint32(rec.Version()))
	return rec.appendBody(dst)
}

// Decode decodes one framed record. Every byte must be consumed.
func Decode(b []byte) (Record, error) {
	r := &reader{kbin.Reader{Src: b}}
	fv := r.Uvarint()
	key := r.Uvarint()
	version := r.Uvarint()
	if err := r.Complete(); err != nil {
		return nil, fmt.Errorf("%w: truncated frame", ErrCorruptRecord)
	}
	if fv != frameVersion {
		return nil, fmt.Errorf("%w: frame version %d, want %d", ErrCorruptRecord, fv, frameVersion)
	}
	if key > 0x7fff {
		return nil, fmt.Errorf("%w: api key %d", ErrCorruptRecord, key)
	}
	rec := newRecord(int16(key))
	if rec == nil {
		return nil, fmt.Errorf("%w: unknown api key %d", ErrCorruptRecord, key)
	}
	if int64(version) != int64(rec.Version()) {
		return nil, fmt.Errorf("%w: api key %d version %d not supported (want %d)", ErrCorruptRecord, key, version, rec.Version())
	}
	rec.readBody(r)
	if err := r.Complete(); err != nil {
		return nil, fmt.Errorf("%w: api key %d: %v", ErrCorruptRecord, key, err)
	}
	if len(r.Src) != 0 {
		return nil, fmt.Errorf("%w: api key %d: %d trailing bytes", ErrCorruptRecord, key, len(r.Src))
	}
	return rec, nil
}

// reader extends kbin.Reader with the compound types of the record schemas.
// Like kbin.Reader it records the first failure and returns zero values
// afterwards; callers check Complete once at the end.
type reader struct {
	kbin.Reader
}

func (r *reader) fail() {
	r.Reader.Span(-1) // marks the reader bad
}

// int32s reads a compact array of int32. Null and empty read as nil.
func (r *reader) int32s() []int32 {
	n := r.CompactArrayLen()
	if n <= 0 {
		return nil
	}
	if int(n)*4 > len(r.Src) {
		r.fail()
		return nil
	}
	out := make([]int32, n)
	for i := range out {
		out[i] = r.Int32()
	}
	return out
}

// tags reads a tagged-field section, handing each field to fn; fn returns
// false for tags it does not know, which are skipped.
func (r *reader) tags(fn func(tag uint32, body *reader) bool) {
	n := r.Uvarint()
	if int(n) > len(r.Src) {
		r.fail()
		return
	}
	for range n {
		tag := r.Uvarint()
		size := r.Uvarint()
		if int64(size) > int64(len(r.Src)) {
			r.fail()
			return
		}
		body := &reader{kbin.Reader{Src: r.Span(int(size))}}
		if fn == nil || !fn(tag, body) {
			continue
		}
		if body.Complete() != nil || len(body.Src) != 0 {
			r.fail()
			return
		}
	}
}

func (r *reader) skipTags() { r.tags(nil) }

func appendInt32s(dst []byte, v []int32) []byte {
	dst = kbin.AppendCompactArrayLen(dst, len(v))
	for _, x := range v {
		dst = kbin.AppendInt32(dst, x)
	}
	return dst
}

func appendNoTags(dst []byte) []byte { return kbin.AppendUvarint(dst, 0) }

// appendTag appends one tagged field whose body is built by body.
func appendTag(dst []byte, tag uint32, body []byte) []byte {
	dst = kbin.AppendUvarint(dst, tag)
	dst = kbin.AppendUvarint(dst, uint32(len(body)))
	return append(dst, body...)
}

func (v *RegisterBrokerRecord) appendBody(dst []byte) []byte {
	dst = kbin.AppendInt32(dst, v.BrokerID)
	dst = kbin.AppendUuid(dst, v.IncarnationID)
	dst = kbin.AppendInt64(dst, v.BrokerEpoch)
	dst = kbin.AppendCompactArrayLen(dst, len(v.Endpoints))
	for _, e := range v.Endpoints {
		dst = kbin.AppendCompactString(dst, e.Name)
		dst = kbin.AppendCompactString(dst, e.Host)
		dst = kbin.AppendUint16(dst, e.Port)
		dst = kbin.AppendInt16(dst, e.SecurityProtocol)
		dst = appendNoTags(dst)
	}
	dst = kbin.AppendCompactArrayLen(dst, 0) // Features
	dst = kbin.AppendCompactNullableString(dst, v.Rack)
	dst = kbin.AppendBool(dst, v.Fenced)
	dst = kbin.AppendBool(dst, v.InControlledShutdown)
	return appendNoTags(dst)
}

func (v *RegisterBrokerRecord) readBody(r *reader) {
	v.BrokerID = r.Int32()
	v.IncarnationID = r.Uuid()
	v.BrokerEpoch = r.Int64()
	if n := r.CompactArrayLen(); n > 0 {
		v.Endpoints = make([]Endpoint, n)
		for i := range v.Endpoints {
			e := &v.Endpoints[i]
			e.Name = r.CompactString()
			e.Host = r.CompactString()
			e.Port = r.Uint16()
			e.SecurityProtocol = r.Int16()
			r.skipTags()
		}
	}
	if n := r.CompactArrayLen(); n > 0 {
		for range n { // Features: name, min, max; ignored
			r.CompactString()
			r.Int16()
			r.Int16()
			r.skipTags()
		}
	}
	v.Rack = r.CompactNullableString()
	v.Fenced = r.Bool()
	v.InControlledShutdown = r.Bool()
	r.skipTags()
}

func (v *TopicRecord) appendBody(dst []byte) []byte {
	dst = kbin.AppendCompactString(dst, v.Name)
	dst = kbin.AppendUuid(dst, v.TopicID)
	return appendNoTags(dst)
}

func (v *TopicRecord) readBody(r *reader) {
	v.Name = r.CompactString()
	v.TopicID = r.Uuid()
	r.skipTags()
}

func (v *PartitionRecord) appendBody(dst []byte) []byte {
	dst = kbin.AppendInt32(dst, v.PartitionID)
	dst = kbin.AppendUuid(dst, v.TopicID)
	dst = appendInt32s(dst, v.Replicas)
	dst = appendInt32s(dst, v.ISR)
	dst = appendInt32s(dst, nil) // RemovingReplicas
	dst = appendInt32s(dst, nil) // AddingReplicas
	dst = kbin.AppendInt32(dst, v.Leader)
	dst = kbin.AppendInt32(dst, v.LeaderEpoch)
	dst = kbin.AppendInt32(dst, v.PartitionEpoch)
	return appendNoTags(dst)
}

func (v *PartitionRecord) readBody(r *reader) {
	v.PartitionID = r.Int32()
	v.TopicID = r.Uuid()
	v.Replicas = r.int32s()
	v.ISR = r.int32s()
	r.int32s()
	r.int32s()
	v.Leader = r.Int32()
	v.LeaderEpoch = r.Int32()
	v.PartitionEpoch = r.Int32()
	r.skipTags()
}

func (v *ConfigRecord) appendBody(dst []byte) []byte {
	dst = kbin.AppendInt8(dst, v.ResourceType)
	dst = kbin.AppendCompactString(dst, v.ResourceName)
	dst = kbin.AppendCompactString(dst, v.Name)
	dst = kbin.AppendCompactNullableString(dst, v.Value)
	return appendNoTags(dst)
}

func (v *ConfigRecord) readBody(r *reader) {
	v.ResourceType = r.Int8()
	v.ResourceName = r.CompactString()
	v.Name = r.CompactString()
	v.Value = r.CompactNullableString()
	r.skipTags()
}

// Tags of PartitionChangeRecord.
const (
	tagChangeISR      = 0
	tagChangeLeader   = 1
	tagChangeReplicas = 2
)

func (v *PartitionChangeRecord) appendBody(dst []byte) []byte {
	dst = kbin.AppendInt32(dst, v.PartitionID)
	dst = kbin.AppendUuid(dst, v.TopicID)
	n := 0
	if v.ISR != nil {
		n++
	}
	if v.Leader != LeaderNoChange {
		n++
	}
	if v.Replicas != nil {
		n++
	}
	dst = kbin.AppendUvarint(dst, uint32(n))
	if v.ISR != nil {
		dst = appendTag(dst, tagChangeISR, appendInt32s(nil, v.ISR))
	}
	if v.Leader != LeaderNoChange {
		dst = appendTag(dst, tagChangeLeader, kbin.AppendInt32(nil, v.Leader))
	}
	if v.Replicas != nil {
		dst = appendTag(dst, tagChangeReplicas, appendInt32s(nil, v.Replicas))
	}
	return dst
}

func (v *PartitionChangeRecord) readBody(r *reader) {
	v.PartitionID = r.Int32()
	v.TopicID = r.Uuid()
	v.Leader = LeaderNoChange
	r.tags(func(tag uint32, b *reader) bool {
		switch tag {
		case tagChangeISR:
			v.ISR = b.int32s()
			if v.ISR == nil {
				v.ISR = []int32{}
			}
		case tagChangeLeader:
			v.Leader = b.Int32()
		case tagChangeReplicas:
			v.Replicas = b.int32s()
			if v.Replicas == nil {
				v.Replicas = []int32{}
			}
		default:
			return false
		}
		return true
	})
}

func (v *FenceBrokerRecord) appendBody(dst []byte) []byte {
	dst = kbin.AppendInt32(dst, v.ID)
	dst = kbin.AppendInt64(dst, v.Epoch)
	return appendNoTags(dst)
}

func (v *FenceBrokerRecord) readBody(r *reader) {
	v.ID = r.Int32()
	v.Epoch = r.Int64()
	r.skipTags()
}

func (v *UnfenceBrokerRecord) appendBody(dst []byte) []byte {
	dst = kbin.AppendInt32(dst, v.ID)
	dst = kbin.AppendInt64(dst, v.Epoch)
	return appendNoTags(dst)
}

func (v *UnfenceBrokerRecord) readBody(r *reader) {
	v.ID = r.Int32()
	v.Epoch = r.Int64()
	r.skipTags()
}

func (v *RemoveTopicRecord) appendBody(dst []byte) []byte {
	dst = kbin.AppendUuid(dst, v.TopicID)
	return appendNoTags(dst)
}

func (v *RemoveTopicRecord) readBody(r *reader) {
	v.TopicID = r.Uuid()
	r.skipTags()
}

func (v *ProducerIDsRecord) appendBody(dst []byte) []byte {
	dst = kbin.AppendInt32(dst, v.BrokerID)
	dst = kbin.AppendInt64(dst, v.BrokerEpoch)
	dst = kbin.AppendInt64(dst, v.NextProducerID)
	return appendNoTags(dst)
}

func (v *ProducerIDsRecord) readBody(r *reader) {
	v.BrokerID = r.Int32()
	v.BrokerEpoch = r.Int64()
	v.NextProducerID = r.Int64()
	r.skipTags()
}

// Tags of BrokerRegistrationChangeRecord.
const (
	tagRegFenced             = 0
	tagRegInControlledShutdn = 1
)

func (v *BrokerRegistrationChangeRecord) appendBody(dst []byte) []byte {
	dst = kbin.AppendInt32(dst, v.BrokerID)
	dst = kbin.AppendInt64(dst, v.BrokerEpoch)
	n := 0
	if v.Fenced != 0 {
		n++
	}
	if v.InControlledShutdown != 0 {
		n++
	}
	dst = kbin.AppendUvarint(dst, uint32(n))
	if v.Fenced != 0 {
		dst = appendTag(dst, tagRegFenced, kbin.AppendInt8(nil, v.Fenced))
	}
	if v.InControlledShutdown != 0 {
		dst = appendTag(dst, tagRegInControlledShutdn, kbin.AppendInt8(nil, v.InControlledShutdown))
	}
	return dst
}

func (v *BrokerRegistrationChangeRecord) readBody(r *reader) {
	v.BrokerID = r.Int32()
	v.BrokerEpoch = r.Int64()
	r.tags(func(tag uint32, b *reader) bool {
		switch tag {
		case tagRegFenced:
			v.Fenced = b.Int8()
		case tagRegInControlledShutdn:
			v.InControlledShutdown = b.Int8()
		default:
			return false
		}
		return true
	})
}

func (*NoOpRecord) appendBody(dst []byte) []byte { return appendNoTags(dst) }

func (*NoOpRecord) readBody(r *reader) { r.skipTags() }
