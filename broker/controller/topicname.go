package controller

import (
	"fmt"
	"strings"
)

// MaxTopicNameLength is the longest legal topic name (Kafka's limit: a
// partition directory name "<topic>-<partition>" must fit in 255 bytes).
const MaxTopicNameLength = 249

// ValidateTopicName checks a topic name against Kafka's rules: not empty,
// not "." or "..", at most 249 characters, only ASCII letters, digits, '.',
// '_' and '-'.
func ValidateTopicName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("topic name is empty")
	case name == "." || name == "..":
		return fmt.Errorf("topic name %q is not allowed", name)
	case len(name) > MaxTopicNameLength:
		return fmt.Errorf("topic name is %d characters long, the limit is %d", len(name), MaxTopicNameLength)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		legal := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
		if !legal {
			return fmt.Errorf("topic name %q has an illegal character %q at %d: only ASCII letters, digits, '.', '_' and '-' are allowed", name, c, i)
		}
	}
	return nil
}

// HasCollisionChars reports whether a name contains '.' or '_', which metric
// names do not distinguish: such a topic deserves a warning.
func HasCollisionChars(name string) bool {
	return strings.ContainsAny(name, "._")
}

// CollisionKey maps a topic name to the name metrics see ('.' as '_'); two
// different topics with the same key collide.
func CollisionKey(name string) string {
	return strings.ReplaceAll(name, ".", "_")
}
