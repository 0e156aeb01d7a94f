package harness

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/moby/moby/client"
)

// A placement puts nodes on Docker Engines: node name (n1..n9) -> the
// endpoint of the Engine that runs it, as `--docker-host` takes it:
//
//	unix:///var/run/docker.sock   a local socket (or an ssh -L tunnel's)
//	tcp://host:2375               an Engine listening on TCP, no TLS
//	context:NAME or NAME          a Docker context (docker context ls), its
//	                              host and TLS files read from the CLI's
//	                              context store ($DOCKER_CONFIG or ~/.docker)
//
// Nodes a placement does not name run on the default host: DOCKER_HOST,
// else the local socket. A run stores its placement complete (every node,
// the default written out) in test.json, so `--replay` places the nodes
// as they were.

// contextName is what the Docker CLI accepts as a context name.
var contextName = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_.+-]*$`)

// ParseDockerHosts reads `--docker-host`: comma-separated NODE=ENDPOINT
// entries. Each error names the entry it is about; the node names are
// checked against the cluster by ValidateDockerHosts.
func ParseDockerHosts(s string) (map[string]string, error) {
	hosts, seen := map[string]string{}, map[string]string{}
	var problems []string
	for _, entry := range strings.Split(s, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		node, endpoint, ok := strings.Cut(entry, "=")
		node, endpoint = strings.TrimSpace(node), strings.TrimSpace(endpoint)
		switch {
		case !ok || node == "" || endpoint == "":
			problems = append(problems, fmt.Sprintf("%q: want NODE=ENDPOINT (n2=tcp://host:2375)", entry))
		case seen[node] != "":
			problems = append(problems, fmt.Sprintf("%q: %s is placed twice (also on %s)", entry, node, seen[node]))
		default:
			seen[node] = endpoint
			if err := checkEndpoint(endpoint); err != nil {
				problems = append(problems, fmt.Sprintf("%q: %v", entry, err))
				continue
			}
			hosts[node] = endpoint
		}
	}
	if len(problems) > 0 {
		return nil, errors.New(strings.Join(problems, "; "))
	}
	if len(hosts) == 0 {
		return nil, errors.New("no NODE=ENDPOINT entry")
	}
	return hosts, nil
}

// checkEndpoint checks an endpoint's shape (a context is looked up by
// resolveEndpoint).
func checkEndpoint(endpoint string) error {
	scheme, rest, hasScheme := strings.Cut(endpoint, "://")
	if !hasScheme {
		name := strings.TrimPrefix(endpoint, "context:")
		if !contextName.MatchString(name) {
			return fmt.Errorf("%q is neither unix://PATH, tcp://HOST:PORT nor a Docker context name", endpoint)
		}
		return nil
	}
	switch scheme {
	case "unix":
		if !strings.HasPrefix(rest, "/") {
			return fmt.Errorf("unix endpoint %q: the socket path must be absolute (unix:///var/run/docker.sock)", endpoint)
		}
	case "tcp":
		host, port, err := net.SplitHostPort(rest)
		if err != nil || host == "" {
			return fmt.Errorf("tcp endpoint %q: want tcp://HOST:PORT", endpoint)
		}
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return fmt.Errorf("tcp endpoint %q: bad port %q", endpoint, port)
		}
	case "ssh":
		return fmt.Errorf("ssh endpoint %q: not supported (the Engine client has no ssh helper); tunnel the socket (ssh -NL /tmp/n2.sock:/var/run/docker.sock HOST) and name unix:///tmp/n2.sock", endpoint)
	default:
		return fmt.Errorf("endpoint %q: unknown scheme %q (unix, tcp, or a Docker context)", endpoint, scheme)
	}
	return nil
}

// DefaultDockerHost is the endpoint of nodes no placement names:
// DOCKER_HOST, else the local socket.
func DefaultDockerHost() string {
	if h := os.Getenv(client.EnvOverrideHost); h != "" {
		return h
	}
	return client.DefaultDockerHost
}

// ValidateDockerHosts checks a placement against a cluster of nodes
// n1..nK: every node it names exists, every endpoint is well formed and
// every context it names can be resolved. Each problem names the node.
func ValidateDockerHosts(hosts map[string]string, nodes int) []string {
	var problems []string
	for _, node := range sortedKeys(hosts) {
		id, err := strconv.Atoi(strings.TrimPrefix(node, "n"))
		if !strings.HasPrefix(node, "n") || err != nil || id < 1 || id > nodes || node != "n"+strconv.Itoa(id) {
			problems = append(problems, fmt.Sprintf("--docker-host %s: no such node (--nodes %d makes n1..n%d)", node, nodes, nodes))
			continue
		}
		if err := checkEndpoint(hosts[node]); err != nil {
			problems = append(problems, fmt.Sprintf("--docker-host %s: %v", node, err))
			continue
		}
		if _, err := resolveEndpoint(hosts[node]); err != nil {
			problems = append(problems, fmt.Sprintf("--docker-host %s: %v", node, err))
		}
	}
	return problems
}

// Placement is hosts with every node of n1..nK placed: the nodes it does
// not name run on the default host.
func Placement(hosts map[string]string, nodes int) map[string]string {
	out := make(map[string]string, nodes)
	for i := 1; i <= nodes; i++ {
		name := "n" + strconv.Itoa(i)
		out[name] = hosts[name]
		if out[name] == "" {
			out[name] = DefaultDockerHost()
		}
	}
	return out
}

// PlacementText writes a placement as `--docker-host` takes it, in node
// order.
func PlacementText(hosts map[string]string) string {
	parts := make([]string, 0, len(hosts))
	for _, n := range sortedKeys(hosts) { // n1..n9 sort as numbers
		parts = append(parts, n+"="+hosts[n])
	}
	return strings.Join(parts, ",")
}

// dockerEndpoint is how to reach one Engine.
type dockerEndpoint struct {
	// Host is the Engine's address (unix:// or tcp://); empty means the
	// environment's (client.FromEnv: DOCKER_HOST and its TLS variables).
	Host string
	// CA, Cert and Key are a context's TLS files (empty: no TLS).
	CA, Cert, Key string
}

// opts are the Engine client options that reach the endpoint.
func (e dockerEndpoint) opts() []client.Opt {
	if e.Host == "" {
		return []client.Opt{client.FromEnv}
	}
	o := []client.Opt{client.WithHost(e.Host)}
	if e.CA != "" || e.Cert != "" {
		o = append(o, client.WithTLSClientConfig(e.CA, e.Cert, e.Key))
	}
	return o
}

// resolveEndpoint turns a placement's endpoint into an address: the
// default host through the environment (so DOCKER_HOST's TLS settings
// apply), a unix or tcp address as it is, a context through the CLI's
// context store.
func resolveEndpoint(endpoint string) (dockerEndpoint, error) {
	if endpoint == DefaultDockerHost() {
		return dockerEndpoint{}, nil
	}
	if strings.Contains(endpoint, "://") {
		return dockerEndpoint{Host: endpoint}, nil
	}
	return resolveContext(strings.TrimPrefix(endpoint, "context:"))
}

// resolveContext reads a Docker context from the CLI's store:
// contexts/meta/<sha256 of the name>/meta.json holds its Docker host,
// contexts/tls/<same>/docker/ its TLS files. "default" is the default
// host.
func resolveContext(name string) (dockerEndpoint, error) {
	if name == "default" {
		return dockerEndpoint{}, nil
	}
	dir := os.Getenv("DOCKER_CONFIG")
	if dir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return dockerEndpoint{}, fmt.Errorf("context %s: no home directory to find ~/.docker in: %w", name, err)
		}
		dir = filepath.Join(home, ".docker")
	}
	sum := sha256.Sum256([]byte(name))
	id := hex.EncodeToString(sum[:])
	metaPath := filepath.Join(dir, "contexts", "meta", id, "meta.json")
	b, err := os.ReadFile(metaPath)
	if errors.Is(err, fs.ErrNotExist) {
		return dockerEndpoint{}, fmt.Errorf("no Docker context %q in %s (docker context ls lists them; docker context create %s --docker host=tcp://HOST:2376,... makes one)", name, filepath.Join(dir, "contexts"), name)
	}
	if err != nil {
		return dockerEndpoint{}, fmt.Errorf("context %s: %w", name, err)
	}
	var meta struct {
		Endpoints map[string]struct {
			Host          string `json:"Host"`
			SkipTLSVerify bool   `json:"SkipTLSVerify"`
		} `json:"Endpoints"`
	}
	if err := json.Unmarshal(b, &meta); err != nil {
		return dockerEndpoint{}, fmt.Errorf("context %s: %s: %w", name, metaPath, err)
	}
	ep, ok := meta.Endpoints["docker"]
	if !ok || ep.Host == "" {
		return dockerEndpoint{}, fmt.Errorf("context %s has no Docker endpoint (%s)", name, metaPath)
	}
	if err := checkEndpoint(ep.Host); err != nil || !strings.Contains(ep.Host, "://") {
		return dockerEndpoint{}, fmt.Errorf("context %s: its host: %v", name, err)
	}
	if ep.SkipTLSVerify {
		return dockerEndpoint{}, fmt.Errorf("context %s skips TLS verification, which faultline does not do; give the context a CA (docker context update %s --docker ca=...)", name, name)
	}
	out := dockerEndpoint{Host: ep.Host}
	tlsDir := filepath.Join(dir, "contexts", "tls", id, "docker")
	file := func(n string) string {
		p := filepath.Join(tlsDir, n)
		if _, err := os.Stat(p); err != nil {
			return ""
		}
		return p
	}
	out.CA, out.Cert, out.Key = file("ca.pem"), file("cert.pem"), file("key.pem")
	return out, nil
}
