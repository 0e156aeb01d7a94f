package agent

import (
	"errors"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type fakeDisk struct {
	calls []string
	fail  error
}

func (d *fakeDisk) Exec(line string) (string, error) {
	d.calls = append(d.calls, "exec "+line)
	return "did " + line + "\n", d.fail
}
func (d *fakeDisk) Unmount() error { d.calls = append(d.calls, "unmount"); return nil }

type fakeBroker struct{ disk *fakeDisk }

func (b fakeBroker) Kill() error { b.disk.calls = append(b.disk.calls, "kill broker"); return nil }

func TestHandlePassesDiskCommandsAndCutsPowerAfterTheKill(t *testing.T) {
	d := &fakeDisk{}
	s := &Supervisor{Disk: d, Broker: fakeBroker{d}}
	out, down, err := s.Handle("disk eio fsync path=*.log\n")
	require.NoError(t, err)
	assert.False(t, down)
	assert.Equal(t, "did eio fsync path=*.log\n", out)

	_, down, err = s.Handle("disk power torn seed=7")
	require.NoError(t, err)
	assert.True(t, down, "a power loss takes the node down")
	assert.Equal(t, []string{"exec eio fsync path=*.log", "kill broker", "exec power torn seed=7"}, d.calls,
		"the broker dies before the filesystem drops its unsynced writes")

	_, down, err = s.Handle("disk heal")
	assert.ErrorContains(t, err, "lost power")
	assert.True(t, down)
	assert.Len(t, d.calls, 3, "nothing reaches the filesystem after a power loss")
}

func TestHandleRefusesUnknownCommands(t *testing.T) {
	d := &fakeDisk{}
	s := &Supervisor{Disk: d, Broker: fakeBroker{d}}
	for line, want := range map[string]string{
		"format /data": `unknown agent command "format" (known: disk)`,
		"disk":         "disk: want a fault filesystem command",
		"":             `unknown agent command ""`,
	} {
		_, down, err := s.Handle(line)
		assert.ErrorContains(t, err, want, line)
		assert.False(t, down)
	}
	assert.Empty(t, d.calls)
	d.fail = errors.New("eio: unknown operation \"read\"")
	_, _, err := s.Handle("disk eio read")
	assert.ErrorContains(t, err, "unknown operation")
}

// TestServeAnswersOverTheSocket: Send gets the output, or the agent's
// refusal as an error, and a power loss ends Serve.
func TestServeAnswersOverTheSocket(t *testing.T) {
	socket := filepath.Join(t.TempDir(), "agent.sock")
	l, err := net.Listen("unix", socket)
	require.NoError(t, err)
	defer l.Close()
	d := &fakeDisk{}
	powered := make(chan struct{})
	go (&Supervisor{Disk: d, Broker: fakeBroker{d}}).Serve(l, func() { close(powered) })

	out, err := Send(socket, "disk status")
	require.NoError(t, err)
	assert.Equal(t, "did status\n", out)
	_, err = Send(socket, "chaos")
	assert.EqualError(t, err, `unknown agent command "chaos" (known: disk)`)
	_, err = Send(socket, "disk power seed=1")
	require.NoError(t, err)
	select {
	case <-powered:
	case <-time.After(5 * time.Second):
		t.Fatal("a power loss did not end Serve")
	}
	_, err = Send(filepath.Join(t.TempDir(), "none.sock"), "disk status")
	assert.ErrorContains(t, err, "reach the node's agent")
}
