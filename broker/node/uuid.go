package node

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
)

// RandomUUID returns a new random Kafka UUID in its text form: 16 random
// bytes (version 4, IETF variant, as Java's UUID.randomUUID) encoded as 22
// characters of unpadded base64url. Like Kafka it never returns an id that
// starts with '-' (it would read as a command-line flag) nor the all-zero or
// reserved metadata-topic ids.
func RandomUUID() string {
	for {
		var b [16]byte
		if _, err := rand.Read(b[:]); err != nil {
			// crypto/rand.Read never returns an error on supported platforms.
			panic(fmt.Sprintf("crypto/rand: %v", err))
		}
		b[6] = b[6]&0x0f | 0x40
		b[8] = b[8]&0x3f | 0x80
		s := base64.RawURLEncoding.EncodeToString(b[:])
		if s[0] == '-' || isReservedUUID(b) {
			continue
		}
		return s
	}
}

// ParseUUID checks that s is a Kafka UUID in text form (22 characters of
// unpadded base64url encoding 16 bytes) and returns its bytes.
func ParseUUID(s string) ([16]byte, error) {
	var u [16]byte
	if len(s) != 22 {
		return u, fmt.Errorf("%q is not a Kafka UUID: want 22 base64url characters (for example %s from `broker random-uuid`), got %d", s, "MkU3OEVBNTcwNTJENDM2Qg", len(s))
	}
	b, err := base64.RawURLEncoding.Strict().DecodeString(s)
	if err != nil || len(b) != 16 {
		return u, fmt.Errorf("%q is not a Kafka UUID: not 16 bytes of base64url (use `broker random-uuid` to make one)", s)
	}
	copy(u[:], b)
	if isReservedUUID(u) {
		return u, fmt.Errorf("%q is a reserved Kafka UUID and cannot be used as an id", s)
	}
	return u, nil
}

// isReservedUUID reports the ids Kafka reserves: zero (Uuid.ZERO_UUID) and
// one (Uuid.METADATA_TOPIC_ID).
func isReservedUUID(u [16]byte) bool {
	for i := 0; i < 15; i++ {
		if u[i] != 0 {
			return false
		}
	}
	return u[15] == 0 || u[15] == 1
}
