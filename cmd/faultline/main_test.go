package main

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
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
