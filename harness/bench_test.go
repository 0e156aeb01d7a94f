package harness

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/faultline/faultline/docker"
)

func benchBinaries(b *testing.B) (string, string) {
	b.Helper()
	t := &testing.T{}
	broker, agent := buildBinaries(t)
	if t.Failed() {
		b.Fatal("building the binaries failed")
	}
	return broker, agent
}

func dockerOrSkipB(b *testing.B, runID string) *Docker {
	d, err := NewDocker(context.Background(), runID)
	if errors.Is(err, ErrNoDocker) {
		b.Skipf("skipping: %v", err)
	}
	if err != nil {
		b.Fatal(err)
	}
	return d
}

// BenchmarkDockerImageBuild measures building the node image from scratch
// (a nonce file defeats the content cache) around real binaries.
func BenchmarkDockerImageBuild(b *testing.B) {
	d := dockerOrSkipB(b, "flbench")
	defer d.Close()
	broker, agent := benchBinaries(b)
	bb, err := os.ReadFile(broker)
	if err != nil {
		b.Fatal(err)
	}
	ab, err := os.ReadFile(agent)
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		files := map[string][]byte{"Dockerfile": docker.Dockerfile, "broker": bb, "faultline": ab,
			"nonce": []byte(fmt.Sprint(time.Now().UnixNano()))}
		files["Dockerfile"] = append(append([]byte(nil), docker.Dockerfile...), []byte("COPY nonce /nonce\n")...)
		if _, built, err := d.BuildImage(context.Background(), files); err != nil || !built {
			b.Fatalf("build: built=%v err=%v", built, err)
		}
	}
}

// benchClusterStart measures Setup plus the wait until every broker is in
// the metadata, then tears the cluster down (not timed).
func benchClusterStart(b *testing.B, runtime string, nodes int) {
	broker, agent := benchBinaries(b)
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		runID := fmt.Sprintf("flbench%d", time.Now().UnixNano()%1_000_000_000)
		var rt Runtime
		if runtime == "docker" {
			d, err := NewDockerRuntime(context.Background(), runID)
			if errors.Is(err, ErrNoDocker) {
				b.Skipf("skipping: %v", err)
			}
			if err != nil {
				b.Fatal(err)
			}
			rt = d
		} else {
			rt = NewProcess(b.TempDir())
		}
		c := Cluster{Nodes: nodes, Topology: "combined", ClusterID: newClusterID(), BrokerBinary: broker, AgentBinary: agent}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		b.StartTimer()
		ns, err := rt.Setup(ctx, c)
		if err != nil {
			b.Fatal(err)
		}
		var seeds []string
		for _, n := range ns {
			if n.Broker {
				seeds = append(seeds, n.Addr)
			}
		}
		cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
		if err != nil {
			b.Fatal(err)
		}
		r := &run{nodes: ns, adm: cl}
		if err := r.waitServing(ctx, time.Minute); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		cl.Close()
		_ = rt.Teardown(ctx)
		cancel()
		b.StartTimer()
	}
}

func BenchmarkProcessClusterStart1(b *testing.B) { benchClusterStart(b, "process", 1) }
func BenchmarkDockerClusterStart1(b *testing.B)  { benchClusterStart(b, "docker", 1) }
