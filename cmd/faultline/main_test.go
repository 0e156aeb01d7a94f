package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/faultline/faultline/checker"
	"github.com/faultline/faultline/harness"
	"github.com/faultline/faultline/workloads"
)

func TestExitCodes(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		out  string
	}{
		{[]string{"check", "../../checker/testdata/valid-basic.jsonl"}, 0, "VALID"},
		{[]string{"check", "../../checker/testdata/lost-write.jsonl"}, 1, "lost-write"},
		{[]string{"check", "/nonexistent/history.jsonl"}, 254, ""},
		{[]string{"check"}, 254, ""},
		{[]string{"frobnicate"}, 254, ""},
		{[]string{"test", "--nodes", "0"}, 254, ""},
		{[]string{"test", "--acks", "2"}, 254, ""},
		{[]string{"test", "--workload", "bank"}, 254, ""},
		{[]string{"test", "--nemesis", "kill,chaos", "--store", "/nonexistent/store"}, 254, ""},
		{[]string{"test", "--nemesis", "partition:everything", "--store", "/nonexistent/store"}, 254, ""},
		{[]string{"test", "--help"}, 0, ""},
		{[]string{"help"}, 0, "faultline test"},
	} {
		var out, errOut bytes.Buffer
		code := run(tc.args, &out, &errOut)
		assert.Equal(t, tc.code, code, "%v: %s%s", tc.args, out.String(), errOut.String())
		assert.Contains(t, out.String(), tc.out, "%v", tc.args)
	}
}

func TestBadArgumentsNameTheFlag(t *testing.T) {
	var out, errOut bytes.Buffer
	code := run([]string{"test", "--nodes", "3", "--replication-factor", "3", "--runtime", "vm"}, &out, &errOut)
	assert.Equal(t, 254, code)
	assert.Contains(t, errOut.String(), "--runtime")
}

// TestUnknownNemesisIsRefusedBeforeSetup: a misspelt fault is a bad argument
// reported before any store directory or node exists.
func TestUnknownNemesisIsRefusedBeforeSetup(t *testing.T) {
	store := t.TempDir()
	var out, errOut bytes.Buffer
	code := run([]string{"test", "--nemesis", "kill,chaos", "--runtime", "process", "--store", store}, &out, &errOut)
	assert.Equal(t, 254, code)
	assert.Contains(t, errOut.String(), `unknown nemesis "chaos"`)
	entries, err := os.ReadDir(store)
	require.NoError(t, err)
	assert.Empty(t, entries, "nothing may be written for a bad argument")
}

// TestTestHelpGivesEveryDefault: every flag of `faultline test --help`
// states its default.
func TestTestHelpGivesEveryDefault(t *testing.T) {
	var out, errOut bytes.Buffer
	require.Equal(t, 0, run([]string{"test", "--help"}, &out, &errOut))
	help := errOut.String()
	assert.Contains(t, help, "usage: faultline test")
	flags := 0
	for _, entry := range strings.Split(help, "\n  -")[1:] {
		flags++
		name, _, _ := strings.Cut(entry, " ")
		assert.Contains(t, entry, "default", "flag --%s does not state its default", strings.TrimSpace(name))
	}
	assert.Equal(t, 35, flags, "every flag is listed")
}

// producedAcks builds t's workload against a fake cluster, sends one
// record and returns the acks of the produce request its client sent.
func producedAcks(t *testing.T, tt harness.Test) int16 {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	require.NoError(t, err)
	defer c.Close()
	acks := make(chan int16, 16)
	c.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		acks <- req.(*kmsg.ProduceRequest).Acks
		return nil, nil, false
	})
	tt.ReplicationFactor = 1
	newWorkload, err := workloadRegistry.Lookup(tt.Workload)
	require.NoError(t, err)
	wl, err := newWorkload(tt.WorkloadOptions(c.ListenAddrs()))
	require.NoError(t, err)
	defer wl.Close()
	cl, err := wl.NewClient()
	require.NoError(t, err)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	done := cl.Invoke(ctx, checker.Op{Type: checker.Invoke, F: "send", Mops: []checker.MicroOp{{F: "send", Key: 0, Value: 1}}})
	want := checker.OK
	if tt.Acks == workloads.AcksNone {
		want = checker.Info // nothing answers an acks=0 send
	}
	require.Equal(t, want, done.Type, done.Error)
	return <-acks
}

// TestAcksZeroIsSentAsAcksZero: `faultline test --acks 0` records acks 0
// in test.json and its producers send acks=0, not the acks=all of an unset
// setting; without --acks the documented default, -1, holds.
func TestAcksZeroIsSentAsAcksZero(t *testing.T) {
	for _, c := range []struct {
		args []string
		want workloads.Acks
		json string
	}{
		{[]string{"--acks", "0"}, workloads.AcksNone, `0`},
		{[]string{"--acks", "1"}, workloads.AcksLeader, `1`},
		{[]string{"--acks", "-1"}, workloads.AcksAll, `-1`},
		{nil, workloads.AcksAll, `-1`},
	} {
		var errOut bytes.Buffer
		tt, code := parseTest(append([]string{"--nodes", "3", "--runtime", "process"}, c.args...), &errOut)
		require.Equal(t, -1, code, errOut.String())
		assert.Equal(t, c.want, tt.Acks, "%v", c.args)
		spec, err := json.Marshal(tt)
		require.NoError(t, err)
		var stored struct {
			Acks json.RawMessage `json:"acks"`
		}
		require.NoError(t, json.Unmarshal(spec, &stored))
		assert.Equal(t, c.json, string(stored.Acks), "test.json of %v", c.args)
		assert.Equal(t, int16(c.want.Int()), producedAcks(t, tt), "produce acks of %v", c.args)
	}
}

// TestEveryCommandHasHelp: `faultline <command> --help` prints the
// command's usage and exits 0.
func TestEveryCommandHasHelp(t *testing.T) {
	for _, cmd := range []string{"test", "suite", "matrix", "shrink", "check", "report", "serve", "agent"} {
		for _, flag := range []string{"--help", "-h"} {
			var out, errOut bytes.Buffer
			assert.Equal(t, 0, run([]string{cmd, flag}, &out, &errOut), "%s %s", cmd, flag)
			assert.Contains(t, errOut.String(), "usage: faultline "+cmd, "%s %s", cmd, flag)
		}
	}
}

// TestUnknownWorkloadListsTheRegistered: a misspelt --workload is a bad
// argument whose error names the workloads there are.
func TestUnknownWorkloadListsTheRegistered(t *testing.T) {
	var out, errOut bytes.Buffer
	assert.Equal(t, 254, run([]string{"test", "--workload", "bank", "--runtime", "process"}, &out, &errOut))
	assert.Contains(t, errOut.String(), `--workload: unknown workload "bank" (known: compact, queue)`)
}

// TestBadNemesisNamesTheBadPart: one error, naming the entry of --nemesis
// that is wrong.
func TestBadNemesisNamesTheBadPart(t *testing.T) {
	var out, errOut bytes.Buffer
	assert.Equal(t, 254, run([]string{"test", "--nemesis", "kill,pause:halves", "--runtime", "process"}, &out, &errOut))
	assert.Equal(t, "faultline test: --nemesis: pause: unknown mode \"halves\" (known: one, minority, majority, leaders, controller, all, coordinator)\n", errOut.String())
}

// TestCommandLineParsesBackToTheSameTest: the flags the shrinker prints
// run the test they describe.
func TestCommandLineParsesBackToTheSameTest(t *testing.T) {
	var errOut bytes.Buffer
	want, code := parseTest([]string{"--name", "x", "--nemesis", "kill:leaders,partition", "--seed", "17", "--time-limit", "45s",
		"--acks", "1", "--idempotent=false", "--broker-config", "min.insync.replicas=1", "--broker-config", "unsafe.enable=true",
		"--subscribe", "--rate", "50", "--nodes", "3", "--replication-factor", "3", "--db", "faultline",
		"--fail-on-client-error", "OUT_OF_ORDER_SEQUENCE_NUMBER", "--crash-clients-interval", "7s",
		"--docker-host", "n1=unix:///var/run/docker.sock,n3=tcp://10.0.0.3:2375"}, &errOut)
	require.Equal(t, -1, code, errOut.String())
	got, code := parseTest(harness.CommandLine(want), &errOut)
	require.Equal(t, -1, code, errOut.String())
	assert.Equal(t, want, got)
}

// TestClientFlagsReachTheTest: --fail-on-client-error, --consumer-mode
// and --crash-clients-interval land in the Test; bad values are bad
// arguments naming the flag.
func TestClientFlagsReachTheTest(t *testing.T) {
	var errOut bytes.Buffer
	tt, code := parseTest([]string{"--fail-on-client-error", "OUT_OF_ORDER_SEQUENCE_NUMBER, UNKNOWN_PRODUCER_ID", "--consumer-mode", "mixed", "--crash-clients-interval", "5s"}, &errOut)
	require.Equal(t, -1, code, errOut.String())
	assert.Equal(t, []string{"OUT_OF_ORDER_SEQUENCE_NUMBER", "UNKNOWN_PRODUCER_ID"}, tt.FailOnClientErrors)
	assert.True(t, tt.MixedConsumers)
	assert.False(t, tt.Subscribe)
	assert.Equal(t, harness.Duration(5*time.Second), tt.CrashClientsInterval)
	tt, code = parseTest([]string{"--consumer-mode", "subscribe"}, &errOut)
	require.Equal(t, -1, code)
	assert.True(t, tt.Subscribe)
	tt, code = parseTest([]string{"--crash-clients-interval", "3s", "--crash-clients-target", "stalled"}, &errOut)
	require.Equal(t, -1, code, errOut.String())
	assert.Equal(t, "stalled", tt.CrashClientsTarget)
	tt, code = parseTest([]string{"--txn", "--crash-clients-interval", "3s", "--crash-clients-target", "zombie"}, &errOut)
	require.Equal(t, -1, code, errOut.String())
	assert.Equal(t, "zombie", tt.CrashClientsTarget)
	tt, code = parseTest([]string{"--txn", "--txn-timeout", "3s"}, &errOut)
	require.Equal(t, -1, code, errOut.String())
	assert.Equal(t, harness.Duration(3*time.Second), tt.TxnTimeout)
	assert.Equal(t, 3*time.Second, tt.WorkloadOptions(nil).TxnTimeout, "the workload gets it")

	for args, want := range map[string]string{
		"--fail-on-client-error NOT_LEADER_OR_FOLLOWER":             `--fail-on-client-error: unknown client error "NOT_LEADER_OR_FOLLOWER"`,
		"--consumer-mode both":                                      `--consumer-mode: must be assign, subscribe or mixed, got "both"`,
		"--crash-clients-interval -1s":                              "--crash-clients-interval: must not be negative",
		"--crash-clients-target slowest":                            `--crash-clients-target: must be random, stalled or zombie, got "slowest"`,
		"--crash-clients-interval 1s --crash-clients-target zombie": "--crash-clients-target zombie: needs --txn",
		"--txn-restart-one-in 1":                                    "--txn-restart-one-in: needs --txn",
		"--txn-timeout 3s":                                          "--txn-timeout: needs --txn",
		"--txn --txn-timeout 20m":                                   "--txn-timeout: must be between 1ms and 15m",
		"--crash-clients-target stalled":                            "--crash-clients-target: needs --crash-clients-interval",
	} {
		errOut.Reset()
		_, code := parseTest(strings.Fields(args), &errOut)
		assert.Equal(t, 254, code, args)
		assert.Contains(t, errOut.String(), want, args)
	}
}

// TestTxnFlag: --txn is stored in the test and refused with acks other
// than all, without idempotence, or with subscribe.
func TestTxnFlag(t *testing.T) {
	var errOut bytes.Buffer
	tt, code := parseTest([]string{"--txn", "--nodes", "3", "--runtime", "process"}, &errOut)
	require.Equal(t, -1, code, errOut.String())
	assert.True(t, tt.Txn)
	for _, args := range [][]string{{"--acks", "1"}, {"--idempotent=false"}, {"--subscribe"}} {
		var out, errOut bytes.Buffer
		assert.Equal(t, 254, run(append([]string{"test", "--txn", "--runtime", "process"}, args...), &out, &errOut), "%v", args)
		assert.Contains(t, errOut.String(), "--txn:", "%v", args)
	}
}

// TestDockerHostFlag: --docker-host lands in the Test as node -> endpoint;
// malformed entries, duplicate and unknown nodes are bad arguments naming
// the entry, before anything starts.
func TestDockerHostFlag(t *testing.T) {
	var errOut bytes.Buffer
	tt, code := parseTest([]string{"--nodes", "3", "--docker-host", "n1=unix:///var/run/docker.sock,n2=tcp://10.0.0.2:2375"}, &errOut)
	require.Equal(t, -1, code, errOut.String())
	assert.Equal(t, map[string]string{"n1": "unix:///var/run/docker.sock", "n2": "tcp://10.0.0.2:2375"}, tt.DockerHosts)
	t.Setenv("DOCKER_CONFIG", t.TempDir())
	for args, want := range map[string]string{
		"--nodes 3 --docker-host n4=tcp://b:2375":              "--docker-host n4: no such node (--nodes 3 makes n1..n3)",
		"--docker-host n1=tcp://a:1,n1=tcp://b:1":              `--docker-host: "n1=tcp://b:1": n1 is placed twice`,
		"--docker-host n2=tcp://b":                             `--docker-host: "n2=tcp://b": tcp endpoint "tcp://b": want tcp://HOST:PORT`,
		"--docker-host n2":                                     `--docker-host: "n2": want NODE=ENDPOINT`,
		"--docker-host n2=lab-b":                               `--docker-host n2: no Docker context "lab-b"`,
		"--runtime process --docker-host n2=tcp://b:2375":      "--docker-host: places nodes on Docker Engines; needs --runtime docker",
		"--docker-host n2=ssh://me@b":                          "not supported",
		"--nodes 2 --docker-host n2=tcp://b:2375,n5=tcp://c:1": "--docker-host n5: no such node",
	} {
		errOut.Reset()
		_, code := parseTest(strings.Fields(args), &errOut)
		assert.Equal(t, 254, code, args)
		assert.Contains(t, errOut.String(), want, args)
	}
}
