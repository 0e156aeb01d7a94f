package config

import (
	"fmt"
	"math"
	"net"
	"sort"
	"strconv"
	"strings"
)

// loader turns a raw key/value map into a Config, collecting every problem
// and warning on the way.
type loader struct {
	raw      map[string]string
	c        *Config
	parsed   map[string]any  // every known key's parsed value (default included)
	bad      map[string]bool // keys whose value did not parse
	problems []string
	warnings []string
}

func newLoader(raw map[string]string) *loader {
	return &loader{
		raw:    raw,
		c:      &Config{Unsafe: map[string]bool{}, values: map[string]string{}, set: map[string]bool{}},
		parsed: map[string]any{},
		bad:    map[string]bool{},
	}
}

func (l *loader) problemf(key, format string, args ...any) {
	l.problems = append(l.problems, key+": "+fmt.Sprintf(format, args...))
}

func (l *loader) warnf(key, format string, args ...any) {
	l.warnings = append(l.warnings, key+": "+fmt.Sprintf(format, args...))
}

// isSet reports whether the input gave key a value.
func (l *loader) isSet(key string) bool { return l.c.set[key] }

// ok reports whether none of keys failed to parse.
func (l *loader) ok(keys ...string) bool {
	for _, k := range keys {
		if l.bad[k] {
			return false
		}
	}
	return true
}

func (l *loader) int64Of(key string) int64 { n, _ := l.parsed[key].(int64); return n }

func (l *loader) stringOf(key string) string { s, _ := l.parsed[key].(string); return s }

func (l *loader) run() {
	l.parseKnown()
	l.parseOthers()
	l.identity()
	l.logSettings()
	l.listeners()
	l.quorum()
	l.crossChecks()
	if len(l.problems) == 0 {
		l.render()
	}
}

// parseKnown parses every key of the table, from the input or its default.
func (l *loader) parseKnown() {
	for i := range brokerKeys {
		d := &brokerKeys[i]
		rawValue, given := l.raw[d.name]
		if given {
			l.c.set[d.name] = true
		} else if !d.hasDef {
			continue
		}
		text := d.def
		if given {
			text = strings.TrimSpace(rawValue)
		}
		v, err := d.parseValue(text)
		if err != nil {
			l.bad[d.name] = true
			l.problemf(d.name, "%v", err)
			continue
		}
		l.parsed[d.name] = v
		if d.field != nil {
			assign(d.field(l.c), v)
		}
	}
}

// parseOthers handles keys outside the table: unsafe.* switches, known but
// unimplemented Kafka families, and unknown keys.
func (l *loader) parseOthers() {
	names := make([]string, 0, len(l.raw))
	for k := range l.raw {
		if keyIndex[k] == nil {
			names = append(names, k)
		}
	}
	sort.Strings(names)
	var unsafeKeys []string
	for _, k := range names {
		v := strings.TrimSpace(l.raw[k])
		switch {
		case strings.HasPrefix(k, unsafePrefix):
			unsafeKeys = append(unsafeKeys, k)
		case k == "":
			l.warnings = append(l.warnings, fmt.Sprintf("a line sets an empty key (value %q); ignored", v))
		default:
			l.warnings = append(l.warnings, unknownKeyWarning(k))
		}
	}
	l.parseUnsafe(unsafeKeys)
}

// unknownKeyWarning explains why k is ignored: a likely typo of a known key
// first, then a Kafka family faultline does not implement.
func unknownKeyWarning(k string) string {
	if near := nearestKey(k); near != "" {
		return fmt.Sprintf("%s: unknown key, ignored; did you mean %s?", k, near)
	}
	for _, u := range unimplemented {
		if strings.HasPrefix(k, u.prefix) {
			return fmt.Sprintf("%s: ignored (%s)", k, u.reason)
		}
	}
	return fmt.Sprintf("%s: unknown key, ignored", k)
}

// identity resolves node.id and its alias broker.id, and process.roles.
func (l *loader) identity() {
	c := l.c
	nodeSet, brokerSet := l.isSet("node.id"), l.isSet("broker.id")
	switch {
	case !l.ok("node.id", "broker.id"):
	case nodeSet && brokerSet && l.int64Of("node.id") != l.int64Of("broker.id"):
		l.problemf("broker.id", "conflicts with node.id (broker.id=%d, node.id=%d); set only node.id, or set both to the same value",
			l.int64Of("broker.id"), l.int64Of("node.id"))
	case brokerSet && !nodeSet:
		c.NodeID = int32(l.int64Of("broker.id"))
	case !nodeSet:
		l.bad["node.id"] = true // unknown: skip the checks that need it
		l.problemf("node.id", "required; set node.id to this node's unique id, e.g. node.id=1")
	}
	if l.ok("process.roles") && len(c.ProcessRoles) == 0 {
		l.problemf("process.roles", "required; set process.roles=broker,controller (one process does both), broker, or controller")
	}
}

// logSettings derives the log settings Kafka computes from several keys.
func (l *loader) logSettings() {
	c := l.c
	if l.isSet("log.dirs") {
		c.LogDirs, c.logDirsKey = l.parsed["log.dirs"].([]string), "log.dirs"
	} else {
		c.logDirsKey = "log.dir"
		if dir := l.stringOf("log.dir"); dir != "" {
			c.LogDirs = []string{dir}
		}
	}
	if l.ok("log.dirs", "log.dir") {
		if len(c.LogDirs) == 0 {
			l.problemf(c.logDirsKey, "empty; set log.dirs to one or more data directories, e.g. log.dirs=/var/lib/faultline/data")
		}
		seen := map[string]bool{}
		for _, d := range c.LogDirs {
			if seen[d] {
				l.problemf(c.logDirsKey, "lists %s twice; list each data directory once", d)
			}
			seen[d] = true
		}
	}
	c.MetadataLogDir = l.stringOf("metadata.log.dir")
	if c.MetadataLogDir == "" && len(c.LogDirs) > 0 {
		c.MetadataLogDir = c.LogDirs[0]
	}

	c.LogRollMs = msFrom(l, "log.roll.ms", "log.roll.hours", msPerHour)
	c.LogRollJitterMs = msFrom(l, "log.roll.jitter.ms", "log.roll.jitter.hours", msPerHour)
	switch {
	case l.isSet("log.retention.ms"):
		c.LogRetentionMs = l.int64Of("log.retention.ms")
	case l.isSet("log.retention.minutes"):
		c.LogRetentionMs = scaleMs(l.int64Of("log.retention.minutes"), msPerMinute)
	default:
		c.LogRetentionMs = scaleMs(l.int64Of("log.retention.hours"), msPerHour)
	}
	if c.LogRetentionMs < 0 {
		c.LogRetentionMs = -1
	}
	c.LogFlushIntervalMs = c.LogFlushSchedulerIntervalMs
	if l.isSet("log.flush.interval.ms") {
		c.LogFlushIntervalMs = l.int64Of("log.flush.interval.ms")
	}
	c.OffsetsRetentionMs = scaleMs(l.int64Of("offsets.retention.minutes"), msPerMinute)
	c.LeaderImbalanceCheckIntervalMs = scaleMs(l.int64Of("leader.imbalance.check.interval.seconds"), msPerSecond)
}

// msFrom returns msKey when set, else unitKey scaled to ms.
func msFrom(l *loader, msKey, unitKey string, unitMs int64) int64 {
	if l.isSet(msKey) {
		return l.int64Of(msKey)
	}
	return scaleMs(l.int64Of(unitKey), unitMs)
}

// scaleMs converts n units of unitMs to ms, saturating at math.MaxInt64.
// The keys it converts are bounded below by -1, so only large values can
// overflow.
func scaleMs(n, unitMs int64) int64 {
	if n > math.MaxInt64/unitMs {
		return math.MaxInt64
	}
	return n * unitMs
}

// listeners resolves and checks listeners, advertised listeners, the
// security protocol map and the inter-broker listener.
func (l *loader) listeners() {
	c := l.c
	names, _ := l.parsed["controller.listener.names"].([]string)
	for _, n := range names {
		c.ControllerListenerNames = append(c.ControllerListenerNames, strings.ToUpper(n))
	}
	if !l.ok("listeners", "advertised.listeners", "process.roles") {
		return
	}
	l.uniqueListeners()
	controller, broker := c.IsController(), c.IsBroker()

	if broker && len(c.BrokerListeners()) == 0 {
		example := "listeners=PLAINTEXT://:9092"
		if controller {
			example = "listeners=PLAINTEXT://:9092,CONTROLLER://:9093"
		}
		if len(c.Listeners) == 0 {
			l.problemf("listeners", "required for the broker role; set e.g. %s", example)
		} else {
			l.problemf("listeners", "has no broker listener (all are in controller.listener.names); add one for clients, e.g. %s", example)
		}
	}
	if controller {
		if len(c.ControllerListenerNames) == 0 {
			l.problemf("controller.listener.names", "required for the controller role; name the listener the quorum uses, e.g. controller.listener.names=CONTROLLER")
		} else if len(c.ControllerListeners()) == 0 {
			l.problemf("controller.listener.names", "none of %s is in listeners; add a listener for it, e.g. listeners=%s://:9093",
				strings.Join(c.ControllerListenerNames, ", "), c.ControllerListenerNames[0])
		}
		if !broker {
			for _, ln := range c.BrokerListeners() {
				l.problemf("listeners", "%s is not in controller.listener.names, and a controller-only node (process.roles=controller) serves only controller listeners; remove it, or add the broker role", ln)
			}
		}
	}
	if broker && !controller {
		for _, ln := range c.ControllerListeners() {
			l.problemf("listeners", "%s is a controller listener (controller.listener.names), but a broker-only node (process.roles=broker) must not serve it; remove it from listeners", ln)
		}
	}

	l.advertised()
	l.protocols()
	if broker {
		l.interBroker()
	}
}

func (l *loader) uniqueListeners() {
	names := map[string]bool{}
	ports := map[int32]string{}
	for _, ln := range l.c.Listeners {
		if names[ln.Name] {
			l.problemf("listeners", "listener name %s appears twice; give each listener its own name", ln.Name)
		}
		names[ln.Name] = true
		if ln.Port == 0 {
			continue
		}
		if other, dup := ports[ln.Port]; dup {
			l.problemf("listeners", "port %d is used by both %s and %s; give each listener its own port", ln.Port, other, ln.Name)
		}
		ports[ln.Port] = ln.Name
	}
}

func unspecifiedHost(host string) bool {
	ip := net.ParseIP(host)
	return ip != nil && ip.IsUnspecified()
}

func (l *loader) advertised() {
	c := l.c
	isCtl := func(name string) bool { return contains(c.ControllerListenerNames, name) }
	listenerNames := map[string]bool{}
	for _, ln := range c.Listeners {
		listenerNames[ln.Name] = true
	}
	if l.isSet("advertised.listeners") {
		adv, _ := l.parsed["advertised.listeners"].([]Listener)
		seen := map[string]bool{}
		for _, a := range adv {
			switch {
			case seen[a.Name]:
				l.problemf("advertised.listeners", "listener name %s appears twice; advertise each listener once", a.Name)
			case !listenerNames[a.Name]:
				l.problemf("advertised.listeners", "%s names no listener in listeners; advertise only listeners that exist", a)
			case unspecifiedHost(a.Host):
				l.problemf("advertised.listeners", "%s advertises %s, which clients cannot connect to; use a host name or IP address they can reach", a, a.Host)
			case a.Port == 0:
				l.problemf("advertised.listeners", "%s advertises port 0; give the port clients should connect to", a)
			}
			seen[a.Name] = true
			if isCtl(a.Name) {
				c.AdvertisedControllerListeners = append(c.AdvertisedControllerListeners, a)
			} else {
				c.AdvertisedListeners = append(c.AdvertisedListeners, a)
			}
		}
		if c.IsController() && len(c.AdvertisedControllerListeners) == 0 {
			c.AdvertisedControllerListeners = c.ControllerListeners()
		}
		return
	}
	for _, ln := range c.Listeners {
		if isCtl(ln.Name) {
			c.AdvertisedControllerListeners = append(c.AdvertisedControllerListeners, ln)
			continue
		}
		if c.IsBroker() && unspecifiedHost(ln.Host) {
			l.problemf("advertised.listeners", "not set, so %s from listeners would be advertised, and clients cannot connect to %s; set advertised.listeners=%s://<host clients reach>:%d",
				ln, ln.Host, ln.Name, ln.Port)
		}
		c.AdvertisedListeners = append(c.AdvertisedListeners, ln)
	}
	if !c.IsController() {
		c.AdvertisedControllerListeners = nil
	}
}

// protocols builds the effective listener.security.protocol.map and checks
// that every listener has a protocol faultline serves.
func (l *loader) protocols() {
	c := l.c
	if !l.ok("listener.security.protocol.map") {
		return
	}
	m, _ := l.parsed["listener.security.protocol.map"].(map[string]string)
	c.ListenerSecurityProtocolMap = make(map[string]string, len(m)+len(c.ControllerListenerNames))
	for k, v := range m {
		c.ListenerSecurityProtocolMap[k] = v
	}
	if !l.isSet("listener.security.protocol.map") {
		for _, n := range c.ControllerListenerNames {
			if _, ok := c.ListenerSecurityProtocolMap[n]; !ok {
				c.ListenerSecurityProtocolMap[n] = "PLAINTEXT"
			}
		}
	}
	// A controller without controller.listener.names already has a problem
	// reported; its controller listener would only add a confusing one here.
	namesMissing := c.IsController() && len(c.ControllerListenerNames) == 0
	for _, ln := range c.Listeners {
		proto, ok := c.ListenerSecurityProtocolMap[ln.Name]
		switch {
		case !ok && namesMissing:
		case !ok:
			l.problemf("listener.security.protocol.map", "no entry for listener %s; add %s:PLAINTEXT", ln.Name, ln.Name)
		case proto != "PLAINTEXT":
			l.problemf("listeners", "%s uses security protocol %s, but faultline serves PLAINTEXT only; map %s:PLAINTEXT in listener.security.protocol.map or remove the listener",
				ln, proto, ln.Name)
		}
	}
}

func (l *loader) interBroker() {
	c := l.c
	if l.isSet("inter.broker.listener.name") && l.isSet("security.inter.broker.protocol") {
		l.problemf("inter.broker.listener.name", "set together with security.inter.broker.protocol; set only inter.broker.listener.name")
		return
	}
	name, origin := strings.ToUpper(l.stringOf("inter.broker.listener.name")), ""
	if name == "" {
		name, origin = l.stringOf("security.inter.broker.protocol"), " (the default, from security.inter.broker.protocol)"
	}
	c.InterBrokerListenerName = name
	var names []string
	for _, a := range c.AdvertisedListeners {
		names = append(names, a.Name)
		if a.Name == name {
			return
		}
	}
	switch {
	case contains(c.ControllerListenerNames, name):
		l.problemf("inter.broker.listener.name", "%s%s is a controller listener; brokers replicate over a broker listener, set inter.broker.listener.name to one of [%s]",
			name, origin, strings.Join(names, ", "))
	case len(names) > 0:
		l.problemf("inter.broker.listener.name", "%s%s is not an advertised broker listener; set inter.broker.listener.name to one of [%s]",
			name, origin, strings.Join(names, ", "))
	}
}

// quorum checks controller.quorum.voters and bootstrap servers against the
// roles.
func (l *loader) quorum() {
	c := l.c
	if !l.ok("controller.quorum.voters", "controller.quorum.bootstrap.servers") {
		return
	}
	voters, bootstrap := len(c.ControllerQuorumVoters) > 0, len(c.ControllerQuorumBootstrapServers) > 0
	if !voters && !bootstrap {
		l.problemf("controller.quorum.voters", "required (or controller.quorum.bootstrap.servers); list the controllers, e.g. controller.quorum.voters=1@localhost:9093")
		return
	}
	if voters && bootstrap {
		l.warnf("controller.quorum.bootstrap.servers", "ignored because controller.quorum.voters is set (a static quorum)")
	}
	if !voters || len(c.ProcessRoles) == 0 || !l.ok("process.roles", "node.id", "broker.id") {
		return
	}
	isVoter := false
	ids := make([]string, 0, len(c.ControllerQuorumVoters))
	for _, v := range c.ControllerQuorumVoters {
		ids = append(ids, strconv.Itoa(int(v.ID)))
		isVoter = isVoter || v.ID == c.NodeID
	}
	switch {
	case c.IsController() && !isVoter:
		l.problemf("controller.quorum.voters", "this node (node.id=%d) has the controller role but is not among the voters [%s]; add %d@<host>:<port> or fix node.id",
			c.NodeID, strings.Join(ids, ", "), c.NodeID)
	case !c.IsController() && isVoter:
		l.problemf("controller.quorum.voters", "node.id=%d is a voter, but this node is broker-only (process.roles=broker); give it a node.id that is not a voter, or add the controller role",
			c.NodeID)
	}
}

// crossChecks compares settings Kafka requires to agree.
func (l *loader) crossChecks() {
	c := l.c
	if l.ok("replica.fetch.wait.max.ms", "replica.lag.time.max.ms") && c.ReplicaFetchWaitMaxMs > c.ReplicaLagTimeMaxMs {
		l.problemf("replica.fetch.wait.max.ms", "%d is greater than replica.lag.time.max.ms %d, so idle followers would drop out of the ISR; lower it",
			c.ReplicaFetchWaitMaxMs, c.ReplicaLagTimeMaxMs)
	}
	if l.ok("replica.fetch.wait.max.ms", "replica.socket.timeout.ms") && c.ReplicaFetchWaitMaxMs > c.ReplicaSocketTimeoutMs {
		l.problemf("replica.socket.timeout.ms", "%d is less than replica.fetch.wait.max.ms %d, so follower fetches would time out; raise it",
			c.ReplicaSocketTimeoutMs, c.ReplicaFetchWaitMaxMs)
	}
	if l.ok("group.min.session.timeout.ms", "group.max.session.timeout.ms") && c.GroupMinSessionTimeoutMs > c.GroupMaxSessionTimeoutMs {
		l.problemf("group.max.session.timeout.ms", "%d is less than group.min.session.timeout.ms %d; raise it or lower the minimum",
			c.GroupMaxSessionTimeoutMs, c.GroupMinSessionTimeoutMs)
	}
	if l.ok("min.insync.replicas", "default.replication.factor") && c.MinInsyncReplicas > c.DefaultReplicationFactor {
		l.warnf("min.insync.replicas", "%d is greater than default.replication.factor %d, so acks=all produce to topics created with the default replication factor fails with NOT_ENOUGH_REPLICAS; lower min.insync.replicas or raise default.replication.factor",
			c.MinInsyncReplicas, c.DefaultReplicationFactor)
	}
	if l.ok("broker.session.timeout.ms", "broker.heartbeat.interval.ms") && c.BrokerSessionTimeoutMs <= c.BrokerHeartbeatIntervalMs {
		l.warnf("broker.session.timeout.ms", "%d is not greater than broker.heartbeat.interval.ms %d, so brokers will be fenced between heartbeats; raise it (Kafka's default is %d with %d)",
			c.BrokerSessionTimeoutMs, c.BrokerHeartbeatIntervalMs, DefaultBrokerSessionTimeoutMs, DefaultBrokerHeartbeatIntervalMs)
	}
}
