package agent

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// SocketPath is where a node's long-lived agent takes commands.
const SocketPath = "/run/faultline/agent.sock"

// Disk is the fault filesystem as the supervisor drives it (*faultfs.FS).
type Disk interface {
	Exec(line string) (string, error)
	Unmount() error
}

// Broker is the process the supervisor runs on the fault filesystem.
type Broker interface {
	// Kill sends SIGKILL and returns once the process has exited.
	Kill() error
}

// Supervisor holds a node's fault filesystem and its broker and turns
// command lines into actions on them.
type Supervisor struct {
	Disk   Disk
	Broker Broker

	mu   sync.Mutex
	down bool
}

// Handle runs one command line:
//
//	disk power [torn] [reorder] [block=N] [seed=N]
//	disk eio|enospc|slow|heal|status ...
//
// "disk LINE" passes LINE to the fault filesystem (its grammar). A power
// loss first kills the broker, as a power cut stops the process together
// with its page cache, then drops what no fsync made durable; down is then
// true: the node ends, and starting it again is the restart after the
// power came back. After a power loss every command is refused.
func (s *Supervisor) Handle(line string) (out string, down bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.down {
		return "", true, errors.New("the node lost power and is going down")
	}
	verb, rest, _ := strings.Cut(strings.TrimSpace(line), " ")
	if verb != "disk" {
		return "", false, fmt.Errorf("unknown agent command %q (known: disk)", verb)
	}
	rest = strings.TrimSpace(rest)
	if rest == "" {
		return "", false, errors.New("disk: want a fault filesystem command (power, eio, enospc, slow, heal, status)")
	}
	if first, _, _ := strings.Cut(rest, " "); first == "power" {
		if err := s.Broker.Kill(); err != nil {
			return "", false, fmt.Errorf("power: kill the broker: %w", err)
		}
		s.down = true
		out, err := s.Disk.Exec(rest)
		return out, true, err
	}
	out, err = s.Disk.Exec(rest)
	return out, false, err
}

// Serve answers command connections on l until it is closed: one line in,
// a reply out ("ok" or "error: ..." on the first line, then the output).
// It calls powerOff once a command took the node down.
func (s *Supervisor) Serve(l net.Listener, powerOff func()) {
	for {
		conn, err := l.Accept()
		if err != nil {
			return
		}
		line, err := bufio.NewReader(conn).ReadString('\n')
		if err != nil && !errors.Is(err, io.EOF) {
			conn.Close()
			continue
		}
		out, down, herr := s.Handle(line)
		if herr != nil {
			fmt.Fprintf(conn, "error: %s\n%s", oneLine(herr.Error()), out)
		} else {
			fmt.Fprintf(conn, "ok\n%s", out)
		}
		conn.Close()
		if down {
			powerOff()
			return
		}
	}
}

func oneLine(s string) string { return strings.ReplaceAll(s, "\n", "; ") }

// Send passes one command line to the agent listening on socket and
// returns its output; an agent's refusal is an error.
func Send(socket, line string) (string, error) {
	conn, err := net.DialTimeout("unix", socket, 5*time.Second)
	if err != nil {
		return "", fmt.Errorf("reach the node's agent: %w (was the node started with a disk fault?)", err)
	}
	defer conn.Close()
	if _, err := fmt.Fprintf(conn, "%s\n", strings.ReplaceAll(line, "\n", " ")); err != nil {
		return "", fmt.Errorf("send to the node's agent: %w", err)
	}
	reply, err := io.ReadAll(conn)
	if err != nil {
		return "", fmt.Errorf("read the node's agent's reply: %w", err)
	}
	status, out, _ := strings.Cut(string(reply), "\n")
	if msg, ok := strings.CutPrefix(status, "error: "); ok {
		return out, errors.New(msg)
	}
	if status != "ok" {
		return out, fmt.Errorf("the node's agent answered %q", status)
	}
	return out, nil
}

// process is the broker as a child of the agent.
type process struct {
	cmd    *exec.Cmd
	exited chan struct{}
	err    error
}

func (p *process) Kill() error {
	if err := p.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	<-p.exited
	return nil
}

// RunOptions say how a node runs under its agent.
type RunOptions struct {
	Socket string   // default SocketPath
	Argv   []string // the broker's command line
}

// Run mounts nothing itself: it runs the broker (opts.Argv) on disk, which
// the caller mounted over the broker's data dir, takes commands on the
// socket while the broker lives, passes SIGTERM and SIGINT on to the
// broker, and unmounts disk before it returns the exit code the node
// should end with: the broker's, or 137 after a power loss.
func Run(ctx context.Context, disk Disk, opts RunOptions, stderr io.Writer) int {
	socket := opts.Socket
	if socket == "" {
		socket = SocketPath
	}
	defer func() {
		if err := disk.Unmount(); err != nil {
			fmt.Fprintf(stderr, "faultline agent: unmount the fault filesystem: %v\n", err)
		}
	}()
	if err := os.MkdirAll(filepath.Dir(socket), 0o755); err != nil {
		fmt.Fprintf(stderr, "faultline agent: %v\n", err)
		return 1
	}
	_ = os.Remove(socket)
	l, err := net.Listen("unix", socket)
	if err != nil {
		fmt.Fprintf(stderr, "faultline agent: listen on %s: %v\n", socket, err)
		return 1
	}
	defer l.Close()
	if len(opts.Argv) == 0 {
		fmt.Fprintln(stderr, "faultline agent run: name the broker's command line after --")
		return 1
	}
	if err := closeOnExec(); err != nil {
		fmt.Fprintf(stderr, "faultline agent: %v\n", err)
		return 1
	}
	cmd := exec.CommandContext(ctx, opts.Argv[0], opts.Argv[1:]...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(stderr, "faultline agent: start the broker: %v\n", err)
		return 1
	}
	p := &process{cmd: cmd, exited: make(chan struct{})}
	go func() { p.err = cmd.Wait(); close(p.exited) }()
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sigs)
	powered := make(chan struct{})
	s := &Supervisor{Disk: disk, Broker: p}
	go s.Serve(l, func() { close(powered) })
	for {
		select {
		case sig := <-sigs:
			_ = cmd.Process.Signal(sig)
		case <-powered:
			fmt.Fprintln(stderr, powerLossNote)
			return 137
		case <-p.exited:
			// A power loss kills the broker while its command still holds
			// the supervisor: isDown waits for it.
			if s.isDown() {
				<-powered
				fmt.Fprintln(stderr, powerLossNote)
				return 137
			}
			return cmd.ProcessState.ExitCode()
		}
	}
}

func (s *Supervisor) isDown() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.down
}

const powerLossNote = "faultline agent: power loss: the broker was killed and the unsynced writes dropped"

// closeOnExec marks every descriptor above stderr close-on-exec. go-fuse
// opens /dev/fuse without it, and a broker that inherited the device would
// hang in its own exit: closing its last file on the mount waits for an
// answer on a connection that the broker itself keeps open.
func closeOnExec() error {
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return fmt.Errorf("list open descriptors: %w", err)
	}
	for _, e := range entries {
		if fd, err := strconv.Atoi(e.Name()); err == nil && fd > 2 {
			syscall.CloseOnExec(fd)
		}
	}
	return nil
}
