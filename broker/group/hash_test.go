package group

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestJavaStringHashCode(t *testing.T) {
	// Java's s[0]*31^(n-1) + ... + s[n-1], worked by hand:
	//   "a"   = 97
	//   "ab"  = 97*31 + 98 = 3105
	//   "abc" = 97*961 + 98*31 + 99 = 93217 + 3038 + 99 = 96354
	//   "Aa"  = 65*31 + 97 = 2112 = 66*31 + 66 = "BB" (the classic collision)
	//   "gé"  = 103*31 + 233 = 3426 (é is one UTF-16 unit, two UTF-8 bytes)
	//   "😀"  = 0xD83D*31 + 0xDE00 = 55357*31 + 56832 = 1772899 (a surrogate pair)
	// and known values of the JDK: "hello".hashCode() == 99162322,
	// "polygenelubricants".hashCode() == Integer.MIN_VALUE, and
	// "my-group".hashCode() == -1906497762 (it wraps around).
	cases := map[string]int32{
		"":                   0,
		"a":                  97,
		"ab":                 3105,
		"abc":                96354,
		"Aa":                 2112,
		"BB":                 2112,
		"gé":                 3426,
		"😀":                  1772899,
		"hello":              99162322,
		"polygenelubricants": -2147483648,
		"my-group":           -1906497762,
	}
	for s, want := range cases {
		assert.Equal(t, want, javaStringHashCode(s), "%q", s)
	}
}

func TestPartitionFor(t *testing.T) {
	// Kafka: Utils.abs(hashCode) % 50, with Utils.abs(MIN_VALUE) == 0.
	cases := map[string]int32{
		"":                       0,
		"a":                      47, // 97 % 50
		"abc":                    4,  // 96354 % 50
		"hello":                  22, // 99162322 % 50
		"my-group":               12, // 1906497762 % 50
		"polygenelubricants":     0,  // abs(MIN_VALUE) is 0, not negative
		"console-consumer-58345": 36, // 162328336 % 50
	}
	for s, want := range cases {
		assert.Equal(t, want, partitionFor(s, 50), "%q", s)
	}
	assert.Equal(t, int32(0), partitionFor("anything", 1))
}
