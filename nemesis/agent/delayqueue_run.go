package agent

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/google/nftables/xt"
	"github.com/mdlayher/netlink"
)

// delayTableName is the nftables table of the delay fallback, apart from
// the partition's and the loss fallback's.
const delayTableName = "faultline-delay"

// DelayPIDFile holds the process id of the running delay queue, written
// once it listens on the queue.
const DelayPIDFile = "/run/faultline/delay-queue.pid"

// delayLogFile takes what the delay queue process writes.
const delayLogFile = "/run/faultline/delay-queue.log"

// DelayQueueCommand is how the agent binary is asked to run the delay
// queue (`faultline agent delay-queue FIELDS`, cmd/faultline); the fields
// are Netem's.
var DelayQueueCommand = []string{"agent", "delay-queue"}

// delayReadyTimeout bounds the wait for a new delay queue to listen, and
// for a healed one to end.
const delayReadyTimeout = 5 * time.Second

// RunDelayQueue listens on the agent's netfilter queue and holds every
// packet as n says until ctx ends, then lets the packets it still holds go.
// It writes its process id to pidFile once it listens (the sign that the
// rule may send it packets) and removes it when it ends.
func RunDelayQueue(ctx context.Context, n Netem, pidFile string) error {
	if n.Duplicate > 0 || n.Loss > 0 {
		return errors.New("delay queue: only delay, jitter and reorder are made here")
	}
	if err := n.Validate(); err != nil {
		return err
	}
	conn, err := netlink.Dial(netlinkNetfilter, nil)
	if err != nil {
		return fmt.Errorf("delay queue: open netfilter netlink: %w", err)
	}
	defer conn.Close()
	_ = conn.SetOption(netlink.NoENOBUFS, true)
	_ = conn.SetReadBuffer(8 << 20)
	reqs, err := bindRequests(delayQueueNum)
	if err != nil {
		return err
	}
	for _, r := range reqs {
		if _, err := conn.Execute(r); err != nil {
			return fmt.Errorf("delay queue: bind queue %d: %w", delayQueueNum, err)
		}
	}
	if err := os.MkdirAll(filepath.Dir(pidFile), 0o755); err != nil {
		return err
	}
	me := strconv.Itoa(os.Getpid())
	if err := os.WriteFile(pidFile, []byte(me+"\n"), 0o644); err != nil {
		return err
	}
	defer func() {
		if b, err := os.ReadFile(pidFile); err == nil && strings.TrimSpace(string(b)) == me {
			_ = os.Remove(pidFile)
		}
	}()
	plan := delayPlan{n: n, rng: rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), uint64(os.Getpid())))}
	// serveDelayQueue lets the held packets go when ctx ends; its
	// receiver ends when the deferred Close closes the connection.
	return serveDelayQueue(ctx, conn, delayQueueNum, plan, time.Now)
}

// applyDelay starts the delay queue process with n's delay, jitter and
// reordering, waits until it listens, and sends every IPv4 packet arriving
// on ifname through it.
func applyDelay(ifname string, n Netem) error {
	ifi, err := net.InterfaceByName(ifname)
	if err != nil {
		return fmt.Errorf("delay: find interface %s: %w", ifname, err)
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("delay: find the agent binary: %w", err)
	}
	d := Netem{Delay: n.Delay, Jitter: n.Jitter, Reorder: n.Reorder}
	if err := os.MkdirAll(filepath.Dir(DelayPIDFile), 0o755); err != nil {
		return err
	}
	_ = os.Remove(DelayPIDFile)
	logf, err := os.OpenFile(delayLogFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("delay: open %s: %w", delayLogFile, err)
	}
	defer logf.Close()
	args := append(append([]string{}, DelayQueueCommand...), strings.Fields(d.String())...)
	cmd := exec.Command(exe, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	// A session of its own: the process outlives the command that started
	// it (a docker exec) and is ended by HealNetem.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("delay: start the delay queue: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	deadline := time.Now().Add(delayReadyTimeout)
	for {
		if pid, ok := delayPID(); ok && pid == cmd.Process.Pid {
			break
		}
		select {
		case err := <-exited:
			b, _ := os.ReadFile(delayLogFile)
			return fmt.Errorf("delay: the delay queue ended before it listened (%v): %s", err, lastLine(string(b)))
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			return fmt.Errorf("delay: the delay queue did not listen within %s", delayReadyTimeout)
		}
	}
	if err := delayRule(ifi.Index); err != nil {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		return err
	}
	return nil
}

// lastLine is the last non-empty line of s.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// delayRule installs the fallback's table: every IPv4 packet arriving on
// ifindex goes to the delay queue, or on when nobody listens there.
func delayRule(ifindex int) error {
	conn, err := nftables.New()
	if err != nil {
		return fmt.Errorf("open netlink: %w", err)
	}
	table, chain := inputChain(conn, delayTableName)
	iif := make([]byte, 4)
	binary.NativeEndian.PutUint32(iif, uint32(ifindex))
	info := xt.Unknown(nfqueueInfo(delayQueueNum))
	conn.AddRule(&nftables.Rule{Table: table, Chain: chain, Exprs: []expr.Any{
		&expr.Meta{Key: expr.MetaKeyIIF, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: iif},
		&expr.Target{Name: "NFQUEUE", Rev: 3, Info: &info},
	}})
	if err := conn.Flush(); err != nil {
		return fmt.Errorf("apply the delay rule: %w", err)
	}
	return nil
}

// healDelay removes the fallback's table, so that no packet is queued any
// more, then ends the delay queue process, which lets the packets it
// holds go, and waits for it to end.
func healDelay() error {
	if err := dropTable(delayTableName); err != nil {
		return err
	}
	pid, ok := delayPID()
	if !ok || !isDelayQueue(pid) {
		// None runs; the pid file may be left from before the node
		// restarted, its number since reused by another process.
		_ = os.Remove(DelayPIDFile)
		return nil
	}
	p, err := os.FindProcess(pid)
	if err == nil {
		err = p.Signal(syscall.SIGTERM)
	}
	if err != nil && !errors.Is(err, os.ErrProcessDone) && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("delay: end the delay queue (pid %d): %w", pid, err)
	}
	deadline := time.Now().Add(delayReadyTimeout)
	for processAlive(pid) {
		if time.Now().After(deadline) {
			_ = p.Kill()
			return fmt.Errorf("delay: the delay queue (pid %d) did not end within %s", pid, delayReadyTimeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
	_ = os.Remove(DelayPIDFile)
	return nil
}

// delayPID reads the running delay queue's process id.
func delayPID() (int, bool) {
	b, err := os.ReadFile(DelayPIDFile)
	if err != nil {
		return 0, false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	return pid, err == nil && pid > 0
}

// isDelayQueue reports whether pid is a running delay queue process: its
// command line names the delay-queue command, so that a pid file outliving
// its process (a node restarted, its pids numbered afresh) never has
// another process signalled.
func isDelayQueue(pid int) bool {
	// A zombie's command line reads empty: it is no delay queue either.
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		return false
	}
	args := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
	return len(args) > len(DelayQueueCommand) && slices.Equal(args[1:1+len(DelayQueueCommand)], DelayQueueCommand)
}

// processAlive reports whether pid runs (a zombie, ended and not yet
// reaped by the node's first process, does not).
func processAlive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// pid (comm) STATE ...: the state follows the last ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || (s[i+2] != 'Z' && s[i+2] != 'X')
}

// ServeDelayQueueUntilSignal is `faultline agent delay-queue`: it runs the
// delay queue until SIGTERM or SIGINT.
func ServeDelayQueueUntilSignal(n Netem) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	return RunDelayQueue(ctx, n, DelayPIDFile)
}
