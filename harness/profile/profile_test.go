package profile

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite the golden files")

func TestBuiltinProfilesLoad(t *testing.T) {
	assert.Equal(t, []string{"apache-kafka", "faultline", "kfake"}, Builtin())
	for _, name := range Builtin() {
		p, err := Load(name)
		require.NoError(t, err, name)
		assert.Equal(t, name, p.Name)
	}
	def, err := Load("")
	require.NoError(t, err)
	assert.Equal(t, "faultline", def.Name, "the reference broker is the default")
	k, _ := Load("kfake")
	assert.False(t, k.IsDurable())
	assert.Equal(t, 1, k.MaxNodes)
	assert.Equal(t, "none", k.Controller)
}

func TestValidationNamesTheField(t *testing.T) {
	cases := []struct {
		name, yaml, want string
	}{
		{"missing start", "name: x\n", "profile field start: missing"},
		{"missing name", "start: [a]\n", "profile field name: missing"},
		{"unknown signal", "name: x\nstart: [a]\nsignals: {kill: BOOM}\n", `profile field signals.kill: unknown signal "BOOM"`},
		{"unknown field", "name: x\nstart: [a]\nstrat: [b]\n", "field strat not found"},
		{"bad template", "name: x\nstart: ['{{.Nope}}']\n", "profile field start[0]"},
		{"unknown binary", "name: x\nstart: ['{{bin \"b\"}}']\n", `bin "b": not in binaries`},
		{"bad topology", "name: x\nstart: [a]\ntopologies: [ring]\n", `profile field topologies: "ring"`},
		{"bad controller", "name: x\nstart: [a]\ncontroller: zk\n", `profile field controller: "zk"`},
		{"bad max nodes", "name: x\nstart: [a]\nmax_nodes: 12\n", "profile field max_nodes: 12"},
		{"binary named faultline", "name: x\nstart: [a]\nbinaries: {faultline: /x}\n", "profile field binaries"},
		{"file with a slash", "name: x\nstart: [a]\nfiles: {a/b: x}\n", "profile field files"},
		{"bad format template", "name: x\nstart: [a]\nformat: ['{{']\n", "profile field format[0]"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse([]byte(c.yaml), "")
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.want)
		})
	}
	_, err := Parse([]byte("name: x\nstart: ['{{.Nope}}']\nsignals: {stop: NO}\n"), "")
	require.Error(t, err)
	assert.Len(t, strings.Split(err.Error(), "\n"), 2, "every bad field on its own line")
}

func TestLoadFileAndUnknownName(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "mybroker.yaml")
	require.NoError(t, os.WriteFile(path, []byte("name: mine\nbinaries: {mine: ./bin/mine}\nstart: ['{{bin \"mine\"}}', --port, '{{.ClientPort}}']\n"), 0o644))
	p, err := Load(path)
	require.NoError(t, err)
	paths, err := p.BinaryPaths(nil)
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(dir, "bin/mine"), paths["mine"], "relative to the profile file")
	_, err = Load("no-such-broker")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "neither a built-in profile (apache-kafka, faultline, kfake) nor a file")
	bad := filepath.Join(dir, "bad.yaml")
	require.NoError(t, os.WriteFile(bad, []byte("name: x\n"), 0o644))
	_, err = Load(bad)
	assert.ErrorContains(t, err, "bad.yaml: profile field start")
}

func TestBinaryPathsExpandVariables(t *testing.T) {
	p, _ := Load("faultline")
	paths, err := p.BinaryPaths(map[string]string{"FAULTLINE_BROKER_BINARY": "/opt/broker"})
	require.NoError(t, err)
	assert.Equal(t, "/opt/broker", paths["broker"])
	k, _ := Load("apache-kafka")
	t.Setenv("KAFKA_HOME", "")
	_, err = k.BinaryPaths(nil)
	assert.ErrorContains(t, err, "expands to nothing")
}

// sampleNode is node 2 of a 3-node combined cluster in Docker.
func sampleNode() NodeData {
	return NodeData{NodeID: 2, Name: "n2", Roles: "broker,controller", Broker: true, Controller: true,
		Host: "10.213.7.12", Bind: "0.0.0.0", ClientPort: 9092, ControllerPort: 9093,
		Voters: "1@10.213.7.11:9093,2@10.213.7.12:9093,3@10.213.7.13:9093", Bootstrap: "10.213.7.11:9093,10.213.7.12:9093,10.213.7.13:9093",
		DataDir: "/data", ConfigDir: "/etc/faultline", ClusterID: "MkU3OEVBNTcwNTJENDM2Qg", Nodes: 3,
		Properties: map[string]string{
			"process.roles": "broker,controller", "node.id": "2", "controller.quorum.voters": "1@10.213.7.11:9093,2@10.213.7.12:9093,3@10.213.7.13:9093",
			"listeners": "PLAINTEXT://0.0.0.0:9092,CONTROLLER://0.0.0.0:9093", "advertised.listeners": "PLAINTEXT://10.213.7.12:9092",
			"controller.listener.names": "CONTROLLER", "log.dirs": "/data/kafka", "min.insync.replicas": "2",
		}}
}

// TestRenderGolden: the commands and files each built-in profile generates
// for one node, against golden files (go test -update rewrites them).
func TestRenderGolden(t *testing.T) {
	for _, name := range Builtin() {
		t.Run(name, func(t *testing.T) {
			p, err := Load(name)
			require.NoError(t, err)
			d := sampleNode()
			d.Properties, err = p.MergeProperties(d.Properties, d)
			require.NoError(t, err)
			r, err := p.Render(d, nil)
			require.NoError(t, err)
			var b strings.Builder
			b.WriteString("# format\n" + strings.Join(r.Format, "\n") + "\n# start\n" + strings.Join(r.Start, "\n") + "\n")
			for _, f := range sortedKeys(r.Files) {
				b.WriteString("# file " + f + "\n" + string(r.Files[f]))
			}
			golden := filepath.Join("testdata", name+".golden")
			if *update {
				require.NoError(t, os.WriteFile(golden, []byte(b.String()), 0o644))
			}
			want, err := os.ReadFile(golden)
			require.NoError(t, err, "run go test -update once")
			assert.Equal(t, string(want), b.String())
		})
	}
}

func sortedKeys(m map[string][]byte) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	for i := range ks {
		for j := i + 1; j < len(ks); j++ {
			if ks[j] < ks[i] {
				ks[i], ks[j] = ks[j], ks[i]
			}
		}
	}
	return ks
}

// TestApacheKafkaCommandsMatchKafkaDocs: what Kafka's quickstart requires
// of a KRaft node (kafka-storage.sh format -t ID -c FILE, then
// kafka-server-start.sh FILE, i.e. kafka.tools.StorageTool and kafka.Kafka
// with the distribution's libs), and the keys its server.properties needs.
func TestApacheKafkaCommandsMatchKafkaDocs(t *testing.T) {
	p, err := Load("apache-kafka")
	require.NoError(t, err)
	d := sampleNode()
	d.Properties, err = p.MergeProperties(d.Properties, d)
	require.NoError(t, err)
	r, err := p.Render(d, nil)
	require.NoError(t, err)
	assert.Equal(t, []string{"/jre/bin/java", "-cp", "/kafka/libs/*", "kafka.tools.StorageTool", "format", "-t", "MkU3OEVBNTcwNTJENDM2Qg", "-c", "/etc/faultline/server.properties"}, r.Format)
	assert.Equal(t, "kafka.Kafka", r.Start[len(r.Start)-2])
	assert.Equal(t, "/etc/faultline/server.properties", r.Start[len(r.Start)-1])
	props := string(r.Files["server.properties"])
	for _, key := range []string{"process.roles=broker,controller", "node.id=2", "controller.quorum.voters=1@", "listeners=PLAINTEXT://0.0.0.0:9092,CONTROLLER://0.0.0.0:9093", "controller.listener.names=CONTROLLER", "log.dirs=/data/kafka", "advertised.listeners=PLAINTEXT://10.213.7.12:9092"} {
		assert.Contains(t, props, key)
	}
	assert.NotContains(t, props, "faultline.", "no reference-broker keys in Kafka's properties")
}
