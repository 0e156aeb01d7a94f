package workloads

import (
	"encoding/json"
	"fmt"
	"strconv"
)

// Acks is a producer's acks setting: how many replicas must hold a write
// before it is acknowledged. Its zero value is unset, which a workload
// reads as AcksAll (Kafka's default); AcksNone is a value of its own, so
// acks=0 is never mistaken for "not given".
type Acks struct {
	n   int8
	set bool
}

// The acks settings Kafka's producers know.
var (
	AcksAll    = Acks{n: -1, set: true} // every in-sync replica
	AcksLeader = Acks{n: 1, set: true}  // the leader alone
	AcksNone   = Acks{n: 0, set: true}  // no acknowledgement at all
)

// AcksOf returns the setting Kafka writes as n: -1, 1 or 0.
func AcksOf(n int) (Acks, error) {
	switch n {
	case -1:
		return AcksAll, nil
	case 1:
		return AcksLeader, nil
	case 0:
		return AcksNone, nil
	}
	return Acks{}, fmt.Errorf("must be -1 (all), 0 or 1, got %d", n)
}

// IsSet reports whether a setting was given.
func (a Acks) IsSet() bool { return a.set }

// OrDefault returns a, or AcksAll when a is unset.
func (a Acks) OrDefault() Acks {
	if !a.set {
		return AcksAll
	}
	return a
}

// Int is the setting as Kafka writes it (-1, 1 or 0); unset is AcksAll's.
func (a Acks) Int() int { return int(a.OrDefault().n) }

// String writes the setting as Kafka does ("-1", "1", "0"), or "unset".
func (a Acks) String() string {
	if !a.set {
		return "unset"
	}
	return strconv.Itoa(int(a.n))
}

// MarshalJSON writes the setting as a number (-1, 1 or 0), or null when
// unset.
func (a Acks) MarshalJSON() ([]byte, error) {
	if !a.set {
		return []byte("null"), nil
	}
	return json.Marshal(int(a.n))
}

// UnmarshalJSON reads -1, 1 or 0; null leaves the setting unset.
func (a *Acks) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*a = Acks{}
		return nil
	}
	var n int
	if err := json.Unmarshal(b, &n); err != nil {
		return fmt.Errorf("acks: want -1, 0 or 1, got %s", b)
	}
	v, err := AcksOf(n)
	if err != nil {
		return fmt.Errorf("acks: %w", err)
	}
	*a = v
	return nil
}
