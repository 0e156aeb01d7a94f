package config

import (
	"fmt"
	"net"
	"strconv"
	"strings"
)

// Listener is one entry of listeners or advertised.listeners:
// NAME://host:port. Name is upper-cased as Kafka does; an empty Host binds
// every interface (in listeners) or means "this machine's host name" (when
// advertised); Port 0 in listeners binds an ephemeral port.
type Listener struct {
	Name string
	Host string
	Port int32
}

// String renders the listener as NAME://host:port (IPv6 hosts bracketed).
func (l Listener) String() string { return l.Name + "://" + l.Address() }

// Address is host:port, ready for net.Listen or net.Dial.
func (l Listener) Address() string { return net.JoinHostPort(l.Host, strconv.Itoa(int(l.Port))) }

// Voter is one entry of controller.quorum.voters: id@host:port.
type Voter struct {
	ID   int32
	Host string
	Port int32
}

// String renders the voter as id@host:port.
func (v Voter) String() string {
	return strconv.Itoa(int(v.ID)) + "@" + v.Address()
}

// Address is host:port of the voter's controller listener.
func (v Voter) Address() string { return net.JoinHostPort(v.Host, strconv.Itoa(int(v.Port))) }

// HostPort is one entry of controller.quorum.bootstrap.servers, or the
// faultline.metrics.address.
type HostPort struct {
	Host string
	Port int32
}

// String renders host:port (IPv6 hosts bracketed).
func (h HostPort) String() string { return net.JoinHostPort(h.Host, strconv.Itoa(int(h.Port))) }

// SplitList splits a Kafka LIST value: comma-separated, blanks around
// entries trimmed, empty entries dropped.
func SplitList(s string) []string {
	var out []string
	for _, part := range strings.Split(s, ",") {
		if part = strings.TrimSpace(part); part != "" {
			out = append(out, part)
		}
	}
	return out
}

// splitHostPort parses host:port or [ipv6]:port; host may be empty.
func splitHostPort(s string) (string, int32, error) {
	host, portText, err := net.SplitHostPort(s)
	if err != nil {
		return "", 0, fmt.Errorf("not host:port")
	}
	if strings.ContainsAny(host, " \t/@") {
		return "", 0, fmt.Errorf("host %q is not a host name or IP address", host)
	}
	port, err := strconv.ParseInt(portText, 10, 32)
	if err != nil || port < 0 || port > 65535 {
		return "", 0, fmt.Errorf("port %q must be a number from 0 to 65535", portText)
	}
	return host, int32(port), nil
}

func parseListeners(s string) (any, error) {
	var out []Listener
	for _, entry := range SplitList(s) {
		name, rest, ok := strings.Cut(entry, "://")
		if !ok || name == "" || strings.ContainsAny(name, ":/@ ") {
			return nil, fmt.Errorf("%q is not NAME://host:port (e.g. PLAINTEXT://:9092)", entry)
		}
		host, port, err := splitHostPort(rest)
		if err != nil {
			return nil, fmt.Errorf("%q is not NAME://host:port (e.g. PLAINTEXT://:9092): %v", entry, err)
		}
		out = append(out, Listener{Name: strings.ToUpper(name), Host: host, Port: port})
	}
	return out, nil
}

func parseVoters(s string) (any, error) {
	var out []Voter
	seen := map[int32]bool{}
	for _, entry := range SplitList(s) {
		idText, rest, ok := strings.Cut(entry, "@")
		id, err := strconv.ParseInt(idText, 10, 32)
		if !ok || err != nil || id < 0 {
			return nil, fmt.Errorf("%q is not id@host:port with a node id >= 0 (e.g. 1@localhost:9093)", entry)
		}
		host, port, err := splitHostPort(rest)
		if err != nil {
			return nil, fmt.Errorf("%q is not id@host:port (e.g. 1@localhost:9093): %v", entry, err)
		}
		if host == "" || port == 0 {
			return nil, fmt.Errorf("%q needs a host and a non-zero port (e.g. 1@localhost:9093)", entry)
		}
		if seen[int32(id)] {
			return nil, fmt.Errorf("voter id %d is listed twice; each voter needs its own node id", id)
		}
		seen[int32(id)] = true
		out = append(out, Voter{ID: int32(id), Host: host, Port: port})
	}
	return out, nil
}

func parseHostPorts(s string) (any, error) {
	var out []HostPort
	for _, entry := range SplitList(s) {
		host, port, err := splitHostPort(entry)
		if err == nil && (host == "" || port == 0) {
			err = fmt.Errorf("needs a host and a non-zero port")
		}
		if err != nil {
			return nil, fmt.Errorf("%q is not host:port (e.g. localhost:9093): %v", entry, err)
		}
		out = append(out, HostPort{Host: host, Port: port})
	}
	return out, nil
}

func parseMetricsAddress(s string) (any, error) {
	if s == "" {
		return "", nil
	}
	if _, _, err := splitHostPort(s); err != nil {
		return nil, fmt.Errorf("must be host:port (e.g. :9404 or 127.0.0.1:9404), or empty to disable, got %q", s)
	}
	return s, nil
}

// securityProtocols are Kafka's SecurityProtocol names.
var securityProtocols = []string{"PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"}

func parseProtocolMap(s string) (any, error) {
	out := map[string]string{}
	for _, entry := range SplitList(s) {
		name, proto, ok := strings.Cut(entry, ":")
		name, proto = strings.ToUpper(strings.TrimSpace(name)), strings.ToUpper(strings.TrimSpace(proto))
		if !ok || name == "" {
			return nil, fmt.Errorf("%q is not LISTENER_NAME:PROTOCOL (e.g. CONTROLLER:PLAINTEXT)", entry)
		}
		if !contains(securityProtocols, proto) {
			return nil, fmt.Errorf("%q: protocol must be one of %s", entry, strings.Join(securityProtocols, ", "))
		}
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("listener %s is mapped twice; map each listener once", name)
		}
		out[name] = proto
	}
	return out, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
