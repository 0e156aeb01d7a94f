package controller

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faultline/faultline/broker/metadata"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the expected output of testdata scenarios")

// TestScenarios replays the controller-side failover scenarios of seed 003
// from testdata/*.txt. Each block is a command, a line "----", and the
// expected output (the records the decision wrote, then every partition),
// ending at a blank line. Commands:
//
//	brokers 1 2 3              register and unfence brokers
//	partition T R=1,2,3 I=1,2,3 L=1   create topic T with one partition
//	config T key=value         set a topic config
//	fence B                    the broker's session expired
//	restart B                  a new incarnation registers and catches up
//	shutdown B                 controlled shutdown (want-shutdown heartbeat)
//	alter T B I=1,2            broker B (the leader) asks for a new ISR
func TestScenarios(t *testing.T) {
	files, err := filepath.Glob("testdata/*.txt")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) { runScenario(t, file) })
	}
}

type scenario struct {
	s           *ClusterState
	incarnation byte
}

func runScenario(t *testing.T, file string) {
	data, err := os.ReadFile(file)
	require.NoError(t, err)
	sc := &scenario{s: &ClusterState{Image: metadata.NewImage("c"), Rand: rand.New(rand.NewPCG(1, 1))}}
	var out strings.Builder
	lines := strings.Split(string(data), "\n")
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#") {
			out.WriteString(line + "\n")
			continue
		}
		require.Less(t, i+1, len(lines), "%s:%d: command without ----", file, i+1)
		require.Equal(t, "----", lines[i+1], "%s:%d: command without ----", file, i+1)
		var want []string
		j := i + 2
		for ; j < len(lines) && lines[j] != ""; j++ {
			want = append(want, lines[j])
		}
		got := sc.run(t, line)
		if !*rewrite {
			assert.Equal(t, strings.Join(want, "\n"), strings.TrimRight(got, "\n"), "%s:%d: %s", file, i+1, line)
		}
		out.WriteString(line + "\n----\n" + strings.TrimRight(got, "\n") + "\n")
		i = j - 1
	}
	if *rewrite {
		require.NoError(t, os.WriteFile(file, []byte(strings.TrimRight(out.String(), "\n")+"\n"), 0o644))
	}
}

func ids(s string) []int32 {
	var out []int32
	for _, f := range strings.Split(s, ",") {
		if f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil {
			panic(fmt.Sprintf("bad id list %q", s))
		}
		out = append(out, int32(n))
	}
	return out
}

func kv(args []string) map[string]string {
	m := map[string]string{}
	for _, a := range args {
		k, v, _ := strings.Cut(a, "=")
		m[k] = v
	}
	return m
}

func (sc *scenario) apply(t *testing.T, res Result, out *strings.Builder) {
	for _, r := range res.Records {
		fmt.Fprintf(out, "record %s\n", describeRecord(r))
	}
	var err error
	sc.s.Image, err = sc.s.Image.ApplyBatch(sc.s.Image.Offset+int64(len(res.Records)), res.Records)
	require.NoError(t, err)
}

func (sc *scenario) run(t *testing.T, line string) string {
	f := strings.Fields(line)
	var out strings.Builder
	s := sc.s
	switch f[0] {
	case "brokers":
		for _, a := range f[1:] {
			id := ids(a)[0]
			sc.incarnation++
			epoch, res, err := s.RegisterBroker(BrokerRegistration{BrokerID: id, IncarnationID: metadata.Uuid{sc.incarnation}})
			require.NoError(t, err)
			sc.apply(t, res, &out)
			_, res, err = s.Heartbeat(Heartbeat{BrokerID: id, BrokerEpoch: epoch, MetadataOffset: s.Image.Offset})
			require.NoError(t, err)
			sc.apply(t, res, &out)
		}
	case "partition":
		a := kv(f[2:])
		id := metadata.Uuid{byte(len(s.Image.Topics) + 1)}
		sc.apply(t, Result{Records: []metadata.Record{
			&metadata.TopicRecord{Name: f[1], TopicID: id},
			&metadata.PartitionRecord{TopicID: id, Replicas: ids(a["R"]), ISR: ids(a["I"]), Leader: ids(a["L"])[0]},
		}}, &out)
	case "config":
		k, v, _ := strings.Cut(f[2], "=")
		sc.apply(t, Result{Records: []metadata.Record{&metadata.ConfigRecord{ResourceType: metadata.ConfigResourceTopic, ResourceName: f[1], Name: k, Value: &v}}}, &out)
	case "fence":
		res, err := s.FenceBroker(ids(f[1])[0])
		require.NoError(t, err)
		sc.apply(t, res, &out)
	case "restart":
		id := ids(f[1])[0]
		sc.incarnation++
		epoch, res, err := s.RegisterBroker(BrokerRegistration{BrokerID: id, IncarnationID: metadata.Uuid{sc.incarnation}})
		require.NoError(t, err)
		sc.apply(t, res, &out)
		reply, res, err := s.Heartbeat(Heartbeat{BrokerID: id, BrokerEpoch: epoch, MetadataOffset: s.Image.Offset})
		require.NoError(t, err)
		sc.apply(t, res, &out)
		fmt.Fprintf(&out, "heartbeat fenced=%v\n", reply.IsFenced)
	case "shutdown":
		id := ids(f[1])[0]
		reply, res, err := s.Heartbeat(Heartbeat{BrokerID: id, BrokerEpoch: s.Image.Brokers[id].Epoch, MetadataOffset: s.Image.Offset, WantShutDown: true})
		require.NoError(t, err)
		sc.apply(t, res, &out)
		fmt.Fprintf(&out, "heartbeat should-shut-down=%v\n", reply.ShouldShutDown)
	case "alter":
		tp := s.Image.Topic(f[1])
		p := tp.Partitions[0]
		b := ids(f[2])[0]
		code, _, res := s.AlterPartition(AlterPartition{BrokerID: b, BrokerEpoch: s.Image.Brokers[b].Epoch, TopicID: tp.ID,
			LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch, NewISR: ids(kv(f[3:])["I"])})
		sc.apply(t, res, &out)
		fmt.Fprintf(&out, "alter-partition error=%d\n", code)
	default:
		t.Fatalf("unknown command %q", line)
	}
	for _, name := range s.Image.TopicNames() {
		for _, p := range s.Image.Topics[name].Partitions {
			fmt.Fprintf(&out, "%s-%d leader=%d leader-epoch=%d isr=%v\n", name, p.Partition, p.Leader, p.LeaderEpoch, p.ISR)
		}
	}
	var fenced []int32
	for id, b := range s.Image.Brokers {
		if b.Fenced {
			fenced = append(fenced, id)
		}
	}
	slices.Sort(fenced)
	fmt.Fprintf(&out, "fenced=%v\n", fenced)
	return out.String()
}

func describeRecord(r metadata.Record) string {
	switch r := r.(type) {
	case *metadata.RegisterBrokerRecord:
		return fmt.Sprintf("RegisterBroker id=%d epoch=%d fenced=%v", r.BrokerID, r.BrokerEpoch, r.Fenced)
	case *metadata.UnfenceBrokerRecord:
		return fmt.Sprintf("UnfenceBroker id=%d", r.ID)
	case *metadata.FenceBrokerRecord:
		return fmt.Sprintf("FenceBroker id=%d", r.ID)
	case *metadata.BrokerRegistrationChangeRecord:
		return fmt.Sprintf("BrokerRegistrationChange id=%d fenced=%d in-controlled-shutdown=%d", r.BrokerID, r.Fenced, r.InControlledShutdown)
	case *metadata.TopicRecord:
		return fmt.Sprintf("Topic %s", r.Name)
	case *metadata.PartitionRecord:
		return fmt.Sprintf("Partition %d replicas=%v isr=%v leader=%d", r.PartitionID, r.Replicas, r.ISR, r.Leader)
	case *metadata.PartitionChangeRecord:
		s := fmt.Sprintf("PartitionChange %d", r.PartitionID)
		if r.Leader != metadata.LeaderNoChange {
			s += fmt.Sprintf(" leader=%d", r.Leader)
		}
		if r.ISR != nil {
			s += fmt.Sprintf(" isr=%v", r.ISR)
		}
		return s
	case *metadata.ConfigRecord:
		return fmt.Sprintf("Config %s %s=%s", r.ResourceName, r.Name, *r.Value)
	}
	return fmt.Sprintf("%T", r)
}
