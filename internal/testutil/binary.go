package testutil

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// BuildBroker compiles cmd/broker into a temporary directory of t and
// returns the binary's path.
func BuildBroker(t testing.TB) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "broker")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/faultline/faultline/cmd/broker")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go build cmd/broker: %v\n%s", err, out)
	}
	return bin
}

// Process is a running broker binary whose stderr is captured line by line.
type Process struct {
	Cmd *exec.Cmd

	mu      sync.Mutex
	lines   []string
	changed chan struct{}
	exited  chan struct{}
	waitErr error
}

// StartProcess runs bin with args; its stderr is collected (and also written
// to t.Log when the test fails).
func StartProcess(t testing.TB, bin string, args ...string) *Process {
	t.Helper()
	cmd := exec.Command(bin, args...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatalf("stderr pipe: %v", err)
	}
	cmd.Stdout = io.Discard
	p := &Process{Cmd: cmd, changed: make(chan struct{}), exited: make(chan struct{})}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			p.mu.Lock()
			p.lines = append(p.lines, sc.Text())
			close(p.changed)
			p.changed = make(chan struct{})
			p.mu.Unlock()
		}
	}()
	go func() {
		<-readDone
		err := cmd.Wait()
		p.mu.Lock()
		p.waitErr = err
		p.mu.Unlock()
		close(p.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-p.exited:
		default:
			_ = cmd.Process.Kill()
			<-p.exited
		}
		if t.Failed() {
			t.Logf("%s stderr:\n%s", filepath.Base(bin), p.Output())
		}
	})
	return p
}

// Output returns everything the process wrote to stderr so far.
func (p *Process) Output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.lines, "\n")
}

// WaitForLine waits until a stderr line matches re and returns its
// submatches. It fails when the process exits first or timeout passes.
func (p *Process) WaitForLine(t testing.TB, re *regexp.Regexp, timeout time.Duration) []string {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	seen := 0
	for {
		p.mu.Lock()
		for ; seen < len(p.lines); seen++ {
			if m := re.FindStringSubmatch(p.lines[seen]); m != nil {
				p.mu.Unlock()
				return m
			}
		}
		changed := p.changed
		p.mu.Unlock()
		select {
		case <-changed:
		case <-p.exited:
			// Lines may have arrived just before the exit; look once more.
			p.mu.Lock()
			n := len(p.lines)
			p.mu.Unlock()
			if seen < n {
				continue
			}
			t.Fatalf("process exited (%v) before logging a line matching %q", p.ExitErr(), re)
		case <-deadline.C:
			t.Fatalf("no line matching %q within %s", re, timeout)
		}
	}
}

// Wait waits for the process to exit and returns its exit code.
func (p *Process) Wait(t testing.TB, timeout time.Duration) int {
	t.Helper()
	select {
	case <-p.exited:
		return p.Cmd.ProcessState.ExitCode()
	case <-time.After(timeout):
		t.Fatalf("process did not exit within %s", timeout)
		return -1
	}
}

// ExitErr is the error of cmd.Wait once the process has exited.
func (p *Process) ExitErr() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.waitErr
}

// Run runs bin with args to completion and returns its exit code, stdout
// and stderr.
func Run(t testing.TB, bin string, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err != nil && cmd.ProcessState == nil {
		t.Fatalf("run %s: %v", bin, err)
	}
	return cmd.ProcessState.ExitCode(), stdout.String(), stderr.String()
}

// WriteProperties writes a server.properties file with the given pairs in
// key order and returns its path.
func WriteProperties(t testing.TB, dir string, props map[string]string) string {
	t.Helper()
	keys := make([]string, 0, len(props))
	for k := range props {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString("# written by a faultline test\n")
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%s\n", k, props[k])
	}
	path := filepath.Join(dir, "server.properties")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatalf("write %s: %v", path, err)
	}
	return path
}
