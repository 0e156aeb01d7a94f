package config

import (
	"sort"
	"strconv"
	"strings"
)

// Entry is one broker or topic config as DescribeConfigs reports it.
type Entry struct {
	Name  string
	Value string // effective value; "" for an unset key without a default
	// IsDefault is true when the input did not set the key.
	IsDefault bool
	// ReadOnly is true for every broker key: faultline has no dynamic
	// broker configs. Topic entries are not read-only.
	ReadOnly bool
	// Sensitive marks a secret whose value must be sent as null. No key
	// faultline knows is secret today (it serves PLAINTEXT only, so there are
	// no passwords); the field keeps DescribeConfigs answers complete.
	Sensitive bool
}

// derived renders keys whose effective value is computed from several keys.
var derived = map[string]func(c *Config) string{
	"node.id":                        func(c *Config) string { return strconv.Itoa(int(c.NodeID)) },
	"broker.id":                      func(c *Config) string { return strconv.Itoa(int(c.NodeID)) },
	"log.dirs":                       func(c *Config) string { return strings.Join(c.LogDirs, ",") },
	"log.roll.ms":                    func(c *Config) string { return strconv.FormatInt(c.LogRollMs, 10) },
	"log.roll.jitter.ms":             func(c *Config) string { return strconv.FormatInt(c.LogRollJitterMs, 10) },
	"log.retention.ms":               func(c *Config) string { return strconv.FormatInt(c.LogRetentionMs, 10) },
	"log.flush.interval.ms":          func(c *Config) string { return strconv.FormatInt(c.LogFlushIntervalMs, 10) },
	"metadata.log.dir":               func(c *Config) string { return c.MetadataLogDir },
	"controller.listener.names":      func(c *Config) string { return strings.Join(c.ControllerListenerNames, ",") },
	"inter.broker.listener.name":     func(c *Config) string { return c.InterBrokerListenerName },
	"listener.security.protocol.map": func(c *Config) string { return renderProtocolMap(c.ListenerSecurityProtocolMap) },
	"advertised.listeners": func(c *Config) string {
		return renderAny(&c.AdvertisedListeners) + commaIf(len(c.AdvertisedListeners) > 0 && len(c.AdvertisedControllerListeners) > 0) +
			renderAny(&c.AdvertisedControllerListeners)
	},
}

func commaIf(b bool) string {
	if b {
		return ","
	}
	return ""
}

func renderProtocolMap(m map[string]string) string {
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	sort.Strings(names)
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = n + ":" + m[n]
	}
	return strings.Join(parts, ",")
}

// renderAny formats a Config field the way Kafka writes the value.
func renderAny(field any) string {
	switch p := field.(type) {
	case *int64:
		return strconv.FormatInt(*p, 10)
	case *int32:
		return strconv.FormatInt(int64(*p), 10)
	case *int16:
		return strconv.FormatInt(int64(*p), 10)
	case *bool:
		return strconv.FormatBool(*p)
	case *string:
		return *p
	case *[]string:
		return strings.Join(*p, ",")
	case *[]Listener:
		return joinStrings(*p)
	case *[]Voter:
		return joinStrings(*p)
	case *[]HostPort:
		return joinStrings(*p)
	}
	return ""
}

func joinStrings[T interface{ String() string }](items []T) string {
	parts := make([]string, len(items))
	for i, it := range items {
		parts[i] = it.String()
	}
	return strings.Join(parts, ",")
}

// render records every known key's effective value for Entries.
func (l *loader) render() {
	c := l.c
	for i := range brokerKeys {
		d := &brokerKeys[i]
		switch {
		case derived[d.name] != nil:
			c.values[d.name] = derived[d.name](c)
		case d.field != nil:
			c.values[d.name] = renderAny(d.field(c))
		case c.set[d.name]:
			c.values[d.name] = strings.TrimSpace(l.raw[d.name])
		default:
			c.values[d.name] = d.def
		}
	}
}

// Entries returns every known broker key with its effective value, in a
// stable order, followed by the unsafe.* keys that were set. It answers
// DescribeConfigs for a broker resource.
func (c *Config) Entries() []Entry {
	out := make([]Entry, 0, len(brokerKeys)+len(c.Unsafe))
	for i := range brokerKeys {
		d := &brokerKeys[i]
		out = append(out, Entry{Name: d.name, Value: c.values[d.name], IsDefault: !c.set[d.name], ReadOnly: true})
	}
	unsafeKeys := make([]string, 0, len(c.Unsafe))
	for k := range c.Unsafe {
		unsafeKeys = append(unsafeKeys, k)
	}
	sort.Strings(unsafeKeys)
	for _, k := range unsafeKeys {
		out = append(out, Entry{Name: k, Value: strconv.FormatBool(c.Unsafe[k]), ReadOnly: true})
	}
	return out
}

// nearestKey returns the known key closest to k by edit distance when it is
// close enough to be a likely typo, else "".
func nearestKey(k string) string {
	best, bestDist := "", len(k)/4+1
	if bestDist > 3 {
		bestDist = 3
	}
	for i := range brokerKeys {
		name := brokerKeys[i].name
		if d := editDistance(k, name, bestDist); d <= bestDist && (best == "" || d < editDistance(k, best, bestDist)) {
			best = name
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b, or limit+1 when
// it exceeds limit.
func editDistance(a, b string, limit int) int {
	if abs(len(a)-len(b)) > limit {
		return limit + 1
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		rowMin := cur[0]
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			rowMin = min(rowMin, cur[j])
		}
		if rowMin > limit {
			return limit + 1
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}
