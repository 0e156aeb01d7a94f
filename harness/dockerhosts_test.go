package harness

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestParseDockerHosts: --docker-host's entries, and each bad one named
// in the error.
func TestParseDockerHosts(t *testing.T) {
	good := []struct {
		in   string
		want map[string]string
	}{
		{"n1=unix:///var/run/docker.sock", map[string]string{"n1": "unix:///var/run/docker.sock"}},
		{"n1=unix:///var/run/docker.sock, n2=tcp://10.0.0.2:2375", map[string]string{"n1": "unix:///var/run/docker.sock", "n2": "tcp://10.0.0.2:2375"}},
		{"n3=context:lab-b,n4=lab-c,", map[string]string{"n3": "context:lab-b", "n4": "lab-c"}},
		{"n2=tcp://[fd00::2]:2376", map[string]string{"n2": "tcp://[fd00::2]:2376"}},
	}
	for _, c := range good {
		got, err := ParseDockerHosts(c.in)
		require.NoError(t, err, c.in)
		assert.Equal(t, c.want, got, c.in)
	}
	bad := []struct{ in, want string }{
		{"", "no NODE=ENDPOINT entry"},
		{"n1", `"n1": want NODE=ENDPOINT`},
		{"=tcp://a:1", `"=tcp://a:1": want NODE=ENDPOINT`},
		{"n1=", `"n1=": want NODE=ENDPOINT`},
		{"n1=tcp://a:1,n1=tcp://b:1", `"n1=tcp://b:1": n1 is placed twice (also on tcp://a:1)`},
		{"n1=tcp://hostonly", `"n1=tcp://hostonly": tcp endpoint "tcp://hostonly": want tcp://HOST:PORT`},
		{"n1=tcp://a:99999", `bad port "99999"`},
		{"n1=tcp://:2375", "want tcp://HOST:PORT"},
		{"n1=unix://relative.sock", "the socket path must be absolute"},
		{"n1=ssh://me@b", "ssh endpoint \"ssh://me@b\": not supported"},
		{"n1=http://b:80", `unknown scheme "http"`},
		{"n1=con text", `"con text" is neither unix://PATH, tcp://HOST:PORT nor a Docker context name`},
		{"n1=context:", "is neither"},
	}
	for _, c := range bad {
		_, err := ParseDockerHosts(c.in)
		require.Error(t, err, c.in)
		assert.Contains(t, err.Error(), c.want, c.in)
	}
	_, err := ParseDockerHosts("n1=tcp://a,n2=b c")
	require.Error(t, err)
	assert.Contains(t, err.Error(), `"n1=tcp://a"`, "every bad entry is named")
	assert.Contains(t, err.Error(), `"n2=b c"`, "every bad entry is named")
}

// TestValidateDockerHosts: a placement names only nodes of the cluster,
// and its contexts exist.
func TestValidateDockerHosts(t *testing.T) {
	t.Setenv("DOCKER_CONFIG", t.TempDir())
	assert.Empty(t, ValidateDockerHosts(map[string]string{"n1": "unix:///a.sock", "n3": "tcp://b:2375"}, 3))
	for _, c := range []struct {
		hosts map[string]string
		want  string
	}{
		{map[string]string{"n4": "tcp://b:2375"}, "--docker-host n4: no such node (--nodes 3 makes n1..n3)"},
		{map[string]string{"n0": "tcp://b:2375"}, "--docker-host n0: no such node"},
		{map[string]string{"n01": "tcp://b:2375"}, "--docker-host n01: no such node"},
		{map[string]string{"broker1": "tcp://b:2375"}, "--docker-host broker1: no such node"},
		{map[string]string{"n2": "tcp://b"}, "--docker-host n2: tcp endpoint"},
		{map[string]string{"n2": "context:lab"}, `--docker-host n2: no Docker context "lab"`},
		{map[string]string{"n2": "lab"}, `--docker-host n2: no Docker context "lab"`},
	} {
		problems := ValidateDockerHosts(c.hosts, 3)
		require.Len(t, problems, 1, "%v", c.hosts)
		assert.Contains(t, problems[0], c.want)
	}
}

// writeContext stores a Docker context as the CLI does (contexts/meta/
// <sha256 of the name>/meta.json, TLS files under contexts/tls/<same>).
func writeContext(t *testing.T, dir, name, meta string, tlsFiles ...string) {
	t.Helper()
	sum := sha256.Sum256([]byte(name))
	id := hex.EncodeToString(sum[:])
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "contexts", "meta", id), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "contexts", "meta", id, "meta.json"), []byte(meta), 0o644))
	for _, f := range tlsFiles {
		p := filepath.Join(dir, "contexts", "tls", id, "docker", f)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte("pem"), 0o600))
	}
}

// TestResolveContext reads a context's host and TLS files from the CLI's
// store, the way `docker context create` writes them.
func TestResolveContext(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("DOCKER_CONFIG", dir)
	t.Setenv("DOCKER_HOST", "")
	writeContext(t, dir, "lab-b", `{"Name":"lab-b","Metadata":{},"Endpoints":{"docker":{"Host":"tcp://10.0.0.5:2376","SkipTLSVerify":false}}}`,
		"ca.pem", "cert.pem", "key.pem")
	writeContext(t, dir, "plain", `{"Name":"plain","Endpoints":{"docker":{"Host":"unix:///run/b.sock"}}}`)
	writeContext(t, dir, "insecure", `{"Name":"insecure","Endpoints":{"docker":{"Host":"tcp://b:2376","SkipTLSVerify":true}}}`)
	writeContext(t, dir, "nodocker", `{"Name":"nodocker","Endpoints":{}}`)
	writeContext(t, dir, "broken", `{`)

	ep, err := resolveEndpoint("context:lab-b")
	require.NoError(t, err)
	assert.Equal(t, "tcp://10.0.0.5:2376", ep.Host)
	tlsDir := filepath.Dir(ep.CA)
	assert.Equal(t, filepath.Join(tlsDir, "ca.pem"), ep.CA)
	assert.Equal(t, filepath.Join(tlsDir, "cert.pem"), ep.Cert)
	assert.Equal(t, filepath.Join(tlsDir, "key.pem"), ep.Key)
	assert.True(t, strings.HasPrefix(tlsDir, filepath.Join(dir, "contexts", "tls")))
	assert.Len(t, ep.opts(), 2, "host and TLS")

	ep, err = resolveEndpoint("plain")
	require.NoError(t, err)
	assert.Equal(t, dockerEndpoint{Host: "unix:///run/b.sock"}, ep)
	assert.Len(t, ep.opts(), 1, "host only")

	ep, err = resolveEndpoint("default")
	require.NoError(t, err)
	assert.Equal(t, dockerEndpoint{}, ep, "the default context is the environment's host")
	ep, err = resolveEndpoint("unix:///var/run/docker.sock")
	require.NoError(t, err)
	assert.Equal(t, dockerEndpoint{}, ep, "the default host goes through the environment, its TLS variables too")
	ep, err = resolveEndpoint("unix:///tmp/other.sock")
	require.NoError(t, err)
	assert.Equal(t, dockerEndpoint{Host: "unix:///tmp/other.sock"}, ep)

	for name, want := range map[string]string{
		"insecure": "skips TLS verification",
		"nodocker": "has no Docker endpoint",
		"broken":   "meta.json",
		"missing":  `no Docker context "missing"`,
	} {
		_, err := resolveEndpoint(name)
		require.Error(t, err, name)
		assert.Contains(t, err.Error(), want, name)
	}
}

// TestPlacement: nodes not named run on DOCKER_HOST, else the local
// socket; the text form parses back to the same placement.
func TestPlacement(t *testing.T) {
	t.Setenv("DOCKER_HOST", "")
	p := Placement(map[string]string{"n2": "tcp://b:2375"}, 3)
	assert.Equal(t, map[string]string{"n1": "unix:///var/run/docker.sock", "n2": "tcp://b:2375", "n3": "unix:///var/run/docker.sock"}, p)
	t.Setenv("DOCKER_HOST", "tcp://a:2375")
	p = Placement(map[string]string{"n2": "tcp://b:2375"}, 3)
	assert.Equal(t, map[string]string{"n1": "tcp://a:2375", "n2": "tcp://b:2375", "n3": "tcp://a:2375"}, p)
	assert.Equal(t, "n1=tcp://a:2375,n2=tcp://b:2375,n3=tcp://a:2375", PlacementText(p))
	back, err := ParseDockerHosts(PlacementText(p))
	require.NoError(t, err)
	assert.Equal(t, p, back)
}

// TestMultiHostSubnets: the Engines of a run over several hosts get
// fixed, distinct /24s (the user routes them before the run), outside the
// range the one-Engine runs draw from.
func TestMultiHostSubnets(t *testing.T) {
	seen := map[string]bool{}
	for k := range 9 {
		s := multiHostSubnetOf(k)
		assert.Equal(t, 24, s.Bits())
		assert.False(t, seen[s.String()], "%s twice", s)
		seen[s.String()] = true
	}
	assert.Equal(t, "10.213.240.0/24", multiHostSubnetOf(0).String())
	for attempt := range 300 {
		assert.Less(t, int(subnetFor("run", attempt).Addr().As4()[2]), multiHostSubnet)
	}
}
