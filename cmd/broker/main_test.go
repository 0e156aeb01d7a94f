package main

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faultline/faultline/broker/node"
)

func runCmd(args ...string) (int, string, string) {
	var stdout, stderr bytes.Buffer
	code := run(args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// writeConfig writes a single-node server.properties into a temp dir and
// returns its path and the data dir.
func writeConfig(t *testing.T, extra ...string) (string, string) {
	t.Helper()
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	lines := []string{
		"process.roles=broker,controller",
		"node.id=1",
		"listeners=PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
		"controller.listener.names=CONTROLLER",
		"controller.quorum.voters=1@127.0.0.1:9093",
		"log.dirs=" + data,
	}
	lines = append(lines, extra...)
	path := filepath.Join(dir, "server.properties")
	require.NoError(t, os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644))
	return path, data
}

func TestHelpListsCommandsAndFlags(t *testing.T) {
	code, out, _ := runCmd("--help")
	assert.Equal(t, exitOK, code)
	for _, c := range []string{"format", "serve", "random-uuid", "version"} {
		assert.Contains(t, out, c)
	}
	code, out, _ = runCmd("format", "--help")
	assert.Equal(t, exitOK, code)
	for _, f := range []string{"-t", "-c", "-ignore-formatted", "-initial-controllers"} {
		assert.Contains(t, out, f)
	}
	code, out, _ = runCmd("help", "serve")
	assert.Equal(t, exitOK, code)
	assert.Contains(t, out, "-config")
	code, _, errOut := runCmd("frobnicate")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, errOut, `unknown command "frobnicate"`)
}

func TestRandomUUIDAndVersion(t *testing.T) {
	code, out, _ := runCmd("random-uuid")
	require.Equal(t, exitOK, code)
	assert.Len(t, strings.TrimSpace(out), 22)
	code, out, _ = runCmd("version")
	require.Equal(t, exitOK, code)
	assert.True(t, strings.HasPrefix(out, "faultline broker "), out)
}

func TestFormatWritesMetaPropertiesAndRefusesTwice(t *testing.T) {
	cfg, data := writeConfig(t)
	const id = "MkU3OEVBNTcwNTJENDM2Qg"
	code, out, errOut := runCmd("format", "-t", id, "-c", cfg)
	require.Equal(t, exitOK, code, errOut)
	assert.Contains(t, out, data)
	meta, err := os.ReadFile(filepath.Join(data, "meta.properties"))
	require.NoError(t, err)
	assert.Contains(t, string(meta), "cluster.id="+id+"\n")
	assert.Contains(t, string(meta), "node.id=1\n")
	assert.Contains(t, string(meta), "version=1\n")
	assert.Regexp(t, `directory\.id=[A-Za-z0-9_-]{22}\n`, string(meta))

	code, _, errOut = runCmd("format", "-t", id, "-c", cfg)
	assert.Equal(t, exitError, code)
	assert.Contains(t, errOut, "already formatted")

	code, out, _ = runCmd("format", "-t", id, "-c", cfg, "--ignore-formatted")
	assert.Equal(t, exitOK, code)
	assert.Contains(t, out, "already formatted")
}

func TestFormatRejectsBadClusterID(t *testing.T) {
	cfg, data := writeConfig(t)
	code, _, errOut := runCmd("format", "-t", "not-a-uuid", "-c", cfg)
	assert.Equal(t, exitError, code)
	assert.Contains(t, errOut, "not a Kafka UUID")
	_, err := os.Stat(filepath.Join(data, "meta.properties"))
	assert.True(t, os.IsNotExist(err))

	code, _, errOut = runCmd("format", "-c", cfg)
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, errOut, "missing -t")
}

func TestBadConfigNamesEachKey(t *testing.T) {
	cfg, _ := writeConfig(t, "num.partitions=zero", "log.segment.bytes=-5")
	code, _, errOut := runCmd("serve", "-c", cfg)
	assert.Equal(t, exitError, code)
	lines := strings.Split(strings.TrimSpace(errOut), "\n")
	require.GreaterOrEqual(t, len(lines), 2, errOut)
	assert.Contains(t, errOut, "num.partitions")
	assert.Contains(t, errOut, "log.segment.bytes")
	for _, l := range lines {
		assert.True(t, strings.HasPrefix(l, "broker serve: "), l)
	}
}

func TestServeRefusesUnformattedDir(t *testing.T) {
	cfg, data := writeConfig(t)
	code, _, errOut := runCmd("serve", "-c", cfg)
	assert.Equal(t, exitError, code)
	assert.Contains(t, errOut, "no meta.properties found in "+data)
	assert.Contains(t, errOut, "broker format")
}

func TestFormatChecksInitialControllersAndOverrides(t *testing.T) {
	cfg, data := writeConfig(t)
	const id = "MkU3OEVBNTcwNTJENDM2Qg"
	code, _, errOut := runCmd("format", "-t", id, "-c", cfg, "--initial-controllers", "2@127.0.0.1:9093")
	assert.Equal(t, exitError, code)
	assert.Contains(t, errOut, "does not list this controller's node.id 1")

	code, _, errOut = runCmd("format", "-t", id, "-c", cfg, "--override", "node.id=x")
	assert.Equal(t, exitError, code)
	assert.Contains(t, errOut, "node.id")

	other := filepath.Join(t.TempDir(), "other")
	code, _, errOut = runCmd("format", "-t", id, "-c", cfg, "--initial-controllers", "1@127.0.0.1:9093", "--override", "log.dirs="+other)
	require.Equal(t, exitOK, code, errOut)
	_, err := os.Stat(filepath.Join(other, "meta.properties"))
	assert.NoError(t, err, "--override log.dirs is where format writes")
	_, err = os.Stat(filepath.Join(data, "meta.properties"))
	assert.True(t, os.IsNotExist(err))
}

func TestQuorumDescribeUsageAndUnreachable(t *testing.T) {
	code, _, stderr := runCmd("quorum")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, stderr, "quorum describe")
	path, _ := writeConfig(t)
	code, _, stderr = runCmd("quorum", "describe", "-c", path)
	assert.Equal(t, exitUsage, code, "one of --status or --replication is required")
	assert.Contains(t, stderr, "--status")
	code, _, _ = runCmd("quorum", "describe", "--status", "--replication", "-c", path)
	assert.Equal(t, exitUsage, code)
	// Nothing listens on the voter's port: the command gives up in time.
	unreachable, _ := writeConfig(t, "controller.quorum.voters=1@127.0.0.1:1")
	code, _, stderr = runCmd("quorum", "describe", "--status", "--timeout", "300ms", "-c", unreachable)
	assert.Equal(t, exitError, code)
	assert.Contains(t, stderr, "127.0.0.1:1")
}

// TestQuorumDescribeStatusOfASingleNode: a lone combined node is the only
// voter of its controller quorum and answers DescribeQuorum on its
// controller listener.
func TestQuorumDescribeStatusOfASingleNode(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	require.NoError(t, ln.Close())
	path, _ := writeConfig(t, "listeners=PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:"+port, "controller.quorum.voters=1@127.0.0.1:"+port)
	code, _, errOut := runCmd("format", "-t", "MkU3OEVBNTcwNTJENDM2Qg", "-c", path)
	require.Equal(t, exitOK, code, errOut)
	cfg, _, err := loadConfig(path, nil)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	n, err := node.Start(ctx, cfg, nil)
	require.NoError(t, err)
	defer func() { assert.NoError(t, n.Shutdown(ctx)) }()

	code, out, errOut := runCmd("quorum", "describe", "--status", "-c", path)
	require.Equal(t, exitOK, code, errOut)
	assert.Contains(t, out, "LeaderId:               1\n")
	assert.Regexp(t, `LeaderEpoch:            [1-9]`, out)
	assert.Regexp(t, `HighWatermark:          [1-9]`, out, "the registration is committed")
	assert.Contains(t, out, "MaxFollowerLag:         0\n")
	assert.Contains(t, out, "CurrentVoters:          [1]\n")
	assert.Contains(t, out, "CurrentObservers:       []\n")
}
