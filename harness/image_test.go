package harness

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faultline/faultline/checker"
)

// tinyELF is a minimal x86-64 ELF executable with one program header: a
// PT_INTERP naming interp when it is set, else a PT_LOAD (a static one).
func tinyELF(t *testing.T, interp string) []byte {
	t.Helper()
	const ehsize, phsize = 64, 56
	var b bytes.Buffer
	ident := [16]byte{0x7f, 'E', 'L', 'F', 2 /* 64-bit */, 1 /* little endian */, 1 /* version */}
	b.Write(ident[:])
	le := binary.LittleEndian
	w := func(v any) { require.NoError(t, binary.Write(&b, le, v)) }
	w(uint16(2))  // ET_EXEC
	w(uint16(62)) // EM_X86_64
	w(uint32(1))
	w(uint64(0x400000)) // entry
	w(uint64(ehsize))   // phoff
	w(uint64(0))        // shoff
	w(uint32(0))        // flags
	w(uint16(ehsize))
	w(uint16(phsize))
	w(uint16(1)) // phnum
	w(uint16(0)) // shentsize
	w(uint16(0)) // shnum
	w(uint16(0)) // shstrndx
	data := append([]byte(interp), 0)
	typ := uint32(1) // PT_LOAD
	if interp != "" {
		typ = 3 // PT_INTERP
	}
	w(typ)
	w(uint32(4))               // flags
	w(uint64(ehsize + phsize)) // offset
	w(uint64(0x400000))        // vaddr
	w(uint64(0x400000))        // paddr
	w(uint64(len(data)))       // filesz
	w(uint64(len(data)))       // memsz
	w(uint64(1))               // align
	b.Write(data)
	return b.Bytes()
}

func TestELFInterpreter(t *testing.T) {
	interp, dynamic := elfInterpreter(tinyELF(t, "/lib64/ld-linux-x86-64.so.2"))
	assert.True(t, dynamic)
	assert.Equal(t, "/lib64/ld-linux-x86-64.so.2", interp)
	_, dynamic = elfInterpreter(tinyELF(t, ""))
	assert.False(t, dynamic, "no PT_INTERP: static")
	_, dynamic = elfInterpreter([]byte("#!/bin/sh\necho not an ELF\n"))
	assert.False(t, dynamic, "a script names no loader")
}

// TestImageContextRefusesADynamicallyLinkedAgent: in a node image FROM
// scratch a dynamically linked agent cannot run, and every fault it was to
// inject would fail; the image is refused with the fix instead.
func TestImageContextRefusesADynamicallyLinkedAgent(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, b, 0o755))
		return p
	}
	static := write("broker", tinyELF(t, ""))
	c := Cluster{BrokerBinary: static, AgentBinary: write("faultline", tinyELF(t, "/lib64/ld-linux-x86-64.so.2"))}
	_, err := imageContext(c)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "dynamically linked")
	assert.Contains(t, err.Error(), "CGO_ENABLED=0")

	c.AgentBinary = write("faultline-static", tinyELF(t, ""))
	files, err := imageContext(c)
	require.NoError(t, err)
	assert.Contains(t, files, "faultline")
	assert.Contains(t, files, "Dockerfile")

	c.BrokerBinary = write("broker-dynamic", tinyELF(t, "/lib/ld-musl-x86_64.so.1"))
	_, err = imageContext(c)
	require.Error(t, err, "a dynamically linked broker is refused too")
	assert.Contains(t, err.Error(), "broker")
}

func TestFaultTallyFindsRunsWhoseFaultsAllFailed(t *testing.T) {
	nem := func(typ checker.OpType, f, errText string) checker.Op {
		return checker.Op{Process: checker.NemesisProcess, Type: typ, F: f, Error: errText}
	}
	h := checker.History{
		nem(checker.Invoke, "start-partition", ""),
		nem(checker.Info, "start-partition", "exec /faultline: no such file or directory"),
		nem(checker.Invoke, "stop-partition", ""),
		nem(checker.Info, "stop-partition", "exec /faultline: no such file or directory"),
		nem(checker.Invoke, "start-partition", ""),
		nem(checker.Info, "start-partition", "exec /faultline: no such file or directory"),
	}
	f := tallyFaults(h)
	assert.Equal(t, FaultTally{Started: 2, Failed: 2, FirstError: "start-partition: exec /faultline: no such file or directory"}, f)
	assert.True(t, f.AllFailed())
	assert.Equal(t, "2 of 2 fault starts failed (first: start-partition: exec /faultline: no such file or directory)", f.String())

	h = append(h, nem(checker.Invoke, "start-kill", ""), nem(checker.OK, "start-kill", ""))
	assert.False(t, tallyFaults(h).AllFailed(), "one fault took effect")
	assert.False(t, tallyFaults(nil).AllFailed(), "no faults at all")
}
