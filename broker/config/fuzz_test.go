package config

import (
	"strings"
	"testing"
)

// checkLinesNameAKey asserts that every problem line starts with the key it
// is about: a known key or an unsafe.* switch.
func checkLinesNameAKey(t *testing.T, err error) {
	t.Helper()
	for _, line := range Problems(err) {
		key, _, ok := strings.Cut(line, ": ")
		if !ok || (keyIndex[key] == nil && !strings.HasPrefix(key, unsafePrefix)) {
			t.Fatalf("problem line does not start with a known key: %q", line)
		}
	}
}

// FuzzFromMap sets one key of a valid combined-mode configuration to a
// fuzzed value, so that validation runs deep: FromMap never panics, every
// problem names its key, and an accepted configuration reports every key
// and gives valid topic defaults.
func FuzzFromMap(f *testing.F) {
	for i := range brokerKeys {
		f.Add(brokerKeys[i].name, "")
		f.Add(brokerKeys[i].name, "-1")
		f.Add(brokerKeys[i].name, "99999999999999999999")
		f.Add(brokerKeys[i].name, brokerKeys[i].def)
	}
	f.Add("listeners", "PLAINTEXT://[::1]:9092,CONTROLLER://0.0.0.0:9093")
	f.Add("advertised.listeners", "PLAINTEXT://0.0.0.0:0,X://a:1")
	f.Add("controller.quorum.voters", "1@[::1]:9093,2@h:1")
	f.Add("process.roles", "controller")
	f.Add("unsafe.anything", "TRUE")
	f.Fuzz(func(t *testing.T, key, value string) {
		m := combined()
		m[key] = value
		c, _, err := FromMap(m)
		checkLinesNameAKey(t, err)
		if err != nil {
			if c != nil {
				t.Fatal("a config returned together with an error")
			}
			return
		}
		if _, err := c.TopicConfig(nil); err != nil {
			t.Fatalf("valid broker config %s=%q gives invalid topic defaults: %v", key, value, err)
		}
		if n := len(c.Entries()); n != len(brokerKeys)+len(c.Unsafe) {
			t.Fatalf("Entries lists %d keys, want %d", n, len(brokerKeys)+len(c.Unsafe))
		}
	})
}
