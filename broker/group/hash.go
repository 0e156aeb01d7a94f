package group

import (
	"sync"
	"unicode/utf16"
	"unicode/utf8"
)

// javaStringHashCode is Java's String.hashCode: s[0]*31^(n-1) + ... + s[n-1]
// over the UTF-16 code units of s, in wrapping 32-bit arithmetic. Go strings
// are UTF-8; invalid bytes decode to U+FFFD, as Kafka's UTF-8 decoder
// replaces malformed input.
func javaStringHashCode(s string) int32 {
	var h int32
	for _, r := range s {
		if r1, r2 := utf16.EncodeRune(r); r1 != utf8.RuneError {
			h = 31*(31*h+int32(r1)) + int32(r2) // a surrogate pair
			continue
		}
		h = 31*h + int32(r)
	}
	return h
}

// partitionFor places a group on an offsets partition as Kafka does:
// Utils.abs(groupId.hashCode) % partitions, where Utils.abs maps
// Integer.MIN_VALUE to 0 instead of overflowing.
func partitionFor(group string, partitions int32) int32 {
	h := javaStringHashCode(group)
	switch {
	case h == -1<<31:
		h = 0
	case h < 0:
		h = -h
	}
	return h % partitions
}

// HashPartition places key (a group id, or a transactional id for
// __transaction_state) on one of partitions exactly as Kafka does; the
// transaction coordinator shares it.
func HashPartition(key string, partitions int32) int32 { return partitionFor(key, partitions) }

// PartitionLocks hands out one mutex per partition of a coordinator's
// internal topic, made on first use: appends to one partition are
// serialised, different partitions proceed in parallel. The zero value is
// ready; the transaction coordinator shares it.
type PartitionLocks struct {
	mu    sync.Mutex
	locks map[int32]*sync.Mutex
}

// Of returns partition p's mutex.
func (l *PartitionLocks) Of(p int32) *sync.Mutex {
	l.mu.Lock()
	defer l.mu.Unlock()
	m := l.locks[p]
	if m == nil {
		if l.locks == nil {
			l.locks = map[int32]*sync.Mutex{}
		}
		m = new(sync.Mutex)
		l.locks[p] = m
	}
	return m
}
