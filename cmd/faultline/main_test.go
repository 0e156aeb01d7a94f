package main

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
	assert.Equal(t, 23, flags, "every flag is listed")
}
